#include "countvfs.h"

#include <sqlite3.h>
#include <string.h>

static sqlite3_vfs *g_real;
static sqlite3_vfs g_vfs;
static engine_counters g_count;
static sqlite3_syscall_ptr g_open_directory;
static int g_sync_retry;

typedef struct cfile {
    sqlite3_file base;
    sqlite3_file *real; /* lives right after this struct */
} cfile;

#define REAL(f) (((cfile *)(f))->real)

static int c_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int c_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int c_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    g_count.writes++;
    g_count.bytes_written += (uint64_t)n;
    return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int c_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
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
static int c_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int c_lock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xLock(REAL(f), lock); }
static int c_unlock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xUnlock(REAL(f), lock); }
static int c_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int c_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int c_sector_size(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int c_device_chars(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int c_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}
static int c_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void c_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int c_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int c_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
static int c_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods g_io = {
    3,
    c_close,
    c_read,
    c_write,
    c_truncate,
    c_sync,
    c_file_size,
    c_lock,
    c_unlock,
    c_check_reserved,
    c_file_control,
    c_sector_size,
    c_device_chars,
    c_shm_map,
    c_shm_lock,
    c_shm_barrier,
    c_shm_unmap,
    c_fetch,
    c_unfetch,
};

/* xOpen: open the real file in the space after our struct, then route its
** methods through g_io.  The unix VFS's methods are all version 3. */
static int c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    cfile *p = (cfile *)f;
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

static int v_delete(sqlite3_vfs *v, const char *name, int dirsync)
{
    (void)v;
    return g_real->xDelete(g_real, name, dirsync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return g_real->xAccess(g_real, name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return g_real->xFullPathname(g_real, name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return g_real->xDlOpen(g_real, name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg)
{
    (void)v;
    g_real->xDlError(g_real, n, msg);
}
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return g_real->xDlSym(g_real, h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    g_real->xDlClose(g_real, h);
}
static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return g_real->xRandomness(g_real, n, out);
}
static int v_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return g_real->xSleep(g_real, us);
}
static int v_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return g_real->xCurrentTime(g_real, out);
}
static int v_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return g_real->xGetLastError(g_real, n, out);
}
static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return g_real->xCurrentTimeInt64(g_real, out);
}
static int v_set_syscall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p)
{
    (void)v;
    return g_real->xSetSystemCall(g_real, name, p);
}
static sqlite3_syscall_ptr v_get_syscall(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return g_real->xGetSystemCall(g_real, name);
}
static const char *v_next_syscall(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return g_real->xNextSystemCall(g_real, name);
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
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_vfs *real = sqlite3_vfs_find(NULL);
    if (!real || real->iVersion < 3)
        return SQLITE_ERROR;
    g_vfs = (sqlite3_vfs){
        3,
        (int)sizeof(cfile) + real->szOsFile,
        real->mxPathname,
        NULL,
        "crashlab-count",
        NULL,
        c_open,
        v_delete,
        v_access,
        v_full_pathname,
        v_dlopen,
        v_dlerror,
        v_dlsym,
        v_dlclose,
        v_randomness,
        v_sleep,
        v_current_time,
        v_last_error,
        v_current_time64,
        v_set_syscall,
        v_get_syscall,
        v_next_syscall,
    };
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
