/*
** DASH as a SQLite VFS (dashvfs.h states the protocol and the contract).
**
** Why a VFS and not an engine wrapper over SQLite: which pages a transaction
** changes and when it commits is decided inside SQLite's pager; the VFS sees
** exactly that (the database page writes, then one xSync at commit with
** journal_mode=OFF) and nothing else.  A wrapper above the SQL API would see
** rows, not pages: it could only copy whole files, or run each transaction
** twice on two connections whose page caches the other one invalidates.
**
** State of an open database: f[cur] is the file PATH names (the committed
** database, never written while it is), f[1-cur] the shadow (PATH-shadow),
** where every write goes.  Per 4 KiB unit, two bitmaps: STALE, the units the
** shadow holds older than the committed file (those the previous transaction
** wrote, or every unit after an open); DIRTY, the units this transaction
** wrote.  A read takes a stale unit from the committed file, any other from
** the shadow.  A partial write of a stale unit copies it first.  Commit
** copies the stale units left, syncs the shadow, exchanges the names,
** syncs the directory; then the old committed file is the shadow and lacks
** exactly the units this transaction wrote: STALE := DIRTY.  This is the
** thesis's DASH ("if there are missing dirty pages, they are written to the
** shadow file along with the new dirty pages"), copying lazily: a page the
** next transaction overwrites anyway is never copied.
*/
#include "dashvfs.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vfsshim.h"

enum { UNIT = 4096 };

typedef struct bitmap {
    unsigned char *b;
    size_t n; /* bytes */
} bitmap;

typedef struct dfile {
    vfsshim_file shim;  /* real: f[0], which takes the locks (the forwards of vfsshim.h) */
    sqlite3_file *f[2]; /* the parent VFS's files, right after this struct */
    int cur;            /* f[cur] is the file PATH names */
    int open[2];        /* f[i] was opened (close it) */
    const char *path;   /* SQLite's name for the database (lives while it is open) */
    char *shadow;       /* PATH-shadow, two NULs at the end (a URI-less filename) */
    bitmap stale, dirty;
} dfile;

_Static_assert(offsetof(dfile, shim) == 0, "a dfile * is its sqlite3_file *");

static sqlite3_vfs g_vfs;
static sqlite3_io_methods g_io; /* filled by dashvfs_register */
static enum dash_order g_order;

#define PARENT(v) VFSSHIM_PARENT(v)
#define CUR(d)    ((d)->f[(d)->cur])
#define SHD(d)    ((d)->f[1 - (d)->cur])

/* bit U of M (0 past its end). */
static int bm_get(const bitmap *m, sqlite3_int64 u)
{
    size_t i = (size_t)(u / 8);
    return i < m->n && ((m->b[i] >> (u % 8)) & 1);
}

/* Set bit U of M, growing it; SQLITE_NOMEM when it cannot grow. */
static int bm_set(bitmap *m, sqlite3_int64 u)
{
    size_t i = (size_t)(u / 8);
    if (i >= m->n) {
        size_t n = (i + 1) * 2;
        unsigned char *b = realloc(m->b, n);
        if (!b)
            return SQLITE_NOMEM;
        memset(b + m->n, 0, n - m->n);
        m->b = b;
        m->n = n;
    }
    m->b[i] |= (unsigned char)(1u << (u % 8));
    return SQLITE_OK;
}

/* Clear bit U of M. */
static void bm_clear(bitmap *m, sqlite3_int64 u)
{
    size_t i = (size_t)(u / 8);
    if (i < m->n)
        m->b[i] &= (unsigned char)~(1u << (u % 8));
}

/* Clear every bit of M from U on. */
static void bm_clear_from(bitmap *m, sqlite3_int64 u)
{
    for (sqlite3_int64 k = u; (size_t)(k / 8) < m->n; k++)
        bm_clear(m, k);
}

/* Clear every bit of M. */
static void bm_zero(bitmap *m)
{
    if (m->b)
        memset(m->b, 0, m->n);
}

/* OR the bits of B into A; SQLITE_NOMEM when A cannot grow. */
static int bm_or(bitmap *a, const bitmap *b)
{
    for (size_t i = 0; i < b->n; i++)
        for (int k = 0; k < 8; k++)
            if ((b->b[i] >> k) & 1 && bm_set(a, (sqlite3_int64)i * 8 + k) != SQLITE_OK)
                return SQLITE_NOMEM;
    return SQLITE_OK;
}

static sqlite3_int64 min64(sqlite3_int64 a, sqlite3_int64 b) { return a < b ? a : b; }

/* Copy unit U from the committed file to the shadow, as far as both sizes
** reach (a unit past either end has nothing to copy). */
static int copy_unit(dfile *d, sqlite3_int64 u)
{
    unsigned char buf[UNIT];
    sqlite3_int64 csize, ssize, off = u * UNIT;
    int rc = CUR(d)->pMethods->xFileSize(CUR(d), &csize);
    if (rc == SQLITE_OK)
        rc = SHD(d)->pMethods->xFileSize(SHD(d), &ssize);
    if (rc != SQLITE_OK || off >= csize)
        return rc;
    int n = (int)min64(UNIT, csize - off);
    rc = CUR(d)->pMethods->xRead(CUR(d), buf, n, off);
    if (rc == SQLITE_OK)
        rc = SHD(d)->pMethods->xWrite(SHD(d), buf, n, off);
    return rc;
}

static int d_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    dfile *d = (dfile *)f;
    int short_read = 0;
    for (int pos = 0; pos < n;) {
        sqlite3_int64 at = off + pos, u = at / UNIT;
        int k = (int)min64(n - pos, (u + 1) * UNIT - at);
        sqlite3_file *src = bm_get(&d->stale, u) ? CUR(d) : SHD(d);
        int rc = src->pMethods->xRead(src, (char *)buf + pos, k, at);
        if (rc == SQLITE_IOERR_SHORT_READ)
            short_read = 1;
        else if (rc != SQLITE_OK)
            return rc;
        pos += k;
    }
    return short_read ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

static int d_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    dfile *d = (dfile *)f;
    for (sqlite3_int64 u = off / UNIT; u * UNIT < off + n; u++) {
        int whole = off <= u * UNIT && off + n >= (u + 1) * UNIT;
        if (bm_get(&d->stale, u) && !whole) {
            int rc = copy_unit(d, u);
            if (rc != SQLITE_OK)
                return rc;
        }
        bm_clear(&d->stale, u);
        if (bm_set(&d->dirty, u) != SQLITE_OK)
            return SQLITE_NOMEM;
    }
    return SHD(d)->pMethods->xWrite(SHD(d), buf, n, off);
}

static int d_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    dfile *d = (dfile *)f;
    sqlite3_int64 first_gone = (size + UNIT - 1) / UNIT;
    bm_clear_from(&d->stale, first_gone);
    bm_clear_from(&d->dirty, first_gone);
    return SHD(d)->pMethods->xTruncate(SHD(d), size);
}

/* fsync the directory of the database, through the unix VFS's own
** openDirectory system call (the counting VFS counts it as a directory sync). */
static int sync_dir(dfile *d)
{
    sqlite3_vfs *unix_vfs = sqlite3_vfs_find("unix");
    if (!unix_vfs || !unix_vfs->xGetSystemCall)
        return SQLITE_IOERR_DIR_FSYNC;
    int (*open_dir)(const char *, int *) =
        (int (*)(const char *, int *))unix_vfs->xGetSystemCall(unix_vfs, "openDirectory");
    int fd = -1;
    if (!open_dir || open_dir(d->path, &fd) != SQLITE_OK || fd < 0)
        return SQLITE_IOERR_DIR_FSYNC;
    int bad = fsync(fd) != 0;
    close(fd);
    return bad ? SQLITE_IOERR_DIR_FSYNC : SQLITE_OK;
}

/* Swap the names PATH and PATH-shadow in one step. */
static int exchange(dfile *d)
{
    if (renameat2(AT_FDCWD, d->path, AT_FDCWD, d->shadow, RENAME_EXCHANGE) != 0) {
        sqlite3_log(SQLITE_IOERR, "dash: renameat2(%s, RENAME_EXCHANGE) failed", d->path);
        return SQLITE_IOERR;
    }
    return SQLITE_OK;
}

/* The shadow becomes what PATH names: catch up, sync, exchange, sync the
** directory (DASH_RENAME_FIRST: exchange, sync the directory, then sync).
** Before the exchange a failure discards the transaction (its units become
** stale again, so reads see the committed file). */
static int publish(dfile *d, int flags)
{
    sqlite3_int64 ssize;
    int rc = SHD(d)->pMethods->xFileSize(SHD(d), &ssize);
    for (size_t i = 0; rc == SQLITE_OK && i < d->stale.n; i++)
        for (int k = 0; rc == SQLITE_OK && k < 8; k++) {
            sqlite3_int64 u = (sqlite3_int64)i * 8 + k;
            if ((d->stale.b[i] >> k) & 1 && u * UNIT < ssize)
                rc = copy_unit(d, u);
        }
    if (rc == SQLITE_OK)
        bm_zero(&d->stale);
    if (rc == SQLITE_OK && g_order == DASH_SHADOW)
        rc = SHD(d)->pMethods->xSync(SHD(d), flags);
    if (rc == SQLITE_OK)
        rc = exchange(d);
    if (rc != SQLITE_OK) {
        if (bm_or(&d->stale, &d->dirty) == SQLITE_OK)
            bm_zero(&d->dirty);
        return rc;
    }
    /* The exchange happened: whatever follows fails, PATH names the shadow. */
    rc = sync_dir(d);
    if (rc == SQLITE_OK && g_order == DASH_RENAME_FIRST)
        rc = SHD(d)->pMethods->xSync(SHD(d), flags);
    d->cur = 1 - d->cur;
    bitmap t = d->stale;
    d->stale = d->dirty;
    d->dirty = t;
    /* the new shadow (the old committed file) takes the committed size */
    sqlite3_int64 csize;
    int rc2 = CUR(d)->pMethods->xFileSize(CUR(d), &csize);
    if (rc2 == SQLITE_OK)
        rc2 = SHD(d)->pMethods->xFileSize(SHD(d), &ssize);
    if (rc2 == SQLITE_OK && ssize != csize)
        rc2 = SHD(d)->pMethods->xTruncate(SHD(d), csize);
    return rc != SQLITE_OK ? rc : rc2;
}

static int d_sync(sqlite3_file *f, int flags) { return publish((dfile *)f, flags); }

static int d_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    dfile *d = (dfile *)f;
    return SHD(d)->pMethods->xFileSize(SHD(d), size);
}

/* File controls go to the shadow (a size hint must never grow the committed
** file); the lock state to f[0]; settings that shape later I/O to both.
** The database never "moves" for SQLite: the exchange is this VFS's own. */
static int d_file_control(sqlite3_file *f, int op, void *arg)
{
    dfile *d = (dfile *)f;
    switch (op) {
    case SQLITE_FCNTL_HAS_MOVED: *(int *)arg = 0; return SQLITE_OK;
    case SQLITE_FCNTL_LOCKSTATE: return d->f[0]->pMethods->xFileControl(d->f[0], op, arg);
    case SQLITE_FCNTL_CHUNK_SIZE:
    case SQLITE_FCNTL_POWERSAFE_OVERWRITE: {
        int v = *(int *)arg; /* POWERSAFE_OVERWRITE (a query when negative) writes it back */
        int rc = CUR(d)->pMethods->xFileControl(CUR(d), op, &v);
        if (rc == SQLITE_OK)
            rc = SHD(d)->pMethods->xFileControl(SHD(d), op, arg);
        return rc;
    }
    default: return SHD(d)->pMethods->xFileControl(SHD(d), op, arg);
    }
}

static int d_close(sqlite3_file *f)
{
    dfile *d = (dfile *)f;
    int rc = SQLITE_OK;
    for (int i = 0; i < 2; i++)
        if (d->open[i]) {
            int r = d->f[i]->pMethods->xClose(d->f[i]);
            rc = rc == SQLITE_OK ? r : rc;
        }
    free(d->shadow);
    free(d->stale.b);
    free(d->dirty.b);
    return rc;
}

/* Open PATH and PATH-shadow.  What a crash left in the shadow is never read:
** it is cut to PATH's size and every unit marked stale, so the first commit
** rebuilds it from PATH (the SUT's whole recovery; PATH itself is untouched). */
static int open_main(sqlite3_vfs *parent, sqlite3_filename name, dfile *d, int flags,
                     int *out_flags)
{
    size_t len = strlen(name);
    d->shadow = calloc(1, len + sizeof DASHVFS_SUFFIX + 2);
    if (!d->shadow)
        return SQLITE_NOMEM;
    memcpy(d->shadow, name, len);
    memcpy(d->shadow + len, DASHVFS_SUFFIX, sizeof DASHVFS_SUFFIX);
    d->path = name;
    d->f[0] = (sqlite3_file *)(d + 1);
    d->f[1] = (sqlite3_file *)((char *)(d + 1) + parent->szOsFile);
    d->shim.real = d->f[0];
    int rc = parent->xOpen(parent, name, d->f[0], flags, out_flags);
    d->open[0] = rc == SQLITE_OK;
    if (rc == SQLITE_OK) {
        int sflags = (flags & ~(SQLITE_OPEN_URI | SQLITE_OPEN_EXCLUSIVE)) | SQLITE_OPEN_CREATE;
        rc = parent->xOpen(parent, d->shadow, d->f[1], sflags, NULL);
        d->open[1] = rc == SQLITE_OK;
    }
    sqlite3_int64 size = 0;
    if (rc == SQLITE_OK)
        rc = d->f[0]->pMethods->xFileSize(d->f[0], &size);
    for (sqlite3_int64 u = 0; rc == SQLITE_OK && u * UNIT < size; u++)
        rc = bm_set(&d->stale, u);
    if (rc == SQLITE_OK)
        rc = d->f[1]->pMethods->xTruncate(d->f[1], size);
    return rc;
}

static int d_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                  int *out_flags)
{
    sqlite3_vfs *parent = PARENT(vfs);
    if (!(flags & SQLITE_OPEN_MAIN_DB) || !name)
        return parent->xOpen(parent, name, file, flags, out_flags);
    dfile *d = (dfile *)file;
    memset(d, 0, sizeof *d);
    int rc = open_main(parent, name, d, flags, out_flags);
    if (rc != SQLITE_OK) {
        d_close(file);
        file->pMethods = NULL;
        return rc;
    }
    file->pMethods = &g_io;
    return SQLITE_OK;
}

int dashvfs_register(enum dash_order order)
{
    if (g_vfs.zName)
        return order == g_order ? SQLITE_OK : SQLITE_MISUSE;
    sqlite3_vfs *parent = sqlite3_vfs_find(NULL);
    if (!parent || parent->iVersion < 2)
        return SQLITE_ERROR;
    g_order = order;
    /* The rest of the VFS is the parent's, called with the parent itself. */
    vfsshim_vfs(&g_vfs, 2, DASHVFS_NAME, parent, (int)sizeof(dfile) + 2 * parent->szOsFile, d_open);
    /* Version 1: no shared memory (no WAL), no memory mapping.  Locks live on
    ** f[0], the file first opened, whichever name it has now: one connection
    ** in one process (the contract); so do the sector size and the device
    ** characteristics (the base's forwards to the real file, f[0]). */
    vfsshim_io_methods(&g_io, 1);
    g_io.xClose = d_close;
    g_io.xRead = d_read;
    g_io.xWrite = d_write;
    g_io.xTruncate = d_truncate;
    g_io.xSync = d_sync;
    g_io.xFileSize = d_file_size;
    g_io.xFileControl = d_file_control;
    return sqlite3_vfs_register(&g_vfs, 0);
}
