/*
** C unit test of crashlab's WALDIO VFS (waldiovfs.h), built and run under
** AddressSanitizer + UBSan by `make ctest` with a folder on a real file
** system as its argument (O_DIRECT).  Five transactions are committed
** through the VFS with no checkpoint and the files copied while the
** connection is open, as a power cut leaves them.  Then: the WAL is
** 4 KiB blocks, block 0 the header and block k + 1 frame k with its frame
** header in the page's last 24 bytes, pre-allocated; each transaction was
** one aligned group write; the copy opened through the VFS recovers all
** five (SQLite's own WAL recovery) and without it does not; a torn or a
** missing commit frame is not committed.
*/
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "waldiovfs.h"
#include "walsum.h"

enum { BLK = WALDIOVFS_BLOCK, TAIL = BLK - 24, PREALLOC = 16, TXNS = 5 };

static void spit(const char *path, const unsigned char *b, long n)
{
    FILE *out = fopen(path, "wb");
    CHECK(out && fwrite(b, 1, (size_t)n, out) == (size_t)n);
    if (out)
        fclose(out);
}

/* The number of live frames in the WAL image W (N bytes): blocks from 1 on
** whose embedded frame header carries the header's salts. */
static int live_frames(const unsigned char *w, long n)
{
    int k = 0;
    while ((long)(k + 2) * BLK <= n && memcmp(w + (long)(k + 1) * BLK + TAIL + 8, w + 16, 8) == 0)
        k++;
    return k;
}

/* Rows of t in the database PATH opened through VFS (NULL: SQLite's
** default), -1 when it does not open or has no table t. */
static long long rows(const char *path, const char *vfs)
{
    sqlite3 *db;
    long long v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, vfs) == SQLITE_OK)
        v = scalar(db, "SELECT count(*) FROM t");
    sqlite3_close(db);
    return v;
}

/* A copy of the crash image (DB, WAL) at DIR/NAME, its WAL given by W. */
static void crash_copy(const char *dir, const char *name, const unsigned char *db, long ndb,
                       const unsigned char *w, long nw, char *path, size_t len)
{
    char wal[600];
    snprintf(path, len, "%s/%s", dir, name);
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    spit(path, db, ndb);
    spit(wal, w, nw);
}

/* long: one WALDIO database written, its crash images read back: the steps share it */
static void test_waldio(const char *dir)
{
    char path[512], wal[520], copy[512];
    snprintf(path, sizeof path, "%s/test-waldio.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(path);
    unlink(wal);
    CHECK(waldiovfs_register(PREALLOC) == SQLITE_OK);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, WALDIOVFS_NAME) ==
          SQLITE_OK);
    int reserve = WALDIOVFS_RESERVE;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    CHECK(exec(db, "PRAGMA page_size=4096") == SQLITE_OK);
    CHECK(exec(db, "PRAGMA journal_mode=WAL") == SQLITE_OK);
    CHECK(exec(db, "PRAGMA synchronous=FULL") == SQLITE_OK);
    CHECK(exec(db, "PRAGMA wal_autocheckpoint=0") == SQLITE_OK);
    CHECK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    waldiovfs_stats before, after;
    waldiovfs_get_stats(&before);
    for (int i = 1; i <= TXNS; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, randomblob(100))", i);
        CHECK(exec(db, sql) == SQLITE_OK);
    }
    waldiovfs_get_stats(&after);
    /* one aligned write and one sync per transaction */
    CHECK(after.group_writes - before.group_writes == TXNS);
    CHECK(after.blocks_written - before.blocks_written == TXNS); /* one frame each here */
    CHECK(after.syncs - before.syncs == TXNS);
    CHECK(after.direct_opens == 1 && after.buffered_opens == 0);
    CHECK(after.prealloc_syncs == 1);
    reserve = -1; /* only asks */
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    CHECK(reserve == WALDIOVFS_RESERVE);

    long ndb = 0, nw = 0;
    unsigned char *dbimg = read_all(path, &ndb), *w = read_all(wal, &nw);
    CHECK(dbimg && w);
    if (!dbimg || !w)
        goto out;
    /* the layout: whole blocks, pre-allocated; the header in block 0 */
    CHECK(nw % BLK == 0 && nw >= (long)(1 + PREALLOC) * BLK);
    CHECK((be32(w) & ~1u) == 0x377f0682u && be32(w + 8) == BLK);
    for (int i = 32; i < BLK; i++)
        CHECK(w[i] == 0);
    int frames = live_frames(w, nw);
    CHECK(frames >= TXNS + 1); /* the table's creation, then one frame per insert */
    for (int k = 0; k < frames; k++) {
        const unsigned char *fh = w + (long)(k + 1) * BLK + TAIL;
        CHECK(be32(fh) >= 1); /* a page number */
    }
    const unsigned char *last = w + (long)frames * BLK + TAIL;
    CHECK(be32(last + 4) != 0); /* the last frame is a commit frame */

    /* the crash image through the VFS: SQLite's recovery finds every commit */
    CHECK(waldiovfs_register(0) == SQLITE_OK); /* as the checkers open it */
    crash_copy(dir, "test-waldio-copy.db", dbimg, ndb, w, nw, copy, sizeof copy);
    CHECK(rows(copy, WALDIOVFS_NAME) == TXNS);
    /* without the VFS SQLite reads its own layout: no frame is found */
    crash_copy(dir, "test-waldio-copy.db", dbimg, ndb, w, nw, copy, sizeof copy);
    CHECK(rows(copy, NULL) != TXNS);

    /* torn commit frame: its first sector never reached the disk */
    unsigned char *torn = malloc((size_t)nw);
    CHECK(torn != NULL);
    if (torn) {
        memcpy(torn, w, (size_t)nw);
        memset(torn + (long)frames * BLK, 0, 512);
        crash_copy(dir, "test-waldio-copy.db", dbimg, ndb, torn, nw, copy, sizeof copy);
        CHECK(rows(copy, WALDIOVFS_NAME) == TXNS - 1);
        /* missing commit frame: its block is still the pre-allocated zeros */
        memset(torn + (long)frames * BLK, 0, BLK);
        crash_copy(dir, "test-waldio-copy.db", dbimg, ndb, torn, nw, copy, sizeof copy);
        CHECK(rows(copy, WALDIOVFS_NAME) == TXNS - 1);
        free(torn);
    }

    /* a transaction larger than the pre-allocated WAL: the file grows by
    ** PREALLOC blocks of synced zeros first, and the copy still recovers */
    CHECK(waldiovfs_register(PREALLOC) == SQLITE_OK);
    CHECK(exec(db, "BEGIN") == SQLITE_OK);
    for (int i = 0; i < 80; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, randomblob(2000))", 100 + i);
        CHECK(exec(db, sql) == SQLITE_OK);
    }
    CHECK(exec(db, "COMMIT") == SQLITE_OK);
    waldiovfs_get_stats(&after);
    CHECK(after.prealloc_syncs == 2);
    free(w);
    free(dbimg);
    dbimg = read_all(path, &ndb), w = read_all(wal, &nw);
    CHECK(dbimg && w && nw % BLK == 0 && live_frames(w, nw) > PREALLOC);
    CHECK(waldiovfs_register(0) == SQLITE_OK);
    if (dbimg && w) {
        crash_copy(dir, "test-waldio-copy.db", dbimg, ndb, w, nw, copy, sizeof copy);
        CHECK(rows(copy, WALDIOVFS_NAME) == TXNS + 80);
    }
    char cw[600];
    snprintf(cw, sizeof cw, "%s-wal", copy);
    unlink(copy);
    unlink(cw);
out:
    free(dbimg);
    free(w);
    CHECK(sqlite3_close(db) == SQLITE_OK); /* checkpoints and deletes the WAL */
    CHECK(access(wal, F_OK) != 0);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_waldiovfs DIR (a folder on a file system with O_DIRECT)\n");
        return 2;
    }
    test_waldio(argv[1]);
    return testutil_done("test_waldiovfs");
}
