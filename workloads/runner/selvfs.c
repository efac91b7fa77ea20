/* Selective journaling as a VFS shim: the contract is in selvfs.h. */
#include "selvfs.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "vfsshim.h"

enum { K_PASS, K_DB, K_JOURNAL };                           /* what an open file is to the shim */
enum { O_JWRITE, O_JTRUNC, O_JSYNC, O_DBWRITE, O_DBTRUNC }; /* kept operations */

typedef struct kept {
    int kind;
    int n;             /* bytes (writes) or sync flags (O_JSYNC) */
    sqlite3_int64 off; /* offset (writes) or size (truncations) */
    unsigned char *data;
} kept;

typedef struct sfile {
    sqlite3_file base;
    sqlite3_file *real; /* lives right after this struct */
    int kind;
    int real_open;      /* K_JOURNAL: the real journal exists (replayed) */
    const char *name;   /* K_JOURNAL: valid until xClose (SQLite's promise) */
    int flags;          /* K_JOURNAL: xOpen's flags, for the real open */
    unsigned char *mem; /* K_JOURNAL kept in memory: its content */
    sqlite3_int64 size, cap;
} sfile;

static struct {
    sqlite3_vfs *real;
    sqlite3_vfs vfs;
    int max_pages;
    sfile *db;      /* the main database of the open transaction */
    sfile *journal; /* its journal while it is in memory */
    int pending;    /* the journal's transaction has not reached its commit sync */
    kept *ops;
    size_t nops, cap;
    unsigned long fs_txns, journal_txns;
} g;

#define REAL(f) (((sfile *)(f))->real)

/* drop_ops: forget every kept operation (the transaction is over). */
static void drop_ops(void)
{
    for (size_t i = 0; i < g.nops; i++)
        free(g.ops[i].data);
    g.nops = 0;
    g.pending = 0;
}

/* keep: append one operation (with a copy of DATA when N > 0 and DATA set);
** SQLITE_NOMEM when memory runs out. */
static int keep(int kind, const void *data, int n, sqlite3_int64 off)
{
    if (g.nops == g.cap) {
        size_t cap = g.cap ? 2 * g.cap : 64;
        kept *ops = realloc(g.ops, cap * sizeof *ops);
        if (!ops)
            return SQLITE_NOMEM;
        g.ops = ops;
        g.cap = cap;
    }
    kept *k = &g.ops[g.nops];
    *k = (kept){kind, n, off, NULL};
    if (data && n > 0) {
        k->data = malloc((size_t)n);
        if (!k->data)
            return SQLITE_NOMEM;
        memcpy(k->data, data, (size_t)n);
    }
    g.nops++;
    return SQLITE_OK;
}

/* pending: whether F's writes are being kept (a transaction whose journal
** is in memory and whose commit sync has not come yet). */
static int pending(const sfile *f) { return g.pending && (f == g.db || f == g.journal); }

/* db_size: the database's size as the kept operations leave it. */
static int db_size(sfile *f, sqlite3_int64 *out)
{
    int rc = f->real->pMethods->xFileSize(f->real, out);
    for (size_t i = 0; rc == SQLITE_OK && i < g.nops; i++) {
        const kept *k = &g.ops[i];
        if (k->kind == O_DBWRITE && k->off + k->n > *out)
            *out = k->off + k->n;
        else if (k->kind == O_DBTRUNC)
            *out = k->off;
    }
    return rc;
}

/* ---- the journal kept in memory ---- */

static int mem_write(sfile *f, const void *buf, int n, sqlite3_int64 off)
{
    if (off + n > f->cap) {
        sqlite3_int64 cap = f->cap ? f->cap : 8192;
        while (cap < off + n)
            cap *= 2;
        unsigned char *mem = realloc(f->mem, (size_t)cap);
        if (!mem)
            return SQLITE_NOMEM;
        memset(mem + f->cap, 0, (size_t)(cap - f->cap));
        f->mem = mem;
        f->cap = cap;
    }
    memcpy(f->mem + off, buf, (size_t)n);
    if (off + n > f->size)
        f->size = off + n;
    return SQLITE_OK;
}

static int mem_read(sfile *f, void *buf, int n, sqlite3_int64 off)
{
    sqlite3_int64 have = off < f->size ? f->size - off : 0;
    if (have > n)
        have = n;
    if (have > 0)
        memcpy(buf, f->mem + off, (size_t)have);
    if (have < n) {
        memset((char *)buf + have, 0, (size_t)(n - have));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

/* ---- the commit: the choice ---- */

static int cmp_off(const void *a, const void *b)
{
    sqlite3_int64 x = *(const sqlite3_int64 *)a, y = *(const sqlite3_int64 *)b;
    return (x > y) - (x < y);
}

/* header_only: whether the kept write K of page 1 changes, against the
** page on disk, nothing but the header's change counter (bytes 24-27) and
** its copy, version-valid-for (92-95): the only change a one-row
** transaction makes there.  -1 on a read error. */
static int header_only(sfile *db, const kept *k)
{
    unsigned char *old = malloc((size_t)k->n);
    if (!old)
        return -1;
    int rc = db->real->pMethods->xRead(db->real, old, k->n, 0);
    int same = rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ ? 1 : -1;
    if (rc == SQLITE_IOERR_SHORT_READ)
        same = 0; /* a new database: page 1 is all new */
    for (int i = 0; same == 1 && i < k->n; i++)
        if (old[i] != k->data[i] && !(i >= 24 && i < 28) && !(i >= 92 && i < 96))
            same = 0;
    free(old);
    return same;
}

/* changed_pages: the distinct database pages written by the kept
** operations, page 1 left out when its only change is the header's change
** counter (header_only); -1 when out of memory or on a read error. */
static long changed_pages(sfile *db)
{
    sqlite3_int64 *offs = malloc((g.nops ? g.nops : 1) * sizeof *offs);
    if (!offs)
        return -1;
    size_t n = 0;
    const kept *page1 = NULL;
    for (size_t i = 0; i < g.nops; i++) {
        const kept *k = &g.ops[i];
        if (k->kind == O_DBWRITE && k->off != 0)
            offs[n++] = k->off;
        else if (k->kind == O_DBWRITE)
            page1 = k; /* the last write of page 1 is what the disk gets */
    }
    qsort(offs, n, sizeof *offs, cmp_off);
    long distinct = 0;
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || offs[i] != offs[i - 1];
    free(offs);
    if (page1) {
        int same = header_only(db, page1);
        if (same < 0)
            return -1;
        distinct += !same;
    }
    return distinct;
}

/* replay: perform the kept operations on the real files in their order;
** WITH_JOURNAL: the journal's too (it is created first), else only the
** database's. */
static int replay(int with_journal)
{
    sfile *j = g.journal, *db = g.db;
    int rc = SQLITE_OK;
    if (with_journal) {
        int out = 0;
        rc = g.real->xOpen(g.real, j->name, j->real, j->flags, &out);
        if (rc != SQLITE_OK)
            return rc;
        j->real_open = 1;
    }
    for (size_t i = 0; rc == SQLITE_OK && i < g.nops; i++) {
        const kept *k = &g.ops[i];
        sqlite3_file *jr = j->real, *dr = db->real;
        switch (k->kind) {
        case O_JWRITE:
            if (with_journal)
                rc = jr->pMethods->xWrite(jr, k->data, k->n, k->off);
            break;
        case O_JTRUNC:
            if (with_journal)
                rc = jr->pMethods->xTruncate(jr, k->off);
            break;
        case O_JSYNC:
            if (with_journal)
                rc = jr->pMethods->xSync(jr, k->n);
            break;
        case O_DBWRITE: rc = dr->pMethods->xWrite(dr, k->data, k->n, k->off); break;
        case O_DBTRUNC: rc = dr->pMethods->xTruncate(dr, k->off); break;
        default: break;
        }
    }
    return rc;
}

/* commit_sync: the database's commit sync of a pending transaction: choose
** the journal by the pages changed, write, sync the database. */
static int commit_sync(sfile *db, int flags)
{
    long pages = changed_pages(db);
    if (pages < 0)
        return SQLITE_IOERR; /* out of memory, or page 1 unreadable */
    int fs_only = g.max_pages < 0 || pages <= g.max_pages;
    int rc = replay(!fs_only);
    if (rc == SQLITE_OK)
        rc = db->real->pMethods->xSync(db->real, flags);
    if (fs_only)
        g.fs_txns++;
    else
        g.journal_txns++;
    /* the journal stays what it is now, in memory (never on disk) or real,
    ** until SQLite closes and deletes it */
    drop_ops();
    return rc;
}

/* ---- io methods ---- */

static int s_close(sqlite3_file *f)
{
    sfile *p = (sfile *)f;
    int rc = SQLITE_OK;
    if (p->kind == K_JOURNAL) {
        if (g.journal == p) {
            drop_ops(); /* if not committed, nothing of it reached the disk */
            g.journal = NULL;
        }
        free(p->mem);
        if (p->real_open)
            rc = p->real->pMethods->xClose(p->real);
        return rc;
    }
    if (p == g.db)
        g.db = NULL;
    return p->real->pMethods->xClose(p->real);
}

static int s_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    sfile *p = (sfile *)f;
    if (p->kind == K_JOURNAL && !p->real_open)
        return mem_read(p, buf, n, off);
    int rc = p->real->pMethods->xRead(p->real, buf, n, off);
    if (!pending(p) || (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ))
        return rc;
    sqlite3_int64 size;
    int rc2 = db_size(p, &size);
    if (rc2 != SQLITE_OK)
        return rc2;
    for (size_t i = 0; i < g.nops; i++) { /* later operations win */
        const kept *k = &g.ops[i];
        if (k->kind == O_DBTRUNC && k->off < off + n) {
            sqlite3_int64 from = k->off > off ? k->off : off;
            memset((char *)buf + (from - off), 0, (size_t)(off + n - from));
        } else if (k->kind == O_DBWRITE && k->off < off + n && k->off + k->n > off) {
            sqlite3_int64 from = k->off > off ? k->off : off;
            sqlite3_int64 to = k->off + k->n < off + n ? k->off + k->n : off + n;
            memcpy((char *)buf + (from - off), k->data + (from - k->off), (size_t)(to - from));
        }
    }
    if (off + n <= size)
        return SQLITE_OK;
    sqlite3_int64 keep_n = size > off ? size - off : 0;
    memset((char *)buf + keep_n, 0, (size_t)(n - keep_n));
    return SQLITE_IOERR_SHORT_READ;
}

static int s_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    sfile *p = (sfile *)f;
    if (p->kind == K_JOURNAL && !p->real_open) {
        int rc = pending(p) ? keep(O_JWRITE, buf, n, off) : SQLITE_OK;
        return rc == SQLITE_OK ? mem_write(p, buf, n, off) : rc;
    }
    if (pending(p))
        return keep(O_DBWRITE, buf, n, off);
    return p->real->pMethods->xWrite(p->real, buf, n, off);
}

static int s_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    sfile *p = (sfile *)f;
    if (p->kind == K_JOURNAL && !p->real_open) {
        if (size < p->size)
            p->size = size;
        return pending(p) ? keep(O_JTRUNC, NULL, 0, size) : SQLITE_OK;
    }
    if (pending(p))
        return keep(O_DBTRUNC, NULL, 0, size);
    return p->real->pMethods->xTruncate(p->real, size);
}

static int s_sync(sqlite3_file *f, int flags)
{
    sfile *p = (sfile *)f;
    if (p->kind == K_JOURNAL && !p->real_open)
        return pending(p) ? keep(O_JSYNC, NULL, flags, 0) : SQLITE_OK;
    if (pending(p))
        return commit_sync(p, flags);
    return p->real->pMethods->xSync(p->real, flags);
}

static int s_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    sfile *p = (sfile *)f;
    if (p->kind == K_JOURNAL && !p->real_open) {
        *size = p->size;
        return SQLITE_OK;
    }
    if (pending(p))
        return db_size(p, size);
    return p->real->pMethods->xFileSize(p->real, size);
}

/* A journal kept in memory has no real file: no locks, no controls. */
#define MEMJ(f) (((sfile *)(f))->kind == K_JOURNAL && !((sfile *)(f))->real_open)

static int s_lock(sqlite3_file *f, int lock)
{
    return MEMJ(f) ? SQLITE_OK : REAL(f)->pMethods->xLock(REAL(f), lock);
}
static int s_unlock(sqlite3_file *f, int lock)
{
    return MEMJ(f) ? SQLITE_OK : REAL(f)->pMethods->xUnlock(REAL(f), lock);
}
static int s_check_reserved(sqlite3_file *f, int *out)
{
    if (MEMJ(f)) {
        *out = 0;
        return SQLITE_OK;
    }
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int s_file_control(sqlite3_file *f, int op, void *arg)
{
    return MEMJ(f) ? SQLITE_NOTFOUND : REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int s_sector_size(sqlite3_file *f)
{
    return MEMJ(f) ? 4096 : REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int s_device_chars(sqlite3_file *f)
{
    return MEMJ(f) ? 0 : REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int s_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp)
{
    return MEMJ(f) ? SQLITE_IOERR : REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}
static int s_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return MEMJ(f) ? SQLITE_IOERR : REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void s_shm_barrier(sqlite3_file *f)
{
    if (!MEMJ(f))
        REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int s_shm_unmap(sqlite3_file *f, int del)
{
    return MEMJ(f) ? SQLITE_OK : REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
/* No memory-mapped reads while writes are kept: they would miss them. */
static int s_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    if (MEMJ(f) || pending((sfile *)f)) {
        *pp = NULL;
        return SQLITE_OK;
    }
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
static int s_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return MEMJ(f) ? SQLITE_OK : REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods g_io = {
    3,
    s_close,
    s_read,
    s_write,
    s_truncate,
    s_sync,
    s_file_size,
    s_lock,
    s_unlock,
    s_check_reserved,
    s_file_control,
    s_sector_size,
    s_device_chars,
    s_shm_map,
    s_shm_lock,
    s_shm_barrier,
    s_shm_unmap,
    s_fetch,
    s_unfetch,
};

/* xOpen: the main database and every other file go to the real VFS; a
** main journal that does not exist yet (a new transaction's) is kept in
** memory, one that exists (a hot journal) is the real file. */
static int s_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    sfile *p = (sfile *)f;
    memset(p, 0, sizeof *p);
    p->real = (sqlite3_file *)&p[1];
    if ((flags & SQLITE_OPEN_MAIN_JOURNAL) && name) {
        int exists = 0;
        int rc = g.real->xAccess(g.real, name, SQLITE_ACCESS_EXISTS, &exists);
        if (rc != SQLITE_OK)
            return rc;
        if (!exists && g.db && !g.journal) {
            p->kind = K_JOURNAL;
            p->name = name;
            p->flags = flags;
            p->base.pMethods = &g_io;
            g.journal = p;
            g.pending = 1;
            if (out)
                *out = flags;
            return SQLITE_OK;
        }
    }
    int rc = g.real->xOpen(g.real, name, p->real, flags, out);
    if (p->real->pMethods && p->real->pMethods->iVersion < 3) {
        p->real->pMethods->xClose(p->real);
        p->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    if (rc == SQLITE_OK && (flags & SQLITE_OPEN_MAIN_DB)) {
        p->kind = K_DB;
        g.db = p;
    }
    p->base.pMethods = p->real->pMethods ? &g_io : NULL;
    return rc;
}

/* xDelete: a journal that never reached the disk is deleted by doing
** nothing (no unlink, no directory sync). */
static int s_delete(sqlite3_vfs *v, const char *name, int dirsync)
{
    (void)v;
    int rc = g.real->xDelete(g.real, name, dirsync);
    return rc == SQLITE_IOERR_DELETE_NOENT ? SQLITE_OK : rc;
}

int selvfs_register(int max_pages)
{
    g.max_pages = max_pages;
    if (g.real)
        return SQLITE_OK;
    sqlite3_vfs *real;
    int rc = vfsshim_default_parent(3, &real);
    if (rc != SQLITE_OK)
        return rc;
    /* The rest of the VFS is the parent's (vfsshim.h); the io methods are
    ** all the shim's own (a journal kept in memory has no real file). */
    vfsshim_vfs(&g.vfs, 3, SELVFS_NAME, real, (int)sizeof(sfile) + real->szOsFile, s_open);
    g.vfs.xDelete = s_delete;
    g.real = real;
    return sqlite3_vfs_register(&g.vfs, 0);
}

void selvfs_counts(unsigned long *fs, unsigned long *journal)
{
    *fs = g.fs_txns;
    *journal = g.journal_txns;
}
