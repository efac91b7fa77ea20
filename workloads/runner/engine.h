/*
** The engine interface: one vtable per storage engine the runner can drive.
** engine_sqlite.c is the SQLite engine, engine_dhl.c the DHL engine (libdhl);
** both are listed in ENGINES (main.c).
**
** Contract for every engine: rows live in tables 0..ntables-1 keyed by a
** signed 64-bit key with an opaque byte-string value.  Each call returns 0
** on success or -1 with a one-line message available from errmsg() until the
** next call.  insert fails if the key exists; update, remove and select fail
** if it does not (the op stream never asks for either).  commit returns 0
** only once the transaction is durable as far as the engine's configured
** guarantee goes: the runner writes txn-ack after that and only after that.
*/
#ifndef CRASHLAB_ENGINE_H
#define CRASHLAB_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "contentdigest.h" /* the digest the SQLite-backed engines report */

/* I/O the engine issued, counted where it calls the OS. */
typedef struct engine_counters {
    uint64_t writes; /* write()/pwrite() calls */
    uint64_t bytes_written;
    uint64_t file_syncs; /* fsync()/fdatasync() of files */
    uint64_t dir_syncs;  /* fsync() of directories */
} engine_counters;

typedef struct engine_options {
    const char *db;           /* database path */
    const char *journal_mode; /* SQLite: DELETE, TRUNCATE, PERSIST, WAL, MEMORY, OFF */
    const char *synchronous;  /* SQLite: OFF, NORMAL, FULL, EXTRA */
    const char *locking_mode; /* SQLite: NORMAL, EXCLUSIVE */
    int wal_autocheckpoint;   /* SQLite: pages between automatic checkpoints, 0 = none */
    int journal_size_limit;   /* SQLite: bytes a kept journal/WAL is cut to, -1 = none */
    int wal_prealloc;         /* SQLite WAL: frames of zeros written at open, 0 = none */
    int cksumvfs;             /* SQLite: 1 = page checksums through crashlab's checksum VFS */
    int waldio;               /* SQLite WAL: N > 0 = WALDIO VFS, WAL pre-allocated to N frames */
    int waldio_fill;          /* WALDIO: 1 = zero-fill the pre-allocated blocks, 0 = leave them
                                 unwritten (fallocate only: WALDIO §5.1's hazard) */
    const char *dhl_mode;     /* DHL: tc, cc, tc_opt, cc_opt, nolog */
    const char *sync;         /* DHL: fsync, fdatasync */
    int page_size;
    uint32_t ntables;
    /* SQLite: a failed fsync is retried once and the retry's success
    ** reported (the "fsyncgate" bug, on purpose: a SUT that must fail
    ** ERR-DURABLE under an eio fault).  Never do this in an application. */
    int sync_retry;
    /* SQLite: NULL, or "require" / "noioctl" (batchvfs.h): every commit must
    ** go through F2FS's atomic write (noioctl: the ioctls faked, on purpose) */
    const char *batch_atomic;
    /* SQLite: 0, or a dash_order (dashvfs.h): the database is two files that
    ** take turns (DASH), opened through crashlab's DASH VFS. */
    int dash;
    /* SQLite: 1 = through the selective-journaling VFS (selvfs.h), which
    ** sends a transaction changing at most SELECTIVE_PAGES pages besides
    ** page 1 through the file system's journal alone (-1: every one). */
    int selective;
    int selective_pages;
} engine_options;

typedef struct engine engine; /* each engine defines its own */

typedef struct engine_vtab {
    const char *name;
    /* Open (creating if needed) the database and its tables 0..ntables-1.
    ** Returns 0 and sets *OUT, or -1 with a message in ERR. */
    int (*open)(const engine_options *opt, engine **out, char *err, size_t errlen);
    int (*begin)(engine *e);
    int (*insert)(engine *e, uint32_t table, int64_t key, const void *val, uint32_t len);
    int (*update)(engine *e, uint32_t table, int64_t key, const void *val, uint32_t len);
    int (*remove)(engine *e, uint32_t table, int64_t key);
    int (*select)(engine *e, uint32_t table, int64_t key);
    int (*commit)(engine *e);
    /* Abandon the open transaction after a failure (best effort: an engine
    ** that has already rolled it back, or has none open, does nothing). */
    void (*rollback)(engine *e);
    /* Whether the last failure was the storage's (an I/O error, a full
    ** disk), not the workload's (a missing key): only those are a failed
    ** transaction the runner handles (txn-error); the others are bugs. */
    int (*io_failed)(engine *e);
    /* The oracle content digest of every row this open sees (contentdigest.h;
    ** DHL: dhl_digest), 32 hex digits and a NUL in HEX: what the runner
    ** reports after a restart (REC-AGREE).  Returns 0, or -1 (errmsg). */
    int (*digest)(engine *e, char hex[33]);
    /* The I/O counts so far. */
    void (*counters)(engine *e, engine_counters *out);
    const char *(*errmsg)(engine *e);
    /* Close and free E; FINAL (if not NULL) gets the counts after closing.
    ** Returns 0, or -1 with a message in ERR. */
    int (*close)(engine *e, engine_counters *final, char *err, size_t errlen);
} engine_vtab;

extern const engine_vtab engine_sqlite;
extern const engine_vtab engine_dhl;
extern const engine_vtab engine_xlog; /* xlog.c */

#endif
