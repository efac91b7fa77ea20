/*
** The DHL engine: libdhl (dhl/include/dhl.h) on a file or a raw block
** device.  Table t is DHL tree t; a row is a record key -> value.  Options:
**   mode       tc, cc, tc_opt, cc_opt or nolog (the commit protocol)
**   sync       fsync or fdatasync (what the engine's syncs call)
**   page_size  the database page size (must match an existing database)
**
** Creating: a path that does not exist or is an empty regular file is
** formatted, and the directory holding a new file is fsynced (the file's
** name must survive a power loss too: libdhl syncs only the file itself).
** A block device whose first 512 bytes are all zero is a fresh device (the
** raw tier's base image is zero-filled) and is formatted in place; any other
** content is opened as a database, which runs DHL recovery.
**
** Counts (--stats): libdhl counts its own I/O where it calls the OS (one
** pwrite per page, one fsync/fdatasync per sync); the runner adds the
** directory fsync it makes itself.
*/
#include <dhl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "errorf.h"

struct engine {
    dhl *db;
    uint32_t ntables;
    uint64_t dir_syncs; /* directory fsyncs made by this engine */
    void *buf;          /* select's value buffer */
    size_t buflen;
    char err[512];
    int io_error; /* the last call failed with DHL_EIO */
};

/* Set X->err from a printf format; returns -1. */
#define fail(x, ...) errorf((x)->err, sizeof(x)->err, __VA_ARGS__)

/* e->err = WHAT: libdhl's message and code name, when RC is an error;
** returns 0 for DHL_OK, else -1. */
static int check(engine *e, int rc, const char *what)
{
    e->io_error = rc == DHL_EIO;
    if (rc == DHL_OK)
        return 0;
    return fail(e, "%s: %s (%s)", what, dhl_errmsg(e->db), dhl_errstr(rc));
}

/* fsync the directory holding PATH.  Returns 0, or -1 with errno set. */
static int sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == path) {
        snprintf(dir, sizeof dir, "/");
    } else {
        if ((size_t)(slash - path) >= sizeof dir) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* 1 if the block device PATH starts with 512 zero bytes (a fresh device),
** 0 if not, -1 with errno set if it cannot be read. */
static int blockdev_is_blank(const char *path)
{
    unsigned char b[512];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, b, sizeof b, 0);
    int saved = errno;
    close(fd);
    if (n < 0) {
        errno = saved;
        return -1;
    }
    for (ssize_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static void free_engine(engine *e)
{
    if (e->db)
        dhl_close(e->db);
    free(e->buf);
    free(e);
}

/* check_options: OPT's DHL mode, sync call, page size and table count, the
** first two into *MODE and *DATASYNC; else -1 with why in ERR. */
static int check_options(const engine_options *opt, enum dhl_mode *mode, int *datasync, char *err,
                         size_t errlen)
{
    if (dhl_mode_parse(opt->dhl_mode, mode) != DHL_OK) {
        snprintf(err, errlen,
                 "bad DHL mode %s (choose from tc, cc, tc_opt, cc_opt, nolog, "
                 "tc_thesis, cc_thesis)",
                 opt->dhl_mode);
        return -1;
    }
    if (strcmp(opt->sync, "fsync") == 0)
        *datasync = 0;
    else if (strcmp(opt->sync, "fdatasync") == 0)
        *datasync = 1;
    else {
        snprintf(err, errlen, "bad sync call %s (choose from fsync, fdatasync)", opt->sync);
        return -1;
    }
    if (opt->page_size < DHL_MIN_PAGE_SIZE || opt->page_size > DHL_MAX_PAGE_SIZE ||
        (opt->page_size & (opt->page_size - 1))) {
        snprintf(err, errlen, "bad page size %d (a power of two, %d..%d)", opt->page_size,
                 DHL_MIN_PAGE_SIZE, DHL_MAX_PAGE_SIZE);
        return -1;
    }
    if (opt->ntables < 1 || opt->ntables > DHL_MAX_TREES) {
        snprintf(err, errlen, "%u tables: DHL holds 1..%d trees", opt->ntables, DHL_MAX_TREES);
        return -1;
    }
    return 0;
}

static int dh_open(const engine_options *opt, engine **out, char *err, size_t errlen)
{
    enum dhl_mode mode;
    int datasync;
    if (check_options(opt, &mode, &datasync, err, errlen) != 0)
        return -1;
    /* Decide between formatting and opening (see the file comment). */
    uint32_t flags = datasync ? DHL_OPEN_FDATASYNC : 0;
    int new_file = 0;
    struct stat st;
    if (stat(opt->db, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "cannot stat: %s", strerror(errno));
            return -1;
        }
        flags |= DHL_OPEN_CREATE;
        new_file = 1;
    } else if (S_ISREG(st.st_mode) && st.st_size == 0) {
        flags |= DHL_OPEN_CREATE;
    } else if (S_ISBLK(st.st_mode)) {
        int blank = blockdev_is_blank(opt->db);
        if (blank < 0) {
            snprintf(err, errlen, "cannot read the device: %s", strerror(errno));
            return -1;
        }
        if (blank)
            flags |= DHL_OPEN_TRUNCATE;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->ntables = opt->ntables;
    e->buflen = DHL_MAX_VALUE(opt->page_size);
    e->buf = malloc(e->buflen);
    if (!e->buf) {
        free_engine(e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct dhl_options o;
    dhl_options_default(&o);
    o.page_size = (uint32_t)opt->page_size;
    o.mode = mode;
    o.ntrees = opt->ntables;
    o.flags = flags;
    int rc = dhl_open(opt->db, &o, &e->db);
    if (rc != DHL_OK) {
        snprintf(err, errlen, "dhl_open: %s (%s)", e->db ? dhl_errmsg(e->db) : "out of memory",
                 dhl_errstr(rc));
        free_engine(e);
        return -1;
    }
    if (new_file) {
        if (sync_parent_dir(opt->db) != 0) {
            snprintf(err, errlen, "fsync of the database's directory: %s", strerror(errno));
            free_engine(e);
            return -1;
        }
        e->dir_syncs++;
    }
    *out = e;
    return 0;
}

static int dh_begin(engine *e) { return check(e, dhl_begin(e->db), "begin"); }

static int dh_commit(engine *e) { return check(e, dhl_commit(e->db), "commit"); }

/* After a failed commit libdhl has poisoned the handle (dhl/DESIGN.md): no
** transaction stays open and nothing more may be written through it. */
static int dh_io_failed(engine *e) { return e->io_error; }

static void dh_rollback(engine *e)
{
    if (dhl_in_txn(e->db))
        dhl_rollback(e->db);
}

/* "OP tT key K" for messages. */
static void what(char *buf, size_t n, const char *op, uint32_t t, int64_t key)
{
    snprintf(buf, n, "%s t%u key %lld", op, t, (long long)key);
}

static int dh_insert(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    char w[96];
    what(w, sizeof w, "insert", t, key);
    return check(e, dhl_insert(e->db, t, key, val, len), w);
}

static int dh_update(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    char w[96];
    what(w, sizeof w, "update", t, key);
    return check(e, dhl_update(e->db, t, key, val, len), w);
}

static int dh_remove(engine *e, uint32_t t, int64_t key)
{
    char w[96];
    what(w, sizeof w, "delete", t, key);
    return check(e, dhl_delete(e->db, t, key), w);
}

static int dh_select(engine *e, uint32_t t, int64_t key)
{
    char w[96];
    what(w, sizeof w, "select", t, key);
    size_t len;
    return check(e, dhl_get(e->db, t, key, e->buf, e->buflen, &len), w);
}

static void dh_counters(engine *e, engine_counters *out)
{
    struct dhl_counters c;
    dhl_counters(e->db, &c);
    out->writes = c.pages_written; /* libdhl writes one page per pwrite */
    out->bytes_written = c.bytes_written;
    out->file_syncs = c.syncs;
    out->dir_syncs = e->dir_syncs;
}

static const char *dh_errmsg(engine *e) { return e->err; }

/* libdhl's content digest of the committed state this open sees. */
static int dh_digest(engine *e, char hex[33]) { return check(e, dhl_digest(e->db, hex), "digest"); }

static int dh_close(engine *e, engine_counters *final, char *err, size_t errlen)
{
    /* Closing writes nothing (no transaction is open), so the counts taken
    ** now are the final ones; libdhl's counters die with the handle. */
    if (final)
        dh_counters(e, final);
    int rc = dhl_close(e->db);
    e->db = NULL;
    free_engine(e);
    if (rc != DHL_OK) {
        snprintf(err, errlen, "close: %s", dhl_errstr(rc));
        return -1;
    }
    return 0;
}

const engine_vtab engine_dhl = {
    .name = "dhl",
    .open = dh_open,
    .begin = dh_begin,
    .insert = dh_insert,
    .update = dh_update,
    .remove = dh_remove,
    .select = dh_select,
    .commit = dh_commit,
    .rollback = dh_rollback,
    .io_failed = dh_io_failed,
    .counters = dh_counters,
    .errmsg = dh_errmsg,
    .digest = dh_digest,
    .close = dh_close,
};
