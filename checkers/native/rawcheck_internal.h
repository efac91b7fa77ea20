/*
** rawcheck_internal.h — what the units of the native DHL checker share
** (rawcheck.c: the engine's view and the facts; rawcheck_image.c: the
** context and the crash image the engine reads and writes;
** rawcheck_decode.c: the checker's own decoder of the format).  Not for
** callers: they include rawcheck.h.
*/
#ifndef RAWCHECK_INTERNAL_H
#define RAWCHECK_INTERNAL_H

#include "rawcheck.h"

#include <stdlib.h>
#include <string.h>

#define NONE          0xFFFFFFFFu /* an absent string or list in the facts */
#define MODE_TC       0
#define MODE_NOLOG    4
#define O_READONLY    4u
#define E_MODE        12 /* the engine's "NOLOG file opened in a logging mode" */
#define F_THESIS_FLAG 2u /* header flag of the thesis's format: the Python path reads it */
#define ERRLEN        4096

/* --- growable buffers ------------------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t n, cap;
    int oom;
};

struct vec {
    uint32_t *v;
    size_t n, cap;
    int oom;
};

/* grow: make room for `need` elements of `size` bytes in *p (capacity *cap). */
static inline int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static inline void put(struct buf *b, const void *x, size_t n)
{
    if (b->oom || grow((void **)&b->p, &b->cap, b->n + n, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

static inline void put_u32(struct buf *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

/* put_str: a length-prefixed string, or NONE for NULL. */
static inline void put_str(struct buf *b, const char *s)
{
    if (!s) {
        put_u32(b, NONE);
        return;
    }
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static inline void put_vec(struct buf *b, const struct vec *v)
{
    put_u32(b, (uint32_t)v->n);
    for (size_t i = 0; i < v->n; i++)
        put_u32(b, v->v[i]);
}

static inline void push(struct vec *v, uint32_t x)
{
    if (v->oom || grow((void **)&v->v, &v->cap, v->n + 1, sizeof(uint32_t))) {
        v->oom = 1;
        return;
    }
    v->v[v->n++] = x;
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* --- the context ----------------------------------------------------------------- */

/* An image the engine reads and writes through io (ctx: the image).  Its
** bytes are view's when view is set (a copy deferred until the first write:
** the second recovery of a recovered image seldom writes), else data's; in
** both, zero past mem.hiwater.  data is zero past `dirty`. */
struct image {
    uint8_t *data;
    uint64_t cap, dirty;
    const uint8_t *view;
    struct rc_mem mem;
    struct rc_io io;
};

struct rc_ctx {
    struct rc_engine e;
    struct image img, again;
    uint32_t *hdr; /* the engine's decoded slot headers, 6 per page */
    size_t hdrcap;
    uint32_t *rpages, *rparents;
    int32_t *rslots;
    size_t rcap;
    struct buf out, chunk;
    struct vec t1, newest_pages, above, count_fcc, fcc_pages, count_newest, changed;
    /* the checker's decoder */
    uint32_t *seen; /* seen[p] == gen: page p reached in this tree */
    size_t seencap;
    uint32_t gen;
    struct vec stack, nocommit;
    uint8_t *row;
    size_t rowcap;
    char err[ERRLEN];
    struct facts *fp; /* the facts of the state being examined */
};

/* rc_load: im holds the first `size` bytes of src, of which those past
** `used` are zero (rawcheck_image.c). */
int rc_load(struct image *im, const uint8_t *src, uint64_t size, uint64_t used);

/* rc_view: im holds the bytes rc_load would give it, read from src until
** the engine's first write copies them (rawcheck_image.c). */
int rc_view(struct image *im, const uint8_t *src, uint64_t size, uint64_t used);

/* What the checker's own decoder reads of an image (rawcheck_decode.c). */
struct reading {
    uint32_t fcc;
    int readable; /* rows read: the digest holds */
    unsigned __int128 sum;
    const char *error; /* NULL, or c->err */
};

/* rc_read_committed: the committed content of img as stored (dhl_format.py
** read_committed); RC_FALLBACK where the Python decoder raises. */
int rc_read_committed(rc_ctx *c, const uint8_t *img, uint64_t size, struct reading *r);

/* rc_hex128: v as 32 hex digits and a NUL. */
void rc_hex128(unsigned __int128 v, char hex[33]);

#endif /* RAWCHECK_INTERNAL_H */
