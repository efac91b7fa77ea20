/*
** memio.h — test support: an in-memory disk behind struct dhl_io that can
** capture every write and sync the engine issues (the I/O shim of the
** engine-level crash test), a dict model of the database content, and the
** model's oracle digest.  Header-only; included by the C tests.
*/
#ifndef DHL_MEMIO_H
#define DHL_MEMIO_H

#include "dhl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_RC(db, call)                                                                         \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != DHL_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, dhl_errstr(rc_),   \
                    dhl_errmsg(db));                                                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* One captured I/O: a page-sized write at off, or a sync. */
struct wop {
    bool sync;
    uint64_t off;
    size_t n;
    uint8_t *data;
};

struct memdisk {
    uint8_t *data;
    size_t size, cap;
    bool record;
    struct wop *ops;
    size_t nops, opcap;
    uint64_t syncs;
};

static inline void md_ensure(struct memdisk *d, size_t end)
{
    if (end > d->cap) {
        size_t c = d->cap ? d->cap : 65536;
        while (c < end)
            c *= 2;
        d->data = realloc(d->data, c);
        CHECK(d->data);
        memset(d->data + d->cap, 0, c - d->cap);
        d->cap = c;
    }
    if (end > d->size)
        d->size = end;
}

static inline void md_log(struct memdisk *d, struct wop op)
{
    if (!d->record)
        return;
    if (d->nops == d->opcap) {
        d->opcap = d->opcap ? 2 * d->opcap : 64;
        d->ops = realloc(d->ops, sizeof *d->ops * d->opcap);
        CHECK(d->ops);
    }
    d->ops[d->nops++] = op;
}

static inline int md_pread(void *ctx, void *buf, size_t n, uint64_t off, size_t *got)
{
    struct memdisk *d = ctx;
    size_t avail = off >= d->size ? 0 : d->size - off;
    *got = n < avail ? n : avail;
    memcpy(buf, d->data + off, *got);
    return 0;
}

static inline int md_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    struct memdisk *d = ctx;
    md_ensure(d, off + n);
    memcpy(d->data + off, buf, n);
    if (d->record) {
        uint8_t *c = malloc(n);
        CHECK(c);
        memcpy(c, buf, n);
        md_log(d, (struct wop){false, off, n, c});
    }
    return 0;
}

static inline int md_sync(void *ctx, int datasync)
{
    (void)datasync;
    struct memdisk *d = ctx;
    d->syncs++;
    md_log(d, (struct wop){true, 0, 0, NULL});
    return 0;
}

static inline int md_size(void *ctx, uint64_t *bytes)
{
    *bytes = ((struct memdisk *)ctx)->size;
    return 0;
}

static inline struct dhl_io md_io(struct memdisk *d)
{
    return (struct dhl_io){d, md_pread, md_pwrite, md_sync, md_size, NULL, 0};
}

static inline void md_clear_log(struct memdisk *d)
{
    for (size_t i = 0; i < d->nops; i++)
        free(d->ops[i].data);
    d->nops = 0;
}

static inline void md_free(struct memdisk *d)
{
    md_clear_log(d);
    free(d->ops);
    free(d->data);
    memset(d, 0, sizeof *d);
}

/* md_copy: a new disk with the same bytes (no log). */
static inline struct memdisk md_copy(const struct memdisk *s)
{
    struct memdisk d = {0};
    md_ensure(&d, s->size ? s->size : 1);
    d.size = s->size;
    memcpy(d.data, s->data, s->size);
    return d;
}

static inline void md_apply(struct memdisk *d, const struct wop *op)
{
    if (op->sync)
        return;
    md_ensure(d, op->off + op->n);
    memcpy(d->data + op->off, op->data, op->n);
}

/* ---- the model: per tree, an unsorted array of (key, value) ---- */
#define MODEL_TREES 4
struct mrec {
    int64_t key;
    size_t len;
    uint8_t val[1100];
};
struct model {
    struct mrec *r[MODEL_TREES];
    size_t n[MODEL_TREES], cap[MODEL_TREES];
};

static inline struct mrec *model_find(struct model *m, uint32_t t, int64_t k)
{
    for (size_t i = 0; i < m->n[t]; i++)
        if (m->r[t][i].key == k)
            return &m->r[t][i];
    return NULL;
}

static inline void model_put(struct model *m, uint32_t t, int64_t k, const void *v, size_t len)
{
    struct mrec *r = model_find(m, t, k);
    if (!r) {
        if (m->n[t] == m->cap[t]) {
            m->cap[t] = m->cap[t] ? 2 * m->cap[t] : 64;
            m->r[t] = realloc(m->r[t], sizeof(struct mrec) * m->cap[t]);
            CHECK(m->r[t]);
        }
        r = &m->r[t][m->n[t]++];
    }
    r->key = k;
    r->len = len;
    memcpy(r->val, v, len);
}

static inline void model_del(struct model *m, uint32_t t, int64_t k)
{
    struct mrec *r = model_find(m, t, k);
    CHECK(r);
    *r = m->r[t][--m->n[t]];
}

static inline void model_copy(struct model *dst, const struct model *src)
{
    for (int t = 0; t < MODEL_TREES; t++) {
        dst->n[t] = src->n[t];
        dst->cap[t] = src->n[t] ? src->n[t] : 1;
        dst->r[t] = malloc(sizeof(struct mrec) * dst->cap[t]);
        CHECK(dst->r[t]);
        if (src->n[t])
            memcpy(dst->r[t], src->r[t], sizeof(struct mrec) * src->n[t]);
    }
}

static inline void model_free(struct model *m)
{
    for (int t = 0; t < MODEL_TREES; t++)
        free(m->r[t]);
    memset(m, 0, sizeof *m);
}

/* model_digest: the oracle digest of the model (same formula as dhl.h). */
static inline void model_digest(const struct model *m, char hex[33])
{
    unsigned __int128 sum = 0;
    uint8_t buf[12 + 1100];
    for (uint32_t t = 0; t < MODEL_TREES; t++)
        for (size_t i = 0; i < m->n[t]; i++) {
            const struct mrec *r = &m->r[t][i];
            for (int b = 0; b < 4; b++)
                buf[b] = (uint8_t)(t >> (8 * b));
            for (int b = 0; b < 8; b++)
                buf[4 + b] = (uint8_t)((uint64_t)r->key >> (8 * b));
            memcpy(buf + 12, r->val, r->len);
            XXH128_hash_t h = XXH3_128bits(buf, 12 + r->len);
            sum += ((unsigned __int128)h.high64 << 64) | h.low64;
        }
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)(sum >> 64), (unsigned long long)sum);
}

/* A small deterministic PRNG (xorshift64*). */
static uint64_t rnd_state = 88172645463325252ull;
static inline uint64_t rnd(void)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 2685821657736338717ull;
}
static inline uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static inline bool quick(void) { return getenv("DHL_TEST_QUICK") != NULL; }

#endif
