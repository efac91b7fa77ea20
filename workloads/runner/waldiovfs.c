/*
** crashlab's WALDIO VFS (the layout and the contract: waldiovfs.h).  The
** shim sits over the VFS that was the default when it was registered (in
** crashlab-runner the counting VFS, so its writes and syncs are counted
** where they reach the OS).  The same file builds the runner's copy and
** libcrashlab-waldiovfs.so, through which the checkers open a WALDIO
** database with the system SQLite.
**
** O_DIRECT: the unix VFS opens files through its overridable "open" system
** call; the shim overrides it once and adds O_DIRECT to the one open it
** asks for (a thread-local flag set around the WAL's xOpen), which also
** hands it the file descriptor for fallocate().
*/
#include "waldiovfs.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "vfsshim.h"
#include "walsum.h"

enum {
    BLK = WALDIOVFS_BLOCK,
    HDR = 32,           /* the WAL header */
    FHDR = 24,          /* a frame header */
    FRAME = BLK + FHDR, /* a frame as SQLite lays it out */
    TAIL = BLK - FHDR,  /* where the frame header sits in a block */
    MAXBUF = 256,       /* blocks in the group buffer (1 MiB) */
    CHUNK = 31,         /* blocks per write: below the unix VFS's 128 KiB */
    PART_PAGE = 1,      /* bytes [0, TAIL) of a block are in the buffer */
    PART_TAIL = 2,      /* bytes [TAIL, BLK) */
    PART_ALL = 3,
    ZEROS = 16 * BLK /* the zero buffer of pre-allocation */
};

typedef struct wfile wfile;
struct wfile {
    vfsshim_file shim; /* the real file lives right after this struct */
    int fd;            /* the WAL's descriptor (from the open hook), -1 if unknown */
    /* the group buffer: blocks [first, first + n), aligned */
    unsigned char *buf;
    unsigned char parts[MAXBUF];
    sqlite3_int64 first;
    int n;
    unsigned char *bounce;   /* one aligned block for reads */
    sqlite3_int64 bounce_at; /* the block it holds, -1: none */
};

_Static_assert(offsetof(wfile, shim) == 0, "a wfile * is its sqlite3_file *");

static sqlite3_vfs *g_real;
static sqlite3_vfs g_vfs;
/* The io methods of a WAL: the shim's own but for the locks, the sector
** size, the device characteristics and shared memory, which are the real
** file's (filled by waldiovfs_register). */
static sqlite3_io_methods g_io;
static int g_prealloc;
static int g_zero_fill = 1; /* waldiovfs_set_zero_fill */
static waldiovfs_stats g_stats;
static sqlite3_syscall_ptr g_sys_open;
static _Thread_local int t_want_direct; /* 1: O_DIRECT required, 2: wanted */
static _Thread_local int t_fd, t_direct;

#define REAL(f) VFSSHIM_REAL(f)

/* The unix VFS's open(), with O_DIRECT added when the shim asks for it. */
static int hook_open(const char *path, int flags, int mode)
{
    int (*sys)(const char *, int, int) = (int (*)(const char *, int, int))g_sys_open;
    if (!t_want_direct)
        return sys(path, flags, mode);
    int fd = sys(path, flags | O_DIRECT, mode);
    t_direct = fd >= 0;
    if (fd < 0 && errno == EINVAL && t_want_direct == 2)
        fd = sys(path, flags, mode); /* a checker on a file system without O_DIRECT */
    t_fd = fd;
    return fd;
}

/* --- the two layouts ---------------------------------------------------- */

/* Where logical byte OFF lives: block *BLKNO, byte *AT in it, *LEN logical
** bytes contiguous from there, in part *PART; *AT = -1 for a page's
** reserved bytes, which are not stored (they read as zeros). */
static void locate(sqlite3_int64 off, sqlite3_int64 *blkno, int *at, int *len, int *part)
{
    if (off < HDR) {
        *blkno = 0, *at = (int)off, *len = HDR - (int)off, *part = PART_PAGE;
        return;
    }
    sqlite3_int64 rel = off - HDR;
    int r = (int)(rel % FRAME);
    *blkno = rel / FRAME + 1;
    if (r < FHDR) {
        *at = TAIL + r, *len = FHDR - r, *part = PART_TAIL;
    } else if (r - FHDR < TAIL) {
        *at = r - FHDR, *len = TAIL - (r - FHDR), *part = PART_PAGE;
    } else {
        *at = -1, *len = FRAME - r, *part = 0;
    }
}

/* The logical (SQLite's) size of a WAL whose file is PHYS bytes. */
static sqlite3_int64 logical_of(sqlite3_int64 phys)
{
    if (phys < BLK)
        return phys >= HDR ? HDR : 0;
    return HDR + (phys / BLK - 1) * FRAME;
}

/* The file size that holds a logical WAL of SIZE bytes. */
static sqlite3_int64 physical_of(sqlite3_int64 size)
{
    if (size <= 0)
        return 0;
    if (size <= HDR)
        return BLK;
    return (1 + (size - HDR + FRAME - 1) / FRAME) * BLK;
}

/* --- disk --------------------------------------------------------------- */

/* Block B from disk into the bounce buffer (zeros past the end). */
static int read_block(wfile *w, sqlite3_int64 b)
{
    if (w->bounce_at == b)
        return SQLITE_OK;
    w->bounce_at = -1;
    int rc = REAL(w)->pMethods->xRead(REAL(w), w->bounce, BLK, b * BLK);
    if (rc == SQLITE_IOERR_SHORT_READ)
        rc = SQLITE_OK; /* the unix VFS zero-filled the rest */
    if (rc == SQLITE_OK)
        w->bounce_at = b;
    return rc;
}

static int file_size(wfile *w, sqlite3_int64 *out)
{
    return REAL(w)->pMethods->xFileSize(REAL(w), out);
}

/* preallocate: make the file at least BLOCKS blocks of written zeros, and
** sync it (the file system journals the size and the extents once, here). */
static int preallocate(wfile *w, sqlite3_int64 blocks)
{
    sqlite3_int64 size;
    int rc = file_size(w, &size);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_int64 want = blocks * BLK;
    size -= size % BLK; /* a torn last block is rewritten whole */
    if (size >= want)
        return SQLITE_OK;
    /* contiguous if it can; zeros follow, unless the broken variant leaves
    ** the blocks unwritten (they read as zeros until first written) */
    int allocated = w->fd >= 0 && posix_fallocate(w->fd, size, want - size) == 0;
    if (allocated && !g_zero_fill)
        size = want;
    void *zeros;
    if (posix_memalign(&zeros, BLK, ZEROS) != 0)
        return SQLITE_NOMEM;
    memset(zeros, 0, ZEROS);
    while (rc == SQLITE_OK && size < want) {
        int n = want - size < ZEROS ? (int)(want - size) : ZEROS;
        rc = REAL(w)->pMethods->xWrite(REAL(w), zeros, n, size);
        size += n;
    }
    free(zeros);
    w->bounce_at = -1;
    if (rc == SQLITE_OK)
        rc = REAL(w)->pMethods->xSync(REAL(w), SQLITE_SYNC_NORMAL);
    if (rc == SQLITE_OK)
        g_stats.prealloc_syncs++;
    return rc;
}

/* --- the group buffer --------------------------------------------------- */

/* complete: fill the parts of buffered block I not written yet from disk. */
static int complete(wfile *w, int i)
{
    if (w->parts[i] == PART_ALL)
        return SQLITE_OK;
    int rc = read_block(w, w->first + i);
    if (rc != SQLITE_OK)
        return rc;
    unsigned char *dst = w->buf + (size_t)i * BLK;
    if (!(w->parts[i] & PART_PAGE))
        memcpy(dst, w->bounce, TAIL);
    if (!(w->parts[i] & PART_TAIL))
        memcpy(dst + TAIL, w->bounce + TAIL, FHDR);
    w->parts[i] = PART_ALL;
    return SQLITE_OK;
}

/* The WAL header (32 bytes) as it stands: buffered or on disk. */
static int wal_header(wfile *w, unsigned char out[HDR])
{
    if (w->n && w->first == 0) {
        int rc = complete(w, 0);
        if (rc == SQLITE_OK)
            memcpy(out, w->buf, HDR);
        return rc;
    }
    int rc = read_block(w, 0);
    if (rc == SQLITE_OK)
        memcpy(out, w->bounce, HDR);
    return rc;
}

/* The stored checksum (8 bytes) of the frame in block B (B >= 1), or of
** the WAL header for B = 0. */
static int stored_cksum(wfile *w, sqlite3_int64 b, const unsigned char hdr[HDR],
                        unsigned char out[8])
{
    if (b == 0) {
        memcpy(out, hdr + 24, 8);
        return SQLITE_OK;
    }
    if (w->n && b >= w->first && b < w->first + w->n) {
        memcpy(out, w->buf + (size_t)(b - w->first) * BLK + TAIL + 16, 8);
        return SQLITE_OK;
    }
    int rc = read_block(w, b);
    if (rc == SQLITE_OK)
        memcpy(out, w->bounce + TAIL + 16, 8);
    return rc;
}

/* reseal: recompute the checksum of every live frame in the buffer, in
** order, over its header's first 8 bytes and its page as SQLite reads it
** back (the embedded frame header's bytes as zeros), chained from the frame
** before as stored.  A frame whose salts are not the header's is left. */
static int reseal(wfile *w)
{
    unsigned char hdr[HDR], prev[8];
    int rc = wal_header(w, hdr);
    if (rc != SQLITE_OK || (be32(hdr) & ~1u) != 0x377f0682u)
        return rc;
    int big_endian = (int)(be32(hdr) & 1);
    static const unsigned char zero[FHDR];
    for (int i = 0; i < w->n; i++) {
        sqlite3_int64 b = w->first + i;
        if (b == 0)
            continue;
        unsigned char *blk = w->buf + (size_t)i * BLK, *fh = blk + TAIL;
        if (memcmp(fh + 8, hdr + 16, 8) != 0)
            continue;
        rc = stored_cksum(w, b - 1, hdr, prev);
        if (rc != SQLITE_OK)
            return rc;
        uint32_t s[2] = {be32(prev), be32(prev + 4)};
        sums(fh, 8, big_endian, s);
        sums(blk, TAIL, big_endian, s);
        sums(zero, FHDR, big_endian, s);
        put_be32(fh + 16, s[0]);
        put_be32(fh + 20, s[1]);
    }
    return SQLITE_OK;
}

/* flush: write the buffered blocks as one aligned write (growing a
** pre-allocated file first if they reach past it); no sync. */
static int flush(wfile *w)
{
    if (!w->n)
        return SQLITE_OK;
    int rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && i < w->n; i++)
        rc = complete(w, i);
    if (rc == SQLITE_OK)
        rc = reseal(w);
    sqlite3_int64 end = w->first + w->n, size;
    if (rc == SQLITE_OK && g_prealloc > 0)
        rc = file_size(w, &size);
    if (rc == SQLITE_OK && g_prealloc > 0 && size < end * BLK)
        rc = preallocate(w, end + g_prealloc);
    /* The unix VFS writes at most 128 KiB - 1 bytes per call (seekAndWriteFd
    ** masks the length), so a larger group is several aligned writes of
    ** CHUNK blocks, all before the sync. */
    for (int i = 0; rc == SQLITE_OK && i < w->n; i += CHUNK) {
        int k = w->n - i < CHUNK ? w->n - i : CHUNK;
        rc = REAL(w)->pMethods->xWrite(REAL(w), w->buf + (size_t)i * BLK, k * BLK,
                                       (w->first + i) * BLK);
    }
    if (rc != SQLITE_OK)
        return rc;
    g_stats.group_writes++;
    g_stats.blocks_written += (uint64_t)w->n;
    if (w->bounce_at >= w->first && w->bounce_at < end)
        w->bounce_at = -1;
    w->n = 0;
    return SQLITE_OK;
}

/* The buffer index of block B, taken into the buffer (flushing what is
** there first when B does not extend it); -1 with *RC set on failure. */
static int buffered(wfile *w, sqlite3_int64 b, int *rc)
{
    if (w->n && b >= w->first && b < w->first + w->n)
        return (int)(b - w->first);
    if (!(w->n && b == w->first + w->n && w->n < MAXBUF)) {
        *rc = flush(w);
        if (*rc != SQLITE_OK)
            return -1;
        w->first = b;
    }
    int i = w->n++;
    w->parts[i] = 0;
    memset(w->buf + (size_t)i * BLK, 0, BLK);
    return i;
}

/* A commit frame is complete in the buffer: its group can go to disk. */
static int commit_ready(wfile *w)
{
    for (int i = 0; i < w->n; i++)
        if (w->first + i > 0 && w->parts[i] == PART_ALL &&
            be32(w->buf + (size_t)i * BLK + TAIL + 4) != 0)
            return 1;
    return 0;
}

/* --- io methods --------------------------------------------------------- */

static int w_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off)
{
    wfile *w = (wfile *)f;
    const unsigned char *src = data;
    if (off == 0 && amt >= HDR && be32(src + 8) != BLK) {
        sqlite3_log(SQLITE_IOERR_WRITE, "crashlab-waldio: page size %u, not %d", be32(src + 8),
                    BLK);
        return SQLITE_IOERR_WRITE;
    }
    while (amt > 0) {
        sqlite3_int64 b;
        int at, len, part, rc = SQLITE_OK;
        locate(off, &b, &at, &len, &part);
        if (len > amt)
            len = amt;
        if (at >= 0) {
            int i = buffered(w, b, &rc);
            if (i < 0)
                return rc;
            int whole =
                b == 0 ? (at == 0 && len == HDR)
                       : (part == PART_PAGE ? at == 0 && len == TAIL : at == TAIL && len == FHDR);
            if (!whole && !(w->parts[i] & part) && (rc = complete(w, i)) != SQLITE_OK)
                return rc;
            memcpy(w->buf + (size_t)i * BLK + at, src, (size_t)len);
            w->parts[i] |= b == 0 ? PART_ALL : part; /* block 0: the header, then zeros */
        }
        src += len, off += len, amt -= len;
    }
    return commit_ready(w) ? flush(w) : SQLITE_OK;
}

static int w_read(sqlite3_file *f, void *data, int amt, sqlite3_int64 off)
{
    wfile *w = (wfile *)f;
    unsigned char *dst = data;
    sqlite3_int64 size;
    int rc = file_size(w, &size);
    if (rc != SQLITE_OK)
        return rc;
    if (w->n && (w->first + w->n) * BLK > size)
        size = (w->first + w->n) * BLK;
    sqlite3_int64 lsize = logical_of(size);
    while (amt > 0 && off < lsize) {
        sqlite3_int64 b;
        int at, len, part;
        locate(off, &b, &at, &len, &part);
        if (len > amt)
            len = amt;
        if (off + len > lsize)
            len = (int)(lsize - off);
        if (at < 0) {
            memset(dst, 0, (size_t)len);
        } else if (w->n && b >= w->first && b < w->first + w->n) {
            int i = (int)(b - w->first);
            if ((rc = complete(w, i)) != SQLITE_OK)
                return rc;
            memcpy(dst, w->buf + (size_t)i * BLK + at, (size_t)len);
        } else {
            if ((rc = read_block(w, b)) != SQLITE_OK)
                return rc;
            memcpy(dst, w->bounce + at, (size_t)len);
        }
        dst += len, off += len, amt -= len;
    }
    if (amt > 0) {
        memset(dst, 0, (size_t)amt);
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int w_sync(sqlite3_file *f, int flags)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    if (rc == SQLITE_OK)
        rc = REAL(w)->pMethods->xSync(REAL(w), flags);
    if (rc == SQLITE_OK)
        g_stats.syncs++;
    return rc;
}

static int w_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    w->bounce_at = -1;
    return rc == SQLITE_OK ? REAL(w)->pMethods->xTruncate(REAL(w), physical_of(size)) : rc;
}

static int w_file_size(sqlite3_file *f, sqlite3_int64 *out)
{
    wfile *w = (wfile *)f;
    sqlite3_int64 size;
    int rc = file_size(w, &size);
    if (rc != SQLITE_OK)
        return rc;
    if (w->n && (w->first + w->n) * BLK > size)
        size = (w->first + w->n) * BLK;
    *out = logical_of(size);
    return SQLITE_OK;
}

static int w_close(sqlite3_file *f)
{
    wfile *w = (wfile *)f;
    int rc = flush(w);
    int rc2 = REAL(w)->pMethods->xClose(REAL(w));
    free(w->buf);
    free(w->bounce);
    return rc != SQLITE_OK ? rc : rc2;
}

/* Size and chunk hints would make the unix VFS write single bytes (refused
** under O_DIRECT); the shim pre-allocates itself. */
static int w_file_control(sqlite3_file *f, int op, void *arg)
{
    if (op == SQLITE_FCNTL_SIZE_HINT || op == SQLITE_FCNTL_CHUNK_SIZE)
        return SQLITE_OK;
    int rc = REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
    if (rc == SQLITE_OK && op == SQLITE_FCNTL_VFSNAME)
        *(char **)arg = sqlite3_mprintf(WALDIOVFS_NAME "/%z", *(char **)arg);
    return rc;
}
/* The WAL is never memory-mapped by SQLite; refuse anyway (its layout is
** not SQLite's). */
static int w_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    (void)f, (void)off, (void)n;
    *pp = NULL;
    return SQLITE_OK;
}
static int w_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    (void)f, (void)off, (void)p;
    return SQLITE_OK;
}

/* db_geometry_ok: the database NAME's WAL belongs to, if it has a header,
** has 4096-byte pages and at least WALDIOVFS_RESERVE reserved bytes. */
static int db_geometry_ok(const char *wal_name)
{
    sqlite3_file *db = sqlite3_database_file_object(wal_name);
    unsigned char h[100];
    if (!db || !db->pMethods || db->pMethods->xRead(db, h, sizeof h, 0) != SQLITE_OK ||
        memcmp(h, "SQLite format 3", 16) != 0)
        return 1; /* no header yet: the first page 1 written is checked by the pager's size */
    int ps = h[16] << 8 | h[17];
    if (ps == BLK && h[20] >= WALDIOVFS_RESERVE)
        return 1;
    sqlite3_log(SQLITE_CANTOPEN,
                "crashlab-waldio: %s: page size %d, %d reserved bytes (needs %d, %d)", wal_name, ps,
                h[20], BLK, WALDIOVFS_RESERVE);
    return 0;
}

/* xOpen: the WAL goes through the shim, opened with O_DIRECT and
** pre-allocated; every other file is the underlying VFS's own. */
static int w_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL))
        return g_real->xOpen(g_real, name, f, flags, out);
    wfile *w = (wfile *)f;
    memset(w, 0, sizeof *w);
    w->shim.real = (sqlite3_file *)&w[1];
    w->bounce_at = -1;
    if (!db_geometry_ok(name))
        return SQLITE_CANTOPEN;
    void *buf = NULL, *bounce = NULL;
    if (posix_memalign(&buf, BLK, (size_t)MAXBUF * BLK) != 0 ||
        posix_memalign(&bounce, BLK, BLK) != 0) {
        free(buf);
        return SQLITE_NOMEM;
    }
    t_want_direct = g_prealloc > 0 ? 1 : 2, t_fd = -1, t_direct = 0;
    int rc = g_real->xOpen(g_real, name, w->shim.real, flags, out);
    t_want_direct = 0;
    w->fd = t_fd;
    if (rc != SQLITE_OK || !w->shim.real->pMethods) {
        free(buf), free(bounce);
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    w->buf = buf, w->bounce = bounce;
    if (t_direct)
        g_stats.direct_opens++;
    else
        g_stats.buffered_opens++;
    w->shim.base.pMethods = &g_io;
    if (g_prealloc > 0 && !(flags & SQLITE_OPEN_READONLY))
        rc = preallocate(w, 1 + (sqlite3_int64)g_prealloc);
    if (rc != SQLITE_OK) {
        w_close(f);
        w->shim.base.pMethods = NULL;
    }
    return rc;
}

void waldiovfs_set_zero_fill(int on) { g_zero_fill = on != 0; }

int waldiovfs_register(int prealloc_frames)
{
    if (prealloc_frames < 0)
        return SQLITE_MISUSE;
    g_prealloc = prealloc_frames;
    if (g_real)
        return SQLITE_OK;
    sqlite3_vfs *real;
    int rc = vfsshim_default_parent(3, &real);
    if (rc != SQLITE_OK)
        return rc;
    if (!real->xGetSystemCall)
        return SQLITE_ERROR;
    g_sys_open = real->xGetSystemCall(real, "open");
    if (!g_sys_open)
        return SQLITE_ERROR;
    rc = real->xSetSystemCall(real, "open", (sqlite3_syscall_ptr)hook_open);
    if (rc != SQLITE_OK)
        return rc;
    vfsshim_vfs(&g_vfs, 3, WALDIOVFS_NAME, real, (int)sizeof(wfile) + real->szOsFile, w_open);
    vfsshim_io_methods(&g_io, 3);
    g_io.xClose = w_close;
    g_io.xRead = w_read;
    g_io.xWrite = w_write;
    g_io.xTruncate = w_truncate;
    g_io.xSync = w_sync;
    g_io.xFileSize = w_file_size;
    g_io.xFileControl = w_file_control;
    g_io.xFetch = w_fetch;
    g_io.xUnfetch = w_unfetch;
    g_real = real;
    return sqlite3_vfs_register(&g_vfs, 0);
}

void waldiovfs_get_stats(waldiovfs_stats *out) { *out = g_stats; }
