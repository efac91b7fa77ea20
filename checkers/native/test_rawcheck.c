/*
** test_rawcheck.c — the native raw-tier checker against the real engine
** (built into this test, under ASan + UBSan by checkers/build.mk): a
** database made by libdhl in memory, examined intact (the checker's facts
** agree with what the engine says directly), with a torn last transaction,
** and damaged at random (no crash, no sanitizer report, a result always).
** The test may include the engine's header; the checker may not.
*/
#include "rawcheck.h"

#include <dhl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (256u * 1024u) /* a 256 KiB "device" */
#define PS   4096u

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The serialised facts (rawcheck.c emit(): NSC scalars, 10 strings, 8 lists). */
#define NSC          13
#define SC_ABOVE_NEW 12 /* B_ABOVE_NEWEST: slot headers above the newest commit record */
struct parsed {
    uint32_t sc[NSC];
    char str[10][256];
    int has[10];
    uint32_t nlist[8]; /* 0xFFFFFFFF: none */
};

static uint32_t u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* parse: 0 when the blob holds exactly the layout. */
static int parse(const uint8_t *b, size_t n, struct parsed *p)
{
    size_t at = 0;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < NSC; i++, at += 4)
        p->sc[i] = u32(b + at);
    for (int i = 0; i < 10; i++) {
        uint32_t k = u32(b + at);
        at += 4;
        if (k == 0xFFFFFFFFu)
            continue;
        p->has[i] = 1;
        snprintf(p->str[i], sizeof p->str[i], "%.*s", (int)k, (const char *)b + at);
        at += k;
    }
    for (int i = 0; i < 8; i++) {
        uint32_t k = u32(b + at);
        at += 4;
        p->nlist[i] = k;
        if (k != 0xFFFFFFFFu)
            at += 4 * (size_t)k;
    }
    return at == n ? 0 : -1;
}

static struct rc_engine engine(void)
{
    struct rc_engine e;
    e.open = (int (*)(const char *, const struct rc_options *, void **))dhl_open;
    e.close = (int (*)(void *))dhl_close;
    e.errmsg = (const char *(*)(const void *))dhl_errmsg;
    e.info = (int (*)(void *, struct rc_info *))dhl_info;
    e.recovery_info = (void (*)(const void *, struct rc_recovery *))dhl_recovery_info;
    e.check = (int (*)(void *))dhl_check;
    e.digest = (int (*)(void *, char *))dhl_digest;
    e.reachable =
        (int (*)(void *, uint32_t *, uint32_t *, int32_t *, uint32_t, uint32_t *))dhl_reachable;
    e.image_headers = dhl_image_headers;
    e.valid_slot = (int (*)(uint32_t, uint32_t, uint32_t))dhl_valid_slot;
    return e;
}

/* make_db: a CC database of `txns` transactions in img (SIZE bytes). */
static void make_db(uint8_t *img, int txns)
{
    memset(img, 0, SIZE);
    struct dhl_mem m = {img, SIZE, SIZE, 0, 0, 1, 0};
    struct dhl_io io;
    dhl_mem_io(&io, &m);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = DHL_MODE_CC;
    o.ntrees = 2;
    o.flags = DHL_OPEN_CREATE | DHL_OPEN_TRUNCATE;
    o.io = &io;
    dhl *db;
    int rc = dhl_open("(test)", &o, &db);
    CHECK(rc == DHL_OK, "open: %s", dhl_errmsg(db));
    char val[200];
    for (int t = 0; t < txns && rc == DHL_OK; t++) {
        dhl_begin(db);
        for (int k = 0; k < 40; k++) {
            memset(val, 'a' + (k + t) % 26, sizeof val);
            rc = dhl_insert(db, (uint32_t)(k % 2), t * 100 + k, val, 50 + (size_t)k);
        }
        CHECK(rc == DHL_OK && dhl_commit(db) == DHL_OK, "txn %d: %s", t, dhl_errmsg(db));
    }
    dhl_close(db);
}

/* engine_digest: the engine's content digest of img read-only. */
static void engine_digest(uint8_t *img, char hex[33], uint32_t *fcc)
{
    static uint8_t copy[SIZE];
    memcpy(copy, img, SIZE);
    struct dhl_mem m = {copy, SIZE, SIZE, 0, 0, 1, SIZE};
    struct dhl_io io;
    dhl_mem_io(&io, &m);
    struct dhl_options o;
    dhl_options_default(&o);
    o.flags = DHL_OPEN_READONLY;
    o.io = &io;
    dhl *db;
    CHECK(dhl_open("(test)", &o, &db) == DHL_OK, "open read-only: %s", dhl_errmsg(db));
    CHECK(dhl_digest(db, hex) == DHL_OK, "digest");
    struct dhl_info info;
    CHECK(dhl_info(db, &info) == DHL_OK, "info");
    *fcc = info.fcc;
    dhl_close(db);
}

static const uint8_t *examine(rc_ctx *c, const uint8_t *img, const uint64_t *offs,
                              const uint64_t *lens, const uint8_t *data, uint32_t n, size_t *len,
                              int *rc)
{
    const uint8_t *out = NULL;
    *rc =
        rc_examine(c, img, SIZE, SIZE, offs, lens, data, n, "db", "db.rec", "db.again", &out, len);
    return out;
}

/* A recovery that is not idempotent: the engine's open, and then, on an
** open that may write (not read-only) of the label "db.again", a byte of
** page 3 changed through the store.  The checker's second recovery must
** see its own copy change, and report page 3, while the image recovered
** first stays as it was. */
static int (*real_open)(const char *, const struct rc_options *, void **);

static int scribbling_open(const char *path, const struct rc_options *o, void **out)
{
    int rc = real_open(path, o, out);
    if (rc == 0 && !(o->flags & 4u) && !strcmp(path, "db.again")) {
        uint8_t page[PS];
        size_t got = 0;
        o->io->pread(o->io->ctx, page, PS, 3 * PS, &got);
        page[100] ^= 0xff;
        o->io->pwrite(o->io->ctx, page, PS, 3 * PS);
    }
    return rc;
}

/* same_facts: the facts of rc_examine and rc_examine_chunk agree, state by
** state, on a chunk of three overlays over img: none, the older database's
** page 0 (from the "log"), zeros over page 0, and one past the device. */
static void check_chunk(rc_ctx *c, const uint8_t *img, const uint8_t *older)
{
    static uint8_t log[2 * PS];
    memcpy(log + PS, older, PS); /* the log: a header, then the payload */
    const uint64_t items[] = {0, PS, PS, 0, RC_ZEROS, 512, SIZE - 512, PS, 1024};
    const uint32_t nitems[] = {0, 1, 1, 1};
    int32_t rcs[4];
    uint64_t lens[4];
    const uint8_t *all = NULL;
    size_t total = 0;
    int rc = rc_examine_chunk(c, img, SIZE, SIZE, log, sizeof log, items, nitems, 4, "db", "db.rec",
                              "db.again", rcs, lens, &all, &total);
    CHECK(rc == RC_OK, "chunk: rc %d", rc);
    CHECK(rcs[0] == RC_OK && rcs[1] == RC_OK && rcs[2] == RC_OK && rcs[3] == RC_FALLBACK,
          "chunk: rcs %d %d %d %d", rcs[0], rcs[1], rcs[2], rcs[3]);
    static uint8_t copy[3][64 * 1024];
    size_t at = 0;
    for (int i = 0; i < 3; i++) { /* kept: the next call reuses the buffer */
        CHECK(lens[i] <= sizeof copy[i], "chunk: facts of %llu bytes", (unsigned long long)lens[i]);
        memcpy(copy[i], all + at, lens[i]);
        at += lens[i];
    }
    CHECK(at == total, "chunk: %zu of %zu bytes", at, total);
    static uint8_t zeros[512];
    const uint8_t *data[] = {NULL, older, zeros};
    const uint64_t offs[] = {0, 0, 0}, lns[] = {0, PS, 512};
    for (int i = 0; i < 3; i++) {
        const uint8_t *one = NULL;
        size_t len = 0;
        rc = rc_examine(c, img, SIZE, SIZE, offs + i, lns + i, data[i], i ? 1 : 0, "db", "db.rec",
                        "db.again", &one, &len);
        CHECK(rc == RC_OK && len == lens[i] && !memcmp(one, copy[i], len),
              "chunk: state %d differs from its own call", i);
    }
}

/* Damage at random: sectors zeroed or filled with bytes, bytes of slot
** headers and offset arrays changed; every result is well formed. */
static void check_random_damage(rc_ctx *c, const uint8_t *img)
{
    static uint8_t bad[SIZE];
    size_t len;
    int rc;
    const uint8_t *out;
    struct parsed p;
    uint32_t dfcc, nc;
    char dhex[33], err[128];
    srand(7);
    int done = 0;
    for (int round = 0; round < 400; round++) {
        memcpy(bad, img, SIZE);
        for (int k = 0; k < 1 + rand() % 4; k++) {
            uint32_t page = (uint32_t)rand() % 16, at = (uint32_t)rand() % PS;
            if (rand() % 2)
                at %= 64; /* the slot headers and the start of the arrays */
            uint32_t len2 = rand() % 3 ? 1 + (uint32_t)rand() % 4 : 512;
            if (at + len2 > PS)
                len2 = PS - at;
            for (uint32_t b = 0; b < len2; b++)
                bad[page * PS + at + b] = rand() % 3 ? (uint8_t)rand() : 0;
        }
        out = examine(c, bad, NULL, NULL, NULL, 0, &len, &rc);
        CHECK(rc == RC_OK || rc == RC_FALLBACK, "round %d: rc %d", round, rc);
        if (rc == RC_OK) {
            CHECK(parse(out, len, &p) == 0, "round %d: layout", round);
            done++;
        }
        rc = rc_decode(c, bad, SIZE, &dfcc, dhex, err, sizeof err, &nc);
        CHECK(rc == RC_OK || rc == RC_FALLBACK, "round %d: decode rc %d", round, rc);
    }
    CHECK(done > 300, "only %d of 400 damaged images examined", done);
}

/* A second recovery that writes: its copy is its own. */
static void check_scribble(struct rc_engine e, const uint8_t *img, const char *hex)
{
    size_t len;
    int rc;
    struct parsed p;
    struct rc_engine scribble = e;
    real_open = e.open;
    scribble.open = scribbling_open;
    rc_ctx *s = rc_new(&scribble);
    CHECK(s != NULL, "rc_new");
    const uint8_t *out = examine(s, img, NULL, NULL, NULL, 0, &len, &rc);
    CHECK(rc == RC_OK && parse(out, len, &p) == 0, "scribble: rc %d", rc);
    CHECK(p.nlist[7] == 1, "scribble: %u pages changed, not page 3 alone", p.nlist[7]);
    CHECK(!strcmp(p.str[7], hex), "scribble: the recovered image changed: digest %s", p.str[7]);
    const uint8_t *again = examine(s, img, NULL, NULL, NULL, 0, &len, &rc);
    CHECK(rc == RC_OK && parse(again, len, &p) == 0 && p.nlist[7] == 1, "scribble, again: %u pages",
          p.nlist[7]);
    rc_free(s);
}

/* Images the native path leaves to the Python one (RC_FALLBACK), and one
** that is no database at all (an open error, no decode). */
static void check_not_ours(rc_ctx *c, const uint8_t *img)
{
    static uint8_t bad[SIZE];
    size_t len;
    int rc;
    struct parsed p;
    uint64_t off, n;
    uint32_t dfcc, nc;
    char dhex[33], err[128];
    /* the thesis's format (header flag 2): the Python path's business */
    memcpy(bad, img, SIZE);
    bad[20] |= 2;
    const uint8_t *out = examine(c, bad, NULL, NULL, NULL, 0, &len, &rc);
    CHECK(rc == RC_FALLBACK, "thesis's format: rc %d", rc);

    /* an overlay past the device: the Python path's business */
    off = SIZE - 512;
    n = 1024;
    static uint8_t junk[1024];
    out = examine(c, img, &off, &n, junk, 1, &len, &rc);
    CHECK(rc == RC_FALLBACK, "past the end: rc %d", rc);

    /* not a database at all */
    memset(bad, 0, SIZE);
    out = examine(c, bad, NULL, NULL, NULL, 0, &len, &rc);
    CHECK(rc == RC_OK && parse(out, len, &p) == 0 && p.has[0] && !p.has[4], "zeroed: rc %d", rc);
    CHECK(rc_decode(c, bad, SIZE, &dfcc, dhex, err, sizeof err, &nc) == RC_OK && !dhex[0] &&
              !strcmp(err, "no DHL header (bad magic)"),
          "zeroed: decode error %s", err);
}

int main(void)
{
    for (int i = 0; i < 7; i++)
        if (i != 1 && i != 4)
            CHECK(rc_abi_size(i) == dhl_abi_size(i), "ABI struct %d", i);
    struct rc_engine e = engine();
    rc_ctx *c = rc_new(&e);
    CHECK(c != NULL, "rc_new");
    static uint8_t img[SIZE];
    make_db(img, 6);
    char hex[33];
    uint32_t fcc;
    engine_digest(img, hex, &fcc);

    /* intact: both readers see the engine's content at its FCC; nothing to
    ** roll back, nothing for a second recovery to change */
    size_t len;
    int rc;
    const uint8_t *out = examine(c, img, NULL, NULL, NULL, 0, &len, &rc);
    struct parsed p;
    CHECK(rc == RC_OK, "intact: rc %d", rc);
    CHECK(parse(out, len, &p) == 0, "intact: layout");
    CHECK(!p.has[0], "intact: no open error");
    CHECK(p.sc[0] == fcc && p.sc[6] == fcc, "intact: FCC %u / %u, engine %u", p.sc[0], p.sc[6],
          fcc);
    CHECK(!strcmp(p.str[1], hex) && !strcmp(p.str[3], hex), "intact: digests %s %s, engine %s",
          p.str[1], p.str[3], hex);
    CHECK(!strcmp(p.str[6], "ok") && !strcmp(p.str[7], hex), "intact: integrity %s", p.str[6]);
    CHECK(p.nlist[1] == 0 && p.nlist[2] == 0, "intact: pages without a committed slot");
    CHECK(p.nlist[7] == 0, "intact: a second recovery changed %u pages", p.nlist[7]);
    CHECK(p.sc[SC_ABOVE_NEW] == 0, "intact: %u headers above the newest commit record",
          p.sc[SC_ABOVE_NEW]);
    uint32_t dfcc, nc;
    char dhex[33], err[128];
    CHECK(rc_decode(c, img, SIZE, &dfcc, dhex, err, sizeof err, &nc) == RC_OK && dfcc == fcc &&
              !strcmp(dhex, hex) && !err[0],
          "decode: FCC %u digest %s error %s", dfcc, dhex, err);

    /* the last transaction torn: its header page (page 0) from the one
    ** before; recovery rolls back, the FCC goes one down */
    static uint8_t older[SIZE];
    make_db(older, 5);
    uint64_t off = 0, n = PS;
    out = examine(c, img, &off, &n, older, 1, &len, &rc);
    CHECK(rc == RC_OK && parse(out, len, &p) == 0, "torn: rc %d", rc);
    CHECK(p.sc[9] < fcc, "torn: recovered FCC %u, not below %u", p.sc[9], fcc);
    /* its pages on disk, its commit record not: the thesis's Fig. 5(b) */
    CHECK(p.sc[SC_ABOVE_NEW] > 0, "torn: no header above the newest commit record");

    check_not_ours(c, img);

    check_random_damage(c, img);

    /* one call per chunk: the facts of each state as its own call's */
    check_chunk(c, img, older);

    check_scribble(e, img, hex);
    rc_free(c);
    rc_free(NULL);
    if (failures)
        fprintf(stderr, "test_rawcheck: %d failures\n", failures);
    else
        printf("test_rawcheck: ok\n");
    return failures != 0;
}
