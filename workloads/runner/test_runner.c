/*
** C unit test of the runner's op stream reader and file mark channel (built
** and run under AddressSanitizer + UBSan by `make ctest`).  The end-to-end
** behaviour (SQLite engine, marks in order, digests) is tested from pytest.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "marks.h"
#include "opstream.h"
#include "testutil.h"

typedef struct buf {
    uint8_t b[512];
    size_t n;
} buf;

static void put8(buf *b, unsigned v) { b->b[b->n++] = (uint8_t)v; }
static void put32(buf *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        put8(b, (v >> (8 * i)) & 0xff);
}
static void put64(buf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        put8(b, (v >> (8 * i)) & 0xff);
}

/* A valid stream: 2 tables, set-up txn 0 inserting one row, setup-done,
** txn 1 (update + select), txn 2 (delete), END with its index. */
static void valid_stream(buf *b)
{
    b->n = 0;
    memcpy(b->b, "CLOPSTRM", 8);
    b->n = 8;
    put32(b, 1);
    put32(b, 2);
    put32(b, 2);
    put32(b, 0);
    put8(b, OPS_BEGIN);
    put32(b, 0);
    put8(b, OPS_INSERT);
    put32(b, 1);
    put64(b, 7);
    put32(b, 3);
    put8(b, 'a');
    put8(b, 'b');
    put8(b, 'c');
    put8(b, OPS_COMMIT);
    put32(b, 0);
    put8(b, OPS_MARK);
    put8(b, 10);
    memcpy(b->b + b->n, "setup-done", 10);
    b->n += 10;
    size_t t1 = b->n;
    put8(b, OPS_BEGIN);
    put32(b, 1);
    put8(b, OPS_UPDATE);
    put32(b, 1);
    put64(b, 7);
    put32(b, 0);
    put8(b, OPS_SELECT);
    put32(b, 1);
    put64(b, 7);
    put8(b, OPS_COMMIT);
    put32(b, 1);
    size_t t2 = b->n;
    put8(b, OPS_BEGIN);
    put32(b, 2);
    put8(b, OPS_DELETE);
    put32(b, 1);
    put64(b, (uint64_t)-5);
    put8(b, OPS_COMMIT);
    put32(b, 2);
    put8(b, OPS_END);
    put32(b, 2);
    put64(b, t1);
    put64(b, t2);
}

/* Read the whole stream; returns the number of records or -1 on error. */
static int count(const buf *b, char *err)
{
    ops_stream s;
    ops_record r;
    int n = 0, rc;
    if (ops_open_buffer(&s, b->b, b->n) != 0) {
        strcpy(err, s.err);
        return -1;
    }
    while ((rc = ops_next(&s, &r)) == 1)
        n++;
    strcpy(err, s.err);
    return rc < 0 ? -1 : n;
}

static void test_stream(void)
{
    buf b;
    char err[256];
    valid_stream(&b);
    CHECK(count(&b, err) == 12);

    ops_stream s;
    ops_record r;
    CHECK(ops_open_buffer(&s, b.b, b.n) == 0);
    CHECK(s.ntables == 2 && s.ntxns == 2);
    CHECK(ops_next(&s, &r) == 1 && r.type == OPS_BEGIN && r.txn == 0);
    CHECK(ops_next(&s, &r) == 1 && r.type == OPS_INSERT && r.table == 1 && r.key == 7 &&
          r.len == 3 && memcmp(r.value, "abc", 3) == 0);
    CHECK(ops_next(&s, &r) == 1 && r.type == OPS_COMMIT);
    CHECK(ops_next(&s, &r) == 1 && r.type == OPS_MARK && strcmp(r.label, "setup-done") == 0);

    /* Every proper prefix is an error (truncation never passes silently). */
    for (size_t n = 0; n < b.n; n++) {
        buf p = b;
        p.n = n;
        CHECK(count(&p, err) == -1);
    }
    /* Trailing garbage after END. */
    buf g = b;
    g.b[g.n++] = 0;
    CHECK(count(&g, err) == -1);

    buf m = b; /* bad magic */
    m.b[0] = 'X';
    CHECK(count(&m, err) == -1 && strstr(err, "magic"));
    m = b; /* table out of range: the INSERT's table (offset 24 + 5 + 1) */
    m.b[30] = 2;
    CHECK(count(&m, err) == -1 && strstr(err, "table 2 of 2"));
    m = b; /* txn 1 renumbered 3 (its BEGIN is at 24 + 5 + 20 + 5 + 12 = 66) */
    m.b[67] = 3;
    CHECK(count(&m, err) == -1 && strstr(err, "out of order"));
    m = b; /* END index entry points elsewhere */
    m.b[m.n - 8] ^= 1;
    CHECK(count(&m, err) == -1 && strstr(err, "END index"));
    m = b; /* unknown record type */
    m.b[24] = 99;
    CHECK(count(&m, err) == -1 && strstr(err, "unknown record type"));
}

static void test_marks(void)
{
    char path[] = "/tmp/crashlab-marks-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[256];
    marks *m;
    unsetenv("CRASHLAB_MARK_DM");
    setenv("CRASHLAB_MARK", path, 1);
    CHECK(marks_open(&m, NULL, err, sizeof err) == 0);
    CHECK(strcmp(marks_channel(m), "file") == 0);
    CHECK(marks_emit(m, "txn-begin:1", err, sizeof err) == 0);
    CHECK(marks_emit(m, "txn-ack:1", err, sizeof err) == 0);
    CHECK(marks_emit(m, "has space", err, sizeof err) == -1);
    CHECK(marks_emit(m, "", err, sizeof err) == -1);
    marks_close(m);
    FILE *f = fopen(path, "r");
    char text[64] = "";
    CHECK(f && fread(text, 1, sizeof text - 1, f) > 0);
    if (f)
        fclose(f);
    CHECK(strcmp(text, "txn-begin:1\ntxn-ack:1\n") == 0);
    unlink(path);

    /* The recorder's control file is never created by the runner. */
    CHECK(marks_open(&m, NULL, err, sizeof err) == -1 && strstr(err, path));
    setenv("CRASHLAB_MARK_DM", "lw", 1);
    CHECK(marks_open(&m, NULL, err, sizeof err) == -1 && strstr(err, "both"));
    unsetenv("CRASHLAB_MARK");
    unsetenv("CRASHLAB_MARK_DM");
    CHECK(marks_open(&m, NULL, err, sizeof err) == 0 && strcmp(marks_channel(m), "none") == 0);
    CHECK(marks_emit(m, "setup-done", err, sizeof err) == 0);
    marks_close(m);
}

int main(void)
{
    test_stream();
    test_marks();
    return testutil_done("test_runner");
}
