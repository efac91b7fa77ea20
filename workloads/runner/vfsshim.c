/*
** The pass-through base of the VFS shims (vfsshim.h): each method below
** calls the same method of the parent VFS or of the real file, with the
** same arguments, and returns what it returns.
*/
#include "vfsshim.h"

#include <stddef.h>

/* A shim's sqlite3_file * is its vfsshim_file * (the first member). */
_Static_assert(offsetof(vfsshim_file, base) == 0, "vfsshim_file must start with sqlite3_file");

#define REAL(f)   VFSSHIM_REAL(f)
#define PARENT(v) VFSSHIM_PARENT(v)

/* --- io methods: forward to the real file -------------------------------- */

static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int f_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xLock(REAL(f), lock); }
static int f_unlock(sqlite3_file *f, int lock) { return REAL(f)->pMethods->xUnlock(REAL(f), lock); }
static int f_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector_size(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_device_chars(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, pp);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, pp);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

void vfsshim_io_methods(sqlite3_io_methods *m, int iversion)
{
    *m = (sqlite3_io_methods){
        .iVersion = iversion,
        .xClose = f_close,
        .xRead = f_read,
        .xWrite = f_write,
        .xTruncate = f_truncate,
        .xSync = f_sync,
        .xFileSize = f_file_size,
        .xLock = f_lock,
        .xUnlock = f_unlock,
        .xCheckReservedLock = f_check_reserved,
        .xFileControl = f_file_control,
        .xSectorSize = f_sector_size,
        .xDeviceCharacteristics = f_device_chars,
    };
    if (iversion >= 2) {
        m->xShmMap = f_shm_map;
        m->xShmLock = f_shm_lock;
        m->xShmBarrier = f_shm_barrier;
        m->xShmUnmap = f_shm_unmap;
    }
    if (iversion >= 3) {
        m->xFetch = f_fetch;
        m->xUnfetch = f_unfetch;
    }
}

/* --- VFS methods: forward to the parent, called with the parent itself --- */

static int v_delete(sqlite3_vfs *v, const char *name, int dirsync)
{
    return PARENT(v)->xDelete(PARENT(v), name, dirsync);
}
static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    return PARENT(v)->xAccess(PARENT(v), name, flags, out);
}
static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    return PARENT(v)->xFullPathname(PARENT(v), name, n, out);
}
static void *v_dlopen(sqlite3_vfs *v, const char *name)
{
    return PARENT(v)->xDlOpen(PARENT(v), name);
}
static void v_dlerror(sqlite3_vfs *v, int n, char *msg) { PARENT(v)->xDlError(PARENT(v), n, msg); }
static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    return PARENT(v)->xDlSym(PARENT(v), h, sym);
}
static void v_dlclose(sqlite3_vfs *v, void *h) { PARENT(v)->xDlClose(PARENT(v), h); }
static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
    return PARENT(v)->xRandomness(PARENT(v), n, out);
}
static int v_sleep(sqlite3_vfs *v, int us) { return PARENT(v)->xSleep(PARENT(v), us); }
static int v_current_time(sqlite3_vfs *v, double *out)
{
    return PARENT(v)->xCurrentTime(PARENT(v), out);
}
static int v_last_error(sqlite3_vfs *v, int n, char *out)
{
    return PARENT(v)->xGetLastError(PARENT(v), n, out);
}
static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    return PARENT(v)->xCurrentTimeInt64(PARENT(v), out);
}
static int v_set_syscall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr p)
{
    return PARENT(v)->xSetSystemCall(PARENT(v), name, p);
}
static sqlite3_syscall_ptr v_get_syscall(sqlite3_vfs *v, const char *name)
{
    return PARENT(v)->xGetSystemCall(PARENT(v), name);
}
static const char *v_next_syscall(sqlite3_vfs *v, const char *name)
{
    return PARENT(v)->xNextSystemCall(PARENT(v), name);
}

int vfsshim_default_parent(int min_version, sqlite3_vfs **out)
{
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return rc;
    *out = sqlite3_vfs_find(NULL);
    return *out && (*out)->iVersion >= min_version ? SQLITE_OK : SQLITE_ERROR;
}

void vfsshim_vfs(sqlite3_vfs *v, int iversion, const char *name, sqlite3_vfs *parent,
                 int sz_os_file,
                 int (*x_open)(sqlite3_vfs *, sqlite3_filename, sqlite3_file *, int, int *))
{
    *v = (sqlite3_vfs){
        .iVersion = iversion,
        .szOsFile = sz_os_file,
        .mxPathname = parent->mxPathname,
        .zName = name,
        .pAppData = parent,
        .xOpen = x_open,
        .xDelete = v_delete,
        .xAccess = v_access,
        .xFullPathname = v_full_pathname,
        .xDlOpen = v_dlopen,
        .xDlError = v_dlerror,
        .xDlSym = v_dlsym,
        .xDlClose = v_dlclose,
        .xRandomness = v_randomness,
        .xSleep = v_sleep,
        .xCurrentTime = v_current_time,
        .xGetLastError = v_last_error,
    };
    if (iversion >= 2)
        v->xCurrentTimeInt64 = v_current_time64;
    if (iversion >= 3) {
        v->xSetSystemCall = v_set_syscall;
        v->xGetSystemCall = v_get_syscall;
        v->xNextSystemCall = v_next_syscall;
    }
}
