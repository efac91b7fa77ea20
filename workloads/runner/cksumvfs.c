/*
** crashlab's checksum VFS (the contract and page format: cksumvfs.h).  The
** shim sits over the VFS that was the default when it was registered (in
** crashlab-runner the counting VFS, so its writes are counted where they
** reach the OS).  The same file builds the runner's copy and a shared
** library (libcrashlab-cksumvfs.so) through which the checkers open a
** checksummed database with the system SQLite.
*/
#include "cksumvfs.h"

#include <sqlite3.h>
#include <stddef.h>
#include <string.h>

#include "vfsshim.h"
#include "walsum.h"

enum { WAL_HDR = 32, FRAME_HDR = 24, CKSUM = 8 };

typedef struct kfile kfile;
struct kfile {
    vfsshim_file shim; /* the real file lives right after this struct */
    int is_wal;
    kfile *main; /* a WAL's database file (itself for a database) */
    /* known from the database header (on the database's kfile) */
    int on;       /* 8 reserved bytes: compute and verify */
    int pagesize; /* 0: no header seen yet */
};

_Static_assert(offsetof(kfile, shim) == 0, "a kfile * is its sqlite3_file *");

static sqlite3_vfs *g_real;
static sqlite3_vfs g_vfs;
/* The io methods: the real file's, but for k_read, k_write, k_file_control
** and k_fetch (filled by cksumvfs_register). */
static sqlite3_io_methods g_io;

#define REAL(f) VFSSHIM_REAL(f)

void cksumvfs_compute(const unsigned char *a, size_t n, unsigned char out[8])
{
    uint32_t s[2] = {0, 0};
    sums(a, n, 0, s);
    put_le32(out, s[0]);
    put_le32(out + 4, s[1]);
}

/* note_header: learn the checksum switch and page size from a database
** header at the start of BUF (N bytes of page 1), if it is one. */
static void note_header(kfile *db, const unsigned char *buf, int n)
{
    if (n < 100 || memcmp(buf, "SQLite format 3", 16) != 0)
        return;
    int ps = buf[16] << 8 | buf[17];
    db->pagesize = ps == 1 ? 65536 : ps;
    db->on = buf[20] == CKSUMVFS_RESERVE;
}

/* A whole page whose checksum mismatches: the read's error, logged. */
static int verify(kfile *p, const unsigned char *page, int n, sqlite3_int64 off)
{
    unsigned char want[CKSUM];
    cksumvfs_compute(page, (size_t)n - CKSUM, want);
    if (memcmp(page + n - CKSUM, want, CKSUM) == 0)
        return SQLITE_OK;
    sqlite3_log(SQLITE_IOERR_DATA, "crashlab-cksum: checksum mismatch at offset %lld of %s", off,
                p->is_wal ? "a WAL" : "a database");
    return SQLITE_IOERR_DATA;
}

/* wal_geometry: the WAL's page size and checksum byte order from its
** header on disk (0 when it has none yet). */
static int wal_geometry(kfile *p, int *big_endian, unsigned char hdr[WAL_HDR])
{
    sqlite3_file *r = REAL(p);
    if (r->pMethods->xRead(r, hdr, WAL_HDR, 0) != SQLITE_OK)
        return 0;
    uint32_t magic = be32(hdr);
    if ((magic & ~1u) != 0x377f0682u)
        return 0;
    *big_endian = (int)(magic & 1);
    uint32_t ps = be32(hdr + 8);
    return ps >= 512 && ps <= 65536 && !(ps & (ps - 1)) ? (int)ps : 0;
}

/* The frame number (from 0) whose page data starts at OFF, or -1. */
static sqlite3_int64 frame_at(sqlite3_int64 off, int pagesize)
{
    sqlite3_int64 rel = off - WAL_HDR - FRAME_HDR;
    if (rel < 0 || rel % (pagesize + FRAME_HDR))
        return -1;
    return rel / (pagesize + FRAME_HDR);
}

/* reseal: rewrite the header of frame K so that its WAL checksum covers
** PAGE as it will be written: the running checksum of the frame before (or
** of the WAL header), over the header's first 8 bytes and the page. */
static int reseal(kfile *p, sqlite3_int64 k, const unsigned char *page, int pagesize,
                  int big_endian, const unsigned char walhdr[WAL_HDR])
{
    sqlite3_file *r = REAL(p);
    sqlite3_int64 at = WAL_HDR + k * (pagesize + FRAME_HDR);
    unsigned char hdr[FRAME_HDR], prev[8];
    int rc = r->pMethods->xRead(r, hdr, FRAME_HDR, at);
    if (rc == SQLITE_OK && k > 0)
        rc = r->pMethods->xRead(r, prev, 8, at - (pagesize + FRAME_HDR) + 16);
    else if (rc == SQLITE_OK)
        memcpy(prev, walhdr + 24, 8);
    if (rc != SQLITE_OK)
        return rc;
    uint32_t s[2] = {be32(prev), be32(prev + 4)};
    sums(hdr, 8, big_endian, s);
    sums(page, (size_t)pagesize, big_endian, s);
    put_be32(hdr + 16, s[0]);
    put_be32(hdr + 20, s[1]);
    return r->pMethods->xWrite(r, hdr, FRAME_HDR, at);
}

static int k_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    kfile *p = (kfile *)f;
    int rc = REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
    if (rc != SQLITE_OK)
        return rc;
    if (!p->is_wal) {
        if (off == 0)
            note_header(p, buf, n);
        return p->on && n == p->pagesize ? verify(p, buf, n, off) : SQLITE_OK;
    }
    if (!p->main || !p->main->on || n != p->main->pagesize)
        return SQLITE_OK;
    unsigned char walhdr[WAL_HDR];
    int big_endian, ps = wal_geometry(p, &big_endian, walhdr);
    if (ps != n || frame_at(off, ps) < 0)
        return SQLITE_OK;
    return verify(p, buf, n, off);
}

static int k_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    kfile *p = (kfile *)f;
    /* The page buffer is SQLite's, and its last 8 bytes are reserved for
    ** this shim: the checksum is written into it, as SQLite's cksumvfs does,
    ** so the cached page matches what is on disk. */
    unsigned char *page = (unsigned char *)(uintptr_t)buf;
    if (!p->is_wal) {
        if (off == 0)
            note_header(p, buf, n);
        if (p->on && n == p->pagesize)
            cksumvfs_compute(page, (size_t)n - CKSUM, page + n - CKSUM);
        return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
    }
    kfile *db = p->main;
    unsigned char walhdr[WAL_HDR];
    int big_endian = 0, ps = 0;
    sqlite3_int64 k = -1;
    if (db && n >= 512 && !(n & (n - 1))) { /* a page, if the WAL header says so */
        ps = wal_geometry(p, &big_endian, walhdr);
        k = ps == n ? frame_at(off, ps) : -1;
    }
    if (k >= 0 && memcmp(page, "SQLite format 3", 16) == 0)
        note_header(db, page, n); /* page 1 as the WAL holds it */
    if (k < 0 || !db->on)
        return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
    cksumvfs_compute(page, (size_t)n - CKSUM, page + n - CKSUM);
    int rc = reseal(p, k, page, ps, big_endian, walhdr);
    return rc == SQLITE_OK ? REAL(f)->pMethods->xWrite(REAL(f), buf, n, off) : rc;
}

static int k_file_control(sqlite3_file *f, int op, void *arg)
{
    int rc = REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
    if (rc == SQLITE_OK && op == SQLITE_FCNTL_VFSNAME)
        *(char **)arg = sqlite3_mprintf(CKSUMVFS_NAME "/%z", *(char **)arg);
    return rc;
}
/* No memory-mapped pages of a checksummed database: every read is verified. */
static int k_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    kfile *p = (kfile *)f;
    if (p->main && p->main->on) {
        *pp = NULL;
        return SQLITE_OK;
    }
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
/* xOpen: the main database and its WAL go through the shim (a WAL finds
** its database's kfile through sqlite3_database_file_object); every other
** file is the underlying VFS's own. */
static int k_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    if (!(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)))
        return g_real->xOpen(g_real, name, f, flags, out);
    kfile *p = (kfile *)f;
    memset(p, 0, sizeof *p);
    p->shim.real = (sqlite3_file *)&p[1];
    int rc = g_real->xOpen(g_real, name, p->shim.real, flags, out);
    if (rc != SQLITE_OK || !p->shim.real->pMethods) {
        p->shim.base.pMethods = NULL;
        return rc;
    }
    if (p->shim.real->pMethods->iVersion < 3) {
        p->shim.real->pMethods->xClose(p->shim.real);
        p->shim.base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    if (flags & SQLITE_OPEN_WAL) {
        sqlite3_file *db = sqlite3_database_file_object(name);
        p->is_wal = 1;
        p->main = db && db->pMethods == &g_io ? (kfile *)db : NULL;
    } else {
        p->main = p;
    }
    p->shim.base.pMethods = &g_io;
    return SQLITE_OK;
}

int cksumvfs_register(void)
{
    if (g_real)
        return SQLITE_OK;
    sqlite3_vfs *real;
    int rc = vfsshim_default_parent(3, &real);
    if (rc != SQLITE_OK)
        return rc;
    vfsshim_vfs(&g_vfs, 3, CKSUMVFS_NAME, real, (int)sizeof(kfile) + real->szOsFile, k_open);
    vfsshim_io_methods(&g_io, 3);
    g_io.xRead = k_read;
    g_io.xWrite = k_write;
    g_io.xFileControl = k_file_control;
    g_io.xFetch = k_fetch;
    g_real = real;
    return sqlite3_vfs_register(&g_vfs, 0);
}
