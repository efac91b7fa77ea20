/*
** C unit test of the DASH VFS (dashvfs.h), built and run under AddressSanitizer
** + UBSan by `make ctest`.  The database name is read as a crash leaves it
** (its bytes copied into another file, opened with stock SQLite, as the
** checkers do): after each commit it holds exactly the committed rows; while
** a transaction is open (its pages spilled to disk by a tiny page cache)
** nothing of it; a reopen serves the database name, never the shadow, even
** when a crash left garbage there.
*/
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dashvfs.h"
#include "testutil.h"

/* SQL that inserts N rows of 900 random bytes into t. */
#define INSERT_ROWS(n)                                                                             \
    "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < " #n ") "            \
    "INSERT INTO t(v) SELECT randomblob(900) FROM s"

/* Rows in t of a stock-SQLite open of a copy of PATH (-1: it does not open
** or is not intact). */
static long long rows_seen_by_checker(const char *path, const char *copy)
{
    if (copy_file(path, copy))
        return -1;
    sqlite3 *db;
    long long v = -1;
    if (sqlite3_open_v2(copy, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        scalar(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'") == 1)
        v = scalar(db, "SELECT count(*) FROM t");
    sqlite3_close(db);
    return v;
}

static sqlite3 *open_dash(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, DASHVFS_NAME) !=
            SQLITE_OK ||
        exec(db, "PRAGMA locking_mode=EXCLUSIVE") || exec(db, "PRAGMA journal_mode=OFF") ||
        exec(db, "PRAGMA synchronous=FULL") || exec(db, "PRAGMA cache_size=2")) {
        fprintf(stderr, "open %s: %s\n", path, db ? sqlite3_errmsg(db) : "?");
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static void test_commits_and_reopen(const char *dir)
{
    char path[512], shadow[512], copy[512];
    snprintf(path, sizeof path, "%s/d.db", dir);
    snprintf(shadow, sizeof shadow, "%s/d.db%s", dir, DASHVFS_SUFFIX);
    snprintf(copy, sizeof copy, "%s/copy.db", dir);
    sqlite3 *db = open_dash(path);
    CHECK(db != NULL);
    if (!db)
        return;
    CHECK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    for (int k = 1; k <= 5; k++) {
        CHECK(exec(db, INSERT_ROWS(20)) == SQLITE_OK);
        CHECK(rows_seen_by_checker(path, copy) == 20LL * k);
    }
    /* an open transaction larger than the page cache: spilled, to the shadow only */
    long before_len = 0, during_len = 0;
    unsigned char *before = read_all(path, &before_len);
    CHECK(exec(db, "BEGIN") == SQLITE_OK);
    CHECK(exec(db, INSERT_ROWS(400)) == SQLITE_OK);
    CHECK(exec(db, "UPDATE t SET v = randomblob(800) WHERE id % 3 = 0") == SQLITE_OK);
    CHECK(rows_seen_by_checker(path, copy) == 100);
    unsigned char *during = read_all(path, &during_len); /* the committed file is never written */
    CHECK(before && during && before_len == during_len &&
          memcmp(before, during, (size_t)before_len) == 0);
    free(before);
    free(during);
    CHECK(exec(db, "COMMIT") == SQLITE_OK);
    CHECK(rows_seen_by_checker(path, copy) == 500);
    CHECK(exec(db, "DELETE FROM t WHERE id > 30") == SQLITE_OK);
    CHECK(rows_seen_by_checker(path, copy) == 30);
    sqlite3_close(db);

    /* a crash left garbage in the shadow: the reopen never serves it */
    FILE *f = fopen(shadow, "r+b");
    CHECK(f != NULL);
    if (f) {
        char junk[4096];
        memset(junk, 0xa5, sizeof junk);
        for (int i = 0; i < 8; i++)
            fwrite(junk, 1, sizeof junk, f);
        fclose(f);
    }
    db = open_dash(path);
    CHECK(db != NULL);
    if (!db)
        return;
    CHECK(scalar(db, "SELECT count(*) FROM t") == 30);
    CHECK(exec(db, "INSERT INTO t(v) VALUES (x'01')") == SQLITE_OK);
    CHECK(scalar(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'") ==
          1);
    CHECK(rows_seen_by_checker(path, copy) == 31);
    sqlite3_close(db);
}

int main(void)
{
    char dir[] = "/tmp/test_dashvfs.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK(dashvfs_register(DASH_SHADOW) == SQLITE_OK);
    CHECK(dashvfs_register(DASH_SHADOW) == SQLITE_OK);
    CHECK(dashvfs_register(DASH_RENAME_FIRST) == SQLITE_MISUSE);
    test_commits_and_reopen(dir);
    const char *names[] = {"d.db", "d.db" DASHVFS_SUFFIX, "copy.db"};
    char p[512];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return testutil_done("test_dashvfs");
}
