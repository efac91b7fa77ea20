/*
** cmdline.h — crashlab-runner's command line (main.c's top comment: what
** the options do), and its way out on a fatal error.
*/
#ifndef CRASHLAB_CMDLINE_H
#define CRASHLAB_CMDLINE_H

#include <stdint.h>

#include "engine.h"

/* The command line. */
typedef struct args {
    const char *ops_path, *marks_path, *latency_path, *stats_path;
    const char *engine_name;
    const char *db_env;
    const char *crash_at; /* --crash-at: a mark name, or NULL */
    int retry;            /* --on-error retry */
    uint32_t from_txn;    /* 0: from the start */
    engine_options opt;
    const engine_vtab *vt; /* the engine named */
} args;

/* parse_args: the command line, checked, and its engine (a usage message
** and exit 2 on any mistake). */
void parse_args(int argc, char **argv, args *a);

/* die: "crashlab-runner: " and the message on stderr, then exit(code). */
__attribute__((noreturn)) void die(int code, const char *fmt, ...);

#endif
