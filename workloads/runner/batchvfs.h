/*
** The batch-atomic-write watch: a shim over the default VFS (the counting
** VFS) that sees SQLite's batch-atomic-write commits, for the MAW SUTs.
**
** SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE, on a file whose VFS
** reports SQLITE_IOCAP_BATCH_ATOMIC (the unix VFS does on F2FS: its
** F2FS_IOC_GET_FEATURES answer has F2FS_FEATURE_ATOMIC_WRITE), keeps the
** rollback journal in memory and commits by writing the dirty pages between
** the file controls SQLITE_FCNTL_BEGIN_ATOMIC_WRITE and
** SQLITE_FCNTL_COMMIT_ATOMIC_WRITE, which the unix VFS turns into the
** ioctls F2FS_IOC_START_ATOMIC_WRITE and F2FS_IOC_COMMIT_ATOMIC_WRITE
** (pager.c, sqlite3PagerCommitPhaseOne; os_unix.c, unixFileControl).  When
** a commit does not fit (a cache spill, a failed ioctl) SQLite falls back to
** an on-disk rollback journal without telling anyone.
**
** The shim counts, on the main database file, the writes inside and outside
** an atomic batch and the batch file controls and their results, and every
** write to a rollback journal; batchvfs_check says whether one transaction
** really committed through a batch.  Mode BATCHVFS_NOIOCTL is a bug on
** purpose: the three file controls return SQLITE_OK without reaching the
** VFS below, so SQLite believes its pages were written atomically while
** they are plain writes (a broken variant the checkers must catch).
*/
#ifndef CRASHLAB_BATCHVFS_H
#define CRASHLAB_BATCHVFS_H

#include <stddef.h>
#include <stdint.h>

enum { BATCHVFS_REQUIRE = 1, BATCHVFS_NOIOCTL = 2 };

typedef struct batchvfs_counts {
    uint64_t begun;         /* BEGIN_ATOMIC_WRITE that returned SQLITE_OK */
    uint64_t begin_failed;  /* BEGIN_ATOMIC_WRITE that failed */
    uint64_t committed;     /* COMMIT_ATOMIC_WRITE that returned SQLITE_OK */
    uint64_t commit_failed; /* COMMIT_ATOMIC_WRITE that failed */
    uint64_t rolled_back;   /* ROLLBACK_ATOMIC_WRITE */
    uint64_t db_batched;    /* database writes inside a batch */
    uint64_t db_unbatched;  /* database writes outside any batch */
    uint64_t journal;       /* writes to a rollback journal file */
} batchvfs_counts;

/* The mode named TEXT ("require", "noioctl"), or 0. */
int batchvfs_mode(const char *text);

/* Register the shim over the current default VFS as the new default
** (once; MODE from batchvfs_mode).  Returns an SQLite result code. */
int batchvfs_register(int mode);

/* The counts since the process started. */
void batchvfs_get(batchvfs_counts *out);

/* 0 when the writes since BEFORE were all database writes inside atomic
** batches that committed (or there were none); else -1 with the reason in
** ERR (ERRLEN bytes). */
int batchvfs_check(const batchvfs_counts *before, char *err, size_t errlen);

/* The counts as a JSON object (no newline) in BUF; snprintf's result. */
int batchvfs_json(char *buf, size_t len);

#endif
