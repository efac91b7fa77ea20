/*
** logfuse_log.c — the fuse recording daemon's log (logfuse.h): entries
** appended in the dm-log-writes format (logwrites.h) and the super block's
** entry count kept current.
*/
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "logfuse.h"

/*
** Write all of iov at offset off of fd (retrying short writes).  Returns 0,
** or -1 with errno set.
*/
static int pwritev_all(int fd, struct iovec *iov, int n, off_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n, off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/*
** Rewrite the log's super block with the current entry count.  Returns 0 or
** -1 (and marks the daemon failed).  The padding after sectorsize is zero.
** Once the super block is mapped (g.super), only nr_entries changes, and it
** is stored through the mapping: the page cache has it at once, no syscall.
*/
int write_super(void)
{
    if (g.super) {
        uint64_t n = htole64(g.nr_entries);
        memcpy(g.super + offsetof(struct log_write_super, nr_entries), &n, sizeof n);
        return 0;
    }
    uint8_t block[LOG_SECTOR_SIZE];
    struct log_write_super s;
    memset(block, 0, sizeof block);
    s.magic = htole64(WRITE_LOG_MAGIC);
    s.version = htole64(WRITE_LOG_VERSION);
    s.nr_entries = htole64(g.nr_entries);
    s.sectorsize = htole32(LOG_SECTOR_SIZE);
    memcpy(block, &s, 28); /* 28 = the packed size; bytes 28.. stay zero */
    struct iovec iov = {block, sizeof block};
    if (pwritev_all(g.log_fd, &iov, 1, 0) != 0) {
        fprintf(stderr, "logfuse: writing the log super block: %s\n", strerror(errno));
        g.failed = 1;
        return -1;
    }
    return 0;
}

/*
** Append one entry: a header block (sector, nr_sectors, flags, the label of
** a MARK) followed by `len` bytes of payload from `data` (len is a multiple
** of the sector size; 0 for FLUSH, DISCARD and MARK).  Rewrites the super
** block after FLUSH, FUA and MARK entries.  Returns 0, or -1 after marking
** the daemon failed.
*/
int log_append(uint64_t sector, uint64_t nr_sectors, uint64_t flags, const char *label,
               size_t label_len, const void *data, size_t len)
{
    uint8_t header[LOG_SECTOR_SIZE];
    struct log_write_entry e;
    if (g.failed)
        return -1;
    memset(header, 0, sizeof header);
    e.sector = htole64(sector);
    e.nr_sectors = htole64(nr_sectors);
    e.flags = htole64(flags);
    e.data_len = htole64(label_len);
    memcpy(header, &e, sizeof e);
    if (label_len)
        memcpy(header + sizeof e, label, label_len);
    struct iovec iov[2] = {{header, sizeof header}, {(void *)data, len}};
    if (pwritev_all(g.log_fd, iov, len ? 2 : 1, g.log_off) != 0) {
        fprintf(stderr, "logfuse: appending to the log at byte %lld: %s\n", (long long)g.log_off,
                strerror(errno));
        g.failed = 1;
        return -1;
    }
    g.log_off += (off_t)(sizeof header + len);
    g.nr_entries++;
    if (flags & (LOG_FLUSH_FLAG | LOG_FUA_FLAG | LOG_MARK_FLAG))
        return write_super();
    return 0;
}
