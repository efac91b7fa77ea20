/*
** test_engine.c — libdhl against a dict model in every mode (random
** inserts/updates/deletes/splits, reopen, structure check, digest), the
** measured I/O facts (syncs and pages per transaction), page utilisation,
** and bad input (non-DHL file, wrong page size, truncation, bad offsets).
*/
#include "memio.h"

#include <fcntl.h>
#include <unistd.h>

static const enum dhl_mode MODES[] = {DHL_MODE_TC,       DHL_MODE_CC,    DHL_MODE_TC_OPT,
                                      DHL_MODE_CC_OPT,   DHL_MODE_NOLOG, DHL_MODE_TC_THESIS,
                                      DHL_MODE_CC_THESIS};
#define NMODES ((int)(sizeof MODES / sizeof MODES[0]))

static dhl *open_md(struct memdisk *d, enum dhl_mode mode, uint32_t ps, uint32_t ntrees,
                    uint32_t flags)
{
    struct dhl_io io = md_io(d);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = mode;
    o.page_size = ps;
    o.ntrees = ntrees;
    o.flags = flags;
    o.io = &io;
    dhl *db = NULL;
    CHECK_RC(db, dhl_open("mem", &o, &db));
    return db;
}

struct cmp_ctx {
    struct model *m;
    uint32_t t;
    size_t seen;
    int64_t last;
};

static int cmp_cb(void *arg, int64_t k, const void *v, size_t n)
{
    struct cmp_ctx *c = arg;
    CHECK(c->seen == 0 || k > c->last);
    c->last = k;
    struct mrec *r = model_find(c->m, c->t, k);
    CHECK(r && r->len == n && memcmp(r->val, v, n) == 0);
    c->seen++;
    return 0;
}

static void same_as_model(dhl *db, struct model *m, uint32_t ntrees)
{
    for (uint32_t t = 0; t < ntrees; t++) {
        struct cmp_ctx c = {m, t, 0, 0};
        CHECK_RC(db, dhl_scan(db, t, INT64_MIN, INT64_MAX, cmp_cb, &c));
        CHECK(c.seen == m->n[t]);
    }
    char a[33], b[33];
    CHECK_RC(db, dhl_digest(db, a));
    model_digest(m, b);
    CHECK(strcmp(a, b) == 0);
}

/* random_ops: a random workload of multi-operation transactions against
** the model, with occasional rollbacks and reopens. */
static void random_ops(enum dhl_mode mode, uint32_t ps, int ntx)
{
    struct memdisk d = {0};
    const uint32_t NT = 3;
    dhl *db = open_md(&d, mode, ps, NT, DHL_OPEN_CREATE);
    struct model m = {0};
    uint8_t val[1100];
    size_t maxv = DHL_MAX_VALUE(ps) < 300 ? DHL_MAX_VALUE(ps) : 300;
    for (int tx = 0; tx < ntx; tx++) {
        struct model before;
        model_copy(&before, &m);
        CHECK_RC(db, dhl_begin(db));
        int nops = 1 + (int)rnd_below(8);
        for (int i = 0; i < nops; i++) {
            uint32_t t = (uint32_t)rnd_below(NT);
            int64_t k = (int64_t)rnd_below(400) - 100;
            if (rnd_below(10) == 0)
                k = (int64_t)(rnd() >> 1) * (rnd_below(2) ? 1 : -1);
            size_t len = rnd_below(maxv + 1);
            for (size_t j = 0; j < len; j++)
                val[j] = (uint8_t)rnd();
            struct mrec *r = model_find(&m, t, k);
            int op = (int)rnd_below(3);
            if (op == 0) {
                int rc = dhl_insert(db, t, k, val, len);
                CHECK(rc == (r ? DHL_EEXISTS : DHL_OK));
                if (!r)
                    model_put(&m, t, k, val, len);
            } else if (op == 1) {
                int rc = dhl_update(db, t, k, val, len);
                CHECK(rc == (r ? DHL_OK : DHL_ENOTFOUND));
                if (r)
                    model_put(&m, t, k, val, len);
            } else {
                int rc = dhl_delete(db, t, k);
                CHECK(rc == (r ? DHL_OK : DHL_ENOTFOUND));
                if (r)
                    model_del(&m, t, k);
            }
        }
        if (rnd_below(10) == 0) {
            CHECK_RC(db, dhl_rollback(db));
            model_free(&m);
            m = before;
        } else {
            CHECK_RC(db, dhl_commit(db));
            model_free(&before);
        }
        if (tx % 50 == 49) {
            CHECK_RC(db, dhl_check(db));
            same_as_model(db, &m, NT);
            dhl_close(db);
            db = open_md(&d, mode, ps, NT, 0);
            struct dhl_recovery r;
            dhl_recovery_info(db, &r);
            CHECK(r.invalid_headers == 0 && !r.rolled_back);
        }
    }
    CHECK_RC(db, dhl_check(db));
    same_as_model(db, &m, NT);
    dhl_close(db);
    model_free(&m);
    md_free(&d);
}

/* one_insert: syncs and pages of a one-record insert into a one-leaf tree. */
static void one_insert(enum dhl_mode mode, uint64_t *syncs, uint64_t *pages)
{
    struct memdisk d = {0};
    dhl *db = open_md(&d, mode, 4096, 1, DHL_OPEN_CREATE);
    uint8_t v[100] = {1};
    CHECK_RC(db, dhl_insert(db, 0, 1, v, sizeof v)); /* creates the root leaf */
    dhl_reset_counters(db);
    CHECK_RC(db, dhl_insert(db, 0, 2, v, sizeof v));
    struct dhl_counters c;
    dhl_counters(db, &c);
    *syncs = c.syncs;
    *pages = c.pages_written;
    dhl_close(db);
    md_free(&d);
}

static void io_facts(void)
{
    uint64_t s, p;
    const uint64_t want_s[] = {2, 1, 1, 1, 1, 2, 1}, want_p[] = {2, 2, 1, 1, 1, 2, 2};
    for (int i = 0; i < NMODES; i++) {
        one_insert(MODES[i], &s, &p);
        printf("  one-record insert, %-6s: %llu syncs, %llu pages written\n",
               dhl_mode_name(MODES[i]), (unsigned long long)s, (unsigned long long)p);
        CHECK(s == want_s[i] && p == want_p[i]);
    }
    /* A two-page transaction: TC_OPT now needs its ordering sync. */
    struct memdisk d = {0};
    dhl *db = open_md(&d, DHL_MODE_TC_OPT, 4096, 2, DHL_OPEN_CREATE);
    uint8_t v[100] = {2};
    CHECK_RC(db, dhl_insert(db, 0, 1, v, sizeof v));
    CHECK_RC(db, dhl_insert(db, 1, 1, v, sizeof v));
    dhl_reset_counters(db);
    CHECK_RC(db, dhl_begin(db));
    CHECK_RC(db, dhl_insert(db, 0, 2, v, sizeof v));
    CHECK_RC(db, dhl_insert(db, 1, 2, v, sizeof v));
    CHECK_RC(db, dhl_commit(db));
    struct dhl_counters c;
    dhl_counters(db, &c);
    CHECK(c.syncs == 2 && c.pages_written == 2);
    dhl_close(db);
    md_free(&d);
}

/* records_per_page: fixed-size records (8-byte key + rsize-8 value bytes),
** ascending keys, one insert per transaction: the fullest leaf. */
static uint32_t records_per_page(uint32_t rsize)
{
    struct memdisk d = {0};
    dhl *db = open_md(&d, DHL_MODE_CC, 4096, 1, DHL_OPEN_CREATE);
    uint8_t v[64] = {0};
    for (int64_t k = 0; k < 2000; k++)
        CHECK_RC(db, dhl_insert(db, 0, k, v, rsize - 8));
    struct dhl_info in;
    CHECK_RC(db, dhl_info(db, &in));
    uint32_t best = 0;
    for (uint32_t p = 1; p < in.page_count; p++) {
        struct dhl_page_info pi;
        CHECK_RC(db, dhl_page_info(db, p, &pi));
        if (pi.valid_slot >= 0 && pi.slot[pi.valid_slot].type == DHL_PAGE_LEAF &&
            pi.slot[pi.valid_slot].nrec > best)
            best = pi.slot[pi.valid_slot].nrec;
    }
    dhl_close(db);
    md_free(&d);
    return best;
}

static void utilisation(void)
{
    const uint32_t sizes[] = {8, 16, 32, 64}, thesis[] = {291, 185, 107, 58};
    for (int i = 0; i < 4; i++) {
        uint32_t n = records_per_page(sizes[i]);
        printf("  %2u-byte records: %u per 4 KiB page (thesis DHL: %u)\n", sizes[i], n, thesis[i]);
        CHECK(n + 3 >= thesis[i] && n <= thesis[i] + 3);
    }
}

static int expect_open(struct memdisk *d, enum dhl_mode mode, uint32_t ps, int want)
{
    struct dhl_io io = md_io(d);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = mode;
    o.page_size = ps;
    o.io = &io;
    dhl *db = NULL;
    int rc = dhl_open("mem", &o, &db);
    if (rc == DHL_OK)
        rc = dhl_check(db);
    if (rc != want)
        fprintf(stderr, "expected %s, got %s: %s\n", dhl_errstr(want), dhl_errstr(rc),
                dhl_errmsg(db));
    else
        printf("  %s: %s\n", dhl_errstr(rc), dhl_errmsg(db));
    CHECK(rc == want && (rc == DHL_OK || dhl_errmsg(db)[0]));
    dhl_close(db);
    return rc;
}

static void bad_input(void)
{
    /* non-DHL content */
    struct memdisk d = {0};
    md_ensure(&d, 8192);
    memcpy(d.data, "SQLite format 3", 16);
    expect_open(&d, DHL_MODE_TC, 0, DHL_ENOTDHL);
    md_free(&d);

    /* a real database */
    struct memdisk good = {0};
    dhl *db = open_md(&good, DHL_MODE_CC, 1024, 1, DHL_OPEN_CREATE);
    uint8_t v[50] = {7};
    for (int k = 0; k < 200; k++)
        CHECK_RC(db, dhl_insert(db, 0, k, v, sizeof v));
    dhl_close(db);
    expect_open(&good, DHL_MODE_CC, 1024, DHL_OK);
    expect_open(&good, DHL_MODE_CC, 4096, DHL_EPAGESIZE); /* wrong page size asked */
    expect_open(&good, DHL_MODE_NOLOG, 0, DHL_EMODE);

    d = md_copy(&good);
    d.data[DHL_HDR_PAGE_SIZE] = 0x01; /* 1024 -> 1025: not a power of two */
    expect_open(&d, DHL_MODE_CC, 0, DHL_EPAGESIZE);
    md_free(&d);

    d = md_copy(&good);
    d.size = 3 * 1024; /* truncated */
    expect_open(&d, DHL_MODE_CC, 0, DHL_ETRUNC);
    md_free(&d);

    d = md_copy(&good);
    d.size = 100;
    expect_open(&d, DHL_MODE_CC, 0, DHL_ETRUNC);
    md_free(&d);

    /* impossible offsets: point every record of every page past the end */
    d = md_copy(&good);
    for (size_t p = 1; p < d.size / 1024; p++)
        for (int i = 0; i < 4; i++) {
            uint8_t *a = d.data + p * 1024 + DHL_PAGE_ARRAY + 4 * i;
            a[0] = 0xf0, a[1] = 0x03, a[2] = 0xf0, a[3] = 0x03; /* 1008: record runs past 1024 */
        }
    expect_open(&d, DHL_MODE_CC, 0, DHL_ECORRUPT);
    md_free(&d);

    /* a value larger than a page holds */
    db = open_md(&good, DHL_MODE_CC, 1024, 1, 0);
    static uint8_t big[2000];
    CHECK(dhl_insert(db, 0, 9999, big, DHL_MAX_VALUE(1024) + 1) == DHL_EINVAL);
    printf("  DHL_EINVAL: %s\n", dhl_errmsg(db));
    CHECK_RC(db, dhl_insert(db, 0, 9999, big, DHL_MAX_VALUE(1024)));
    CHECK(dhl_insert(db, 7, 1, big, 1) == DHL_EINVAL);
    CHECK(dhl_commit(db) == DHL_EMISUSE);
    CHECK_RC(db, dhl_check(db));
    dhl_close(db);
    md_free(&good);
}

/* posix_file: the real file path, fsync and fdatasync, reopen. */
static void posix_file(void)
{
    char path[] = "/tmp/dhl-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = DHL_MODE_CC_OPT;
    o.flags = DHL_OPEN_CREATE | DHL_OPEN_FDATASYNC;
    o.ntrees = 2;
    dhl *db = NULL;
    CHECK_RC(db, dhl_open(path, &o, &db));
    uint8_t v[128];
    memset(v, 'x', sizeof v);
    for (int k = 0; k < 300; k++)
        CHECK_RC(db, dhl_insert(db, (uint32_t)k % 2, k, v, sizeof v));
    char a[33], b[33];
    CHECK_RC(db, dhl_digest(db, a));
    dhl_close(db);
    o.flags = 0;
    o.ntrees = 0;
    CHECK_RC(db, dhl_open(path, &o, &db));
    CHECK_RC(db, dhl_check(db));
    CHECK_RC(db, dhl_digest(db, b));
    CHECK(strcmp(a, b) == 0);
    uint64_t n;
    CHECK_RC(db, dhl_count(db, 1, &n));
    CHECK(n == 150);
    dhl_close(db);
    /* an empty file without CREATE is not a database */
    CHECK(truncate(path, 0) == 0);
    CHECK(dhl_open(path, &o, &db) == DHL_ENOTDHL);
    dhl_close(db);
    unlink(path);
}

/* thesis_txn: a cc_thesis database (4 KiB pages, 2 trees) after 4
** one-page transactions, and the writes of a fifth that changes both trees
** (the two leaves, then the header page) in d->ops: base is the image
** before it.  Returns the fifth transaction's TID. */
static uint32_t thesis_txn(struct memdisk *base, struct memdisk *d)
{
    dhl *db = open_md(d, DHL_MODE_CC_THESIS, 4096, 2, DHL_OPEN_CREATE);
    uint8_t v[100] = {3};
    for (int k = 0; k < 4; k++)
        CHECK_RC(db, dhl_insert(db, (uint32_t)k % 2, k, v, sizeof v));
    *base = md_copy(d);
    d->record = true;
    CHECK_RC(db, dhl_begin(db));
    CHECK_RC(db, dhl_insert(db, 0, 10, v, sizeof v));
    CHECK_RC(db, dhl_insert(db, 1, 10, v, sizeof v));
    CHECK_RC(db, dhl_commit(db));
    struct dhl_info in;
    CHECK_RC(db, dhl_info(db, &in));
    dhl_close(db);
    CHECK(d->nops == 4 && d->ops[2].off == 0 && d->ops[3].sync);
    return in.fcc;
}

static void commit_record(const struct memdisk *d, uint32_t out[3])
{
    CHECK(dhl_image_commit(d->data, d->size, out) == DHL_OK);
}

/* thesis_restore: the commit record persisted, one of its two pages not
** (Fig. 5(c)): recovery restores FCC - 1 and that transaction's size in
** place, in the header page write that invalidates the meta slot of T. */
static void thesis_restore(void)
{
    struct memdisk base = {0}, d = {0};
    uint32_t T = thesis_txn(&base, &d), cr[3];
    struct memdisk crash = md_copy(&base);
    md_apply(&crash, &d.ops[2]); /* the commit record */
    md_apply(&crash, &d.ops[0]); /* one leaf of two */
    commit_record(&crash, cr);
    CHECK(cr[0] == 1 && cr[1] == T && cr[2] == 3);
    crash.record = true;
    dhl *db = open_md(&crash, DHL_MODE_CC_THESIS, 4096, 2, 0);
    struct dhl_recovery r;
    dhl_recovery_info(db, &r);
    dhl_close(db);
    commit_record(&crash, cr);
    printf("  restore: FCC %u size 3 with 2 slot headers -> FCC %u size %u\n", T, cr[1], cr[2]);
    /* T-1 wrote one leaf and the header page; T's headers are gone */
    CHECK(r.rolled_back && r.fcc == T - 1 && cr[1] == T - 1 && cr[2] == 2);
    CHECK(crash.nops == 3 && crash.ops[0].off == 0 && crash.ops[2].sync);
    /* the file's own mode, and no other family */
    expect_open(&crash, DHL_MODE_AUTO, 0, DHL_OK);
    expect_open(&crash, DHL_MODE_CC, 0, DHL_EMODE);
    expect_open(&base, DHL_MODE_TC, 0, DHL_EMODE);
    md_free(&crash);
    md_free(&base);
    md_free(&d);
}

/* thesis_torn_header: the header page's write torn at every sector: the
** commit record lies in sector 0 with the meta slot it commits, so a torn
** write keeps or loses both (with the leaves on disk: T or T-1, each
** complete). */
static void thesis_torn_header(void)
{
    struct memdisk base = {0}, d = {0};
    uint32_t T = thesis_txn(&base, &d);
    for (size_t k = 0; k <= 8; k++) {
        struct memdisk crash = md_copy(&base);
        md_apply(&crash, &d.ops[0]);
        md_apply(&crash, &d.ops[1]);
        memcpy(crash.data, d.ops[2].data, 512 * k);
        dhl *db = open_md(&crash, DHL_MODE_CC_THESIS, 4096, 2, 0);
        struct dhl_info in;
        CHECK_RC(db, dhl_info(db, &in));
        CHECK_RC(db, dhl_check(db));
        CHECK(in.fcc == (k ? T : T - 1));
        dhl_close(db);
        md_free(&crash);
    }
    printf("  header page torn after 0..8 sectors: FCC %u (0 sectors) or %u, complete\n", T - 1, T);
    md_free(&base);
    md_free(&d);
}

int main(void)
{
    int ntx = quick() ? 120 : 600;
    const uint32_t sizes[] = {512, 4096};
    for (int i = 0; i < NMODES; i++)
        for (int s = 0; s < 2; s++) {
            random_ops(MODES[i], sizes[s], ntx);
            printf("random ops vs model: %s, %u-byte pages, %d txns: ok\n", dhl_mode_name(MODES[i]),
                   sizes[s], ntx);
        }
    printf("I/O per transaction:\n");
    io_facts();
    printf("page utilisation:\n");
    utilisation();
    printf("bad input:\n");
    bad_input();
    posix_file();
    printf("the thesis's CC (one commit record in place):\n");
    thesis_restore();
    thesis_torn_header();
    printf("test_engine: ok\n");
    return 0;
}
