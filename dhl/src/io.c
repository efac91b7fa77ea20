/*
** io.c — the I/O layer: a POSIX implementation of struct dhl_io on a file
** or block device, and the page-granular read/write/sync wrappers that
** count what the engine does (syncs, pages and bytes written).
*/
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

struct posix_ctx {
    int fd;
    bool blockdev;
};

static int px_pread(void *ctx, void *buf, size_t n, uint64_t off, size_t *got)
{
    struct posix_ctx *c = ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(c->fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static int px_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    struct posix_ctx *c = ctx;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(c->fd, (const uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        done += (size_t)r;
    }
    return 0;
}

static int px_sync(void *ctx, int datasync)
{
    struct posix_ctx *c = ctx;
    int r = datasync ? fdatasync(c->fd) : fsync(c->fd);
    return r < 0 ? -errno : 0;
}

static int px_size(void *ctx, uint64_t *bytes)
{
    struct posix_ctx *c = ctx;
    struct stat st;
    if (fstat(c->fd, &st) < 0)
        return -errno;
    if (S_ISBLK(st.st_mode)) {
        uint64_t sz = 0;
        if (ioctl(c->fd, BLKGETSIZE64, &sz) < 0)
            return -errno;
        *bytes = sz;
        return 0;
    }
    *bytes = (uint64_t)st.st_size;
    return 0;
}

static int px_close(void *ctx)
{
    struct posix_ctx *c = ctx;
    int r = close(c->fd) < 0 ? -errno : 0;
    free(c);
    return r;
}

/* dhl__posix_io: open path (creating it when asked; truncating regular
** files when asked) and install the POSIX io in db.  Returns DHL_OK or
** DHL_EIO with the reason. */
int dhl__posix_io(dhl *db, const char *path, bool create, bool truncate)
{
    int fl = db->readonly ? O_RDONLY : O_RDWR;
    if (create && !db->readonly)
        fl |= O_CREAT;
    int fd = open(path, fl | O_CLOEXEC, 0644);
    if (fd < 0)
        return dhl__err(db, DHL_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return dhl__err(db, DHL_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
        close(fd);
        return dhl__err(db, DHL_EINVAL, "%s is neither a regular file nor a block device", path);
    }
    if (truncate && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0) {
        int e = errno;
        close(fd);
        return dhl__err(db, DHL_EIO, "cannot truncate %s: %s", path, strerror(e));
    }
    struct posix_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    }
    c->fd = fd;
    c->blockdev = S_ISBLK(st.st_mode);
    db->io = (struct dhl_io){c, px_pread, px_pwrite, px_sync, px_size, px_close, c->blockdev};
    db->own_io = true;
    db->blockdev = c->blockdev;
    return DHL_OK;
}

/* dhl__read: read page pgno into buf.  A read past the end of the store
** fills the rest with zeros and sets *short_read (may be NULL). */
int dhl__read(dhl *db, uint32_t pgno, uint8_t *buf, bool *short_read)
{
    size_t got = 0;
    int r = db->io.pread(db->io.ctx, buf, db->ps, (uint64_t)pgno * db->ps, &got);
    if (r < 0)
        return dhl__err(db, DHL_EIO, "read of page %u failed: %s", pgno, strerror(-r));
    if (got < db->ps)
        memset(buf + got, 0, db->ps - got);
    if (short_read)
        *short_read = got < db->ps;
    db->ctr.pages_read++;
    return DHL_OK;
}

/* dhl__write: write one whole page and count it. */
int dhl__write(dhl *db, uint32_t pgno, const uint8_t *buf)
{
    int r = db->io.pwrite(db->io.ctx, buf, db->ps, (uint64_t)pgno * db->ps);
    if (r < 0)
        return dhl__err(db, DHL_EIO, "write of page %u failed: %s", pgno, strerror(-r));
    db->ctr.pages_written++;
    db->ctr.bytes_written += db->ps;
    return DHL_OK;
}

/* dhl__sync: fsync or fdatasync (DHL_OPEN_FDATASYNC) and count it. */
int dhl__sync(dhl *db)
{
    int r = db->io.sync(db->io.ctx, (db->oflags & DHL_OPEN_FDATASYNC) ? 1 : 0);
    if (r < 0)
        return dhl__err(db, DHL_EIO, "sync failed: %s", strerror(-r));
    db->ctr.syncs++;
    return DHL_OK;
}

/* dhl__file_pages: whole pages physically present (0 if unknown). */
uint64_t dhl__file_pages(dhl *db)
{
    uint64_t b = 0;
    if (!db->io.size || db->io.size(db->io.ctx, &b) < 0)
        return 0;
    return b / db->ps;
}
