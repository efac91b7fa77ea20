/*
** crashlab-runner: execute an op stream (workloads/opstream.py) against one
** storage engine, writing marks as it goes:
**   setup-done     where the stream says (after the warm-up transaction)
**   txn-begin:K    before transaction K's BEGIN
**   txn-ack:K      only after transaction K's commit call returned success
**   workload-end   after the last transaction and the engine's close
** The database is --db PATH, or with --db-env NAME the path held by the
** environment variable NAME (the recorder's raw tier puts the recorded block
** device in CRASHLAB_DEV: it exists only once recording has started).
** --from-txn K continues a workload on a database a crash left behind: the
** set-up and transactions before K are skipped (opening the database runs
** the engine's recovery first).
** Any failure prints one line "crashlab-runner: ..." on stderr and exits 1
** (2 for bad arguments or a malformed op stream); a failed commit is never
** followed by its txn-ack.
**
** A transaction that fails because the storage did (an I/O error, a full
** disk: engine.h io_failed) is marked txn-error:K;attempt=N;op=OP;why=WORDS and rolled
** back.  --on-error stop (the default) then closes the engine and exits 3;
** --on-error retry runs the same transaction once more (its marks carry
** ;attempt=2) and stops if that fails too.  Any other failure, and any in
** the set-up, exits 1.
** --crash-at NAME kills the runner (SIGKILL) right after it writes the mark
** NAME: an application crash with no power loss (the process-crash fault).
** --sync-retry is the fsyncgate bug on purpose (engine.h, SQLite only).
*/
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batchvfs.h"
#include "cmdline.h"
#include "dashvfs.h"
#include "engine.h"
#include "marks.h"
#include "opstream.h"
#include "selvfs.h"

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Write TEXT (LEN bytes) to PATH atomically: a temporary file beside it,
** fsync, rename.  Returns 0, or -1 with errno set. */
static int write_atomic(const char *path, const char *text, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        saved = ok ? errno : saved;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

/* A growing string buffer for the report files. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            die(1, "formatting a report failed");
        if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *q = realloc(b->p, cap);
        if (!q)
            die(1, "out of memory");
        b->p = q;
        b->cap = cap;
    }
}

static void sb_counters(sbuf *b, const char *name, const engine_counters *c)
{
    sb_printf(b,
              "  \"%s\": {\"writes\": %" PRIu64 ", \"bytes_written\": %" PRIu64
              ", \"file_syncs\": %" PRIu64 ", \"dir_syncs\": %" PRIu64 ", \"fsyncs\": %" PRIu64 "}",
              name, c->writes, c->bytes_written, c->file_syncs, c->dir_syncs,
              c->file_syncs + c->dir_syncs);
}

static engine_counters diff(const engine_counters *a, const engine_counters *b)
{
    engine_counters d = {b->writes - a->writes, b->bytes_written - a->bytes_written,
                         b->file_syncs - a->file_syncs, b->dir_syncs - a->dir_syncs};
    return d;
}

/* A run of the op stream against the engine, and what it measured. */
typedef struct run {
    const engine_vtab *vt;
    engine *e;
    marks *mk;
    ops_stream s;
    uint32_t from_txn;
    const char *crash_at; /* --crash-at */
    int retry;            /* --on-error retry */
    int retrying;         /* txn_failed rewound the stream for a retry */
    uint32_t attempt;     /* of the open transaction, from 1 */
    ops_stream txn_start; /* the stream just before its BEGIN: a retry resumes there */
    uint64_t *latency;    /* latency[K-1]: transaction K's, in microseconds */
    engine_counters c_start, c_end, c_final;
    uint64_t t_start, t_end, t_begin;
    uint32_t done_txns; /* the last transaction acknowledged */
    char err[600];
} run;

/* emit: write the mark LABEL, or die; with --crash-at NAME and LABEL's
** name (before any ';') equal to NAME, the process then dies by SIGKILL. */
static void emit(run *st, const char *label)
{
    if (marks_emit(st->mk, label, st->err, sizeof st->err) != 0)
        die(1, "%s", st->err);
    if (st->crash_at && strncmp(label, st->crash_at, strcspn(label, ";")) == 0 &&
        strlen(st->crash_at) == strcspn(label, ";"))
        kill(getpid(), SIGKILL);
}

/* begin_txn: BEGIN of transaction r->txn (0: set-up): start the measurement
** at the first one run, mark txn-begin:K, call the engine; its failure. */
static int begin_txn(run *st, const ops_record *r)
{
    char label[64];
    if (r->txn == 1 || r->txn == st->from_txn) {
        st->vt->counters(st->e, &st->c_start);
        st->t_start = now_us();
    }
    if (r->txn > 0) {
        if (st->attempt > 1)
            snprintf(label, sizeof label, "txn-begin:%u;attempt=%u", r->txn, st->attempt);
        else
            snprintf(label, sizeof label, "txn-begin:%u", r->txn);
        emit(st, label);
    }
    st->t_begin = now_us();
    return st->vt->begin(st->e);
}

/* commit_txn: COMMIT of transaction r->txn: call the engine and, only once it
** returned success, mark txn-ack:K and measure; the engine's failure. */
static int commit_txn(run *st, const ops_record *r)
{
    char label[64];
    int bad = st->vt->commit(st->e);
    if (bad || r->txn == 0)
        return bad;
    st->latency[r->txn - 1] = now_us() - st->t_begin;
    snprintf(label, sizeof label, "txn-ack:%u", r->txn);
    emit(st, label);
    st->done_txns = r->txn;
    if (r->txn == st->s.ntxns) {
        st->vt->counters(st->e, &st->c_end);
        st->t_end = now_us();
    }
    return 0;
}

/* run_record: apply one record of the stream to the engine.  Returns NULL,
** or the name of the operation that failed. */
static const char *run_record(run *st, const ops_record *r)
{
    const engine_vtab *vt = st->vt;
    engine *e = st->e;
    int bad = 0;
    const char *what = "";
    switch (r->type) {
    case OPS_BEGIN:
        bad = begin_txn(st, r);
        what = "begin";
        break;
    case OPS_INSERT:
        bad = vt->insert(e, r->table, r->key, r->value, r->len);
        what = "insert";
        break;
    case OPS_UPDATE:
        bad = vt->update(e, r->table, r->key, r->value, r->len);
        what = "update";
        break;
    case OPS_DELETE:
        bad = vt->remove(e, r->table, r->key);
        what = "delete";
        break;
    case OPS_SELECT:
        bad = vt->select(e, r->table, r->key);
        what = "select";
        break;
    case OPS_COMMIT:
        bad = commit_txn(st, r);
        what = "commit";
        break;
    case OPS_MARK: emit(st, r->label); break;
    case OPS_END: break;
    }
    return bad ? what : NULL;
}

/* as_word: TEXT as one mark word in OUT: each run of bytes other than
** [A-Za-z0-9.-] becomes one '_' (none at the ends), cut to OUTLEN-1 bytes. */
static void as_word(const char *text, char *out, size_t outlen)
{
    size_t n = 0;
    int gap = 0;
    for (; *text && n + 1 < outlen; text++) {
        unsigned char c = (unsigned char)*text;
        if (isalnum(c) || c == '.' || c == '-') {
            if (gap && n && n + 2 < outlen)
                out[n++] = '_';
            out[n++] = (char)c;
            gap = 0;
        } else {
            gap = 1;
        }
    }
    out[n] = '\0';
}

/* txn_failed: operation WHAT of transaction K failed: mark txn-error:K, roll
** back, and either rewind the stream to K's BEGIN for one more attempt
** (--on-error retry) or close the engine and exit 3. */
static void txn_failed(run *st, uint32_t k, const char *what)
{
    char why[120], label[256];
    const char *msg = st->vt->errmsg(st->e);
    as_word(msg, why, sizeof why);
    snprintf(label, sizeof label, "txn-error:%u;attempt=%u;op=%s;why=%s", k, st->attempt, what,
             why);
    emit(st, label);
    st->vt->rollback(st->e);
    int again = st->retry && st->attempt < 2;
    fprintf(stderr, "crashlab-runner: txn %u: %s failed (attempt %u): %s; %s\n", k, what,
            st->attempt, msg, again ? "retrying" : "stopped");
    if (again) {
        st->attempt++;
        st->retrying = 1;
        st->s = st->txn_start;
        return;
    }
    st->vt->close(st->e, NULL, st->err, sizeof st->err); /* best effort: it failed already */
    marks_close(st->mk);
    exit(3);
}

/* run_stream: run the stream (from transaction from_txn on), close the
** engine and mark workload-end; die on any failure. */
static void run_stream(run *st)
{
    ops_record r;
    int rc;
    int skipping = st->from_txn > 0;
    ops_stream before = st->s;
    while ((rc = ops_next(&st->s, &r)) == 1) {
        if (skipping) { /* --from-txn: nothing before transaction from_txn runs */
            if (r.type == OPS_BEGIN && r.txn >= st->from_txn)
                skipping = 0;
            else {
                before = st->s;
                continue;
            }
        }
        if (r.type == OPS_BEGIN) {
            if (!st->retrying)
                st->attempt = 1; /* a new transaction, not a retry */
            st->retrying = 0;
            st->txn_start = before;
        }
        /* the transaction the record belongs to (0: the set-up, or a mark
        ** outside any transaction: a failure there is not a transaction's) */
        uint32_t k = r.type == OPS_MARK || r.type == OPS_END ? 0 : st->s.open_txn;
        const char *what = run_record(st, &r);
        if (what && (k == 0 || !st->vt->io_failed(st->e)))
            die(1, "txn %u: %s: %s", k, what, st->vt->errmsg(st->e));
        if (what)
            txn_failed(st, k, what);
        before = st->s;
    }
    if (rc < 0)
        die(2, "%s", st->s.err);
    if (st->vt->close(st->e, &st->c_final, st->err, sizeof st->err) != 0)
        die(1, "%s", st->err);
    emit(st, "workload-end");
}

/* write_latency: the latency report (one line per acknowledged transaction)
** to PATH, or die. */
static void write_latency(const run *st, const char *path)
{
    sbuf b = {0};
    sb_printf(&b, "txn\tlatency_us\n");
    for (uint32_t i = 0; i < st->done_txns; i++)
        sb_printf(&b, "%u\t%" PRIu64 "\n", i + 1, st->latency[i]);
    if (write_atomic(path, b.p, b.n) != 0)
        die(1, "%s: %s", path, strerror(errno));
    free(b.p);
}

/* write_stats: the stats report (settings, the measured transactions'
** counters and time, the whole run's counters; after a restart, OPENED:
** what its open saw) to PATH, or die. */
static void write_stats(const run *st, const args *a, const char *channel, const char *opened,
                        const char *path)
{
    engine_counters w = diff(&st->c_start, &st->c_end);
    sbuf b = {0};
    sb_printf(&b, "{\n  \"engine\": \"%s\",\n", st->vt->name);
    if (st->vt == &engine_dhl)
        sb_printf(&b, "  \"dhl_mode\": \"%s\",\n  \"sync\": \"%s\",\n", a->opt.dhl_mode,
                  a->opt.sync);
    else
        sb_printf(&b,
                  "  \"journal_mode\": \"%s\",\n  \"synchronous\": \"%s\",\n"
                  "  \"locking_mode\": \"%s\",\n  \"wal_autocheckpoint\": %d,\n"
                  "  \"journal_size_limit\": %d,\n  \"wal_prealloc\": %d,\n",
                  a->opt.journal_mode, a->opt.synchronous, a->opt.locking_mode,
                  a->opt.wal_autocheckpoint, a->opt.journal_size_limit, a->opt.wal_prealloc);
    if (a->opt.selective) {
        unsigned long fs, journal;
        selvfs_counts(&fs, &journal);
        sb_printf(&b,
                  "  \"selective\": {\"max_pages\": %d, \"fs_journal_txns\": %lu, "
                  "\"sqlite_journal_txns\": %lu},\n",
                  a->opt.selective_pages, fs, journal);
    }
    sb_printf(&b,
              "  \"page_size\": %d,\n  \"transactions\": %u,\n  \"elapsed_us\": %" PRIu64
              ",\n  \"marks\": \"%s\",\n",
              a->opt.page_size, st->done_txns, st->t_end - st->t_start, channel);
    sb_counters(&b, "workload", &w);
    sb_printf(&b, ",\n");
    sb_counters(&b, "total", &st->c_final);
    if (a->opt.batch_atomic) { /* the MAW runner's batch counts (batchvfs.h) */
        char batch[512];
        batchvfs_json(batch, sizeof batch);
        sb_printf(&b, ",\n  \"batch_atomic\": %s", batch);
    }
    if (opened) /* a restart: what its open saw (REC-AGREE) */
        sb_printf(&b, ",\n  \"opened\": %s", opened);
    sb_printf(&b, "\n}\n");
    if (write_atomic(path, b.p, b.n) != 0)
        die(1, "%s: %s", path, strerror(errno));
    free(b.p);
}

/* report_opened: after a restart's open, before any transaction runs, the
** JSON object of what the SUT's own open (its recovery, its VFS) sees in OUT:
** {"digest": HEX}, the oracle content digest, or {"error": WORD} when it
** cannot be read.  Also written at once as the stats report PATH (if not
** NULL) on its own, so that a restart that fails later still reports what
** it opened (REC-AGREE); the full report replaces it at the end. */
static void report_opened(run *st, const char *path, char *out, size_t outlen)
{
    char digest[33], why[120], early[240];
    if (st->vt->digest(st->e, digest) == 0) {
        snprintf(out, outlen, "{\"digest\": \"%s\"}", digest);
    } else {
        as_word(st->vt->errmsg(st->e), why, sizeof why);
        snprintf(out, outlen, "{\"error\": \"%s\"}", why);
    }
    int n = snprintf(early, sizeof early, "{\"opened\": %s}\n", out);
    if (path && write_atomic(path, early, (size_t)n) != 0)
        die(1, "%s: %s", path, strerror(errno));
}

int main(int argc, char **argv)
{
    args a;
    parse_args(argc, argv, &a);

    /* no counters yet, nothing acknowledged */
    run st = {.vt = a.vt, .from_txn = a.from_txn, .crash_at = a.crash_at, .retry = a.retry};
    if (ops_open_file(&st.s, a.ops_path) != 0)
        die(2, "%s", st.s.err);
    a.opt.ntables = st.s.ntables;
    if (marks_open(&st.mk, a.marks_path, st.err, sizeof st.err) != 0)
        die(1, "%s", st.err);
    if (a.vt->open(&a.opt, &st.e, st.err, sizeof st.err) != 0)
        die(1, "%s: %s", a.opt.db, st.err);
    char opened[200] = ""; /* a restart: what the SUT's own open sees */
    if (a.from_txn)
        report_opened(&st, a.stats_path, opened, sizeof opened);
    st.latency = calloc(st.s.ntxns ? st.s.ntxns : 1, sizeof *st.latency);
    if (!st.latency)
        die(1, "out of memory");

    run_stream(&st);
    const char *channel = marks_channel(st.mk); /* a string literal: outlives mk */
    marks_close(st.mk);

    if (a.latency_path)
        write_latency(&st, a.latency_path);
    if (a.stats_path)
        write_stats(&st, &a, channel, a.from_txn ? opened : NULL, a.stats_path);
    free(st.latency);
    ops_close(&st.s);
    return 0;
}
