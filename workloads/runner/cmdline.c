/*
** cmdline.c — crashlab-runner's command line (cmdline.h): the options read
** and checked against each other, the engine looked up by name.
*/
#include "cmdline.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batchvfs.h"
#include "dashvfs.h"

static const engine_vtab *const ENGINES[] = {&engine_sqlite, &engine_dhl, &engine_xlog, NULL};

void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("crashlab-runner: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "crashlab-runner: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: crashlab-runner --ops FILE (--db PATH | --db-env NAME) "
                    "[--engine sqlite|dhl|xlog] [--journal-mode M] [--synchronous S] "
                    "[--locking-mode M] [--wal-autocheckpoint N] [--journal-size-limit N] "
                    "[--wal-prealloc N] [--cksumvfs 0|1] [--dash shadow|rename-first] "
                    "[--selective N] [--dhl-mode M] [--sync fsync|fdatasync] "
                    "[--page-size N] [--marks FILE] [--latency FILE] [--stats FILE] [--from-txn K] "
                    "[--on-error stop|retry] [--crash-at MARK] [--sync-retry] "
                    "[--batch-atomic require|noioctl] [--waldio N [--waldio-fill 0|1]]\n");
    exit(2);
}

/* int_arg: the integer value of option NAME, in LO..HI, or a usage error. */
static int int_arg(const char *name, const char *arg, long lo, long hi)
{
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

/* parse_options: read the options of ARGV into A (usage_error on a bad one). */
/* long: one case per option of the runner, a flat switch */
static void parse_options(int argc, char **argv, args *a)
{
    static const struct option LONG[] = {
        {"ops", required_argument, 0, 'o'},
        {"db", required_argument, 0, 'd'},
        {"engine", required_argument, 0, 'e'},
        {"journal-mode", required_argument, 0, 'j'},
        {"synchronous", required_argument, 0, 's'},
        {"page-size", required_argument, 0, 'p'},
        {"marks", required_argument, 0, 'm'},
        {"latency", required_argument, 0, 'l'},
        {"stats", required_argument, 0, 'S'},
        {"db-env", required_argument, 0, 'E'},
        {"dhl-mode", required_argument, 0, 'M'},
        {"sync", required_argument, 0, 'y'},
        {"from-txn", required_argument, 0, 'F'},
        {"locking-mode", required_argument, 0, 'L'},
        {"wal-autocheckpoint", required_argument, 0, 'A'},
        {"journal-size-limit", required_argument, 0, 'J'},
        {"wal-prealloc", required_argument, 0, 'P'},
        {"on-error", required_argument, 0, 'O'},
        {"crash-at", required_argument, 0, 'C'},
        {"sync-retry", no_argument, 0, 'R'},
        {"cksumvfs", required_argument, 0, 'V'},
        {"batch-atomic", required_argument, 0, 'B'},
        {"waldio", required_argument, 0, 'W'},
        {"waldio-fill", required_argument, 0, 'G'},
        {"dash", required_argument, 0, 'D'},
        {"selective", required_argument, 0, 'Z'},
        {0, 0, 0, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", LONG, NULL)) != -1) {
        switch (c) {
        case 'o': a->ops_path = optarg; break;
        case 'd': a->opt.db = optarg; break;
        case 'e': a->engine_name = optarg; break;
        case 'j': a->opt.journal_mode = optarg; break;
        case 's': a->opt.synchronous = optarg; break;
        case 'p': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v <= 0 || v > 65536)
                usage_error("bad --page-size %s", optarg);
            a->opt.page_size = (int)v;
            break;
        }
        case 'L': a->opt.locking_mode = optarg; break;
        case 'A':
            a->opt.wal_autocheckpoint = int_arg("--wal-autocheckpoint", optarg, 0, INT32_MAX);
            break;
        case 'J':
            a->opt.journal_size_limit = int_arg("--journal-size-limit", optarg, -1, INT32_MAX);
            break;
        case 'P': a->opt.wal_prealloc = int_arg("--wal-prealloc", optarg, 1, 65536); break;
        case 'O':
            if (strcmp(optarg, "stop") != 0 && strcmp(optarg, "retry") != 0)
                usage_error("bad --on-error %s (choose from stop, retry)", optarg);
            a->retry = strcmp(optarg, "retry") == 0;
            break;
        case 'C': a->crash_at = optarg; break;
        case 'R': a->opt.sync_retry = 1; break;
        case 'V': a->opt.cksumvfs = int_arg("--cksumvfs", optarg, 0, 1); break;
        case 'B':
            if (!batchvfs_mode(optarg))
                usage_error("bad --batch-atomic %s (choose from require, noioctl)", optarg);
            a->opt.batch_atomic = optarg;
            break;
        case 'W': a->opt.waldio = int_arg("--waldio", optarg, 1, 65536); break;
        case 'G': a->opt.waldio_fill = int_arg("--waldio-fill", optarg, 0, 1); break;
        case 'Z':
            a->opt.selective = 1;
            a->opt.selective_pages = int_arg("--selective", optarg, -1, INT32_MAX);
            break;
        case 'D':
            if (strcmp(optarg, "shadow") != 0 && strcmp(optarg, "rename-first") != 0)
                usage_error("bad --dash %s (choose from shadow, rename-first)", optarg);
            a->opt.dash = strcmp(optarg, "shadow") == 0 ? DASH_SHADOW : DASH_RENAME_FIRST;
            break;
        case 'm': a->marks_path = optarg; break;
        case 'l': a->latency_path = optarg; break;
        case 'S': a->stats_path = optarg; break;
        case 'E': a->db_env = optarg; break;
        case 'M': a->opt.dhl_mode = optarg; break;
        case 'y': a->opt.sync = optarg; break;
        case 'F': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 1 || v > UINT32_MAX)
                usage_error("bad --from-txn %s", optarg);
            a->from_txn = (uint32_t)v;
            break;
        }
        default: usage_error("unknown or incomplete option %s", argv[optind - 1]);
        }
    }
}

/* parse_args: the command line, checked, and its engine (usage_error on any
** mistake). */
void parse_args(int argc, char **argv, args *a)
{
    *a = (args){.engine_name = "sqlite",
                .opt = {.db = NULL,
                        .journal_mode = "DELETE",
                        .synchronous = "FULL",
                        /* SQLite's defaults (DEFAULT_WAL_AUTOCHECKPOINT, _JOURNAL_SIZE_LIMIT),
                        ** set explicitly so that they do not depend on how SQLite was built */
                        .locking_mode = "NORMAL",
                        .wal_autocheckpoint = 1000,
                        .journal_size_limit = -1,
                        .wal_prealloc = 0,
                        .waldio_fill = 1,
                        .dhl_mode = "tc",
                        .sync = "fsync",
                        .page_size = 4096,
                        .ntables = 0}};
    parse_options(argc, argv, a);
    if (optind != argc)
        usage_error("unexpected argument %s", argv[optind]);
    if (!a->ops_path)
        usage_error("%s", "--ops FILE is required");
    if (a->opt.db && a->db_env)
        usage_error("%s", "give --db or --db-env, not both");
    if (a->db_env) {
        a->opt.db = getenv(a->db_env);
        if (!a->opt.db || !*a->opt.db)
            usage_error("--db-env %s: the variable is not set", a->db_env);
    }
    if (!a->opt.db)
        usage_error("%s", "--db PATH is required");
    a->vt = NULL;
    for (int i = 0; ENGINES[i]; i++)
        if (strcmp(ENGINES[i]->name, a->engine_name) == 0)
            a->vt = ENGINES[i];
    if (!a->vt)
        usage_error("unknown engine %s (choose from sqlite, dhl, xlog)", a->engine_name);
    /* libdhl poisons its handle after a failed commit (fail-stop): a retry
    ** would need a reopen that reads through a page cache the failed
    ** writeback left wrong. */
    if (a->vt == &engine_dhl && (a->retry || a->opt.sync_retry))
        usage_error("%s", "--on-error retry and --sync-retry are for the sqlite engine: dhl is "
                          "fail-stop after an error");
    if (a->opt.cksumvfs && a->vt != &engine_sqlite)
        usage_error("%s", "--cksumvfs is an option of the sqlite engine");
    if (a->opt.batch_atomic &&
        (a->vt != &engine_sqlite || a->opt.cksumvfs || a->opt.dash || a->opt.waldio))
        usage_error("%s", "--batch-atomic is an option of the sqlite engine, without --cksumvfs, "
                          "--dash or --waldio");
    if (a->opt.waldio && (a->vt != &engine_sqlite || a->opt.cksumvfs || a->opt.wal_prealloc))
        usage_error("%s", "--waldio is an option of the sqlite engine, without --cksumvfs or "
                          "--wal-prealloc");
    if (!a->opt.waldio_fill && !a->opt.waldio)
        usage_error("%s", "--waldio-fill is an option of --waldio");
    if (a->opt.dash && a->vt != &engine_sqlite)
        usage_error("%s", "--dash is an option of the sqlite engine");
    if (a->opt.selective && (a->vt != &engine_sqlite || a->opt.cksumvfs || a->opt.waldio ||
                             a->opt.dash || strcasecmp(a->opt.journal_mode, "DELETE") != 0))
        usage_error("%s", "--selective is for the sqlite engine in journal mode DELETE, "
                          "without another VFS");
}
