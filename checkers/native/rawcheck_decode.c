/*
** rawcheck_decode.c — the native DHL checker's own reader of the DHL format
** (the "independent decoder" of checkers/dhl_format.py, restated here from
** dhl/FORMAT.md): FCC from the commit records, the read rule, the tree
** walk, the content digest.  It shares no code or header with the engine.
*/
#include "rawcheck_internal.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdarg.h>
#include <stdio.h>

#define F_MAGIC   "DHL format 1\0\0\0\0"
#define F_SLOT    12
#define F_ARRAY   24
#define F_REC     10
#define F_META0   32
#define F_NOLOG   1u
#define F_LEAF    1
#define F_INTER   2
#define F_MAXTREE 32

struct meta {
    uint32_t tid, commit, page_count;
    const uint8_t *roots;
};

/* fvalid: the read rule of two TIDs at fcc (ties: slot 0). */
static int fvalid(uint32_t t0, uint32_t t1, uint32_t fcc)
{
    int ok0 = t0 && t0 <= fcc, ok1 = t1 && t1 <= fcc;
    if (ok0 && ok1)
        return t1 > t0 ? 1 : 0;
    return ok0 ? 0 : ok1 ? 1 : -1;
}

static struct meta fmeta(const uint8_t *img, int s, uint32_t ntrees)
{
    const uint8_t *m = img + F_META0 + (size_t)s * (16 + 4 * ntrees);
    return (struct meta){rd32(m), rd32(m + 4), rd32(m + 8), m + 16};
}

static uint32_t fpagecount(const struct meta *m, uint32_t t)
{
    int s = fvalid(m[0].tid, m[1].tid, t);
    return s >= 0 ? m[s].page_count : 0;
}

/* fhead: (tid, commit) of slot s of page p, page 0's from its meta slots. */
static void fhead(const uint8_t *img, uint64_t ps, const struct meta *m, uint32_t p, int s,
                  uint32_t *t, uint32_t *c)
{
    if (p == 0) {
        *t = m[s].tid;
        *c = m[s].commit;
        return;
    }
    const uint8_t *h = img + p * ps + (size_t)s * F_SLOT;
    *t = rd32(h);
    *c = rd16(h + 8);
}

/* ffcc: the newest complete commit record's TID (only the newest two
** candidates, newest first, are tried). */
static uint32_t ffcc(const uint8_t *img, uint64_t size, uint64_t ps, const struct meta *m)
{
    uint64_t npages = size / ps;
    uint32_t mx = m[0].page_count > m[1].page_count ? m[0].page_count : m[1].page_count;
    if (mx < npages)
        npages = mx;
    uint64_t nheads = npages > 1 ? npages : 1;
    /* the two greatest distinct (tid, commit) candidates */
    uint32_t ct[2] = {0, 0}, cc[2] = {0, 0};
    int nc = 0;
    for (uint64_t p = 0; p < nheads; p++)
        for (int s = 0; s < 2; s++) {
            uint32_t t, c;
            fhead(img, ps, m, (uint32_t)p, s, &t, &c);
            if (!t || !c || p >= fpagecount(m, t))
                continue;
            int dup = 0;
            for (int i = 0; i < nc; i++)
                dup |= ct[i] == t && cc[i] == c;
            if (dup)
                continue;
            if (nc == 0 || t > ct[0] || (t == ct[0] && c > cc[0])) {
                ct[1] = ct[0], cc[1] = cc[0];
                ct[0] = t, cc[0] = c;
                nc = nc < 2 ? nc + 1 : 2;
            } else if (nc == 1 || t > ct[1] || (t == ct[1] && c > cc[1])) {
                ct[1] = t, cc[1] = c;
                nc = 2;
            }
        }
    for (int i = 0; i < nc; i++) {
        uint64_t lim = fpagecount(m, ct[i]);
        if (lim > npages)
            lim = npages;
        uint32_t count = 0;
        for (uint64_t p = 0; p < lim; p++)
            for (int s = 0; s < 2; s++) {
                uint32_t t, c;
                fhead(img, ps, m, (uint32_t)p, s, &t, &c);
                count += t == ct[i];
            }
        if (count == cc[i])
            return ct[i];
    }
    return 0;
}

/* ferror: the reading fails with a message (no content, no page list). */
static int ferror_(rc_ctx *c, struct reading *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    r->error = c->err;
    r->readable = 0;
    c->nocommit.n = 0;
    return RC_OK;
}

/* add_row: the row's 128-bit hash (u32 tree, i64 key, value) into the sum. */
static int add_row(rc_ctx *c, struct reading *r, uint32_t tree, const uint8_t *key,
                   const uint8_t *val, size_t vlen)
{
    if (grow((void **)&c->row, &c->rowcap, 12 + vlen, 1))
        return RC_ENOMEM;
    uint8_t t[4] = {(uint8_t)tree, (uint8_t)(tree >> 8), (uint8_t)(tree >> 16),
                    (uint8_t)(tree >> 24)};
    memcpy(c->row, t, 4);
    memcpy(c->row + 4, key, 8);
    memcpy(c->row + 12, val, vlen);
    XXH128_hash_t h = XXH3_128bits(c->row, 12 + vlen);
    r->sum += (unsigned __int128)h.high64 << 64 | h.low64;
    return RC_OK;
}

/* read_page: the records of page p (number p, `ps` bytes) under its slot s:
** an interior page's children onto c->stack, a leaf's rows into the sum.
** RC_OK (r->error set when the page is bad), RC_FALLBACK or RC_ENOMEM. */
static int read_page(rc_ctx *c, struct reading *r, uint32_t tree, const uint8_t *page, uint32_t p,
                     uint32_t ps, int s)
{
    const uint8_t *h = page + s * F_SLOT;
    uint32_t nrec = rd16(h + 4), type = h[10];
    for (uint32_t i = 0; i < nrec; i++) {
        uint64_t at = F_ARRAY + 4 * (uint64_t)i + 2 * (uint64_t)s;
        if (at + 2 > ps)
            return RC_FALLBACK; /* struct.error in the Python decoder */
        uint32_t off = rd16(page + at);
        if (off + F_REC > ps)
            return ferror_(c, r, "page %u: record %u offset %u out of page", p, i, off);
        uint32_t vlen = rd16(page + off + 8);
        uint32_t avail = ps - off - F_REC;
        size_t vl = vlen < avail ? vlen : avail;
        const uint8_t *val = page + off + F_REC;
        if (type == F_INTER) {
            if (vl != 4)
                return ferror_(c, r, "page %u: interior record %u has a %zu-byte value", p, i, vl);
            push(&c->stack, rd32(val));
        } else if (type == F_LEAF) {
            if (add_row(c, r, tree, page + off, val, vl))
                return RC_ENOMEM;
        } else {
            return ferror_(c, r, "page %u: bad page type %u", p, type);
        }
    }
    return RC_OK;
}

int rc_read_committed(rc_ctx *c, const uint8_t *img, uint64_t size, struct reading *r)
{
    *r = (struct reading){0, 0, 0, NULL};
    c->nocommit.n = 0;
    if (size < 16 || memcmp(img, F_MAGIC, 16))
        return ferror_(c, r, "no DHL header (bad magic)");
    if (size < 28)
        return RC_FALLBACK;
    uint32_t ps = rd32(img + 16), flags = rd32(img + 20), ntrees = rd32(img + 24);
    if (ps < 512 || (ps & (ps - 1)) || ntrees < 1 || ntrees > F_MAXTREE)
        return ferror_(c, r, "bad header: page size %u, %u trees", ps, ntrees);
    if (size < F_META0 + 2 * (16 + 4 * (uint64_t)ntrees))
        return RC_FALLBACK;
    int nolog = (flags & F_NOLOG) != 0;
    struct meta m[2] = {fmeta(img, 0, ntrees), fmeta(img, 1, ntrees)};
    uint32_t fcc = nolog ? m[0].tid : ffcc(img, size, ps, m);
    r->fcc = fcc;
    int ms = nolog ? 0 : fvalid(m[0].tid, m[1].tid, fcc);
    if (ms < 0)
        return ferror_(c, r, "no meta slot committed at FCC %u", fcc);
    uint64_t npages = size / ps;
    if (npages > 0xffffffffu)
        return RC_ENOMEM;
    if (npages + 1 > c->seencap) { /* fresh marks, all zero: no page seen */
        free(c->seen);
        c->seencap = 0;
        c->gen = 0;
        if (!(c->seen = calloc(npages + 1, sizeof(uint32_t))))
            return RC_ENOMEM;
        c->seencap = npages + 1;
    }
    r->readable = 1;
    for (uint32_t tree = 0; tree < ntrees; tree++) {
        uint32_t root = rd32(m[ms].roots + 4 * tree);
        if (++c->gen == 0) { /* wrapped: forget every earlier walk */
            memset(c->seen, 0, c->seencap * sizeof(uint32_t));
            c->gen = 1;
        }
        c->stack.n = 0;
        if (root)
            push(&c->stack, root);
        while (c->stack.n) {
            if (c->stack.oom)
                return RC_ENOMEM;
            uint32_t p = c->stack.v[--c->stack.n];
            if (p >= npages || p == 0 || c->seen[p] == c->gen)
                return ferror_(c, r, "tree %u: bad or repeated page %u", tree, p);
            c->seen[p] = c->gen;
            const uint8_t *page = img + (uint64_t)p * ps;
            int s = nolog ? 0 : fvalid(rd32(page), rd32(page + F_SLOT), fcc);
            if (s < 0) {
                push(&c->nocommit, p);
                continue;
            }
            int rc = read_page(c, r, tree, page, p, ps, s);
            if (rc || r->error)
                return rc;
        }
    }
    return c->nocommit.oom ? RC_ENOMEM : RC_OK;
}

void rc_hex128(unsigned __int128 v, char hex[33])
{
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)(uint64_t)(v >> 64),
             (unsigned long long)(uint64_t)v);
}

int rc_decode(rc_ctx *c, const uint8_t *image, uint64_t size, uint32_t *fcc, char hex[33],
              char *err, size_t errcap, uint32_t *no_committed)
{
    struct reading r;
    int rc = rc_read_committed(c, image, size, &r);
    if (rc)
        return rc;
    *fcc = r.fcc;
    hex[0] = 0;
    if (r.readable)
        rc_hex128(r.sum, hex);
    snprintf(err, errcap, "%s", r.error ? r.error : "");
    *no_committed = (uint32_t)c->nocommit.n;
    return RC_OK;
}
