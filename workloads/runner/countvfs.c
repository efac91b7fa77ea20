#include "countvfs.h"

#include <sqlite3.h>
#include <string.h>

#include "vfsshim.h"

static sqlite3_vfs *g_real;
static sqlite3_vfs g_vfs;
static engine_counters g_count;
static sqlite3_syscall_ptr g_open_directory;
static int g_sync_retry;

/* An open file is a vfsshim_file: the real file lives right after it. */
#define REAL(f) VFSSHIM_REAL(f)

/* The io methods: the real file's, but for the counted writes and syncs. */
static sqlite3_io_methods g_io;

static int c_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    g_count.writes++;
    g_count.bytes_written += (uint64_t)n;
    return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int c_sync(sqlite3_file *f, int flags)
{
    g_count.file_syncs++;
    int rc = REAL(f)->pMethods->xSync(REAL(f), flags);
    if (rc != SQLITE_OK && g_sync_retry) {
        /* After a failed writeback the kernel has marked the pages clean and
        ** reported the error once: this retry succeeds with the data gone. */
        g_count.file_syncs++;
        rc = REAL(f)->pMethods->xSync(REAL(f), flags);
    }
    return rc;
}

/* xOpen: open the real file in the space after our struct, then route its
** methods through g_io.  The unix VFS's methods are all version 3. */
static int c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    vfsshim_file *p = (vfsshim_file *)f;
    p->real = (sqlite3_file *)&p[1];
    int rc = g_real->xOpen(g_real, name, p->real, flags, out);
    if (p->real->pMethods && p->real->pMethods->iVersion < 3) {
        p->real->pMethods->xClose(p->real);
        p->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    p->base.pMethods = p->real->pMethods ? &g_io : NULL;
    return rc;
}

/* The unix VFS's openDirectory(path, &fd): counted, then the original. */
static int count_open_directory(const char *path, int *fd)
{
    int rc = ((int (*)(const char *, int *))g_open_directory)(path, fd);
    if (rc == SQLITE_OK)
        g_count.dir_syncs++;
    return rc;
}

int countvfs_register(int sync_retry)
{
    g_sync_retry = sync_retry;
    if (g_real)
        return SQLITE_OK;
    sqlite3_vfs *real;
    int rc = vfsshim_default_parent(3, &real);
    if (rc != SQLITE_OK)
        return rc;
    vfsshim_vfs(&g_vfs, 3, "crashlab-count", real, (int)sizeof(vfsshim_file) + real->szOsFile,
                c_open);
    vfsshim_io_methods(&g_io, 3);
    g_io.xWrite = c_write;
    g_io.xSync = c_sync;
    /* Without this hook directory fsyncs would go uncounted: refuse. */
    g_open_directory = real->xGetSystemCall(real, "openDirectory");
    if (!g_open_directory)
        return SQLITE_ERROR;
    rc = real->xSetSystemCall(real, "openDirectory", (sqlite3_syscall_ptr)count_open_directory);
    if (rc != SQLITE_OK)
        return rc;
    g_real = real;
    return sqlite3_vfs_register(&g_vfs, 1);
}

void countvfs_get(engine_counters *out) { *out = g_count; }
