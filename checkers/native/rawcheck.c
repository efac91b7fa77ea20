/*
** rawcheck.c — the facts checkers/dhl_examine.py's examine() takes of a raw-tier
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
**    arithmetic on the slot headers the engine decodes (dhl_facts.py);
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
#include "rawcheck_internal.h"

#include <stdio.h>

/* The engine's error code names, as the binding names them (dhl/binding.py). */
static const char *const CODES[] = {
    "DHL_OK",      "DHL_ENOTFOUND", "DHL_EEXISTS", "DHL_EINVAL",   "DHL_EIO",
    "DHL_ENOTDHL", "DHL_EPAGESIZE", "DHL_ETRUNC",  "DHL_ECORRUPT", "DHL_EMISUSE",
    "DHL_ENOMEM",  "DHL_EFULL",     "DHL_EMODE",
};
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

/* --- the engine's slot headers, and dhl_facts.py's arithmetic on them ------------ */

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

/* pagecount_at: the page count transaction tid saw (dhl_facts.py pagecount_at). */
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

/* count_above: slot headers with a TID above tid, on every page. */
static uint32_t count_above(const struct heads *hs, uint32_t tid)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < hs->npages; p++)
        n += (hs->h[6 * p] > tid) + (hs->h[6 * p + 1] > tid);
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

/* --- the facts ------------------------------------------------------------------- */

/* The facts of one state, emitted as: the NSCALAR scalars (u32 each), the
** NSTR strings (u32 length and bytes, or NONE), the NARR lists (u32 count
** and u32 items, or NONE) — the order below, which checkers/dhl_native.py
** parses.  Defaults (0, NONE, empty) are dhl_facts.py's Before/After defaults. */
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
    B_ABOVE_NEWEST,
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

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* reachable: the committed trees' pages, through the engine's walk, into
** c->rpages, c->rparents, c->rslots (*n of them). */
static int reachable(rc_ctx *c, void *db, uint32_t page_count, uint32_t *n)
{
    uint32_t cap = page_count > 16 ? page_count : 16;
    *n = 0;
    for (;;) {
        if (grow((void **)&c->rpages, &c->rcap, cap, sizeof(uint32_t)) ||
            !(c->rparents = realloc(c->rparents, c->rcap * sizeof(uint32_t))) ||
            !(c->rslots = realloc(c->rslots, c->rcap * sizeof(int32_t))))
            return RC_ENOMEM;
        if (c->e.reachable(db, c->rpages, c->rparents, c->rslots, cap, n))
            return RC_FALLBACK;
        if (*n <= cap)
            return RC_OK;
        cap = *n;
    }
}

/* independent: the checker's own reading of the bytes of c->img (Before's
** indep_* facts and the pages without a committed slot). */
static int independent(rc_ctx *c, struct facts *f)
{
    struct reading r;
    int rc = rc_read_committed(c, c->img.data, c->img.mem.size, &r);
    if (rc)
        return rc;
    f->sc[B_INDEP_FCC] = r.fcc;
    if (r.readable) {
        char hex[33];
        rc_hex128(r.sum, hex);
        set_str(f, S_B_INDEP_DIGEST, hex);
    }
    if (r.error)
        set_str(f, S_B_INDEP_ERROR, r.error);
    if (c->nocommit.n)
        qsort(c->nocommit.v, c->nocommit.n, sizeof(uint32_t), cmp_u32);
    f->arr[L_B_NOCOMMIT] = &c->nocommit;
    return RC_OK;
}

/* before: Before and nolog (dhl_examine.py examine_before); *newest: Before.newest. */
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
    uint32_t n;
    rc = reachable(c, db, info.page_count, &n);
    if (rc) {
        c->e.close(db);
        return rc;
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
    f->sc[B_ABOVE_NEWEST] = *nolog ? 0 : count_above(&hs, nw);
    f->sc[B_REACHED] = n;
    c->e.close(db);
    *newest = nw;
    f->arr[L_B_NEWEST_PAGES] = &c->newest_pages;
    f->arr[L_B_T1] = &c->t1;
    return independent(c, f);
}

/* second: the second recovery of a copy of the recovered image (dhl_examine.py
** _second_recovery): the pages it changed into c->changed, or *failed with
** the message in c->err. */
static int second(rc_ctx *c, const char *label, uint32_t ps, int *failed)
{
    struct image *im = &c->img, *ag = &c->again;
    int rc = rc_view(ag, im->data, im->mem.size, im->mem.hiwater);
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

/* after: After (dhl_examine.py examine_after on the image recovered in place). */
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
    /* the thesis's format (dhl/FORMAT.md: header flag 2, one commit record
    ** in place) is read by the Python path only */
    if (c->img.mem.size >= 24 && (rd32(c->img.data + 20) & F_THESIS_FLAG))
        return RC_FALLBACK;
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
    int rc = rc_load(&c->img, durable, size, used);
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
            rc = rc_load(&c->img, durable, size, used);
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
