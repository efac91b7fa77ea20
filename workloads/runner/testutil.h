/*
** What the runner's C unit tests (test_*.c) share: CHECK, which counts a
** failed check and goes on, and REQUIRE, which ends the test at once;
** testutil_done(), the exit status and the one line a test ends with;
** file helpers (a crash image is a file's bytes copied or rewritten); and,
** in a test that includes <sqlite3.h> first, exec() and scalar().
** Header-only: each test is one translation unit that includes it once.
*/
#ifndef CRASHLAB_TESTUTIL_H
#define CRASHLAB_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The end of test NAME: "NAME: ok" and 0, or the failed checks and 1. */
static inline int testutil_done(const char *name)
{
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* Copy file FROM to TO (a crash image of one file); 0 on success. */
static inline int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int bad = !in || !out;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, out) != n;
    if (in)
        fclose(in);
    if (out)
        bad |= fclose(out) != 0;
    return bad;
}

/* The bytes of file PATH (malloc'ed, *LEN set), or NULL. */
static inline unsigned char *read_all(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*len + 1)) && fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    return buf;
}

#ifdef SQLITE_VERSION /* <sqlite3.h> was included first */

/* Run SQL on DB; its result code (the error logged). */
static inline int exec(sqlite3 *db, const char *sql)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
    return rc;
}

/* The first column of the first row of SQL as an integer (-1 on error);
** *RC: SQLITE_OK, or the error of the prepare or of the step. */
static inline long long scalar_rc(sqlite3 *db, const char *sql, int *rc)
{
    sqlite3_stmt *st;
    long long v = -1;
    *rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (*rc == SQLITE_OK) {
        *rc = sqlite3_step(st);
        if (*rc == SQLITE_ROW) {
            v = sqlite3_column_int64(st, 0);
            *rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
    }
    return v;
}

/* scalar_rc() without the result code. */
static inline long long scalar(sqlite3 *db, const char *sql)
{
    int rc;
    return scalar_rc(db, sql, &rc);
}

#endif
#endif
