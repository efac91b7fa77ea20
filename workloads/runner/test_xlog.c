/*
** Unit test of the xLog record format (xlog.h): headers, records, the scan
** that finds the valid run (torn, stale and foreign bytes end it), payload
** operations; and one engine round trip: records in the NVRAM file, a
** reopen that replays them into SQLite, a second reopen that replays
** nothing twice.  Built and run under ASan+UBSan (workloads/build.mk).
*/
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "testutil.h"
#include "xlog.h"

/* The known CRC-32C of "123456789". */
static void test_crc(void) { REQUIRE(xlog_crc32c("123456789", 9) == 0xe3069283U); }

/* Fill NV with a header (BASE) and N records of LEN bytes; returns the end. */
static size_t fill(uint8_t *nv, uint64_t base, int n, uint32_t len)
{
    uint8_t payload[64];
    memset(nv, 0, XLOG_NVRAM_SIZE);
    xlog_header_encode(nv, base);
    size_t at = XLOG_HDR_SIZE;
    for (int i = 0; i < n; i++) {
        memset(payload, 'a' + i, sizeof payload);
        at += xlog_record_encode(nv + at, base + (uint64_t)i, payload, len);
    }
    return at;
}

static void test_scan(void)
{
    uint8_t nv[XLOG_NVRAM_SIZE];
    xlog_record recs[64];
    size_t end;
    uint64_t base;
    size_t at = fill(nv, 7, 3, 40);
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == 3);
    REQUIRE(end == at && base == 7 && recs[2].lsn == 9 && recs[2].len == 40);
    REQUIRE(recs[1].payload[0] == 'b');
    /* MAX bounds the result */
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 2, &end, &base) == 2);
    /* a torn last record (its last 512-byte unit lost) ends the run */
    size_t third = XLOG_HDR_SIZE + 2 * xlog_record_size(40);
    nv[third + 30] ^= 1;
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == 2 && end == third);
    /* a bad header: nothing is valid */
    nv[3] ^= 0x10;
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == -1);
    /* stale records after a reset: lsn below the new base */
    fill(nv, 1, 4, 40);
    xlog_header_encode(nv, 5);
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == 0 && end == XLOG_HDR_SIZE);
    /* a new record over the first stale one, the stale ones after it stay out */
    uint8_t p[8] = {0};
    xlog_record_encode(nv + XLOG_HDR_SIZE, 5, p, 8);
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == 1);
    /* a length past the NVRAM's end */
    fill(nv, 1, 1, 40);
    nv[XLOG_HDR_SIZE + 4] = 0xff;
    nv[XLOG_HDR_SIZE + 5] = 0xff;
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == 0);
    /* an all-zero NVRAM has no header */
    memset(nv, 0, sizeof nv);
    REQUIRE(xlog_scan(nv, sizeof nv, recs, 64, &end, &base) == -1);
    REQUIRE(xlog_scan(nv, 10, recs, 64, &end, &base) == -1);
}

static void test_ops(void)
{
    /* insert t1 k=-5 "hi", delete t2 k=9 */
    uint8_t p[64];
    uint32_t n = 0;
    p[n++] = XLOG_INSERT;
    memcpy(p + n, "\x01\0\0\0", 4);
    n += 4;
    memcpy(p + n, "\xfb\xff\xff\xff\xff\xff\xff\xff", 8);
    n += 8;
    memcpy(p + n, "\x02\0\0\0hi", 6);
    n += 6;
    p[n++] = XLOG_DELETE;
    memcpy(p + n, "\x02\0\0\0\x09\0\0\0\0\0\0\0", 12);
    n += 12;
    uint32_t pos = 0;
    xlog_op op;
    REQUIRE(xlog_op_next(p, n, &pos, &op) == 1);
    REQUIRE(op.op == XLOG_INSERT && op.table == 1 && op.key == -5 && op.len == 2);
    REQUIRE(memcmp(op.value, "hi", 2) == 0);
    REQUIRE(xlog_op_next(p, n, &pos, &op) == 1 && op.op == XLOG_DELETE && op.key == 9);
    REQUIRE(xlog_op_next(p, n, &pos, &op) == 0);
    /* truncated, and an unknown op */
    pos = 0;
    REQUIRE(xlog_op_next(p, 10, &pos, &op) == -1);
    p[0] = 9;
    pos = 0;
    REQUIRE(xlog_op_next(p, n, &pos, &op) == -1);
}

/* Rows in t0 of DB. */
static int rows(const char *db)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    int n = -1;
    REQUIRE(sqlite3_open(db, &h) == SQLITE_OK);
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM t0", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

static void test_engine(void)
{
    char dir[] = "/tmp/test_xlog.XXXXXX", db[128], nv[160], err[600];
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/x.db", dir);
    snprintf(nv, sizeof nv, "%s.nvram", db);
    unsetenv("CRASHLAB_NVRAM");
    engine_options opt = {.db = db, .ntables = 1, .page_size = 4096};
    engine *e;
    REQUIRE(engine_xlog.open(&opt, &e, err, sizeof err) == 0);
    char val[100];
    memset(val, 'v', sizeof val);
    /* 40 one-row transactions: 137-byte records, so the 2 KiB NVRAM is
    ** written back twice on the way */
    for (int k = 1; k <= 40; k++) {
        REQUIRE(engine_xlog.begin(e) == 0);
        REQUIRE(engine_xlog.insert(e, 0, k, val, sizeof val) == 0);
        REQUIRE(engine_xlog.select(e, 0, k) == 0);
        REQUIRE(engine_xlog.commit(e) == 0);
    }
    REQUIRE(engine_xlog.select(e, 0, 1) == 0 && engine_xlog.select(e, 0, 41) != 0);
    REQUIRE(engine_xlog.close(e, NULL, err, sizeof err) == 0);
    int written = rows(db);
    REQUIRE(written > 0 && written < 40); /* the last records are only in the NVRAM */
    REQUIRE(xlog_recover(db, nv, err, sizeof err) == 0);
    REQUIRE(rows(db) == 40);
    REQUIRE(xlog_recover(db, nv, err, sizeof err) == 0); /* idempotent */
    REQUIRE(rows(db) == 40);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    REQUIRE(system(cmd) == 0);
}

int main(void)
{
    test_crc();
    test_scan();
    test_ops();
    test_engine();
    return testutil_done("test_xlog");
}
