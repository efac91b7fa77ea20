/*
** test_memio.c — dhl_mem_io: a database built on the test memdisk, copied
** into a struct dhl_mem, reads, recovers and checks the same there; the
** store's own contract (short reads, growth up to cap, ENOSPC past it).
*/
#include "memio.h"

/* open_io: open on io with the given mode and flags (must succeed). */
static dhl *open_io(const struct dhl_io *io, enum dhl_mode mode, uint32_t flags)
{
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = mode;
    o.flags = flags;
    o.io = io;
    dhl *db = NULL;
    CHECK_RC(db, dhl_open("mem", &o, &db));
    return db;
}

/* same_db: a database on the memdisk and its copy in a dhl_mem read,
** recover and check alike, and recovery writes the same bytes. */
static void same_db(enum dhl_mode mode)
{
    struct memdisk d = {0};
    struct dhl_io mio = md_io(&d);
    struct dhl_options o;
    dhl_options_default(&o);
    o.mode = mode;
    o.ntrees = 2;
    o.flags = DHL_OPEN_CREATE;
    o.io = &mio;
    dhl *db = NULL;
    CHECK_RC(db, dhl_open("mem", &o, &db));
    char val[64];
    for (int t = 0; t < 20; t++) {
        CHECK_RC(db, dhl_begin(db));
        for (int k = 0; k < 15; k++) {
            snprintf(val, sizeof val, "value %d/%d", t, k);
            CHECK_RC(db, dhl_insert(db, (uint32_t)(k % 2), t * 100 + k, val, strlen(val)));
        }
        CHECK_RC(db, dhl_commit(db));
    }
    char want[33], got[33];
    CHECK_RC(db, dhl_digest(db, want));
    dhl_close(db);

    struct dhl_mem m = {malloc(d.size), d.size, d.size, 0, 0, 0, d.size};
    CHECK(m.data);
    memcpy(m.data, d.data, d.size);
    struct dhl_io io;
    dhl_mem_io(&io, &m);
    CHECK(io.ctx == &m && io.close == NULL);

    /* read-only: same content, no write */
    db = open_io(&io, mode, DHL_OPEN_READONLY);
    CHECK_RC(db, dhl_digest(db, got));
    CHECK(strcmp(want, got) == 0);
    CHECK_RC(db, dhl_check(db));
    struct dhl_info in;
    CHECK_RC(db, dhl_info(db, &in));
    CHECK(in.file_pages == d.size / in.page_size);
    dhl_close(db);
    CHECK(m.writes == 0 && memcmp(m.data, d.data, d.size) == 0);

    /* recovering open on both stores: same bytes afterwards */
    db = open_io(&io, mode, 0);
    CHECK_RC(db, dhl_digest(db, got));
    CHECK(strcmp(want, got) == 0);
    dhl_close(db);
    dhl_close(open_io(&mio, mode, 0));
    CHECK(m.size == d.size && memcmp(m.data, d.data, d.size) == 0);
    free(m.data);
    md_free(&d);
}

/* store_contract: short reads past size, growth up to cap, ENOSPC past it,
** hiwater raised by every write. */
static void store_contract(void)
{
    uint8_t data[32] = {1, 2, 3, 4};
    struct dhl_mem m = {data, 4, sizeof data, 0, 0, 0, 4};
    struct dhl_io io;
    dhl_mem_io(&io, &m);
    CHECK(io.blockdev == 0);
    uint8_t buf[16];
    size_t got = 99;
    CHECK(io.pread(io.ctx, buf, 16, 2, &got) == 0 && got == 2 && buf[0] == 3 && buf[1] == 4);
    CHECK(io.pread(io.ctx, buf, 16, 40, &got) == 0 && got == 0);
    uint64_t sz = 0;
    CHECK(io.size(io.ctx, &sz) == 0 && sz == 4);
    CHECK(io.pwrite(io.ctx, "abcd", 4, 28) == 0 && m.size == 32 && data[31] == 'd');
    CHECK(m.hiwater == 32); /* raised to the write's end */
    CHECK(io.pwrite(io.ctx, "abcd", 4, 29) == -ENOSPC && m.size == 32);
    CHECK(io.pwrite(io.ctx, "abcd", 4, UINT64_MAX - 1) == -ENOSPC);
    CHECK(io.sync(io.ctx, 1) == 0 && m.syncs == 1 && m.writes == 1);
    CHECK(dhl_abi_size(5) == sizeof(struct dhl_mem));
    CHECK(dhl_abi_size(6) == sizeof(struct dhl_io));

    /* A block device: the size is fixed, a write past it fails (no growth). */
    uint8_t dev[32] = {0};
    struct dhl_mem b = {dev, 16, sizeof dev, 0, 0, 1, 0};
    dhl_mem_io(&io, &b);
    CHECK(io.blockdev == 1);
    CHECK(io.pwrite(io.ctx, "abcd", 4, 2) == 0 && b.hiwater == 6);
    CHECK(io.pwrite(io.ctx, "abcd", 4, 12) == 0 && b.size == 16 && b.hiwater == 16);
    CHECK(io.pwrite(io.ctx, "abcd", 4, 14) == -ENOSPC && b.size == 16);
    CHECK(io.pwrite(io.ctx, "abcd", 4, 16) == -ENOSPC);
}

int main(void)
{
    const enum dhl_mode modes[] = {DHL_MODE_TC, DHL_MODE_CC, DHL_MODE_TC_OPT, DHL_MODE_CC_OPT,
                                   DHL_MODE_NOLOG};
    for (int i = 0; i < 5; i++) {
        same_db(modes[i]);
        printf("dhl_mem_io mirrors the memdisk: %s: ok\n", dhl_mode_name(modes[i]));
    }
    store_contract();
    printf("test_memio: ok\n");
    return 0;
}
