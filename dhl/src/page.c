/*
** page.c — the page format: header-page meta slots, the read rule, slot
** validation, a page's record view (parsed from its committed slot), and
** building a page image for a transaction (placing new records in free
** space around the committed records, which never move).
*/
#include "internal.h"

#include <stdio.h>

/* dhl_valid_slot: the read rule (see dhl.h). */
int dhl_valid_slot(uint32_t tid0, uint32_t tid1, uint32_t fcc)
{
    bool ok0 = tid0 != DHL_TID_INV && tid0 <= fcc;
    bool ok1 = tid1 != DHL_TID_INV && tid1 <= fcc;
    if (ok0 && ok1)
        return tid1 > tid0 ? 1 : 0;
    return ok0 ? 0 : ok1 ? 1 : -1;
}

static uint32_t meta_off(const dhl *db, int s)
{
    return DHL_HDR_META0 + (uint32_t)s * DHL_META_SIZE(db->ntrees);
}

/* dhl__meta_decode: meta slot s of header image hdr into *m. */
void dhl__meta_decode(const dhl *db, const uint8_t *hdr, int s, struct meta *m)
{
    const uint8_t *p = hdr + meta_off(db, s);
    memset(m, 0, sizeof *m);
    m->tid = get32(p + DHL_META_TID);
    m->commit = get32(p + DHL_META_COMMIT);
    m->page_count = get32(p + DHL_META_PAGECOUNT);
    m->freelist = get32(p + DHL_META_FREELIST);
    for (uint32_t t = 0; t < db->ntrees; t++)
        m->roots[t] = get32(p + DHL_META_ROOTS + 4 * t);
}

/* dhl__meta_encode: write *m into meta slot s of header image hdr. */
void dhl__meta_encode(const dhl *db, uint8_t *hdr, int s, const struct meta *m)
{
    uint8_t *p = hdr + meta_off(db, s);
    put32(p + DHL_META_TID, m->tid);
    put32(p + DHL_META_COMMIT, m->commit);
    put32(p + DHL_META_PAGECOUNT, m->page_count);
    put32(p + DHL_META_FREELIST, m->freelist);
    for (uint32_t t = 0; t < db->ntrees; t++)
        put32(p + DHL_META_ROOTS + 4 * t, m->roots[t]);
}

/* dhl__commit_encode: the thesis's in-place commit record (FCC, size) into
** header image hdr (DHL_FLAG_THESIS databases only). */
void dhl__commit_encode(const dhl *db, uint8_t *hdr, uint32_t fcc, uint32_t size)
{
    put32(hdr + DHL_HDR_COMMIT(db->ntrees), fcc);
    put32(hdr + DHL_HDR_COMMIT(db->ntrees) + 4, size);
}

int dhl__slot_tid(const uint8_t *img, int s)
{
    return (int)get32(img + s * DHL_SLOT_SIZE + DHL_SLOT_TID);
}

/* dhl__page_cslot: the slot of a data page image that the connection reads:
** the read rule at its FCC, or slot 0 in a NOLOG database. */
int dhl__page_cslot(const dhl *db, const uint8_t *img)
{
    uint32_t t0 = get32(img + DHL_SLOT_TID), t1 = get32(img + DHL_SLOT_SIZE + DHL_SLOT_TID);
    if (db->hflags & DHL_FLAG_NOLOG)
        return t0 != DHL_TID_INV ? 0 : -1;
    return dhl_valid_slot(t0, t1, db->fcc);
}

static uint16_t slot_off(const uint8_t *img, int s, uint32_t i)
{
    return get16(img + DHL_PAGE_ARRAY + 4 * i + 2 * s);
}

/* dhl__slot_check: validate slot s of data page pgno: type, record count,
** free-space offset, every record inside the page above the offset array,
** keys strictly ascending, interior values 4 bytes.  DHL_OK/DHL_ECORRUPT. */
int dhl__slot_check(const dhl *db, const uint8_t *img, int s, uint32_t pgno)
{
    dhl *d = (dhl *)db;
    const uint8_t *h = img + s * DHL_SLOT_SIZE;
    uint32_t n = get16(h + DHL_SLOT_NREC), type = h[DHL_SLOT_TYPE];
    uint32_t fo = get16(h + DHL_SLOT_FREE), ps = db->ps;
    if (fo == 0)
        fo = ps;
    if (type != DHL_PAGE_LEAF && type != DHL_PAGE_INTERIOR)
        return dhl__err(d, DHL_ECORRUPT, "page %u slot %d: bad page type %u", pgno, s, type);
    uint32_t arr_end = DHL_PAGE_ARRAY + 4 * n;
    if (arr_end > ps)
        return dhl__err(d, DHL_ECORRUPT, "page %u slot %d: %u records cannot fit a %u-byte page",
                        pgno, s, n, ps);
    if (fo < arr_end || fo > ps)
        return dhl__err(d, DHL_ECORRUPT, "page %u slot %d: free-space offset %u outside [%u,%u]",
                        pgno, s, fo, arr_end, ps);
    int64_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = slot_off(img, s, i);
        if (o < fo || o + DHL_REC_HDR > ps)
            return dhl__err(d, DHL_ECORRUPT, "page %u slot %d: record %u offset %u outside [%u,%u)",
                            pgno, s, i, o, fo, ps - DHL_REC_HDR);
        uint32_t len = get16(img + o + 8);
        if (o + DHL_REC_HDR + len > ps)
            return dhl__err(d, DHL_ECORRUPT,
                            "page %u slot %d: record %u (offset %u, %u bytes) "
                            "runs past the page end",
                            pgno, s, i, o, len);
        if (type == DHL_PAGE_INTERIOR && len != 4)
            return dhl__err(d, DHL_ECORRUPT,
                            "page %u slot %d: interior record %u has %u-byte value", pgno, s, i,
                            len);
        int64_t k = (int64_t)get64(img + o);
        if (i > 0 && k <= prev)
            return dhl__err(d, DHL_ECORRUPT, "page %u slot %d: keys out of order at record %u",
                            pgno, s, i);
        prev = k;
    }
    return DHL_OK;
}

/* dhl__free_recs: empty pg's record view (freeing the values it owns). */
void dhl__free_recs(struct page *pg)
{
    for (uint32_t i = 0; i < pg->n; i++)
        if (pg->recs[i].owned)
            free(pg->recs[i].val);
    pg->n = 0;
    pg->parsed = false;
}

/* dhl__rec_reserve: make room for n records in pg's view. */
int dhl__rec_reserve(struct page *pg, uint32_t n)
{
    if (n <= pg->cap)
        return 0;
    uint32_t cap = pg->cap ? pg->cap : 16;
    while (cap < n)
        cap *= 2;
    struct rec *r = realloc(pg->recs, sizeof *r * cap);
    if (!r)
        return -1;
    pg->recs = r;
    pg->cap = cap;
    return 0;
}

/* dhl__parse: build the record view of pg from its committed slot.  A page
** with no committed slot has an empty leaf view. */
int dhl__parse(dhl *db, struct page *pg)
{
    dhl__free_recs(pg);
    pg->type = DHL_PAGE_LEAF;
    if (pg->cslot >= 0) {
        int rc = dhl__slot_check(db, pg->img, pg->cslot, pg->pgno);
        if (rc)
            return rc;
        const uint8_t *h = pg->img + pg->cslot * DHL_SLOT_SIZE;
        uint32_t n = get16(h + DHL_SLOT_NREC);
        pg->type = h[DHL_SLOT_TYPE];
        if (dhl__rec_reserve(pg, n))
            return dhl__err(db, DHL_ENOMEM, "out of memory");
        for (uint32_t i = 0; i < n; i++) {
            uint16_t o = slot_off(pg->img, pg->cslot, i);
            pg->recs[i] = (struct rec){(int64_t)get64(pg->img + o), get16(pg->img + o + 8), o,
                                       false, pg->img + o + DHL_REC_HDR};
        }
        pg->n = n;
    }
    pg->parsed = true;
    return DHL_OK;
}

struct ext {
    uint32_t off, end;
};

static int ext_cmp(const void *a, const void *b)
{
    const struct ext *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

struct need {
    uint32_t idx, size;
};

static int need_cmp(const void *a, const void *b)
{
    const struct need *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* place: decide where records r[0..n) go in pg's next image.  Committed
** records of pg's valid slot stay where they are (those of r that are
** unchanged reuse them: pin); the new ones go into the gaps between the
** offset array and the committed records, largest first, highest gap
** first.  Writes offsets to offs (may be NULL).  Returns false when they do
** not fit.  NOLOG rewrites the page from scratch: nothing is pinned. */
static bool place(const dhl *db, const struct page *pg, const struct rec *r, uint32_t n,
                  uint16_t *offs)
{
    bool nolog = db->hflags & DHL_FLAG_NOLOG;
    const uint8_t *img = pg->img;
    uint32_t ps = db->ps, nC = 0;
    if (!nolog && pg->cslot >= 0 && !pg->fresh)
        nC = get16(img + pg->cslot * DHL_SLOT_SIZE + DHL_SLOT_NREC);
    uint32_t arr_end = DHL_PAGE_ARRAY + 4 * (nC > n ? nC : n);
    if (arr_end > ps)
        return false;
    bool ok = false;
    struct ext *gaps = malloc(sizeof *gaps * (nC + 2));
    struct ext *pin = malloc(sizeof *pin * (nC + 1));
    struct need *nd = malloc(sizeof *nd * (n + 1));
    if (!gaps || !pin || !nd)
        goto out;
    for (uint32_t i = 0; i < nC; i++) {
        uint32_t o = slot_off(img, pg->cslot, i);
        pin[i] = (struct ext){o, o + DHL_REC_HDR + get16(img + o + 8)};
    }
    qsort(pin, nC, sizeof *pin, ext_cmp);
    if (nC && pin[0].off < arr_end)
        goto out;
    uint32_t ng = 0, lo = arr_end;
    for (uint32_t i = 0; i < nC; i++) {
        if (pin[i].off > lo)
            gaps[ng++] = (struct ext){lo, pin[i].off};
        if (pin[i].end > lo)
            lo = pin[i].end;
    }
    if (ps > lo)
        gaps[ng++] = (struct ext){lo, ps};
    uint32_t nn = 0, total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!nolog && r[i].pin) {
            if (offs)
                offs[i] = r[i].pin;
            continue;
        }
        nd[nn++] = (struct need){i, DHL_REC_HDR + r[i].len};
        total += DHL_REC_HDR + r[i].len;
    }
    /* Fast path: everything fits in the largest gap, in key order downwards. */
    uint32_t best = ng;
    for (uint32_t g = 0; g < ng; g++)
        if (best == ng || gaps[g].end - gaps[g].off > gaps[best].end - gaps[best].off)
            best = g;
    if (best < ng && gaps[best].end - gaps[best].off >= total) {
        uint32_t top = gaps[best].end;
        for (uint32_t j = nn; j-- > 0;) {
            top -= nd[j].size;
            if (offs)
                offs[nd[j].idx] = (uint16_t)top;
        }
        ok = true;
        goto out;
    }
    qsort(nd, nn, sizeof *nd, need_cmp);
    for (uint32_t j = 0; j < nn; j++) {
        uint32_t g = ng;
        while (g-- > 0)
            if (gaps[g].end - gaps[g].off >= nd[j].size)
                break;
        if (g >= ng)
            goto out;
        gaps[g].end -= nd[j].size;
        if (offs)
            offs[nd[j].idx] = (uint16_t)gaps[g].end;
    }
    ok = true;
out:
    free(gaps);
    free(pin);
    free(nd);
    return ok;
}

/* dhl__fits: would pg's records [from, to) fit in pg's next image? */
bool dhl__fits(const dhl *db, const struct page *pg, uint32_t from, uint32_t to)
{
    return place(db, pg, pg->recs + from, to - from, NULL);
}

/* dhl__fits_fresh: would records r[0..n) fit in a fresh (empty) page? */
bool dhl__fits_fresh(const dhl *db, const struct rec *r, uint32_t n)
{
    uint64_t need = DHL_PAGE_ARRAY + 4ull * n;
    for (uint32_t i = 0; i < n; i++)
        need += DHL_REC_HDR + r[i].len;
    return need <= db->ps;
}

/* dhl__materialize: build into out the image pg gets when transaction tid
** writes it: the committed slot and its records untouched, the other slot
** (slot 0 in NOLOG) describing pg's view with TID tid and commit field
** commit, new records copied into free space.  DHL_OK, or DHL_ECORRUPT if
** the view does not fit (the B+-tree layer must have split first). */
int dhl__materialize(dhl *db, const struct page *pg, uint32_t tid, uint16_t commit, uint8_t *out)
{
    bool nolog = db->hflags & DHL_FLAG_NOLOG;
    uint16_t *offs = malloc(sizeof *offs * (pg->n + 1));
    if (!offs)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    if (!place(db, pg, pg->recs, pg->n, offs)) {
        free(offs);
        return dhl__err(db, DHL_ECORRUPT, "internal: page %u view does not fit", pg->pgno);
    }
    int w = 0;
    if (nolog || pg->fresh || pg->cslot < 0)
        memset(out, 0, db->ps);
    else {
        memcpy(out, pg->img, db->ps);
        w = pg->cslot == 0 ? 1 : 0;
    }
    uint32_t lowest = 0;
    for (uint32_t i = 0; i < pg->n; i++) {
        const struct rec *r = &pg->recs[i];
        if (nolog || !r->pin) {
            put64(out + offs[i], (uint64_t)r->key);
            put16(out + offs[i] + 8, r->len);
            /* r->val may point into pg->img (never into out): memcpy is safe. */
            memcpy(out + offs[i] + DHL_REC_HDR, r->val, r->len);
        }
        put16(out + DHL_PAGE_ARRAY + 4 * i + 2 * w, offs[i]);
        if (lowest == 0 || offs[i] < lowest)
            lowest = offs[i];
    }
    uint8_t *h = out + w * DHL_SLOT_SIZE;
    put32(h + DHL_SLOT_TID, tid);
    put16(h + DHL_SLOT_NREC, (uint16_t)pg->n);
    put16(h + DHL_SLOT_FREE, (uint16_t)lowest);
    put16(h + DHL_SLOT_COMMIT, commit);
    h[DHL_SLOT_TYPE] = pg->type;
    h[DHL_SLOT_RESERVED] = 0;
    free(offs);
    return DHL_OK;
}
