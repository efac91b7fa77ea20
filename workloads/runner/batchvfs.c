#include "batchvfs.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* What a file is to SQLite (its xOpen flags). */
enum { KIND_OTHER, KIND_DB, KIND_JOURNAL };

/* Kept after the file of the VFS below: its own methods and its kind.  The
** shim gives the file a copy of those methods with xWrite and xFileControl
** replaced, so every other call goes straight to the VFS below. */
typedef struct bextra {
    const sqlite3_io_methods *orig;
    int kind;
} bextra;

enum { MAX_METHODS = 8 };

static sqlite3_vfs *g_below;
static sqlite3_vfs g_vfs;
static int g_mode;
static int g_offset; /* where bextra starts: the below file's size, 8-aligned */
static int g_in_batch;
static batchvfs_counts g_count;
static struct {
    const sqlite3_io_methods *orig;
    sqlite3_io_methods copy;
} g_tab[MAX_METHODS];
static int g_ntab;

static bextra *extra(sqlite3_file *f) { return (bextra *)((char *)f + g_offset); }

int batchvfs_mode(const char *text)
{
    if (strcmp(text, "require") == 0)
        return BATCHVFS_REQUIRE;
    if (strcmp(text, "noioctl") == 0)
        return BATCHVFS_NOIOCTL;
    return 0;
}

static int b_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    bextra *x = extra(f);
    if (x->kind == KIND_DB)
        g_in_batch ? g_count.db_batched++ : g_count.db_unbatched++;
    else if (x->kind == KIND_JOURNAL)
        g_count.journal++;
    return x->orig->xWrite(f, buf, n, off);
}

/* The three batch file controls on the database are counted (and in
** NOIOCTL mode answered here, never reaching the F2FS ioctls); every other
** file control goes below. */
static int b_file_control(sqlite3_file *f, int op, void *arg)
{
    bextra *x = extra(f);
    int batch_op = op == SQLITE_FCNTL_BEGIN_ATOMIC_WRITE ||
                   op == SQLITE_FCNTL_COMMIT_ATOMIC_WRITE ||
                   op == SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE;
    if (x->kind != KIND_DB || !batch_op)
        return x->orig->xFileControl(f, op, arg);
    int rc = g_mode == BATCHVFS_NOIOCTL ? SQLITE_OK : x->orig->xFileControl(f, op, arg);
    if (op == SQLITE_FCNTL_BEGIN_ATOMIC_WRITE) {
        g_in_batch = rc == SQLITE_OK;
        rc == SQLITE_OK ? g_count.begun++ : g_count.begin_failed++;
    } else if (op == SQLITE_FCNTL_COMMIT_ATOMIC_WRITE) {
        g_in_batch = 0;
        rc == SQLITE_OK ? g_count.committed++ : g_count.commit_failed++;
    } else {
        g_in_batch = 0;
        g_count.rolled_back++;
    }
    return rc;
}

/* The copy of ORIG with the two methods replaced (one per distinct table
** of the VFS below), or NULL when there are too many. */
static const sqlite3_io_methods *wrapped(const sqlite3_io_methods *orig)
{
    for (int i = 0; i < g_ntab; i++)
        if (g_tab[i].orig == orig)
            return &g_tab[i].copy;
    if (g_ntab == MAX_METHODS)
        return NULL;
    g_tab[g_ntab].orig = orig;
    g_tab[g_ntab].copy = *orig;
    g_tab[g_ntab].copy.xWrite = b_write;
    g_tab[g_ntab].copy.xFileControl = b_file_control;
    return &g_tab[g_ntab++].copy;
}

/* xOpen: the VFS below opens the file in place; then its methods are
** swapped for the wrapped copy. */
static int b_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    bextra *x = extra(f);
    x->orig = NULL;
    x->kind = (flags & SQLITE_OPEN_MAIN_DB)        ? KIND_DB
              : (flags & SQLITE_OPEN_MAIN_JOURNAL) ? KIND_JOURNAL
                                                   : KIND_OTHER;
    int rc = g_below->xOpen(g_below, name, f, flags, out);
    if (f->pMethods) {
        const sqlite3_io_methods *m = wrapped(f->pMethods);
        if (!m) {
            f->pMethods->xClose(f);
            f->pMethods = NULL;
            return SQLITE_CANTOPEN;
        }
        x->orig = f->pMethods;
        f->pMethods = m;
    }
    return rc;
}

int batchvfs_register(int mode)
{
    g_mode = mode;
    if (g_below)
        return SQLITE_OK;
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_vfs *below = sqlite3_vfs_find(NULL);
    if (!below)
        return SQLITE_ERROR;
    /* Every other VFS method is the one below, called with this VFS as its
    ** first argument: the counting VFS (the default here) never reads it. */
    g_vfs = *below;
    g_vfs.pNext = NULL;
    g_vfs.zName = "crashlab-batch";
    g_offset = (below->szOsFile + 7) & ~7;
    g_vfs.szOsFile = g_offset + (int)sizeof(bextra);
    g_vfs.xOpen = b_open;
    g_below = below;
    return sqlite3_vfs_register(&g_vfs, 1);
}

void batchvfs_get(batchvfs_counts *out) { *out = g_count; }

int batchvfs_check(const batchvfs_counts *before, char *err, size_t errlen)
{
    const batchvfs_counts *c = &g_count;
    uint64_t outside = c->db_unbatched - before->db_unbatched;
    uint64_t journal = c->journal - before->journal;
    uint64_t inside = c->db_batched - before->db_batched;
    uint64_t committed = c->committed - before->committed;
    if (outside == 0 && journal == 0 && (inside == 0 || committed > 0))
        return 0;
    snprintf(err, errlen,
             "batch atomic write required: the commit wrote %" PRIu64
             " database page(s) outside an atomic batch and %" PRIu64
             " rollback-journal write(s); %" PRIu64 " batch(es) committed, %" PRIu64
             " failed to begin, %" PRIu64 " failed to commit",
             outside, journal, committed, c->begin_failed - before->begin_failed,
             c->commit_failed - before->commit_failed);
    return -1;
}

int batchvfs_json(char *buf, size_t len)
{
    const batchvfs_counts *c = &g_count;
    return snprintf(
        buf, len,
        "{\"mode\": \"%s\", \"begun\": %" PRIu64 ", \"begin_failed\": %" PRIu64
        ", \"committed\": %" PRIu64 ", \"commit_failed\": %" PRIu64 ", \"rolled_back\": %" PRIu64
        ", \"db_batched\": %" PRIu64 ", \"db_unbatched\": %" PRIu64 ", \"journal\": %" PRIu64 "}",
        g_mode == BATCHVFS_NOIOCTL ? "noioctl" : "require", c->begun, c->begin_failed, c->committed,
        c->commit_failed, c->rolled_back, c->db_batched, c->db_unbatched, c->journal);
}
