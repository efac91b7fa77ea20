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
*/
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "marks.h"
#include "opstream.h"

static const engine_vtab *const ENGINES[] = {&engine_sqlite, &engine_dhl, NULL};

static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("crashlab-runner: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(code);
}

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "crashlab-runner: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nusage: crashlab-runner --ops FILE (--db PATH | --db-env NAME) "
          "[--engine sqlite|dhl] [--journal-mode M] [--synchronous S] [--locking-mode M] "
          "[--wal-autocheckpoint N] [--journal-size-limit N] [--wal-prealloc N] [--dhl-mode M] "
          "[--sync fsync|fdatasync] [--page-size N] [--marks FILE] [--latency FILE] "
          "[--stats FILE] [--from-txn K]\n");
  exit(2);
}

/* The integer value of option NAME, in LO..HI, or a usage error. */
static int int_arg(const char *name, const char *arg, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(arg, &end, 10);
  if (*arg == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    char what[160];
    snprintf(what, sizeof what, "bad %s %.40s (an integer, %ld..%ld)", name, arg, lo, hi);
    usage_error("%s", what);
  }
  return (int)v;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Write TEXT (LEN bytes) to PATH atomically: a temporary file beside it,
** fsync, rename.  Returns 0, or -1 with errno set. */
static int write_atomic(const char *path, const char *text, size_t len) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  int ok = fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int saved = errno;
  if (fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    saved = ok ? errno : saved;
    unlink(tmp);
    errno = saved;
    return -1;
  }
  return 0;
}

/* A growing string buffer for the report files. */
typedef struct sbuf { char *p; size_t n, cap; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) die(1, "formatting a report failed");
    if (b->p && (size_t)k < b->cap - b->n) { b->n += (size_t)k; return; }
    size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
    char *q = realloc(b->p, cap);
    if (!q) die(1, "out of memory");
    b->p = q;
    b->cap = cap;
  }
}

static void sb_counters(sbuf *b, const char *name, const engine_counters *c) {
  sb_printf(b, "  \"%s\": {\"writes\": %" PRIu64 ", \"bytes_written\": %" PRIu64
            ", \"file_syncs\": %" PRIu64 ", \"dir_syncs\": %" PRIu64 ", \"fsyncs\": %" PRIu64 "}",
            name, c->writes, c->bytes_written, c->file_syncs, c->dir_syncs,
            c->file_syncs + c->dir_syncs);
}

static engine_counters diff(const engine_counters *a, const engine_counters *b) {
  engine_counters d = {b->writes - a->writes, b->bytes_written - a->bytes_written,
                       b->file_syncs - a->file_syncs, b->dir_syncs - a->dir_syncs};
  return d;
}

int main(int argc, char **argv) {
  const char *ops_path = NULL, *marks_path = NULL, *latency_path = NULL, *stats_path = NULL;
  const char *engine_name = "sqlite";
  const char *db_env = NULL;
  /* SQLite's defaults (this build's DEFAULT_WAL_AUTOCHECKPOINT, _JOURNAL_SIZE_LIMIT),
  ** set explicitly so that they do not depend on how SQLite was compiled */
  engine_options opt = {.db = NULL, .journal_mode = "DELETE", .synchronous = "FULL",
                        .locking_mode = "NORMAL", .wal_autocheckpoint = 1000,
                        .journal_size_limit = -1, .wal_prealloc = 0,
                        .dhl_mode = "tc", .sync = "fsync", .page_size = 4096, .ntables = 0};
  static const struct option LONG[] = {
    {"ops", required_argument, 0, 'o'},          {"db", required_argument, 0, 'd'},
    {"engine", required_argument, 0, 'e'},       {"journal-mode", required_argument, 0, 'j'},
    {"synchronous", required_argument, 0, 's'},  {"page-size", required_argument, 0, 'p'},
    {"marks", required_argument, 0, 'm'},        {"latency", required_argument, 0, 'l'},
    {"stats", required_argument, 0, 'S'},        {"db-env", required_argument, 0, 'E'},
    {"dhl-mode", required_argument, 0, 'M'},     {"sync", required_argument, 0, 'y'},
    {"from-txn", required_argument, 0, 'F'},   {"locking-mode", required_argument, 0, 'L'},
    {"wal-autocheckpoint", required_argument, 0, 'A'},
    {"journal-size-limit", required_argument, 0, 'J'},
    {"wal-prealloc", required_argument, 0, 'P'},
    {0, 0, 0, 0},
  };
  uint32_t from_txn = 0;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "", LONG, NULL)) != -1) {
    switch (c) {
      case 'o': ops_path = optarg; break;
      case 'd': opt.db = optarg; break;
      case 'e': engine_name = optarg; break;
      case 'j': opt.journal_mode = optarg; break;
      case 's': opt.synchronous = optarg; break;
      case 'p': {
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || v <= 0 || v > 65536)
          usage_error("bad --page-size %s", optarg);
        opt.page_size = (int)v;
        break;
      }
      case 'L': opt.locking_mode = optarg; break;
      case 'A': opt.wal_autocheckpoint = int_arg("--wal-autocheckpoint", optarg, 0, INT32_MAX); break;
      case 'J': opt.journal_size_limit = int_arg("--journal-size-limit", optarg, -1, INT32_MAX); break;
      case 'P': opt.wal_prealloc = int_arg("--wal-prealloc", optarg, 1, 65536); break;
      case 'm': marks_path = optarg; break;
      case 'l': latency_path = optarg; break;
      case 'S': stats_path = optarg; break;
      case 'E': db_env = optarg; break;
      case 'M': opt.dhl_mode = optarg; break;
      case 'y': opt.sync = optarg; break;
      case 'F': {
        char *end;
        unsigned long v = strtoul(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || v < 1 || v > UINT32_MAX)
          usage_error("bad --from-txn %s", optarg);
        from_txn = (uint32_t)v;
        break;
      }
      default: usage_error("unknown or incomplete option %s", argv[optind - 1]);
    }
  }
  if (optind != argc) usage_error("unexpected argument %s", argv[optind]);
  if (!ops_path) usage_error("%s", "--ops FILE is required");
  if (opt.db && db_env) usage_error("%s", "give --db or --db-env, not both");
  if (db_env) {
    opt.db = getenv(db_env);
    if (!opt.db || !*opt.db) usage_error("--db-env %s: the variable is not set", db_env);
  }
  if (!opt.db) usage_error("%s", "--db PATH is required");
  const engine_vtab *vt = NULL;
  for (int i = 0; ENGINES[i]; i++)
    if (strcmp(ENGINES[i]->name, engine_name) == 0) vt = ENGINES[i];
  if (!vt) usage_error("unknown engine %s (choose from sqlite, dhl)", engine_name);

  ops_stream s;
  if (ops_open_file(&s, ops_path) != 0) die(2, "%s", s.err);
  opt.ntables = s.ntables;

  char err[600];
  marks *mk;
  if (marks_open(&mk, marks_path, err, sizeof err) != 0) die(1, "%s", err);
  engine *e;
  if (vt->open(&opt, &e, err, sizeof err) != 0) die(1, "%s: %s", opt.db, err);

  uint64_t *latency = calloc(s.ntxns ? s.ntxns : 1, sizeof *latency);
  if (!latency) die(1, "out of memory");
  engine_counters c_start = {0}, c_end = {0}, c_final;
  uint64_t t_start = 0, t_end = 0, t_begin = 0;
  uint32_t done_txns = 0;
  char label[64];
  ops_record r;
  int rc;
  int skipping = from_txn > 0;
  while ((rc = ops_next(&s, &r)) == 1) {
    if (skipping) { /* --from-txn: nothing before transaction from_txn runs */
      if (r.type == OPS_BEGIN && r.txn >= from_txn) skipping = 0;
      else continue;
    }
    int bad = 0;
    const char *what = "";
    switch (r.type) {
      case OPS_BEGIN:
        if (r.txn == 1 || r.txn == from_txn) {
          vt->counters(e, &c_start);
          t_start = now_us();
        }
        if (r.txn > 0) {
          snprintf(label, sizeof label, "txn-begin:%u", r.txn);
          if (marks_emit(mk, label, err, sizeof err) != 0) die(1, "%s", err);
        }
        t_begin = now_us();
        bad = vt->begin(e);
        what = "begin";
        break;
      case OPS_INSERT: bad = vt->insert(e, r.table, r.key, r.value, r.len); what = "insert"; break;
      case OPS_UPDATE: bad = vt->update(e, r.table, r.key, r.value, r.len); what = "update"; break;
      case OPS_DELETE: bad = vt->remove(e, r.table, r.key); what = "delete"; break;
      case OPS_SELECT: bad = vt->select(e, r.table, r.key); what = "select"; break;
      case OPS_COMMIT:
        bad = vt->commit(e);
        what = "commit failed";
        if (bad || r.txn == 0) break;
        latency[r.txn - 1] = now_us() - t_begin;
        snprintf(label, sizeof label, "txn-ack:%u", r.txn);
        if (marks_emit(mk, label, err, sizeof err) != 0) die(1, "%s", err);
        done_txns = r.txn;
        if (r.txn == s.ntxns) {
          vt->counters(e, &c_end);
          t_end = now_us();
        }
        break;
      case OPS_MARK:
        if (marks_emit(mk, r.label, err, sizeof err) != 0) die(1, "%s", err);
        break;
      case OPS_END:
        break;
    }
    if (bad) die(1, "txn %u: %s: %s", s.open_txn, what, vt->errmsg(e));
  }
  if (rc < 0) die(2, "%s", s.err);
  if (vt->close(e, &c_final, err, sizeof err) != 0) die(1, "%s", err);
  if (marks_emit(mk, "workload-end", err, sizeof err) != 0) die(1, "%s", err);
  const char *channel = marks_channel(mk);  /* a string literal: outlives mk */
  marks_close(mk);

  if (latency_path) {
    sbuf b = {0};
    sb_printf(&b, "txn\tlatency_us\n");
    for (uint32_t i = 0; i < done_txns; i++) sb_printf(&b, "%u\t%" PRIu64 "\n", i + 1, latency[i]);
    if (write_atomic(latency_path, b.p, b.n) != 0) die(1, "%s: %s", latency_path, strerror(errno));
    free(b.p);
  }
  if (stats_path) {
    engine_counters w = diff(&c_start, &c_end);
    sbuf b = {0};
    sb_printf(&b, "{\n  \"engine\": \"%s\",\n", vt->name);
    if (vt == &engine_dhl)
      sb_printf(&b, "  \"dhl_mode\": \"%s\",\n  \"sync\": \"%s\",\n", opt.dhl_mode, opt.sync);
    else
      sb_printf(&b, "  \"journal_mode\": \"%s\",\n  \"synchronous\": \"%s\",\n"
                "  \"locking_mode\": \"%s\",\n  \"wal_autocheckpoint\": %d,\n"
                "  \"journal_size_limit\": %d,\n  \"wal_prealloc\": %d,\n",
                opt.journal_mode, opt.synchronous, opt.locking_mode, opt.wal_autocheckpoint,
                opt.journal_size_limit, opt.wal_prealloc);
    sb_printf(&b, "  \"page_size\": %d,\n  \"transactions\": %u,\n  \"elapsed_us\": %" PRIu64
              ",\n  \"marks\": \"%s\",\n", opt.page_size, done_txns, t_end - t_start, channel);
    sb_counters(&b, "workload", &w);
    sb_printf(&b, ",\n");
    sb_counters(&b, "total", &c_final);
    sb_printf(&b, "\n}\n");
    if (write_atomic(stats_path, b.p, b.n) != 0) die(1, "%s: %s", stats_path, strerror(errno));
    free(b.p);
  }
  free(latency);
  ops_close(&s);
  return 0;
}
