/*
** The pass-through base of crashlab's SQLite VFS shims (countvfs, cksumvfs,
** waldiovfs, dashvfs, selvfs).  A shim is a VFS over another one, its
** parent (the default VFS when the shim is registered:
** vfsshim_default_parent): what it does not change goes to the parent
** unchanged.  This file holds that "unchanged" once:
**
**  - vfsshim_vfs() fills a shim's sqlite3_vfs: its name, its file size and
**    its xOpen are the shim's, every other method calls the parent's with
**    the parent itself (kept in pAppData, so two shims stacked in one
**    process each forward to their own parent);
**  - vfsshim_io_methods() fills a shim's sqlite3_io_methods with methods
**    that call the same method of the real file, the parent's file that the
**    shim's open file wraps.  The shim then overrides only what it changes.
**
** A shim whose io methods use these forwards starts its open file with a
** vfsshim_file (its first member, so a sqlite3_file * of the shim is also a
** vfsshim_file *); `real` points at the parent's file, which lives in the
** same allocation after the shim's struct (szOsFile counts both).  (selvfs
** takes only the VFS part: a journal it keeps in memory has no real file.)
** The functions keep no state of their own.
*/
#ifndef CRASHLAB_VFSSHIM_H
#define CRASHLAB_VFSSHIM_H

#include <sqlite3.h>

/* Not exported from the shared libraries (libcrashlab-*vfs.so): each one's
** calls bind to its own copy. */
#define VFSSHIM_API __attribute__((visibility("hidden")))

/* The head of every shim's open file. */
typedef struct vfsshim_file {
    sqlite3_file base;  /* what SQLite sees: pMethods are the shim's */
    sqlite3_file *real; /* the parent's file the forwards call */
} vfsshim_file;

/* The real file of the shim's file F (a sqlite3_file * or a shim struct *). */
#define VFSSHIM_REAL(f) (((vfsshim_file *)(f))->real)

/* The parent of a VFS filled by vfsshim_vfs(). */
#define VFSSHIM_PARENT(v) ((sqlite3_vfs *)(v)->pAppData)

/* The default VFS, a shim's parent, into *OUT, SQLite initialized first.
** Returns SQLITE_OK, the error of sqlite3_initialize(), or SQLITE_ERROR when
** there is no default VFS or its version is below MIN_VERSION. */
VFSSHIM_API int vfsshim_default_parent(int min_version, sqlite3_vfs **out);

/* Fill V (version IVERSION, 1 to 3, at most the parent's) as a shim named
** NAME over PARENT: files of SZ_OS_FILE bytes opened by X_OPEN; the methods
** of versions up to IVERSION forward to PARENT, the later ones are NULL. */
VFSSHIM_API void
vfsshim_vfs(sqlite3_vfs *v, int iversion, const char *name, sqlite3_vfs *parent, int sz_os_file,
            int (*x_open)(sqlite3_vfs *, sqlite3_filename, sqlite3_file *, int, int *));

/* Fill M (version IVERSION, 1 to 3) with the methods that forward to the
** real file (vfsshim_file); the later versions' methods are NULL. */
VFSSHIM_API void vfsshim_io_methods(sqlite3_io_methods *m, int iversion);

#endif
