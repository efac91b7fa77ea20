/*
** A counting shim over SQLite's default (unix) VFS, registered as the new
** default: every file SQLite opens goes through it, so its write and sync
** calls are counted exactly where SQLite hands them to the OS.  Directory
** fsyncs happen inside the unix VFS (after creating a journal and after
** unlinking one with dirSync); they are counted through the unix VFS's
** overridable "openDirectory" system call, which it uses only right before
** such an fsync.
*/
#ifndef CRASHLAB_COUNTVFS_H
#define CRASHLAB_COUNTVFS_H

#include "engine.h"

/* Register the shim as the default VFS (idempotent).  With SYNC_RETRY a
** failed xSync is retried once and the retry's result returned (the
** fsyncgate bug, on purpose: see engine_options.sync_retry).  Returns an
** SQLite result code. */
int countvfs_register(int sync_retry);

/* The counts since the process started. */
void countvfs_get(engine_counters *out);

#endif
