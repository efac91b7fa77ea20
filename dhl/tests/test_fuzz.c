/*
** test_fuzz.c — bounded-time fuzzing of open/recover/check/digest/scan over
** damaged images: random bytes written over random parts of a valid
** database (header page included), whole random pages, truncations.  The
** engine must answer every image with DHL_OK or a clear error code and
** message — never crash, hang or touch memory it does not own (the
** ASan+UBSan build runs this too).
*/
#include "memio.h"

#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int scan_cb(void *a, int64_t k, const void *v, size_t n)
{
    (void)k;
    const uint8_t *p = v;
    for (size_t i = 0; i < n; i++) /* touch every byte: ASan sees bad reads */
        *(unsigned *)a += p[i];
    return 0;
}

static void build(struct memdisk *d, enum dhl_mode mode, uint32_t ps)
{
    struct dhl_io io = md_io(d);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = mode;
    o.page_size = ps;
    o.ntrees = 2;
    o.flags = DHL_OPEN_CREATE;
    o.io = &io;
    dhl *db = NULL;
    CHECK_RC(db, dhl_open("mem", &o, &db));
    uint8_t v[300];
    for (int k = 0; k < 400; k++) {
        size_t len = rnd_below(120);
        memset(v, k, len);
        int rc = dhl_insert(db, (uint32_t)k % 2, (int64_t)rnd_below(100000), v, len);
        CHECK_RC(db, rc == DHL_EEXISTS ? DHL_OK : DHL_OK);
        if (k % 7 == 0)
            dhl_update(db, 0, (int64_t)rnd_below(100000), v, len);
    }
    dhl_close(db);
}

static const enum dhl_mode modes[] = {DHL_MODE_CC, DHL_MODE_TC_OPT, DHL_MODE_NOLOG,
                                      DHL_MODE_CC_THESIS};
#define NGOOD ((int)(sizeof modes / sizeof modes[0]))

int main(void)
{
    double budget = quick() ? 2.0 : 3.0, t0 = now();
    long runs = 0, ok = 0, codes[16] = {0};
    struct memdisk good[NGOOD] = {{0}};
    for (int i = 0; i < NGOOD; i++)
        build(&good[i], modes[i], i == 0 ? 512 : 1024);
    while (now() - t0 < budget) {
        int which = (int)rnd_below(NGOOD);
        uint32_t ps = which == 0 ? 512 : 1024;
        struct memdisk d = md_copy(&good[which]);
        size_t pages = d.size / ps;
        int kind = (int)rnd_below(4);
        if (kind == 0) { /* a few random bytes anywhere, often in the slot area */
            int n = 1 + (int)rnd_below(8);
            for (int i = 0; i < n; i++) {
                size_t p = rnd_below(pages), off = rnd_below(2) ? rnd_below(64) : rnd_below(ps);
                d.data[p * ps + off] = (uint8_t)rnd();
            }
        } else if (kind == 1) { /* a whole random page (never the header) */
            size_t p = 1 + rnd_below(pages - 1);
            for (size_t i = 0; i < ps; i++)
                d.data[p * ps + i] = (uint8_t)rnd();
        } else if (kind == 2) { /* a random page with a plausible slot header */
            size_t p = 1 + rnd_below(pages - 1);
            for (size_t i = 0; i < ps; i++)
                d.data[p * ps + i] = (uint8_t)rnd();
            d.data[p * ps + DHL_SLOT_TID] = 1;
            d.data[p * ps + 1] = d.data[p * ps + 2] = d.data[p * ps + 3] = 0;
            d.data[p * ps + DHL_SLOT_TYPE] = (uint8_t)(1 + rnd_below(2));
            d.data[p * ps + DHL_SLOT_NREC + 1] = 0;
        } else { /* truncation */
            d.size = rnd_below(d.size);
        }
        struct dhl_io io = md_io(&d);
        struct dhl_options o;
        dhl_options_default(&o);
        o.mode = modes[which];
        o.io = &io;
        o.flags = rnd_below(2) ? DHL_OPEN_NORECOVER : 0;
        dhl *db = NULL;
        int rc = dhl_open("fuzz", &o, &db);
        CHECK(db);
        if (rc == DHL_OK) {
            char hex[33];
            unsigned sum = 0;
            int r1 = dhl_check(db);
            CHECK(r1 == DHL_OK || dhl_errmsg(db)[0]);
            int r2 = dhl_digest(db, hex);
            CHECK(r2 == DHL_OK || dhl_errmsg(db)[0]);
            int r3 = dhl_scan(db, 1, INT64_MIN, INT64_MAX, scan_cb, &sum);
            CHECK(r3 == DHL_OK || dhl_errmsg(db)[0]);
            struct dhl_page_info pi;
            for (uint32_t p = 0; p < pages && p < 8; p++)
                dhl_page_info(db, p, &pi);
            if (!(o.flags & DHL_OPEN_NORECOVER)) {
                uint8_t v[10] = {0};
                dhl_insert(db, 0, -5, v, sizeof v);
            }
            ok++;
        } else {
            CHECK(dhl_errmsg(db)[0]); /* an error always says why */
        }
        codes[rc < 16 ? rc : 15]++;
        dhl_close(db);
        md_free(&d);
        runs++;
    }
    printf("fuzz: %ld images in %.1f s, %ld opened;", runs, now() - t0, ok);
    for (int i = 0; i < 16; i++)
        if (codes[i])
            printf(" %s=%ld", dhl_errstr(i), codes[i]);
    printf("\n");
    for (int i = 0; i < NGOOD; i++)
        md_free(&good[i]);
    CHECK(runs > 100);
    printf("test_fuzz: ok\n");
    return 0;
}
