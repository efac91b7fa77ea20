/*
** logfuse_requests.c — the FUSE requests the fuse recording daemon answers
** (logfuse.h; what each logs: logfuse.c's top comment).
*/
#include <errno.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logfuse.h"

static const uint8_t zero_block[ZERO_CHUNK];

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

const struct fuse_lowlevel_ops logfuse_ops = {
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
