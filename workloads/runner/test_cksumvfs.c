/*
** C unit test of crashlab's checksum VFS (cksumvfs.h), built and run under
** AddressSanitizer + UBSan by `make ctest`: the checksum's known answer
** (computed independently from the format's definition), a WAL database
** whose committed frames survive a crash (the files copied while the
** connection is open, as a power cut leaves them), and a flipped bit that
** reads as SQLITE_IOERR_DATA, never as data.
*/
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cksumvfs.h"
#include "testutil.h"

static void test_known_answer(void)
{
    unsigned char page[4088], out[8];
    for (size_t i = 0; i < sizeof page; i++)
        page[i] = (unsigned char)((i * 31 + 7) & 0xff);
    cksumvfs_compute(page, sizeof page, out);
    static const unsigned char want[8] = {0x37, 0x33, 0x4b, 0x1b, 0xa2, 0xc3, 0x92, 0x9c};
    CHECK(memcmp(out, want, 8) == 0);
}

/* A WAL database with checksums: five transactions committed, no
** checkpoint; the files copied mid-run; the copy recovers all five. */
static void test_wal_survives_a_crash(const char *dir)
{
    char a[512], b[512], aw[520], bw[520];
    snprintf(a, sizeof a, "%s/a.db", dir);
    snprintf(b, sizeof b, "%s/b.db", dir);
    snprintf(aw, sizeof aw, "%s-wal", a);
    snprintf(bw, sizeof bw, "%s-wal", b);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(a, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, CKSUMVFS_NAME) ==
          SQLITE_OK);
    int reserve = CKSUMVFS_RESERVE, rc;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    CHECK(exec(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;"
                   "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)") == SQLITE_OK);
    for (int i = 0; i < 5; i++)
        CHECK(exec(db, "INSERT INTO t(v) VALUES(randomblob(300))") == SQLITE_OK);
    CHECK(copy_file(a, b) == 0);
    CHECK(copy_file(aw, bw) == 0);
    sqlite3_close(db);
    CHECK(sqlite3_open_v2(b, &db, SQLITE_OPEN_READWRITE, CKSUMVFS_NAME) == SQLITE_OK);
    CHECK(scalar_rc(db, "SELECT count(*) FROM t", &rc) == 5 && rc == SQLITE_OK);
    sqlite3_close(db);
}

/* One flipped bit of a table page: a read error through the VFS. */
static void test_flipped_bit_is_an_error(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/c.db", dir);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, CKSUMVFS_NAME) ==
          SQLITE_OK);
    int reserve = CKSUMVFS_RESERVE, rc;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    CHECK(exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
                   "INSERT INTO t(v) VALUES(zeroblob(100))") == SQLITE_OK);
    sqlite3_close(db);
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (f) {
        unsigned char c;
        CHECK(fseek(f, 4096 + 4000, SEEK_SET) == 0 && fread(&c, 1, 1, f) == 1);
        c ^= 0x10;
        CHECK(fseek(f, 4096 + 4000, SEEK_SET) == 0 && fwrite(&c, 1, 1, f) == 1);
        fclose(f);
    }
    CHECK(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, CKSUMVFS_NAME) == SQLITE_OK);
    sqlite3_extended_result_codes(db, 1);
    scalar_rc(db, "SELECT count(*) FROM t", &rc);
    CHECK(rc == SQLITE_IOERR_DATA);
    sqlite3_close(db);
}

int main(void)
{
    char dir[] = "/tmp/crashlab-cksumvfs-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK(cksumvfs_register() == SQLITE_OK);
    test_known_answer();
    test_wal_survives_a_crash(dir);
    test_flipped_bit_is_an_error(dir);
    const char *names[] = {"a.db", "a.db-wal", "a.db-shm", "b.db", "b.db-wal", "b.db-shm", "c.db"};
    char p[600];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return testutil_done("test_cksumvfs");
}
