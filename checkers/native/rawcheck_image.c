/*
** rawcheck_image.c — the native DHL checker's context and the crash image
** the engine reads and writes through it (rawcheck_internal.h): a block
** device's image in memory, built in a buffer reused from state to state.
*/
#include "rawcheck_internal.h"

#include <errno.h>

rc_ctx *rc_new(const struct rc_engine *eng)
{
    rc_ctx *c = calloc(1, sizeof *c);
    if (c)
        c->e = *eng;
    return c;
}

void rc_free(rc_ctx *c)
{
    if (!c)
        return;
    free(c->img.data);
    free(c->again.data);
    free(c->hdr);
    free(c->rpages);
    free(c->rparents);
    free(c->rslots);
    free(c->out.p);
    free(c->chunk.p);
    struct vec *vs[] = {&c->t1,           &c->newest_pages, &c->above, &c->count_fcc, &c->fcc_pages,
                        &c->count_newest, &c->changed,      &c->stack, &c->nocommit};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
        free(vs[i]->v);
    free(c->seen);
    free(c->row);
    free(c->fp);
    free(c);
}

size_t rc_abi_size(int which)
{
    switch (which) {
    case 0: return sizeof(struct rc_options);
    case 2: return sizeof(struct rc_recovery);
    case 3: return sizeof(struct rc_info);
    case 5: return sizeof(struct rc_mem);
    case 6: return sizeof(struct rc_io);
    default: return 0;
    }
}

/* The checker's store for the engine: an image in memory that is a block
** device's (fixed size: a write past it fails with ENOSPC), as the engine's
** own memory I/O (dhl_mem_io) serves one, with one difference that changes
** no byte read: a read past hiwater, where the buffer is known to be zero,
** is served by zeroing rather than copying (the engine reads every page of
** the device, and most of a raw-tier device was never written). */
static int st_pread(void *ctx, void *buf, size_t n, uint64_t off, size_t *got)
{
    const struct image *im = ctx;
    const struct rc_mem *m = &im->mem;
    const uint8_t *src = im->view ? im->view : im->data;
    size_t k = 0;
    if (off < m->size)
        k = (size_t)(m->size - off) < n ? (size_t)(m->size - off) : n;
    size_t live = 0; /* bytes below hiwater */
    if (off < m->hiwater)
        live = (size_t)(m->hiwater - off) < k ? (size_t)(m->hiwater - off) : k;
    if (live)
        memcpy(buf, src + off, live);
    if (k > live)
        memset((uint8_t *)buf + live, 0, k - live);
    *got = k;
    return 0;
}

/* own: make im's bytes its own buffer's (the deferred copy of its view). */
static void own(struct image *im)
{
    uint64_t hw = im->mem.hiwater;
    if (!im->view)
        return;
    if (im->dirty > hw)
        memset(im->data + hw, 0, im->dirty - hw);
    memcpy(im->data, im->view, hw);
    im->dirty = hw;
    im->view = NULL;
}

static int st_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    struct image *im = ctx;
    struct rc_mem *m = &im->mem;
    if (off > m->size || n > m->size - off)
        return -ENOSPC; /* a device does not grow */
    own(im);
    memcpy(im->data + off, buf, n);
    if (off + n > m->hiwater)
        m->hiwater = off + n;
    if (off + n > im->dirty)
        im->dirty = off + n;
    m->writes++;
    return 0;
}

static int st_sync(void *ctx, int datasync)
{
    (void)datasync;
    ((struct image *)ctx)->mem.syncs++;
    return 0;
}

static int st_size(void *ctx, uint64_t *bytes)
{
    *bytes = ((const struct image *)ctx)->mem.size;
    return 0;
}

/* reserve: make im an image of `size` bytes, none written or synced yet,
** whose buffer holds at least `size` bytes (its content is the caller's
** business: load and view set it). */
static int reserve(struct image *im, uint64_t size)
{
    uint64_t want = size ? size : 1;
    if (want > im->cap) {
        uint8_t *d = calloc(1, want);
        if (!d)
            return RC_ENOMEM;
        free(im->data);
        im->data = d;
        im->cap = want;
        im->dirty = 0;
    }
    im->view = NULL;
    im->mem = (struct rc_mem){im->data, size, im->cap, 0, 0, 1, 0};
    im->io = (struct rc_io){im, st_pread, st_pwrite, st_sync, st_size, NULL, 1};
    return RC_OK;
}

/* rc_load: im holds the first `size` bytes of src, of which those past `used`
** are zero (MemIO.load with used=): copied into its buffer, and every byte
** past them zero, as MemIO._reserve leaves it (dhl/binding.py). */
int rc_load(struct image *im, const uint8_t *src, uint64_t size, uint64_t used)
{
    uint64_t k = used < size ? used : size;
    int rc = reserve(im, size);
    if (rc)
        return rc;
    if (im->dirty > k)
        memset(im->data + k, 0, im->dirty - k);
    if (k)
        memcpy(im->data, src, k);
    im->mem.hiwater = im->dirty = k;
    return RC_OK;
}

/* rc_view: im holds the same bytes as rc_load(im, src, size, used) would give it,
** read from src (which must not change while im is in use) until the
** engine's first write copies them (own). */
int rc_view(struct image *im, const uint8_t *src, uint64_t size, uint64_t used)
{
    int rc = reserve(im, size);
    if (rc)
        return rc;
    im->view = src;
    im->mem.hiwater = used < size ? used : size;
    return RC_OK;
}
