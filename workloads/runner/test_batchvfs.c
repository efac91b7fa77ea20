/*
** C unit test of the batch-atomic-write watch (batchvfs.h), built against
** the system SQLite (no SQLITE_ENABLE_BATCH_ATOMIC_WRITE) and run under
** AddressSanitizer + UBSan by `make ctest`.  What it holds: a commit that
** wrote through the rollback journal, outside any atomic batch, fails
** batchvfs_check (the guard that keeps a silently non-atomic build from
** passing for MAW); a read-only transaction passes; the batch file controls
** are counted, reach the VFS below in REQUIRE mode (the unix VFS of this
** build answers SQLITE_NOTFOUND) and are answered SQLITE_OK without it in
** NOIOCTL mode; writes between a successful BEGIN and COMMIT count as
** batched.
*/
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batchvfs.h"
#include "countvfs.h"
#include "testutil.h"

/* A database at PATH with one table and one row, committed. */
static sqlite3 *open_db(const char *path)
{
    sqlite3 *db = NULL;
    unlink(path);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(exec(db, "PRAGMA journal_mode=DELETE") == SQLITE_OK);
    CHECK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    return db;
}

static void test_journal_commit_fails_the_check(sqlite3 *db)
{
    char err[512] = "";
    batchvfs_counts before;
    batchvfs_get(&before);
    CHECK(exec(db, "BEGIN; INSERT INTO t(v) VALUES(x'00112233'); COMMIT") == SQLITE_OK);
    CHECK(batchvfs_check(&before, err, sizeof err) == -1);
    CHECK(strstr(err, "outside an atomic batch") != NULL);
    batchvfs_counts now;
    batchvfs_get(&now);
    CHECK(now.journal > before.journal && now.db_unbatched > before.db_unbatched);
    CHECK(now.begun == before.begun); /* no batch support: SQLite never began one */

    batchvfs_get(&before); /* a read-only transaction writes nothing */
    CHECK(exec(db, "BEGIN; SELECT count(*) FROM t; COMMIT") == SQLITE_OK);
    CHECK(batchvfs_check(&before, err, sizeof err) == 0);
}

/* The batch file controls, by hand, in the current mode: EXPECT_RC is what
** BEGIN returns; with a batch begun, a write through SQLite's own page
** writer is not possible here, so the counts of the controls are checked. */
static void test_file_controls(sqlite3 *db, int expect_rc)
{
    batchvfs_counts before, now;
    batchvfs_get(&before);
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_BEGIN_ATOMIC_WRITE, NULL);
    CHECK(rc == expect_rc);
    if (rc == SQLITE_OK) {
        sqlite3_file *fd = NULL;
        CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &fd) == SQLITE_OK);
        char page[512];
        memset(page, 0, sizeof page);
        CHECK(fd->pMethods->xRead(fd, page, sizeof page, 0) == SQLITE_OK);
        CHECK(fd->pMethods->xWrite(fd, page, sizeof page, 0) == SQLITE_OK); /* same bytes */
        CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_COMMIT_ATOMIC_WRITE, NULL) ==
              SQLITE_OK);
    }
    batchvfs_get(&now);
    if (rc == SQLITE_OK) {
        CHECK(now.begun == before.begun + 1 && now.committed == before.committed + 1);
        CHECK(now.db_batched == before.db_batched + 1 && now.db_unbatched == before.db_unbatched);
        char err[512];
        CHECK(batchvfs_check(&before, err, sizeof err) == 0);
    } else {
        CHECK(now.begin_failed == before.begin_failed + 1 && now.begun == before.begun);
    }
}

int main(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/crashlab-test-batchvfs-%ld.db", (long)getpid());
    CHECK(batchvfs_mode("require") == BATCHVFS_REQUIRE);
    CHECK(batchvfs_mode("noioctl") == BATCHVFS_NOIOCTL);
    CHECK(batchvfs_mode("yes") == 0);
    CHECK(countvfs_register(0) == SQLITE_OK);
    CHECK(batchvfs_register(BATCHVFS_REQUIRE) == SQLITE_OK);
    sqlite3 *db = open_db(path);
    test_journal_commit_fails_the_check(db);
    test_file_controls(db, SQLITE_NOTFOUND); /* reaches the unix VFS: no F2FS here */
    CHECK(batchvfs_register(BATCHVFS_NOIOCTL) == SQLITE_OK); /* the mode only changes */
    test_file_controls(db, SQLITE_OK);                       /* answered by the shim */
    char json[512];
    CHECK(batchvfs_json(json, sizeof json) > 0 && strstr(json, "\"mode\": \"noioctl\""));
    sqlite3_close(db);
    unlink(path);
    char journal[80];
    snprintf(journal, sizeof journal, "%s-journal", path);
    unlink(journal);
    return testutil_done("test_batchvfs");
}
