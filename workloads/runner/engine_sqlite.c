/*
** The SQLite engine: the system SQLite through its C API.  Tables are
** t0..t{N-1}, each (id INTEGER PRIMARY KEY, value BLOB NOT NULL); the
** pragmas page_size, locking_mode, journal_mode, synchronous,
** wal_autocheckpoint and journal_size_limit are set at open, each checked
** against what SQLite reports, before the tables are created.  With
** --wal-prealloc N the WAL is then grown to N frames of zeros (synced), so
** that transactions overwrite it in place instead of growing it.  All file
** I/O goes through the counting VFS; with --cksumvfs the database is opened
** through crashlab's checksum VFS over it (cksumvfs.h) and given 8 reserved
** bytes per page before anything is written, so every page carries its
** checksum from the first write on.  With --waldio N the database is opened
** through the WALDIO VFS (waldiovfs.h) over the counting VFS, given the 24
** reserved bytes that hold each WAL frame's header, and its WAL is
** pre-allocated to N frames by the VFS.
*/
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batchvfs.h"
#include "cksumvfs.h"
#include "countvfs.h"
#include "dashvfs.h"
#include "engine.h"
#include "errorf.h"
#include "selvfs.h"
#include "waldiovfs.h"

struct engine {
    sqlite3 *db;
    uint32_t ntables;
    sqlite3_stmt **stmts; /* 4 per table: insert, update, delete, select */
    char err[512];
    int io_error; /* the last failure was SQLITE_IOERR*, SQLITE_FULL or SQLITE_CANTOPEN */
    int batch;    /* --batch-atomic: each commit is checked (batchvfs.h) */
    batchvfs_counts batch_before; /* the counts at the open transaction's BEGIN */
};

enum { S_INSERT, S_UPDATE, S_DELETE, S_SELECT, S_PER_TABLE };

static const char *const JOURNAL_MODES[] = {"DELETE", "TRUNCATE", "PERSIST", "WAL",
                                            "MEMORY", "OFF",      NULL};
static const char *const SYNC_LEVELS[] = {"OFF", "NORMAL", "FULL", "EXTRA", NULL};
static const char *const LOCKING_MODES[] = {"NORMAL", "EXCLUSIVE", NULL};

enum { WAL_HEADER = 32, WAL_FRAME_HEADER = 24 }; /* wal.c's file format */

/* Set X->err from a printf format; returns -1. */
#define fail(x, ...) errorf((x)->err, sizeof(x)->err, __VA_ARGS__)

/* e->err = WHAT: SQLite's message and extended result code; returns -1. */
static int fail_db(engine *e, const char *what)
{
    int code = sqlite3_extended_errcode(e->db);
    /* CANTOPEN: a journal or WAL file that cannot be created on a full disk */
    int primary = code & 0xff;
    e->io_error = primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN;
    return fail(e, "%s: %s (%s, code %d)", what, sqlite3_errmsg(e->db), sqlite3_errstr(code), code);
}

/* Nonzero when NAME is one of LIST (case-insensitive). */
static int one_of(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcasecmp(name, *list) == 0)
            return 1;
    return 0;
}

/* Run SQL; if EXPECT is not NULL, the first column of the first row must
** equal it case-insensitively (PRAGMA journal_mode reports what it set). */
static int exec_expect(engine *e, const char *sql, const char *expect)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(e->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail_db(e, sql);
    int rc, matched = expect == NULL;
    char got[64] = "";
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (t && !got[0])
            snprintf(got, sizeof got, "%s", (const char *)t);
        if (expect && t && strcasecmp((const char *)t, expect) == 0)
            matched = 1;
    }
    if (rc != SQLITE_DONE) {
        sqlite3_finalize(st);
        return fail_db(e, sql);
    }
    sqlite3_finalize(st);
    if (!matched)
        return fail(e, "%s: SQLite kept %s", sql, got[0] ? got : "(nothing)");
    return 0;
}

static void free_engine(engine *e)
{
    if (e->stmts) {
        for (uint32_t i = 0; i < e->ntables * S_PER_TABLE; i++)
            sqlite3_finalize(e->stmts[i]);
        free(e->stmts);
    }
    if (e->db)
        sqlite3_close(e->db);
    free(e);
}

/* prealloc_wal: grow the WAL (it exists: the tables were just committed) to
** FRAMES frames of PAGE bytes by writing zeros past its end, through the VFS,
** and sync it.  A zero frame header fails WAL recovery's salt check, so the
** frames past the last committed one mean nothing; later commits overwrite
** them in place and the file never grows unless one transaction outgrows
** them all. */
static int prealloc_wal(engine *e, int frames, int page)
{
    sqlite3_file *wal = NULL;
    int rc = sqlite3_file_control(e->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
    if (rc != SQLITE_OK || !wal || !wal->pMethods)
        return fail(e, "wal prealloc: no WAL file open");
    sqlite3_int64 size, want = WAL_HEADER + (sqlite3_int64)frames * (WAL_FRAME_HEADER + page);
    rc = wal->pMethods->xFileSize(wal, &size);
    if (rc != SQLITE_OK)
        return fail(e, "wal prealloc: size: %s", sqlite3_errstr(rc));
    static const char zeros[65536];
    while (rc == SQLITE_OK && size < want) {
        int n = want - size < (sqlite3_int64)sizeof zeros ? (int)(want - size) : (int)sizeof zeros;
        rc = wal->pMethods->xWrite(wal, zeros, n, size);
        size += n;
    }
    if (rc == SQLITE_OK)
        rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
    if (rc != SQLITE_OK)
        return fail(e, "wal prealloc: %s", sqlite3_errstr(rc));
    return 0;
}

/* set_pragmas: page_size, locking_mode (before journal_mode: WAL entered in
** EXCLUSIVE mode uses no shared memory), journal_mode, synchronous,
** wal_autocheckpoint and journal_size_limit, each checked against what SQLite
** reports where it reports one; nonzero (with E->err set) on failure. */
static int set_pragmas(engine *e, const engine_options *opt)
{
    char sql[128], want[32];
    snprintf(sql, sizeof sql, "PRAGMA page_size=%d", opt->page_size);
    int bad = exec_expect(e, sql, NULL);
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA locking_mode=%s", opt->locking_mode);
        bad = exec_expect(e, sql, opt->locking_mode);
    }
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", opt->journal_mode);
        bad = exec_expect(e, sql, opt->journal_mode);
    }
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", opt->synchronous);
        bad = exec_expect(e, sql, NULL);
    }
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA wal_autocheckpoint=%d", opt->wal_autocheckpoint);
        snprintf(want, sizeof want, "%d", opt->wal_autocheckpoint);
        bad = exec_expect(e, sql, want);
    }
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA journal_size_limit=%d", opt->journal_size_limit);
        snprintf(want, sizeof want, "%d", opt->journal_size_limit);
        bad = exec_expect(e, sql, want);
    }
    return bad;
}

/* batch_capable: 0 when this SQLite was built with batch atomic writes and
** the database file's VFS reports SQLITE_IOCAP_BATCH_ATOMIC (F2FS), else -1
** with the reason: --batch-atomic refuses to run a commit path that could
** only fall back to the rollback journal. */
static int batch_capable(engine *e)
{
    if (!sqlite3_compileoption_used("ENABLE_BATCH_ATOMIC_WRITE"))
        return fail(e,
                    "--batch-atomic: SQLite %s was built without "
                    "SQLITE_ENABLE_BATCH_ATOMIC_WRITE (use crashlab-runner-maw)",
                    sqlite3_libversion());
    sqlite3_file *fd = NULL;
    if (sqlite3_file_control(e->db, "main", SQLITE_FCNTL_FILE_POINTER, &fd) != SQLITE_OK || !fd ||
        !fd->pMethods)
        return fail(e, "--batch-atomic: the database file is not open");
    if (!(fd->pMethods->xDeviceCharacteristics(fd) & SQLITE_IOCAP_BATCH_ATOMIC))
        return fail(e, "--batch-atomic: the file system offers no batch atomic write "
                       "(SQLITE_IOCAP_BATCH_ATOMIC not reported: F2FS only)");
    return 0;
}

/* check_options: the options of OPT valid and consistent; else -1 with why in ERR. */
static int check_options(const engine_options *opt, char *err, size_t errlen)
{
    if (!one_of(opt->journal_mode, JOURNAL_MODES)) {
        snprintf(err, errlen,
                 "bad journal mode %s (choose from DELETE, TRUNCATE, PERSIST, WAL, "
                 "MEMORY, OFF)",
                 opt->journal_mode);
        return -1;
    }
    if (!one_of(opt->synchronous, SYNC_LEVELS)) {
        snprintf(err, errlen, "bad synchronous %s (choose from OFF, NORMAL, FULL, EXTRA)",
                 opt->synchronous);
        return -1;
    }
    if (opt->page_size < 512 || opt->page_size > 65536 || (opt->page_size & (opt->page_size - 1))) {
        snprintf(err, errlen, "bad page size %d (a power of two, 512..65536)", opt->page_size);
        return -1;
    }
    if (!one_of(opt->locking_mode, LOCKING_MODES)) {
        snprintf(err, errlen, "bad locking mode %s (choose from NORMAL, EXCLUSIVE)",
                 opt->locking_mode);
        return -1;
    }
    if (opt->waldio > 0 && (strcasecmp(opt->journal_mode, "WAL") != 0 ||
                            opt->page_size != WALDIOVFS_BLOCK || opt->cksumvfs || opt->dash)) {
        snprintf(err, errlen,
                 "--waldio needs journal mode WAL and page size %d, no --cksumvfs or --dash",
                 WALDIOVFS_BLOCK);
        return -1;
    }
    if (opt->wal_prealloc > 0 && strcasecmp(opt->journal_mode, "WAL") != 0) {
        snprintf(err, errlen, "--wal-prealloc needs journal mode WAL, not %s", opt->journal_mode);
        return -1;
    }
    /* DASH: no journal (the shadow is the undo), one connection (dashvfs.h) */
    if (opt->dash && (strcasecmp(opt->journal_mode, "OFF") != 0 ||
                      strcasecmp(opt->locking_mode, "EXCLUSIVE") != 0 || opt->cksumvfs)) {
        snprintf(err, errlen, "--dash needs journal mode OFF, locking mode EXCLUSIVE, no cksumvfs");
        return -1;
    }
    return 0;
}

/* register_vfs: the counting VFS and, over it, the one OPT asks for; else -1. */
static int register_vfs(const engine_options *opt, char *err, size_t errlen)
{
    int rc = countvfs_register(opt->sync_retry);
    if (rc == SQLITE_OK && opt->batch_atomic)
        rc = batchvfs_register(batchvfs_mode(opt->batch_atomic)); /* over the counting VFS */
    if (rc == SQLITE_OK && opt->cksumvfs)
        rc = cksumvfs_register(); /* over the counting VFS, the default now */
    if (rc == SQLITE_OK && opt->waldio > 0) {
        waldiovfs_set_zero_fill(opt->waldio_fill);
        rc = waldiovfs_register(opt->waldio); /* likewise */
    }
    if (rc == SQLITE_OK && opt->dash)
        rc = dashvfs_register((enum dash_order)opt->dash); /* over the counting VFS too */
    if (rc == SQLITE_OK && opt->selective)
        rc = selvfs_register(opt->selective_pages); /* likewise */
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "registering the counting VFS: %s", sqlite3_errstr(rc));
        return -1;
    }
    return 0;
}

/* prepare_statements: each table's statements (S_PER_TABLE), kept prepared;
** else -1 with why in e->err. */
static int prepare_statements(engine *e)
{
    char sql[256];
    e->stmts = calloc((size_t)e->ntables * S_PER_TABLE, sizeof *e->stmts);
    if (!e->stmts)
        return fail(e, "out of memory");
    int bad = 0;
    for (uint32_t t = 0; !bad && t < e->ntables; t++) {
        static const char *const FORMS[S_PER_TABLE] = {
            "INSERT INTO t%u(id, value) VALUES(?1, ?2)",
            "UPDATE t%u SET value = ?2 WHERE id = ?1",
            "DELETE FROM t%u WHERE id = ?1",
            "SELECT value FROM t%u WHERE id = ?1",
        };
        for (int k = 0; !bad && k < S_PER_TABLE; k++) {
            snprintf(sql, sizeof sql, FORMS[k], t);
            if (sqlite3_prepare_v3(e->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                   &e->stmts[t * S_PER_TABLE + k], NULL) != SQLITE_OK)
                bad = fail_db(e, sql);
        }
    }
    return bad;
}

static int sq_open(const engine_options *opt, engine **out, char *err, size_t errlen)
{
    if (check_options(opt, err, errlen) != 0 || register_vfs(opt, err, errlen) != 0)
        return -1;
    int rc;
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->ntables = opt->ntables;
    e->batch = opt->batch_atomic != NULL;
    rc = sqlite3_open_v2(opt->db, &e->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                         opt->cksumvfs    ? CKSUMVFS_NAME
                         : opt->waldio    ? WALDIOVFS_NAME
                         : opt->dash      ? DASHVFS_NAME
                         : opt->selective ? SELVFS_NAME
                                          : NULL);
    char sql[256];
    int bad = rc != SQLITE_OK;
    if (bad)
        fail_db(e, opt->db);
    if (!bad)
        sqlite3_extended_result_codes(e->db, 1);
    int want_reserve = opt->cksumvfs ? CKSUMVFS_RESERVE : opt->waldio ? WALDIOVFS_RESERVE : 0;
    int reserve = want_reserve;
    if (!bad && want_reserve)
        sqlite3_file_control(e->db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    if (!bad)
        bad = set_pragmas(e, opt);
    if (!bad && opt->batch_atomic)
        bad = batch_capable(e);
    if (!bad)
        bad = exec_expect(e, "BEGIN", NULL);
    for (uint32_t t = 0; !bad && t < e->ntables; t++) {
        snprintf(sql, sizeof sql,
                 "CREATE TABLE IF NOT EXISTS t%u(id INTEGER PRIMARY KEY, value BLOB NOT NULL)", t);
        bad = exec_expect(e, sql, NULL);
    }
    if (!bad)
        bad = exec_expect(e, "COMMIT", NULL);
    if (!bad && opt->wal_prealloc > 0)
        bad = prealloc_wal(e, opt->wal_prealloc, opt->page_size);
    reserve = -1; /* only asks: the reserved bytes the database has now */
    if (!bad && want_reserve &&
        (sqlite3_file_control(e->db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve) != SQLITE_OK ||
         reserve != want_reserve))
        bad = fail(e, "%s VFS: the database has %d reserved bytes per page, not %d",
                   opt->cksumvfs ? "checksum" : "WALDIO", reserve, want_reserve);
    if (!bad) {
        snprintf(sql, sizeof sql, "PRAGMA page_size");
        sqlite3_stmt *st;
        bad = sqlite3_prepare_v2(e->db, sql, -1, &st, NULL) != SQLITE_OK ||
              sqlite3_step(st) != SQLITE_ROW;
        if (bad)
            fail_db(e, sql);
        else if (sqlite3_column_int(st, 0) != opt->page_size) {
            bad = 1;
            fail(e, "page size is %d, not %d (an existing database?)", sqlite3_column_int(st, 0),
                 opt->page_size);
        }
        sqlite3_finalize(st);
    }
    if (!bad)
        bad = prepare_statements(e);
    if (bad) {
        snprintf(err, errlen, "%s", e->err);
        free_engine(e);
        return -1;
    }
    *out = e;
    return 0;
}

static int sq_begin(engine *e)
{
    e->io_error = 0;
    if (e->batch)
        batchvfs_get(&e->batch_before);
    return exec_expect(e, "BEGIN", NULL);
}

/* With --batch-atomic a commit that wrote outside an atomic batch fails
** (before its txn-ack): a build or file system that silently fell back to
** the rollback journal must not pass for MAW. */
static int sq_commit(engine *e)
{
    e->io_error = 0;
    int bad = exec_expect(e, "COMMIT", NULL);
    if (!bad && e->batch && batchvfs_check(&e->batch_before, e->err, sizeof e->err) != 0)
        bad = -1;
    return bad;
}

static int sq_io_failed(engine *e) { return e->io_error; }

/* After an error SQLite may have rolled back already ("cannot rollback - no
** transaction is active"): either way no transaction is open afterwards. */
static void sq_rollback(engine *e) { sqlite3_exec(e->db, "ROLLBACK", NULL, NULL, NULL); }

/* Run statement K of TABLE for KEY (and VAL); it must change exactly one row,
** or for a select return one. */
static int run(engine *e, int k, uint32_t table, int64_t key, const void *val, uint32_t len)
{
    static const char *const NAMES[S_PER_TABLE] = {"insert", "update", "delete", "select"};
    if (table >= e->ntables)
        return fail(e, "%s: no table %u", NAMES[k], table);
    sqlite3_stmt *st = e->stmts[table * S_PER_TABLE + k];
    sqlite3_bind_int64(st, 1, key);
    if (val)
        sqlite3_bind_blob(st, 2, len ? val : "", (int)len, SQLITE_STATIC);
    e->io_error = 0;
    int rc = sqlite3_step(st);
    int result = 0;
    char what[96];
    snprintf(what, sizeof what, "%s t%u key %lld", NAMES[k], table, (long long)key);
    if (k == S_SELECT) {
        if (rc == SQLITE_ROW) {
            (void)sqlite3_column_blob(st, 0); /* read the value, as an app would */
            rc = sqlite3_step(st);
            if (rc != SQLITE_DONE)
                result = fail_db(e, what);
        } else if (rc == SQLITE_DONE) {
            result = fail(e, "%s: no such row", what);
        } else {
            result = fail_db(e, what);
        }
    } else if (rc != SQLITE_DONE) {
        result = fail_db(e, what);
    } else if (sqlite3_changes(e->db) != 1) {
        result = fail(e, "%s: changed %d rows, not 1", what, sqlite3_changes(e->db));
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return result;
}

static int sq_insert(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    return run(e, S_INSERT, t, key, val, len);
}
static int sq_update(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    return run(e, S_UPDATE, t, key, val, len);
}
static int sq_remove(engine *e, uint32_t t, int64_t key)
{
    return run(e, S_DELETE, t, key, NULL, 0);
}
static int sq_select(engine *e, uint32_t t, int64_t key)
{
    return run(e, S_SELECT, t, key, NULL, 0);
}

/* The content digest of what this connection reads (contentdigest.h). */
static int sq_digest(engine *e, char hex[33])
{
    return content_digest_sqlite(e->db, hex, e->err, sizeof e->err);
}

static void sq_counters(engine *e, engine_counters *out)
{
    (void)e;
    countvfs_get(out);
}

static const char *sq_errmsg(engine *e) { return e->err; }

static int sq_close(engine *e, engine_counters *final, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < e->ntables * S_PER_TABLE; i++)
        sqlite3_finalize(e->stmts[i]);
    free(e->stmts);
    e->stmts = NULL;
    /* Closing the last connection checkpoints a WAL database. */
    int rc = sqlite3_close(e->db);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "close: %s", sqlite3_errmsg(e->db));
        e->db = NULL; /* busy: leave it to process exit */
    } else {
        e->db = NULL;
    }
    if (final)
        countvfs_get(final);
    free_engine(e);
    return rc == SQLITE_OK ? 0 : -1;
}

const engine_vtab engine_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .begin = sq_begin,
    .insert = sq_insert,
    .update = sq_update,
    .remove = sq_remove,
    .select = sq_select,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .io_failed = sq_io_failed,
    .counters = sq_counters,
    .errmsg = sq_errmsg,
    .digest = sq_digest,
    .close = sq_close,
};
