/* Unit test of the selective-journaling VFS (selvfs.h) on real files with
** the system SQLite: the choice per transaction, no journal on disk before
** the commit sync, reads of kept pages after a cache spill, a rollback that
** leaves nothing, and a hot journal left by a crash rolled back as stock
** SQLite does.  Exit 0 on success; a failed check prints it and exits 1. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "selvfs.h"
#include "testutil.h"

static char g_db[256], g_journal[300];

/* open_db: a connection through VFS (NULL: the default), DELETE, FULL. */
static sqlite3 *open_db(const char *vfs)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(g_db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) == SQLITE_OK);
    CHECK(exec(db, "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL") == SQLITE_OK);
    return db;
}

static int journal_exists(void) { return access(g_journal, F_OK) == 0; }

/* One-row transactions go through the file system's journal; many-page
** ones through SQLite's; neither shows a journal on disk before its commit. */
static void test_choice(void)
{
    unsigned long fs0, j0, fs, j;
    sqlite3 *db = open_db(SELVFS_NAME);
    CHECK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    selvfs_counts(&fs0, &j0);
    CHECK(fs0 == 0 && j0 == 1); /* a new table: page 1's schema and page 2 */
    CHECK(exec(db, "BEGIN; INSERT INTO t VALUES(1, zeroblob(100))") == SQLITE_OK);
    CHECK(!journal_exists());
    CHECK(exec(db, "COMMIT") == SQLITE_OK);
    selvfs_counts(&fs, &j);
    CHECK(fs == fs0 + 1 && j == j0);
    CHECK(
        exec(db,
             "BEGIN; WITH RECURSIVE s(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM s WHERE i < 41) "
             "INSERT INTO t SELECT i, zeroblob(3000) FROM s") == SQLITE_OK);
    CHECK(!journal_exists());
    CHECK(exec(db, "COMMIT") == SQLITE_OK);
    selvfs_counts(&fs, &j);
    CHECK(fs == fs0 + 1 && j == j0 + 1);
    CHECK(!journal_exists());
    /* a rolled-back transaction leaves no trace and counts as neither */
    CHECK(exec(db, "BEGIN; DELETE FROM t; ROLLBACK") == SQLITE_OK);
    selvfs_counts(&fs, &j);
    CHECK(fs == fs0 + 1 && j == j0 + 1);
    CHECK(scalar(db, "SELECT count(*) FROM t") == 41);
    /* page 1 changed beyond its change counter (the schema) counts */
    CHECK(exec(db, "CREATE TABLE u(x)") == SQLITE_OK);
    selvfs_counts(&fs, &j);
    CHECK(fs == fs0 + 1 && j == j0 + 2);
    CHECK(exec(db, "DROP TABLE u") == SQLITE_OK);
    sqlite3_close(db);
    db = open_db(NULL);
    CHECK(scalar(db, "SELECT count(*) FROM t") == 41);
    CHECK(scalar(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'") ==
          1);
    sqlite3_close(db);
}

/* A transaction larger than the page cache spills pages before its commit:
** they are kept and read back from memory, and the result is whole. */
static void test_spill(void)
{
    sqlite3 *db = open_db(SELVFS_NAME);
    CHECK(exec(db, "PRAGMA cache_size=10") == SQLITE_OK);
    CHECK(exec(db, "BEGIN; UPDATE t SET v = zeroblob(3500); WITH RECURSIVE s(i) AS (SELECT 101 "
                   "UNION ALL SELECT i + 1 FROM s WHERE i < 160) INSERT INTO t SELECT i, "
                   "zeroblob(2000) FROM s; COMMIT") == SQLITE_OK);
    sqlite3_close(db);
    db = open_db(NULL);
    CHECK(scalar(db, "SELECT count(*) FROM t") == 101);
    CHECK(scalar(db, "SELECT sum(length(v)) FROM t") == 41 * 3500 + 60 * 2000);
    CHECK(scalar(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'") ==
          1);
    sqlite3_close(db);
}

/* A crash in the middle of a stock transaction leaves a hot journal and
** changed pages: opening through the shim rolls it back as stock does. */
static void test_hot_journal(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *db = open_db(NULL);
        CHECK(exec(db, "PRAGMA cache_size=5") == SQLITE_OK);
        CHECK(exec(db, "BEGIN; DELETE FROM t WHERE id > 10; UPDATE t SET v = zeroblob(10)") ==
              SQLITE_OK);
        _exit(journal_exists() ? 0 : 3); /* no commit, no close: a crash */
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(journal_exists());
    sqlite3 *db = open_db(SELVFS_NAME);
    CHECK(scalar(db, "SELECT count(*) FROM t") == 101);
    CHECK(scalar(db, "SELECT sum(length(v)) FROM t") == 41 * 3500 + 60 * 2000);
    CHECK(!journal_exists());
    sqlite3_close(db);
}

int main(void)
{
    char dir[] = "/tmp/test_selvfs.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    snprintf(g_db, sizeof g_db, "%s/t.db", dir);
    snprintf(g_journal, sizeof g_journal, "%s-journal", g_db);
    if (selvfs_register(1) != SQLITE_OK) {
        fprintf(stderr, "test_selvfs: cannot register\n");
        return 1;
    }
    test_choice();
    test_spill();
    test_hot_journal();
    unlink(g_journal);
    unlink(g_db);
    rmdir(dir);
    return testutil_done("test_selvfs");
}
