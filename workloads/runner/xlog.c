/*
** The xLog engine (xlog.h): transactions are acknowledged once their record
** is in the NVRAM; the NVRAM is written back to SQLite (WAL, FULL) when the
** next record does not fit, and replayed when the database is opened.
**
** The NVRAM is a file: under the recorder the `nvram` file of the fuse
** daemon (CRASHLAB_NVRAM), whose writes are logged as FUA writes, durable
** once pwrite returns; elsewhere DB".nvram", a plain file (no durability
** promised: it is for the checkers' scratch copies and for tests).
**
** Write-back order (what makes it safe): BEGIN; every record the database
** lacks (lsn > user_version) applied; PRAGMA user_version = the last lsn;
** COMMIT, which syncs the WAL (synchronous=FULL); only then the NVRAM's
** header is rewritten with base_lsn past the records, which drops them.
*/
#include "xlog.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "countvfs.h"
#include "errorf.h"

/* Records in one NVRAM at most (each takes at least 21 bytes). */
#define XLOG_MAX_RECORDS (XLOG_NVRAM_SIZE / (XLOG_REC_HEAD + XLOG_REC_TAIL + 1) + 1)

enum { S_INSERT, S_UPDATE, S_DELETE, S_SELECT, S_PER_TABLE };

struct engine {
    sqlite3 *db;
    sqlite3_stmt **stmts; /* S_PER_TABLE per table, prepared on first use */
    uint32_t nstmts;
    int nv_fd;
    uint8_t nv[XLOG_NVRAM_SIZE]; /* what the NVRAM holds */
    size_t nv_end;               /* offset past the last valid record */
    uint64_t base_lsn;           /* the header's */
    uint64_t next_lsn;           /* the next transaction's record */
    uint8_t *txn;                /* the open transaction's operations */
    uint32_t txn_len, txn_cap;
    uint64_t nv_writes, nv_bytes; /* pwrites to the NVRAM */
    char err[512];
    int io_error;
};

#define fail(x, ...) errorf((x)->err, sizeof(x)->err, __VA_ARGS__)

/* ---- SQLite ---- */

/* e->err = WHAT: SQLite's message; an I/O failure is noted.  Returns -1. */
static int fail_db(engine *e, const char *what)
{
    int code = sqlite3_extended_errcode(e->db);
    int primary = code & 0xff;
    e->io_error = primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN;
    return fail(e, "%s: %s (code %d)", what, sqlite3_errmsg(e->db), code);
}

/* Run SQL (no result wanted). */
static int exec(engine *e, const char *sql)
{
    if (sqlite3_exec(e->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return fail_db(e, sql);
    return 0;
}

/* The first column of SQL's first row as an integer in *OUT. */
static int query_int(engine *e, const char *sql, int64_t *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(e->db, sql, -1, &st, NULL) != SQLITE_OK)
        return fail_db(e, sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : fail_db(e, sql);
}

/* Statement K of TABLE, prepared on first use (the tables of a database
** being recovered are not known in advance). */
static sqlite3_stmt *stmt(engine *e, uint32_t table, int k)
{
    static const char *const FORMS[S_PER_TABLE] = {
        "INSERT INTO t%u(id, value) VALUES(?1, ?2)",
        "UPDATE t%u SET value = ?2 WHERE id = ?1",
        "DELETE FROM t%u WHERE id = ?1",
        "SELECT value FROM t%u WHERE id = ?1",
    };
    if (table >= e->nstmts / S_PER_TABLE) {
        uint32_t n = (table + 1) * S_PER_TABLE;
        sqlite3_stmt **s = realloc(e->stmts, n * sizeof *s);
        if (!s) {
            fail(e, "out of memory");
            return NULL;
        }
        memset(s + e->nstmts, 0, (n - e->nstmts) * sizeof *s);
        e->stmts = s;
        e->nstmts = n;
    }
    sqlite3_stmt **slot = &e->stmts[table * S_PER_TABLE + k];
    if (!*slot) {
        char sql[96];
        snprintf(sql, sizeof sql, FORMS[k], table);
        if (sqlite3_prepare_v3(e->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK)
            fail_db(e, sql);
    }
    return *slot;
}

/* Apply one operation to the database; it must change exactly one row. */
static int apply_op(engine *e, const xlog_op *op)
{
    int k = op->op == XLOG_INSERT ? S_INSERT : op->op == XLOG_UPDATE ? S_UPDATE : S_DELETE;
    sqlite3_stmt *st = stmt(e, op->table, k);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, op->key);
    if (k != S_DELETE)
        sqlite3_bind_blob(st, 2, op->len ? (const void *)op->value : "", (int)op->len,
                          SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int changed = sqlite3_changes(e->db);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    char what[80];
    snprintf(what, sizeof what, "write-back: op %d t%u key %lld", op->op, op->table,
             (long long)op->key);
    if (rc != SQLITE_DONE)
        return fail_db(e, what);
    if (changed != 1)
        return fail(e, "%s: changed %d rows, not 1", what, changed);
    return 0;
}

/* Apply every operation of PAYLOAD. */
static int apply_payload(engine *e, const uint8_t *payload, uint32_t len)
{
    uint32_t pos = 0;
    xlog_op op;
    int rc;
    while ((rc = xlog_op_next(payload, len, &pos, &op)) == 1)
        if (apply_op(e, &op) != 0)
            return -1;
    return rc == 0 ? 0 : fail(e, "write-back: a malformed record payload");
}

/* ---- the NVRAM ---- */

/* Write N bytes at OFF of the NVRAM copy through to the NVRAM. */
static int nv_write(engine *e, size_t off, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(e->nv_fd, e->nv + off + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            e->io_error = 1;
            return fail(e, "NVRAM write at %zu: %s", off + done, w < 0 ? strerror(errno) : "short");
        }
        done += (size_t)w;
    }
    e->nv_writes++;
    e->nv_bytes += n;
    return 0;
}

/* Empty the NVRAM: a new header whose base_lsn is the next record's. */
static int nv_reset(engine *e)
{
    e->base_lsn = e->next_lsn;
    xlog_header_encode(e->nv, e->base_lsn);
    e->nv_end = XLOG_HDR_SIZE;
    return nv_write(e, 0, XLOG_HDR_SIZE);
}

/*
** Write back: one SQLite transaction with every valid NVRAM record the
** database lacks (lsn > APPLIED) and then EXTRA (EXTRA_LEN bytes of
** operations, the record EXTRA_LSN that never fitted; NULL: none), with
** user_version = the last lsn; COMMIT (synced); then the NVRAM is emptied.
*/
static int write_back(engine *e, int64_t applied, const uint8_t *extra, uint32_t extra_len,
                      uint64_t extra_lsn)
{
    xlog_record recs[XLOG_MAX_RECORDS];
    size_t end;
    uint64_t base;
    int n = xlog_scan(e->nv, sizeof e->nv, recs, XLOG_MAX_RECORDS, &end, &base);
    uint64_t last = (uint64_t)applied;
    if (exec(e, "BEGIN IMMEDIATE") != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (recs[i].lsn <= (uint64_t)applied)
            continue; /* written back before a crash that left the NVRAM full */
        if (apply_payload(e, recs[i].payload, recs[i].len) != 0)
            goto rollback;
        last = recs[i].lsn;
    }
    if (extra) {
        if (apply_payload(e, extra, extra_len) != 0)
            goto rollback;
        last = extra_lsn;
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version=%lld", (long long)last);
    if (exec(e, sql) != 0 || exec(e, "COMMIT") != 0)
        goto rollback;
    if (last + 1 > e->next_lsn)
        e->next_lsn = last + 1;
    return nv_reset(e); /* the rows are durable: the records may go */
rollback:
    sqlite3_exec(e->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* The database's last written-back lsn (PRAGMA user_version). */
static int applied_lsn(engine *e, int64_t *out) { return query_int(e, "PRAGMA user_version", out); }

/*
** Read the NVRAM and replay it: valid records the database lacks are written
** back (and the NVRAM emptied); an NVRAM holding only records the database
** has is emptied; one with no valid header gets one.  An NVRAM with a valid
** header and nothing to drop is left as it is (no write).
*/
static int nv_recover(engine *e)
{
    memset(e->nv, 0, sizeof e->nv);
    ssize_t r = pread(e->nv_fd, e->nv, sizeof e->nv, 0);
    if (r < 0)
        return fail(e, "NVRAM read: %s", strerror(errno));
    int64_t applied;
    if (applied_lsn(e, &applied) != 0)
        return -1;
    e->next_lsn = (uint64_t)applied + 1;
    xlog_record recs[XLOG_MAX_RECORDS];
    size_t end;
    uint64_t base;
    int n = xlog_scan(e->nv, sizeof e->nv, recs, XLOG_MAX_RECORDS, &end, &base);
    if (n < 0)
        return nv_reset(e);
    if (n > 0 && recs[n - 1].lsn > (uint64_t)applied)
        return write_back(e, applied, NULL, 0, 0);
    if (n > 0)
        return nv_reset(e); /* written back already: a crash came before the reset */
    if (base != e->next_lsn)
        return nv_reset(e); /* an empty NVRAM from before the last write-back */
    e->base_lsn = base;
    e->nv_end = end;
    return 0;
}

/* ---- the engine ---- */

static void free_engine(engine *e)
{
    for (uint32_t i = 0; i < e->nstmts; i++)
        sqlite3_finalize(e->stmts[i]);
    free(e->stmts);
    if (e->db)
        sqlite3_close(e->db);
    if (e->nv_fd >= 0)
        close(e->nv_fd);
    free(e->txn);
    free(e);
}

/* Open DB through the counting VFS with the NVRAM at NVRAM (a new database
** gets pages of PAGE_SIZE bytes), create tables 0..NTABLES-1, replay the
** NVRAM. */
static int open_engine(const char *db, const char *nvram, int page_size, uint32_t ntables,
                       engine **out, char *err, size_t errlen)
{
    int rc = countvfs_register(0);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "registering the counting VFS: %s", sqlite3_errstr(rc));
        return -1;
    }
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->nv_fd = -1;
    int bad =
        sqlite3_open_v2(db, &e->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK;
    if (bad)
        fail_db(e, db);
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA page_size=%d", page_size);
    if (!bad)
        bad = exec(e, sql) || exec(e, "PRAGMA journal_mode=WAL") ||
              exec(e, "PRAGMA synchronous=FULL");
    int64_t v = 0;
    if (!bad)
        bad = query_int(e, "PRAGMA synchronous", &v) ||
              (v != 2 && fail(e, "synchronous is %lld, not FULL", (long long)v));
    if (!bad && ntables) {
        bad = exec(e, "BEGIN");
        for (uint32_t t = 0; !bad && t < ntables; t++) {
            snprintf(sql, sizeof sql,
                     "CREATE TABLE IF NOT EXISTS t%u(id INTEGER PRIMARY KEY, value BLOB NOT NULL)",
                     t);
            bad = exec(e, sql);
        }
        if (!bad)
            bad = exec(e, "COMMIT");
    }
    if (!bad) {
        e->nv_fd = open(nvram, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (e->nv_fd < 0)
            bad = fail(e, "NVRAM %s: %s", nvram, strerror(errno));
    }
    if (!bad)
        bad = nv_recover(e);
    if (bad) {
        snprintf(err, errlen, "%s", e->err);
        free_engine(e);
        return -1;
    }
    *out = e;
    return 0;
}

static int xl_open(const engine_options *opt, engine **out, char *err, size_t errlen)
{
    const char *env = getenv("CRASHLAB_NVRAM");
    char path[4096];
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else if (snprintf(path, sizeof path, "%s.nvram", opt->db) >= (int)sizeof path) {
        snprintf(err, errlen, "database path too long");
        return -1;
    }
    return open_engine(opt->db, path, opt->page_size, opt->ntables, out, err, errlen);
}

static int xl_begin(engine *e)
{
    e->io_error = 0;
    e->txn_len = 0;
    return 0;
}

/* Append one operation to the open transaction's payload. */
static int add_op(engine *e, int op, uint32_t table, int64_t key, const void *val, uint32_t len)
{
    uint32_t need = 13 + (op == XLOG_DELETE ? 0 : 4 + len);
    if (e->txn_cap - e->txn_len < need) {
        uint32_t cap = e->txn_cap ? e->txn_cap : 256;
        while (cap - e->txn_len < need)
            cap *= 2;
        uint8_t *p = realloc(e->txn, cap);
        if (!p)
            return fail(e, "out of memory");
        e->txn = p;
        e->txn_cap = cap;
    }
    xlog_op_encode(e->txn + e->txn_len, op, table, key, val, len);
    e->txn_len += need;
    return 0;
}

static int xl_insert(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    return add_op(e, XLOG_INSERT, t, key, val, len);
}

static int xl_update(engine *e, uint32_t t, int64_t key, const void *val, uint32_t len)
{
    return add_op(e, XLOG_UPDATE, t, key, val, len);
}

static int xl_remove(engine *e, uint32_t t, int64_t key)
{
    return add_op(e, XLOG_DELETE, t, key, NULL, 0);
}

/* Whether (TABLE, KEY) is live after the operations of PAYLOAD: *LIVE is
** set when one of them names it (the last one wins). */
static void look_up(const uint8_t *payload, uint32_t len, uint32_t table, int64_t key, int *live)
{
    uint32_t pos = 0;
    xlog_op op;
    while (xlog_op_next(payload, len, &pos, &op) == 1)
        if (op.table == table && op.key == key)
            *live = op.op != XLOG_DELETE;
}

/* A read sees the open transaction, then the NVRAM's records, then the
** database. */
static int xl_select(engine *e, uint32_t t, int64_t key)
{
    int live = -1;
    xlog_record recs[XLOG_MAX_RECORDS];
    size_t end;
    uint64_t base;
    int n = xlog_scan(e->nv, e->nv_end, recs, XLOG_MAX_RECORDS, &end, &base);
    for (int i = 0; i < n; i++)
        look_up(recs[i].payload, recs[i].len, t, key, &live);
    look_up(e->txn, e->txn_len, t, key, &live);
    if (live == -1) {
        sqlite3_stmt *st = stmt(e, t, S_SELECT);
        if (!st)
            return -1;
        sqlite3_bind_int64(st, 1, key);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            (void)sqlite3_column_blob(st, 0);
        sqlite3_reset(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return fail_db(e, "select");
        live = rc == SQLITE_ROW;
    }
    return live ? 0 : fail(e, "select t%u key %lld: no such row", t, (long long)key);
}

/*
** Commit: the transaction's record is appended to the NVRAM; once the
** pwrite returned it is durable and the transaction is acknowledged.  A
** record that does not fit first writes the NVRAM back; one larger than the
** whole NVRAM is written back with it, in the same SQLite transaction.
*/
static int xl_commit(engine *e)
{
    e->io_error = 0;
    size_t size = xlog_record_size(e->txn_len);
    if (e->nv_end + size > sizeof e->nv) {
        int64_t applied;
        if (applied_lsn(e, &applied) != 0)
            return -1;
        if (XLOG_HDR_SIZE + size > sizeof e->nv) {
            uint64_t lsn = e->next_lsn++;
            return write_back(e, applied, e->txn, e->txn_len, lsn);
        }
        if (write_back(e, applied, NULL, 0, 0) != 0)
            return -1;
    }
    size_t at = e->nv_end;
    xlog_record_encode(e->nv + at, e->next_lsn, e->txn, e->txn_len);
    if (nv_write(e, at, size) != 0)
        return -1;
    e->nv_end += size;
    e->next_lsn++;
    return 0;
}

static void xl_rollback(engine *e) { e->txn_len = 0; }

static int xl_io_failed(engine *e) { return e->io_error; }

/* SQLite's file I/O (the counting VFS) plus the NVRAM's writes. */
static void xl_counters(engine *e, engine_counters *out)
{
    countvfs_get(out);
    out->writes += e->nv_writes;
    out->bytes_written += e->nv_bytes;
}

static const char *xl_errmsg(engine *e) { return e->err; }

/* The content digest of the database after the open's NVRAM replay (every
** record the database lacked is written back by then: nv_recover). */
static int xl_digest(engine *e, char hex[33])
{
    return content_digest_sqlite(e->db, hex, e->err, sizeof e->err);
}

/* Close: the NVRAM keeps its records (the next open replays them). */
static int xl_close(engine *e, engine_counters *final, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < e->nstmts; i++)
        sqlite3_finalize(e->stmts[i]);
    free(e->stmts);
    e->stmts = NULL;
    e->nstmts = 0;
    int rc = sqlite3_close(e->db); /* checkpoints the WAL */
    if (rc != SQLITE_OK)
        snprintf(err, errlen, "close: %s", sqlite3_errmsg(e->db));
    e->db = NULL;
    if (final)
        xl_counters(e, final);
    free_engine(e);
    return rc == SQLITE_OK ? 0 : -1;
}

const engine_vtab engine_xlog = {
    .name = "xlog",
    .open = xl_open,
    .begin = xl_begin,
    .insert = xl_insert,
    .update = xl_update,
    .remove = xl_remove,
    .select = xl_select,
    .commit = xl_commit,
    .rollback = xl_rollback,
    .io_failed = xl_io_failed,
    .counters = xl_counters,
    .errmsg = xl_errmsg,
    .digest = xl_digest,
    .close = xl_close,
};

int xlog_recover(const char *db, const char *nvram, char *err, size_t errlen)
{
    engine *e;
    if (open_engine(db, nvram, 4096, 0, &e, err, errlen) != 0) /* an existing file's size rules */
        return -1;
    return xl_close(e, NULL, err, errlen);
}
