/*
** rawcheck.c — the facts checkers/dhl.py's examine() takes of a raw-tier
** crash image, in one C call (rawcheck.h).  Three parts:
**
** 1. the image, built in a buffer reused from state to state: the durable
**    image's bytes up to its last data byte, then the state's overlay (given
**    as bytes, rc_examine, or as pieces of the log in memory, the states of
**    a chunk in one call: rc_examine_chunk);
** 2. the engine's view, through the loaded library's entry points (the
**    table in struct rc_engine): the read-only open before recovery, the
**    recovery in place, a second recovery of a copy — the same calls, in the
**    same order and with the same labels as the Python path, and the same
**    arithmetic on the slot headers the engine decodes (dhl.py);
** 3. the checker's own reader of the DHL format (the "independent decoder"
**    of checkers/dhl_format.py, restated here from dhl/FORMAT.md): FCC from
**    the commit records, the read rule, the tree walk, the content digest.
**    It shares no code or header with the engine.
**
** Where the Python path would raise an exception (the engine failing an
** introspection call, bytes the Python decoder cannot unpack) or where the
** image would grow past its size, rc_examine returns RC_FALLBACK and the
** caller takes the Python path, which then does exactly that.
*/
#include "rawcheck.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE       0xFFFFFFFFu /* an absent string or list in the facts */
#define MODE_TC    0
#define MODE_NOLOG 4
#define O_READONLY 4u
#define E_MODE     12 /* the engine's "NOLOG file opened in a logging mode" */
#define ERRLEN     4096

/* The engine's error code names, as the binding names them (dhl/binding.py). */
static const char *const CODES[] = {
    "DHL_OK",      "DHL_ENOTFOUND", "DHL_EEXISTS", "DHL_EINVAL",   "DHL_EIO",
    "DHL_ENOTDHL", "DHL_EPAGESIZE", "DHL_ETRUNC",  "DHL_ECORRUPT", "DHL_EMISUSE",
    "DHL_ENOMEM",  "DHL_EFULL",     "DHL_EMODE",
};

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
static int grow(void **p, size_t *cap, size_t need, size_t size)
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

static void put(struct buf *b, const void *x, size_t n)
{
    if (b->oom || grow((void **)&b->p, &b->cap, b->n + n, 1)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v)
{
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, le, 4);
}

/* put_str: a length-prefixed string, or NONE for NULL. */
static void put_str(struct buf *b, const char *s)
{
    if (!s) {
        put_u32(b, NONE);
        return;
    }
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static void put_vec(struct buf *b, const struct vec *v)
{
    put_u32(b, (uint32_t)v->n);
    for (size_t i = 0; i < v->n; i++)
        put_u32(b, v->v[i]);
}

static void push(struct vec *v, uint32_t x)
{
    if (v->oom || grow((void **)&v->v, &v->cap, v->n + 1, sizeof(uint32_t))) {
        v->oom = 1;
        return;
    }
    v->v[v->n++] = x;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

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

/* load: im holds the first `size` bytes of src, of which those past `used`
** are zero (MemIO.load with used=): copied into its buffer, and every byte
** past them zero, as MemIO._reserve leaves it (dhl/binding.py). */
static int load(struct image *im, const uint8_t *src, uint64_t size, uint64_t used)
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

/* view: im holds the same bytes as load(im, src, size, used) would give it,
** read from src (which must not change while im is in use) until the
** engine's first write copies them (own). */
static int view(struct image *im, const uint8_t *src, uint64_t size, uint64_t used)
{
    int rc = reserve(im, size);
    if (rc)
        return rc;
    im->view = src;
    im->mem.hiwater = used < size ? used : size;
    return RC_OK;
}

/* errf: the message DhlError gives for code rc and the engine's message. */
static void errf(rc_ctx *c, int rc, const char *msg)
{
    if (rc >= 0 && rc < (int)(sizeof CODES / sizeof CODES[0]))
        snprintf(c->err, sizeof c->err, "%s: %s", CODES[rc], msg);
    else
        snprintf(c->err, sizeof c->err, "DHL_E%d: %s", rc, msg);
}

/* open_db: the binding's Database(label, mode, readonly=, io=) — on failure
** the error in c->err and no handle. */
static int open_db(rc_ctx *c, const char *label, int mode, uint32_t flags, struct image *im,
                   void **db)
{
    struct rc_options o = {0, mode, 0, flags, 0, &im->io};
    void *h = NULL;
    int rc = c->e.open(label, &o, &h);
    if (rc) {
        errf(c, rc, h ? c->e.errmsg(h) : "out of memory");
        c->e.close(h);
        h = NULL;
    }
    *db = h;
    return rc;
}

/* --- the engine's slot headers, and dhl.py's arithmetic on them ------------------ */

struct heads {
    rc_ctx *c;
    const uint32_t *h; /* 6 values per page */
    uint32_t npages;
};

/* decode: the engine's dhl_image_headers of every whole page of im. */
static int decode(rc_ctx *c, struct image *im, uint32_t ps, uint32_t ntrees, struct heads *hs)
{
    uint64_t n = ps ? im->mem.size / ps : 0;
    if (n > 0x7fffffffu || grow((void **)&c->hdr, &c->hdrcap, 6 * n + 1, sizeof(uint32_t)))
        return RC_ENOMEM;
    if (c->e.image_headers(im->data, ps, 0, (uint32_t)n, ntrees, c->hdr))
        return RC_FALLBACK; /* the binding raises */
    *hs = (struct heads){c, c->hdr, (uint32_t)n};
    return RC_OK;
}

/* pagecount_at: the page count transaction tid saw (dhl.py pagecount_at). */
static uint32_t pagecount_at(const struct heads *hs, uint32_t tid)
{
    if (!hs->npages)
        return 0;
    const uint32_t *h = hs->h;
    int s = hs->c->e.valid_slot(h[0], h[1], tid);
    return s >= 0 ? h[4 + s] : 0;
}

/* pages_with: one entry per slot header carrying tid in pages below limit. */
static void pages_with(const struct heads *hs, uint32_t tid, uint64_t limit, struct vec *out)
{
    out->n = 0;
    for (uint32_t p = 0; p < hs->npages && p < limit; p++)
        for (int s = 0; s < 2; s++)
            if (hs->h[6 * p + s] == tid)
                push(out, p);
}

static uint32_t count_with(const struct heads *hs, uint32_t tid, uint64_t limit)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < hs->npages && p < limit; p++)
        n += (hs->h[6 * p] == tid) + (hs->h[6 * p + 1] == tid);
    return n;
}

/* newest_commit: (tid, size, count) of the newest commit record. */
static void newest_commit(const struct heads *hs, uint32_t *tid, uint32_t *size, uint32_t *count)
{
    uint32_t bt = 0, bc = 0;
    for (uint32_t p = 0; p < hs->npages; p++)
        for (int s = 0; s < 2; s++) {
            uint32_t t = hs->h[6 * p + s], c = hs->h[6 * p + 2 + s];
            if (t && c && t > bt && p < pagecount_at(hs, t)) {
                bt = t;
                bc = c;
            }
        }
    *tid = bt;
    *size = bt ? bc : 0;
    *count = bt ? count_with(hs, bt, pagecount_at(hs, bt)) : 0;
}

/* previous_commit: the newest commit record's TID below `below` (0: none). */
static uint32_t previous_commit(const struct heads *hs, uint32_t below)
{
    uint32_t best = 0;
    for (uint32_t p = 0; p < hs->npages; p++)
        for (int s = 0; s < 2; s++) {
            uint32_t t = hs->h[6 * p + s];
            if (t > 0 && t < below && hs->h[6 * p + 2 + s] && p < pagecount_at(hs, t) && t > best)
                best = t;
        }
    return best;
}

/* --- the checker's own decoder (FORMAT.md; checkers/dhl_format.py) -------------- */

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

struct reading {
    uint32_t fcc;
    int readable; /* rows read: the digest holds */
    unsigned __int128 sum;
    const char *error; /* NULL, or c->err */
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

/* fread_committed: the committed content of img as stored (dhl_format.py
** read_committed); RC_FALLBACK where the Python decoder raises. */
static int fread_committed(rc_ctx *c, const uint8_t *img, uint64_t size, struct reading *r)
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
                        return ferror_(c, r, "page %u: interior record %u has a %zu-byte value", p,
                                       i, vl);
                    push(&c->stack, rd32(val));
                } else if (type == F_LEAF) {
                    if (add_row(c, r, tree, page + off, val, vl))
                        return RC_ENOMEM;
                } else {
                    return ferror_(c, r, "page %u: bad page type %u", p, type);
                }
            }
        }
    }
    return c->nocommit.oom ? RC_ENOMEM : RC_OK;
}

static void hex128(unsigned __int128 v, char hex[33])
{
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)(uint64_t)(v >> 64),
             (unsigned long long)(uint64_t)v);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int rc_decode(rc_ctx *c, const uint8_t *image, uint64_t size, uint32_t *fcc, char hex[33],
              char *err, size_t errcap, uint32_t *no_committed)
{
    struct reading r;
    int rc = fread_committed(c, image, size, &r);
    if (rc)
        return rc;
    *fcc = r.fcc;
    hex[0] = 0;
    if (r.readable)
        hex128(r.sum, hex);
    snprintf(err, errcap, "%s", r.error ? r.error : "");
    *no_committed = (uint32_t)c->nocommit.n;
    return RC_OK;
}

/* --- the facts ------------------------------------------------------------------- */

/* The facts of one state, emitted as: the NSCALAR scalars (u32 each), the
** NSTR strings (u32 length and bytes, or NONE), the NARR lists (u32 count
** and u32 items, or NONE) — the order below, which checkers/dhl_native.py
** parses.  Defaults (0, NONE, empty) are dhl.py's Before/After defaults. */
enum {
    B_FCC,
    B_NEWEST,
    B_NEWEST_SIZE,
    B_NEWEST_COUNT,
    B_PREVIOUS,
    B_REACHED,
    B_INDEP_FCC,
    A_FCC,
    A_TXN_SIZE,
    A_ENGINE_FCC,
    A_ROLLED_BACK,
    F_NOLOG_DB,
    NSCALAR
};
enum {
    S_B_ERROR,
    S_B_DIGEST,
    S_B_READ_ERROR,
    S_B_INDEP_DIGEST,
    S_B_INDEP_ERROR,
    S_A_ERROR,
    S_A_INTEGRITY,
    S_A_DIGEST,
    S_A_SCAN_ERROR,
    S_A_IDEM_ERROR,
    NSTR
};
enum {
    L_B_NEWEST_PAGES,
    L_B_T1,
    L_B_NOCOMMIT,
    L_A_ABOVE,
    L_A_COUNT_FCC,
    L_A_FCC_PAGES,
    L_A_COUNT_NEWEST,
    L_A_CHANGED,
    NARR
};

struct facts {
    uint32_t sc[NSCALAR];
    int has[NSTR];
    char str[NSTR][ERRLEN];
    struct vec *arr[NARR]; /* NULL: NONE */
};

static void set_str(struct facts *f, int i, const char *s)
{
    f->has[i] = 1;
    snprintf(f->str[i], sizeof f->str[i], "%s", s);
}

/* emit: the facts serialised into c->out. */
static int emit(rc_ctx *c, const struct facts *f)
{
    struct buf *o = &c->out;
    o->n = 0;
    o->oom = 0;
    for (int i = 0; i < NSCALAR; i++)
        put_u32(o, f->sc[i]);
    for (int i = 0; i < NSTR; i++)
        put_str(o, f->has[i] ? f->str[i] : NULL);
    for (int i = 0; i < NARR; i++) {
        if (!f->arr[i])
            put_u32(o, NONE);
        else if (f->arr[i]->oom)
            return RC_ENOMEM;
        else
            put_vec(o, f->arr[i]);
    }
    return o->oom ? RC_ENOMEM : RC_OK;
}

/* before: Before and nolog (dhl.py examine_before); *newest: Before.newest. */
static int before(rc_ctx *c, struct facts *f, const char *label, int *nolog, uint32_t *newest)
{
    struct image *im = &c->img;
    void *db;
    *nolog = 0;
    *newest = 0;
    int rc = open_db(c, label, MODE_TC, O_READONLY, im, &db);
    if (rc == E_MODE) {
        *nolog = 1;
        rc = open_db(c, label, MODE_NOLOG, O_READONLY, im, &db);
    }
    if (rc) { /* Before(error=...): the rest at their defaults */
        *nolog = 0;
        set_str(f, S_B_ERROR, c->err);
        return RC_OK;
    }
    struct rc_info info;
    struct heads hs;
    rc = c->e.info(db, &info) ? RC_FALLBACK : decode(c, im, info.page_size, info.ntrees, &hs);
    if (rc) {
        c->e.close(db);
        return rc;
    }
    uint32_t nw = info.fcc, size = 0, count = 0, fcc = info.fcc;
    if (!*nolog)
        newest_commit(&hs, &nw, &size, &count);
    /* the committed trees' pages, through the engine's walk */
    uint32_t cap = info.page_count > 16 ? info.page_count : 16, n = 0;
    for (;;) {
        if (grow((void **)&c->rpages, &c->rcap, cap, sizeof(uint32_t)) ||
            !(c->rparents = realloc(c->rparents, c->rcap * sizeof(uint32_t))) ||
            !(c->rslots = realloc(c->rslots, c->rcap * sizeof(int32_t)))) {
            c->e.close(db);
            return RC_ENOMEM;
        }
        if (c->e.reachable(db, c->rpages, c->rparents, c->rslots, cap, &n)) {
            c->e.close(db);
            return RC_FALLBACK;
        }
        if (n <= cap)
            break;
        cap = n;
    }
    c->t1.n = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (c->rslots[i] == -2)
            continue; /* DB-INTEGRITY's business */
        uint32_t p = c->rpages[i], t0 = 0, t1 = 0;
        if (p < hs.npages)
            t0 = hs.h[6 * p], t1 = hs.h[6 * p + 1];
        int ok = (t0 && t0 <= fcc) || (!*nolog && t1 && t1 <= fcc);
        if (!ok) {
            push(&c->t1, p);
            push(&c->t1, c->rparents[i]);
            push(&c->t1, t0);
            push(&c->t1, t1);
        }
    }
    char hex[33];
    rc = c->e.digest(db, hex);
    if (rc) {
        errf(c, rc, c->e.errmsg(db));
        set_str(f, S_B_READ_ERROR, c->err);
    } else {
        set_str(f, S_B_DIGEST, hex);
    }
    f->sc[B_FCC] = fcc;
    f->sc[B_NEWEST] = nw;
    f->sc[B_NEWEST_SIZE] = size;
    f->sc[B_NEWEST_COUNT] = count;
    c->newest_pages.n = 0;
    if (nw)
        pages_with(&hs, nw, im->mem.size, &c->newest_pages);
    f->sc[B_PREVIOUS] = *nolog ? 0 : previous_commit(&hs, nw);
    f->sc[B_REACHED] = n;
    c->e.close(db);
    *newest = nw;
    /* the checker's own reading of the same bytes */
    struct reading r;
    rc = fread_committed(c, im->data, im->mem.size, &r);
    if (rc)
        return rc;
    f->sc[B_INDEP_FCC] = r.fcc;
    if (r.readable) {
        hex128(r.sum, hex);
        set_str(f, S_B_INDEP_DIGEST, hex);
    }
    if (r.error)
        set_str(f, S_B_INDEP_ERROR, r.error);
    if (c->nocommit.n)
        qsort(c->nocommit.v, c->nocommit.n, sizeof(uint32_t), cmp_u32);
    f->arr[L_B_NEWEST_PAGES] = &c->newest_pages;
    f->arr[L_B_T1] = &c->t1;
    f->arr[L_B_NOCOMMIT] = &c->nocommit;
    return RC_OK;
}

/* second: the second recovery of a copy of the recovered image (dhl.py
** _second_recovery): the pages it changed into c->changed, or *failed with
** the message in c->err. */
static int second(rc_ctx *c, const char *label, uint32_t ps, int *failed)
{
    struct image *im = &c->img, *ag = &c->again;
    int rc = view(ag, im->data, im->mem.size, im->mem.hiwater);
    if (rc)
        return rc;
    void *db;
    *failed = open_db(c, label, MODE_TC, 0, ag, &db) != 0;
    c->changed.n = 0;
    if (*failed)
        return RC_OK;
    c->e.close(db);
    if (!ag->mem.writes)
        return RC_OK;
    uint64_t sa = im->mem.size, sb = ag->mem.size;
    if (sa == sb) {
        uint64_t used = im->mem.hiwater > ag->mem.hiwater ? im->mem.hiwater : ag->mem.hiwater;
        if (used > sa)
            used = sa;
        if (!memcmp(im->data, ag->data, used))
            return RC_OK;
    }
    uint64_t mx = sa > sb ? sa : sb, np = ps ? (mx + ps - 1) / ps : 0;
    for (uint64_t p = 0; p < np; p++) {
        uint64_t a0 = p * ps, a1 = a0 + ps;
        uint64_t ea = a1 < sa ? a1 : sa, eb = a1 < sb ? a1 : sb;
        uint64_t la = ea > a0 ? ea - a0 : 0, lb = eb > a0 ? eb - a0 : 0;
        if (la != lb || (la && memcmp(im->data + a0, ag->data + a0, la)))
            push(&c->changed, (uint32_t)p);
    }
    return RC_OK;
}

/* after: After (dhl.py examine_after on the image recovered in place). */
static int after(rc_ctx *c, struct facts *f, const char *label, const char *label_again, int nolog,
                 uint32_t newest)
{
    struct image *im = &c->img;
    void *db;
    if (open_db(c, label, nolog ? MODE_NOLOG : MODE_TC, 0, im, &db)) {
        set_str(f, S_A_ERROR, c->err); /* After(error=...) */
        return RC_OK;
    }
    struct rc_info info;
    struct rc_recovery rec;
    if (c->e.info(db, &info)) {
        c->e.close(db);
        return RC_FALLBACK;
    }
    c->e.recovery_info(db, &rec);
    int crc = c->e.check(db);
    if (crc) {
        errf(c, crc, c->e.errmsg(db));
        set_str(f, S_A_INTEGRITY, c->err);
    } else {
        set_str(f, S_A_INTEGRITY, "ok");
    }
    char hex[33];
    int drc = c->e.digest(db, hex);
    if (drc) {
        errf(c, drc, c->e.errmsg(db));
        set_str(f, S_A_SCAN_ERROR, c->err);
    } else {
        set_str(f, S_A_DIGEST, hex);
    }
    struct heads hs;
    int rc = decode(c, im, info.page_size, info.ntrees, &hs);
    c->e.close(db);
    if (rc)
        return rc;
    uint32_t fcc = info.fcc, size = 0, count;
    if (!nolog)
        newest_commit(&hs, &fcc, &size, &count);
    f->sc[A_FCC] = fcc;
    f->sc[A_TXN_SIZE] = size;
    f->sc[A_ENGINE_FCC] = info.fcc;
    f->sc[A_ROLLED_BACK] = rec.rolled_back ? 1 : 0;
    c->above.n = 0;
    for (uint32_t p = 0; p < hs.npages; p++)
        for (int s = 0; s < 2; s++)
            if (hs.h[6 * p + s] > fcc) {
                push(&c->above, p);
                push(&c->above, (uint32_t)s);
                push(&c->above, hs.h[6 * p + s]);
            }
    c->count_fcc.n = c->fcc_pages.n = c->count_newest.n = 0;
    if (fcc) {
        pages_with(&hs, fcc, pagecount_at(&hs, fcc), &c->count_fcc);
        pages_with(&hs, fcc, im->mem.size, &c->fcc_pages);
    }
    if (newest > fcc)
        pages_with(&hs, newest, im->mem.size, &c->count_newest);
    f->arr[L_A_ABOVE] = &c->above;
    f->arr[L_A_COUNT_FCC] = &c->count_fcc;
    f->arr[L_A_FCC_PAGES] = &c->fcc_pages;
    f->arr[L_A_COUNT_NEWEST] = &c->count_newest;
    if (!nolog) {
        int failed;
        rc = second(c, label_again, info.page_size, &failed);
        if (rc)
            return rc;
        if (failed)
            set_str(f, S_A_IDEM_ERROR, c->err);
        else
            f->arr[L_A_CHANGED] = &c->changed;
    }
    return RC_OK;
}

/* facts_of: the facts of the image in c->img, serialised into c->out. */
static int facts_of(rc_ctx *c, const char *label, const char *label_rec, const char *label_again)
{
    if (!c->fp && !(c->fp = calloc(1, sizeof *c->fp)))
        return RC_ENOMEM;
    struct facts *f = c->fp;
    memset(f->sc, 0, sizeof f->sc);
    memset(f->has, 0, sizeof f->has);
    static struct vec empty;
    for (int i = 0; i < NARR; i++)
        f->arr[i] = i == L_A_CHANGED ? NULL : &empty;
    int nolog;
    uint32_t newest;
    int rc = before(c, f, label, &nolog, &newest);
    if (!rc)
        rc = after(c, f, label_rec, label_again, nolog, newest);
    f->sc[F_NOLOG_DB] = (uint32_t)nolog;
    if (!rc)
        rc = emit(c, f);
    return rc;
}

/* overlay: write n bytes of src (NULL: zeros) at byte off of c->img. */
static void overlay(rc_ctx *c, uint64_t off, const uint8_t *src, uint64_t n)
{
    if (src)
        memcpy(c->img.data + off, src, n);
    else
        memset(c->img.data + off, 0, n);
    if (off + n > c->img.mem.hiwater)
        c->img.mem.hiwater = c->img.dirty = off + n;
}

int rc_examine(rc_ctx *c, const uint8_t *durable, uint64_t size, uint64_t used,
               const uint64_t *offs, const uint64_t *lens, const uint8_t *data, uint32_t nwrites,
               const char *label, const char *label_rec, const char *label_again,
               const uint8_t **out, size_t *outlen)
{
    for (uint32_t i = 0; i < nwrites; i++)
        if (offs[i] > size || lens[i] > size - offs[i])
            return RC_FALLBACK; /* the image would grow: not a block device's */
    int rc = load(&c->img, durable, size, used);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < nwrites; i++) {
        overlay(c, offs[i], data, lens[i]);
        data += lens[i];
    }
    rc = facts_of(c, label, label_rec, label_again);
    *out = c->out.p;
    *outlen = c->out.n;
    return rc;
}

int rc_examine_chunk(rc_ctx *c, const uint8_t *durable, uint64_t size, uint64_t used,
                     const uint8_t *log, uint64_t loglen, const uint64_t *items,
                     const uint32_t *nitems, uint32_t nstates, const char *label,
                     const char *label_rec, const char *label_again, int32_t *rcs, uint64_t *lens,
                     const uint8_t **out, size_t *outlen)
{
    struct buf *all = &c->chunk;
    all->n = 0;
    all->oom = 0;
    const uint64_t *it = items; /* the state's items */
    for (uint32_t i = 0; i < nstates; it += 3 * (size_t)nitems[i], i++) {
        int rc = RC_OK;
        for (uint32_t k = 0; k < nitems[i] && !rc; k++) {
            uint64_t off = it[3 * k], src = it[3 * k + 1], n = it[3 * k + 2];
            if (off > size || n > size - off)
                rc = RC_FALLBACK; /* the image would grow: not a block device's */
            else if (src != RC_ZEROS && (src > loglen || n > loglen - src))
                rc = RC_FALLBACK; /* past the log's end: the Python path reads it */
        }
        if (!rc)
            rc = load(&c->img, durable, size, used);
        for (uint32_t k = 0; k < nitems[i] && !rc; k++) {
            uint64_t src = it[3 * k + 1];
            overlay(c, it[3 * k], src == RC_ZEROS ? NULL : log + src, it[3 * k + 2]);
        }
        if (!rc)
            rc = facts_of(c, label, label_rec, label_again);
        if (rc == RC_ENOMEM)
            return rc;
        rcs[i] = rc;
        lens[i] = rc ? 0 : c->out.n;
        if (!rc)
            put(all, c->out.p, c->out.n);
        if (all->oom)
            return RC_ENOMEM;
    }
    *out = all->p;
    *outlen = all->n;
    return RC_OK;
}
