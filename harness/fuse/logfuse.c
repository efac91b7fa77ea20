/*
** logfuse: the fuse recording daemon of crashlab.
**
**   logfuse --image IMG --log LOG [--nvram BYTES] [--fault RULE]... MOUNTPOINT
**
** Mounts a FUSE file system at MOUNTPOINT holding two files:
**   disk   the block device's content, backed by IMG (read and written in
**          place: IMG must be a working copy, never a base image);
**   mark   a control file: every line written to it is logged as a MARK;
**   nvram  with --nvram BYTES only: the last BYTES of IMG (then not part of
**          `disk`), an emulated battery-backed RAM.  Each write to it is
**          logged as a FUA write (durable once it completes, no FLUSH) at
**          the sectors after the disk's: sector disk_sectors + off / 512.
** The driver (harness/record/fuse.py) attaches `disk` to a loop device with
** `losetup --direct-io=on` and mounts a real file system on that.
**
** Every request that changes the device is appended to LOG, in the
** dm-log-writes format (logwrites.h), BEFORE the daemon replies:
**   write                            -> a write entry with the data
**   fsync / fdatasync                -> a FLUSH entry
**   fallocate PUNCH_HOLE|KEEP_SIZE   -> a DISCARD entry
**   fallocate ZERO_RANGE[|KEEP_SIZE] -> write entries of zeros
**   a line written to `mark`         -> a MARK entry
**   write to `nvram`                 -> a FUA write entry past the disk's sectors
** The daemon is single-threaded (one request at a time), so the log's order
** is the order in which requests completed.  Like the kernel, it rewrites the
** super block's nr_entries after every FLUSH, FUA and MARK entry and at exit.
**
** Pitfalls this file follows (harness/record/NOTES.md): direct_io on both files
** and no writeback cache (otherwise writes reach the daemon late and merged);
** fsync is always implemented (an ENOSYS reply makes the kernel stop sending
** fsync and flushes vanish); setattr is a no-op that succeeds; the daemon
** never touches the file system stacked on top of it, and asks to be treated
** as an I/O flusher with its memory locked, against reclaim deadlocks.
**
** Device faults (--fault, faultrules.h): a request a rule fails is answered
** EIO, neither applied nor logged; a MARK "fault:eio-..." is logged in its
** place.  Marks arm the rules that wait for them.
**
** After mounting it prints "ready" on stdout and closes stdout.  It exits 0
** when unmounted (fusermount3 -u) or on SIGTERM/SIGINT/SIGHUP, and 1 if any
** log write failed (the log is then incomplete: every later request gets EIO).
*/
#define FUSE_USE_VERSION 34

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <linux/falloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "faultrules.h"
#include "logwrites.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define INO_ROOT     1
#define INO_DISK     2
#define INO_MARK     3
#define INO_NVRAM    4
#define ZERO_CHUNK   (1U << 20) /* zero-range writes are logged in 1 MiB entries */
#define ATTR_TIMEOUT 86400.0

/* The daemon's whole state (it is single-threaded). */
static struct {
    int img_fd;          /* the working image */
    uint8_t *img;        /* ... mapped shared: reads and writes are memcpy */
    off_t img_size;      /* fixed: the disk never changes size */
    off_t nv_size;       /* --nvram: the NVRAM's bytes, after the disk's in IMG (0: none) */
    int log_fd;          /* the log, written at log_off */
    uint8_t *super;      /* the log's super block, mapped shared */
    off_t log_off;       /* where the next entry goes */
    uint64_t nr_entries; /* entries appended so far */
    int failed;          /* a log write failed: the log is incomplete */
    uint64_t n_writes, n_flushes, n_discards, n_zero, n_marks, n_nvram, bytes;
} g = {.img_fd = -1, .log_fd = -1};

static const uint8_t zero_block[ZERO_CHUNK];
static fault_rules faults; /* the device faults to inject (--fault) */

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
static int write_super(void)
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
static int log_append(uint64_t sector, uint64_t nr_sectors, uint64_t flags, const char *label,
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

/* Fill st with the attributes of inode ino.  Returns 0 or ENOENT. */
static int fill_attr(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    switch (ino) {
    case INO_ROOT:
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
        return 0;
    case INO_DISK:
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = g.img_size;
        st->st_blocks = g.img_size / 512;
        return 0;
    case INO_MARK:
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        return 0;
    case INO_NVRAM:
        if (!g.nv_size)
            return ENOENT;
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = g.nv_size;
        return 0;
    default: return ENOENT;
    }
}

/* Negotiate the connection: never the writeback cache (see the top). */
static void lf_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
    if (conn->capable & FUSE_CAP_ASYNC_DIO)
        conn->want |= FUSE_CAP_ASYNC_DIO;
}

static void lf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    if (parent != INO_ROOT) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (strcmp(name, "disk") == 0)
        e.ino = INO_DISK;
    else if (strcmp(name, "mark") == 0)
        e.ino = INO_MARK;
    else if (strcmp(name, "nvram") == 0 && g.nv_size)
        e.ino = INO_NVRAM;
    else {
        fuse_reply_err(req, ENOENT);
        return;
    }
    e.attr_timeout = e.entry_timeout = ATTR_TIMEOUT;
    fill_attr(e.ino, &e.attr);
    fuse_reply_entry(req, &e);
}

static void lf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct stat st;
    (void)fi;
    int err = fill_attr(ino, &st);
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/*
** setattr succeeds and changes nothing (chmod, utimens, O_TRUNC of `mark`),
** except that the disk's size cannot change.
*/
static void lf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct stat st;
    (void)fi;
    int err = fill_attr(ino, &st);
    if (!err && (ino == INO_DISK || ino == INO_NVRAM) && (to_set & FUSE_SET_ATTR_SIZE) &&
        attr->st_size != st.st_size)
        err = EPERM;
    if (err)
        fuse_reply_err(req, err);
    else
        fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* Both files are direct I/O: every read and write reaches the daemon. */
static void lf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino != INO_DISK && ino != INO_MARK && !(ino == INO_NVRAM && g.nv_size)) {
        fuse_reply_err(req, ino == INO_ROOT ? EISDIR : ENOENT);
        return;
    }
    fi->direct_io = 1;
    fi->keep_cache = 0;
    fuse_reply_open(req, fi);
}

/*
** A device fault: when a rule fails request OP on bytes [off, off+len), log
** the fault's MARK, reply EIO and return 1; otherwise return 0.
*/
static int inject(fuse_req_t req, enum fault_op op, uint64_t off, uint64_t len)
{
    if (!faults.n || !fault_rules_hit(&faults, op, off, len))
        return 0;
    char label[FAULT_MARK_MAX];
    size_t n = fault_mark_label(op, off, len, label, sizeof label);
    if (log_append(0, 0, LOG_MARK_FLAG, label, n, NULL, 0) == 0)
        g.n_marks++;
    fuse_reply_err(req, EIO);
    return 1;
}

static void lf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    if (ino == INO_DISK && off >= 0 && inject(req, FAULT_READ, (uint64_t)off, size))
        return;
    if (ino == INO_NVRAM) {
        if (off < 0 || off >= g.nv_size)
            size = 0;
        else if (off + (off_t)size > g.nv_size)
            size = (size_t)(g.nv_size - off);
        fuse_reply_buf(req, size ? (const char *)g.img + g.img_size + off : NULL, size);
        return;
    }
    if (ino != INO_DISK || off >= g.img_size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if (off + (off_t)size > g.img_size)
        size = (size_t)(g.img_size - off);
    fuse_reply_buf(req, (const char *)g.img + off, size);
}

/*
** Log each line of a write to `mark` as one MARK entry.  A write without a
** final newline counts as a complete line (marks must land synchronously).
** Empty lines are ignored; a label too long for a header block fails the
** whole write with EINVAL before anything is logged.
*/
static void write_marks(fuse_req_t req, const char *buf, size_t size)
{
    size_t start, end;
    for (start = 0; start < size; start = end + 1) {
        for (end = start; end < size && buf[end] != '\n'; end++) {
        }
        if (end - start > LOG_MARK_MAX) {
            fuse_reply_err(req, EINVAL);
            return;
        }
    }
    for (start = 0; start < size; start = end + 1) {
        for (end = start; end < size && buf[end] != '\n'; end++) {
        }
        if (end == start)
            continue;
        if (log_append(0, 0, LOG_MARK_FLAG, buf + start, end - start, NULL, 0)) {
            fuse_reply_err(req, EIO);
            return;
        }
        g.n_marks++;
        fault_rules_mark(&faults, buf + start, end - start);
    }
    fuse_reply_write(req, size);
}

/*
** A write to the NVRAM: apply it, then log it as a FUA write of the whole
** sectors it touches, at the sectors after the disk's (read back from the
** mapping, like an unaligned disk write).  No fault rule applies to it.
*/
static void write_nvram(fuse_req_t req, const char *buf, size_t size, off_t off)
{
    if (g.failed) {
        fuse_reply_err(req, EIO);
        return;
    }
    if (off < 0 || off >= g.nv_size || size > (size_t)(g.nv_size - off)) {
        fuse_reply_err(req, ENOSPC); /* the NVRAM never grows */
        return;
    }
    if (size == 0) {
        fuse_reply_write(req, 0);
        return;
    }
    uint8_t *nv = g.img + g.img_size;
    memcpy(nv + off, buf, size);
    off_t first = off / LOG_SECTOR_SIZE;
    off_t last = (off + (off_t)size + LOG_SECTOR_SIZE - 1) / LOG_SECTOR_SIZE;
    size_t len = (size_t)(last - first) * LOG_SECTOR_SIZE;
    uint64_t sector = (uint64_t)(g.img_size / LOG_SECTOR_SIZE + first);
    if (log_append(sector, (uint64_t)(last - first), LOG_FUA_FLAG, NULL, 0,
                   nv + first * LOG_SECTOR_SIZE, len)) {
        fuse_reply_err(req, EIO);
        return;
    }
    g.n_writes++;
    g.n_nvram++;
    g.bytes += len;
    fuse_reply_write(req, size);
}

/*
** A write to the disk: apply it to the image, then log it.  Loop devices
** only send sector-aligned writes; an unaligned one is logged as the whole
** sectors it touches, read back from the image after applying it.
*/
static void lf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)fi;
    if (ino == INO_MARK) {
        write_marks(req, buf, size);
        return;
    }
    if (ino == INO_NVRAM) {
        write_nvram(req, buf, size, off);
        return;
    }
    if (ino != INO_DISK) {
        fuse_reply_err(req, EBADF);
        return;
    }
    if (g.failed) {
        fuse_reply_err(req, EIO);
        return;
    }
    if (off < 0 || off >= g.img_size) {
        fuse_reply_err(req, ENOSPC);
        return;
    }
    if (off + (off_t)size > g.img_size)
        size = (size_t)(g.img_size - off);
    if (size == 0) {
        fuse_reply_write(req, 0);
        return;
    }
    if (inject(req, FAULT_WRITE, (uint64_t)off, size))
        return;
    memcpy(g.img + off, buf, size);
    const void *data = buf;
    off_t first = off / LOG_SECTOR_SIZE;
    off_t last = (off + (off_t)size + LOG_SECTOR_SIZE - 1) / LOG_SECTOR_SIZE;
    size_t len = (size_t)(last - first) * LOG_SECTOR_SIZE;
    if (off % LOG_SECTOR_SIZE || size % LOG_SECTOR_SIZE)
        data = g.img + first * LOG_SECTOR_SIZE;
    if (log_append((uint64_t)first, (uint64_t)(last - first), 0, NULL, 0, data, len)) {
        fuse_reply_err(req, EIO);
        return;
    }
    g.n_writes++;
    g.bytes += len;
    fuse_reply_write(req, size);
}

/* A flush of the device's volatile cache: a FLUSH entry.  Never ENOSYS. */
static void lf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    (void)fi;
    if (ino == INO_DISK) {
        if (inject(req, FAULT_FLUSH, 0, 0))
            return;
        if (log_append(0, 0, LOG_FLUSH_FLAG, NULL, 0, NULL, 0)) {
            fuse_reply_err(req, EIO);
            return;
        }
        g.n_flushes++;
    }
    fuse_reply_err(req, 0);
}

static void lf_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    fuse_reply_err(req, 0);
}

/* close() of a file: nothing to do (a device flush arrives as fsync). */
static void lf_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

/*
** Discard (PUNCH_HOLE|KEEP_SIZE) -> a DISCARD entry; zeroing (ZERO_RANGE)
** -> write entries of zeros; plain preallocation changes no content and
** succeeds.  Ranges must be whole sectors inside the disk.
*/
static void lf_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != INO_DISK) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    if (g.failed) {
        fuse_reply_err(req, EIO);
        return;
    }
    if (off < 0 || len <= 0 || off % LOG_SECTOR_SIZE || len % LOG_SECTOR_SIZE) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (off >= g.img_size) {
        fuse_reply_err(req, ENOSPC);
        return;
    }
    if (off + len > g.img_size)
        len = g.img_size - off;
    if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
        /* A working image on a file system without hole punching: zero it. */
        if (fallocate(g.img_fd, mode, off, len) != 0)
            memset(g.img + off, 0, (size_t)len);
        if (log_append((uint64_t)(off / LOG_SECTOR_SIZE), (uint64_t)(len / LOG_SECTOR_SIZE),
                       LOG_DISCARD_FLAG, NULL, 0, NULL, 0)) {
            fuse_reply_err(req, EIO);
            return;
        }
        g.n_discards++;
    } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
        for (off_t done = 0; done < len; done += ZERO_CHUNK) {
            size_t n = (size_t)(len - done < ZERO_CHUNK ? len - done : ZERO_CHUNK);
            memset(g.img + off + done, 0, n);
            if (log_append((uint64_t)((off + done) / LOG_SECTOR_SIZE), n / LOG_SECTOR_SIZE, 0, NULL,
                           0, zero_block, n)) {
                fuse_reply_err(req, EIO);
                return;
            }
            g.bytes += n;
        }
        g.n_zero++;
    } else if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    fuse_reply_err(req, 0);
}

static void lf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    static const char *names[] = {".", "..", "disk", "mark", "nvram"};
    static const fuse_ino_t inos[] = {INO_ROOT, INO_ROOT, INO_DISK, INO_MARK, INO_NVRAM};
    off_t count = g.nv_size ? 5 : 4;
    char out[1024];
    size_t used = 0;
    (void)fi;
    if (ino != INO_ROOT) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    if (size > sizeof out)
        size = sizeof out;
    for (off_t i = off; i < count; i++) {
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = inos[i];
        st.st_mode = (inos[i] == INO_ROOT ? S_IFDIR : S_IFREG);
        size_t need = fuse_add_direntry(req, out + used, size - used, names[i], &st, i + 1);
        if (need > size - used)
            break;
        used += need;
    }
    fuse_reply_buf(req, out, used);
}

static const struct fuse_lowlevel_ops ops = {
    .init = lf_init,
    .lookup = lf_lookup,
    .getattr = lf_getattr,
    .setattr = lf_setattr,
    .open = lf_open,
    .read = lf_read,
    .write = lf_write,
    .flush = lf_flush,
    .fsync = lf_fsync,
    .fsyncdir = lf_fsyncdir,
    .fallocate = lf_fallocate,
    .readdir = lf_readdir,
};

static void usage(void)
{
    fprintf(stderr, "usage: logfuse --image IMG --log LOG [--nvram BYTES] "
                    "[--fault OP:NTH:STICKY:LO:HI[:AFTER]]... MOUNTPOINT\n");
    exit(2);
}

/* open_files: open and map the image IMG (its last g.nv_size bytes are the
** NVRAM), create the log LOG with its super block and map that; on failure
** a message on stderr and -1. */
static int open_files(const char *image, const char *log)
{
    g.img_fd = open(image, O_RDWR | O_CLOEXEC);
    if (g.img_fd < 0) {
        fprintf(stderr, "logfuse: %s: %s\n", image, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(g.img_fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size % LOG_SECTOR_SIZE ||
        st.st_size <= g.nv_size) {
        fprintf(stderr,
                "logfuse: %s: not a regular file of whole %u-byte sectors (past the NVRAM)\n",
                image, LOG_SECTOR_SIZE);
        return -1;
    }
    g.img_size = st.st_size - g.nv_size;
    g.img = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, g.img_fd, 0);
    if (g.img == MAP_FAILED) {
        fprintf(stderr, "logfuse: mmap %s: %s\n", image, strerror(errno));
        return -1;
    }
    g.log_fd = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.log_fd < 0) {
        fprintf(stderr, "logfuse: %s: %s\n", log, strerror(errno));
        return -1;
    }
    g.log_off = LOG_SECTOR_SIZE;
    if (write_super())
        return -1;
    g.super = mmap(NULL, LOG_SECTOR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g.log_fd, 0);
    if (g.super == MAP_FAILED) {
        fprintf(stderr, "logfuse: mmap %s: %s\n", log, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"image", required_argument, NULL, 'i'}, {"log", required_argument, NULL, 'l'},
        {"fault", required_argument, NULL, 'f'}, {"nvram", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    const char *image = NULL, *log = NULL;
    int c;
    char err[160];
    while ((c = getopt_long(argc, argv, "i:l:f:n:h", longopts, NULL)) != -1) {
        if (c == 'i')
            image = optarg;
        else if (c == 'l')
            log = optarg;
        else if (c == 'n') {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v <= 0 || v % LOG_SECTOR_SIZE || v > (1 << 20)) {
                fprintf(stderr, "logfuse: bad --nvram %s (whole %u-byte sectors, at most 1 MiB)\n",
                        optarg, LOG_SECTOR_SIZE);
                return 2;
            }
            g.nv_size = (off_t)v;
        } else if (c == 'f') {
            if (fault_rules_add(&faults, optarg, err, sizeof err) != 0) {
                fprintf(stderr, "logfuse: %s\n", err);
                return 2;
            }
        } else
            usage();
    }
    if (!image || !log || optind != argc - 1)
        usage();
    const char *mountpoint = argv[optind];

    if (open_files(image, log))
        return 2;

    /* Reclaim may need this daemon to make progress: never let it wait on
    ** reclaim itself. */
    if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0)
        fprintf(stderr, "logfuse: warning: PR_SET_IO_FLUSHER: %s\n", strerror(errno));

    /* Single-threaded; no writeback cache; a recognisable name in mtab. */
    char *fargv[] = {argv[0], "-o", "fsname=crashlab-logfuse,subtype=logfuse", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se)
        return 2;
    int rc = 2;
    if (fuse_set_signal_handlers(se) != 0)
        goto out_destroy;
    if (fuse_session_mount(se, mountpoint) != 0)
        goto out_signals;
#ifndef __SANITIZE_ADDRESS__ /* ASan's shadow memory cannot be locked */
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        fprintf(stderr, "logfuse: warning: mlockall: %s\n", strerror(errno));
#endif
    printf("ready\n");
    fflush(stdout);
    fclose(stdout);
    rc = fuse_session_loop(se) < 0 ? 1 : 0;
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_destroy:
    fuse_session_destroy(se);
    fuse_opt_free_args(&args);
    munmap(g.super, LOG_SECTOR_SIZE);
    g.super = NULL;
    if (write_super())
        rc = 1;
    if (g.failed)
        rc = 1;
    close(g.log_fd);
    munmap(g.img, (size_t)(g.img_size + g.nv_size));
    close(g.img_fd);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr,
            "logfuse: %llu entries: %llu writes (%llu bytes), %llu flushes, %llu discards, "
            "%llu zero-ranges, %llu marks, %llu injected faults, %llu nvram writes; "
            "cpu user %.3f s sys %.3f s\n",
            (unsigned long long)g.nr_entries, (unsigned long long)g.n_writes,
            (unsigned long long)g.bytes, (unsigned long long)g.n_flushes,
            (unsigned long long)g.n_discards, (unsigned long long)g.n_zero,
            (unsigned long long)g.n_marks, (unsigned long long)faults.injected,
            (unsigned long long)g.n_nvram, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
            ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    return rc;
}
