/*
** check.c — the structure check, the oracle content digest, and the
** page-level introspection that the checkers and the dhl tool use.
*/
#include "internal.h"

#include <stdio.h>
#include <xxhash.h>

struct chk {
    dhl *db;
    uint8_t *seen;
    int leaf_depth;
};

struct ext {
    uint32_t off, end, idx;
};

static int ext_cmp(const void *a, const void *b)
{
    const struct ext *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* no_overlap: records of the committed slot of pg do not overlap. */
static int no_overlap(dhl *db, const struct page *pg)
{
    uint32_t n = get16(pg->img + pg->cslot * DHL_SLOT_SIZE + DHL_SLOT_NREC);
    struct ext *e = malloc(sizeof *e * (n + 1));
    if (!e)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = get16(pg->img + DHL_PAGE_ARRAY + 4 * i + 2 * pg->cslot);
        e[i] = (struct ext){o, o + DHL_REC_HDR + get16(pg->img + o + 8), i};
    }
    qsort(e, n, sizeof *e, ext_cmp);
    int rc = DHL_OK;
    for (uint32_t i = 1; i < n && !rc; i++)
        if (e[i].off < e[i - 1].end)
            rc = dhl__err(db, DHL_ECORRUPT, "page %u slot %d: records %u and %u overlap", pg->pgno,
                          pg->cslot, e[i - 1].idx, e[i].idx);
    free(e);
    return rc;
}

/* node: check the subtree at pgno holding keys in [lo, hi) (hi_inf: no
** upper bound) at depth d. */
static int node(struct chk *c, uint32_t pgno, int64_t lo, int64_t hi, bool hi_inf, int d)
{
    dhl *db = c->db;
    if (pgno == 0 || pgno >= db->committed.page_count)
        return dhl__err(db, DHL_ECORRUPT, "child pointer %u outside the database (1..%u)", pgno,
                        db->committed.page_count - 1);
    if (c->seen[pgno])
        return dhl__err(db, DHL_ECORRUPT, "page %u is reached twice", pgno);
    c->seen[pgno] = 1;
    if (d > 40)
        return dhl__err(db, DHL_ECORRUPT, "tree deeper than 40 levels");
    struct page *pg;
    int rc = dhl__get(db, pgno, &pg);
    if (!rc)
        rc = no_overlap(db, pg);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < pg->n; i++) {
        int64_t k = pg->recs[i].key;
        if (k < lo || (!hi_inf && k >= hi))
            return dhl__err(db, DHL_ECORRUPT, "page %u: key %lld outside its parent's range", pgno,
                            (long long)k);
    }
    if (pg->type == DHL_PAGE_LEAF) {
        if (c->leaf_depth < 0)
            c->leaf_depth = d;
        else if (c->leaf_depth != d)
            return dhl__err(db, DHL_ECORRUPT, "leaf page %u at depth %d, others at %d", pgno, d,
                            c->leaf_depth);
        return DHL_OK;
    }
    if (pg->n == 0)
        return dhl__err(db, DHL_ECORRUPT, "interior page %u has no children", pgno);
    if (pg->recs[0].key != lo)
        return dhl__err(db, DHL_ECORRUPT,
                        "interior page %u: first key %lld is not its lower bound %lld", pgno,
                        (long long)pg->recs[0].key, (long long)lo);
    for (uint32_t i = 0; i < pg->n; i++) {
        /* pg stays cached: nothing is evicted during a check */
        bool last = i + 1 == pg->n;
        rc = node(c, get32(pg->recs[i].val), pg->recs[i].key, last ? hi : pg->recs[i + 1].key,
                  last ? hi_inf : false, d + 1);
        if (rc)
            return rc;
    }
    return DHL_OK;
}

int dhl_check(dhl *db)
{
    if (!db || !db->opened)
        return DHL_EMISUSE;
    db->err[0] = 0;
    if (db->in_txn)
        return dhl__err(db, DHL_EMISUSE, "cannot check inside a transaction");
    const struct meta *m = &db->committed;
    uint64_t fp = dhl__file_pages(db);
    if (m->page_count > fp)
        return dhl__err(db, DHL_ETRUNC, "database has %u pages but the file only %llu",
                        m->page_count, (unsigned long long)fp);
    if (m->freelist)
        return dhl__err(db, DHL_ECORRUPT, "free-list head %u (pages are never freed)", m->freelist);
    struct chk c = {db, calloc(m->page_count + 1, 1), -1};
    if (!c.seen)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    int rc = DHL_OK;
    for (uint32_t t = 0; t < db->ntrees && !rc; t++) {
        c.leaf_depth = -1;
        if (m->roots[t])
            rc = node(&c, m->roots[t], INT64_MIN, 0, true, 0);
    }
    free(c.seen);
    return rc;
}

struct dig {
    uint32_t tree;
    unsigned __int128 sum;
    uint8_t *buf;
    size_t cap;
};

static int dig_cb(void *arg, int64_t key, const void *val, size_t len)
{
    struct dig *g = arg;
    if (12 + len > g->cap) {
        uint8_t *b = realloc(g->buf, 12 + len);
        if (!b)
            return DHL_ENOMEM;
        g->buf = b;
        g->cap = 12 + len;
    }
    put32(g->buf, g->tree);
    put64(g->buf + 4, (uint64_t)key);
    memcpy(g->buf + 12, val, len);
    XXH128_hash_t h = XXH3_128bits(g->buf, 12 + len);
    g->sum += ((unsigned __int128)h.high64 << 64) | h.low64;
    return 0;
}

int dhl_digest(dhl *db, char hex[33])
{
    struct dig g = {0, 0, NULL, 0};
    int rc = DHL_OK;
    for (uint32_t t = 0; db && t < db->ntrees && !rc; t++) {
        g.tree = t;
        rc = dhl_scan(db, t, INT64_MIN, INT64_MAX, dig_cb, &g);
    }
    free(g.buf);
    if (!db)
        return DHL_EMISUSE;
    if (rc == DHL_ENOMEM)
        return dhl__err(db, rc, "out of memory");
    if (rc)
        return rc;
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)(g.sum >> 64),
             (unsigned long long)g.sum);
    return DHL_OK;
}

int dhl_info(dhl *db, struct dhl_info *in)
{
    if (!db || !db->opened)
        return DHL_EMISUSE;
    memset(in, 0, sizeof *in);
    in->page_size = db->ps;
    in->ntrees = db->ntrees;
    in->flags = db->hflags;
    in->page_count = db->committed.page_count;
    in->freelist = db->committed.freelist;
    in->fcc = db->fcc;
    in->txn_size = db->txn_size;
    memcpy(in->roots, db->committed.roots, sizeof(uint32_t) * db->ntrees);
    in->valid_meta = (uint32_t)db->valid_meta;
    in->file_pages = dhl__file_pages(db);
    return DHL_OK;
}

/* read_raw: the stored bytes of page pgno (error past the end). */
static int read_raw(dhl *db, uint32_t pgno, uint8_t *buf)
{
    if ((uint64_t)pgno >= dhl__file_pages(db))
        return dhl__err(db, DHL_ETRUNC, "page %u is past the end of the file", pgno);
    return dhl__read(db, pgno, buf, NULL);
}

int dhl_read_page(dhl *db, uint32_t pgno, void *buf)
{
    if (!db || !db->opened)
        return DHL_EMISUSE;
    db->err[0] = 0;
    return read_raw(db, pgno, buf);
}

int dhl_page_info(dhl *db, uint32_t pgno, struct dhl_page_info *pi)
{
    if (!db || !db->opened)
        return DHL_EMISUSE;
    db->err[0] = 0;
    uint8_t *b = malloc(db->ps);
    if (!b)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    int rc = read_raw(db, pgno, b);
    if (rc) {
        free(b);
        return rc;
    }
    memset(pi, 0, sizeof *pi);
    pi->pgno = pgno;
    pi->is_data = pgno != 0;
    if (pgno == 0) {
        struct meta m[2];
        for (int s = 0; s < 2; s++) {
            dhl__meta_decode(db, b, s, &m[s]);
            pi->slot[s] =
                (struct dhl_slot_info){m[s].tid, m[s].page_count, m[s].freelist, m[s].commit, 0, 1};
        }
        pi->valid_slot =
            (db->hflags & DHL_FLAG_NOLOG) ? 0 : dhl_valid_slot(m[0].tid, m[1].tid, db->fcc);
    } else {
        char save[sizeof db->err];
        memcpy(save, db->err, sizeof save);
        for (int s = 0; s < 2; s++) {
            const uint8_t *h = b + s * DHL_SLOT_SIZE;
            uint32_t fo = get16(h + DHL_SLOT_FREE);
            pi->slot[s] = (struct dhl_slot_info){
                get32(h + DHL_SLOT_TID),    get16(h + DHL_SLOT_NREC), fo ? fo : db->ps,
                get16(h + DHL_SLOT_COMMIT), h[DHL_SLOT_TYPE],         0};
            pi->slot[s].array_ok = dhl__slot_check(db, b, s, pgno) == DHL_OK;
        }
        memcpy(db->err, save, sizeof save);
        pi->valid_slot = dhl__page_cslot(db, b);
    }
    free(b);
    return DHL_OK;
}

int dhl_slot_offsets(dhl *db, uint32_t pgno, int s, uint16_t *offs, uint32_t cap, uint32_t *n)
{
    if (!db || !db->opened)
        return DHL_EMISUSE;
    db->err[0] = 0;
    if (pgno == 0 || (s != 0 && s != 1))
        return dhl__err(db, DHL_EINVAL, "no offset array for page %u slot %d", pgno, s);
    uint8_t *b = malloc(db->ps);
    if (!b)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    int rc = read_raw(db, pgno, b);
    if (!rc) {
        uint32_t nr = get16(b + s * DHL_SLOT_SIZE + DHL_SLOT_NREC);
        uint32_t lim = (db->ps - DHL_PAGE_ARRAY) / 4;
        if (nr > lim)
            nr = lim;
        for (uint32_t i = 0; i < nr && i < cap; i++)
            offs[i] = get16(b + DHL_PAGE_ARRAY + 4 * i + 2 * s);
        *n = nr;
    }
    free(b);
    return rc;
}

/* dhl_reachable: see dhl.h.  An explicit stack (no recursion): damaged
** images may hold arbitrarily deep or cyclic pointers. */
int dhl_reachable(dhl *db, uint32_t *pages, uint32_t *parents, int32_t *slots, uint32_t cap,
                  uint32_t *n)
{
    if (!db || !db->opened || !n)
        return DHL_EMISUSE;
    db->err[0] = 0;
    *n = 0;
    const struct meta *m = &db->committed;
    uint32_t pc = m->page_count;
    uint64_t fp = dhl__file_pages(db);
    uint8_t *seen = calloc((size_t)pc + 1, 1);
    uint32_t *stk = malloc(sizeof *stk * 2 * ((size_t)pc + 1)); /* (page, parent) pairs */
    uint8_t *buf = malloc(db->ps);
    int rc = (seen && stk && buf) ? DHL_OK : dhl__err(db, DHL_ENOMEM, "out of memory");
    size_t sp = 0;
    for (uint32_t t = db->ntrees; !rc && t-- > 0;)
        if (m->roots[t] && m->roots[t] < pc && !seen[m->roots[t]]) {
            seen[m->roots[t]] = 1;
            stk[sp++] = m->roots[t];
            stk[sp++] = 0;
        }
    char save[sizeof db->err];
    while (!rc && sp > 0) {
        uint32_t parent = stk[--sp], pgno = stk[--sp];
        int32_t cs = -1;
        if ((uint64_t)pgno < fp) {
            if ((rc = dhl__read(db, pgno, buf, NULL)))
                break;
            cs = dhl__page_cslot(db, buf);
            memcpy(save, db->err, sizeof save);
            if (cs >= 0 && dhl__slot_check(db, buf, cs, pgno) != DHL_OK)
                cs = -2;
            memcpy(db->err, save, sizeof save);
        }
        if (*n < cap) {
            pages[*n] = pgno;
            parents[*n] = parent;
            slots[*n] = cs;
        }
        (*n)++;
        if (cs < 0 || buf[cs * DHL_SLOT_SIZE + DHL_SLOT_TYPE] != DHL_PAGE_INTERIOR)
            continue;
        uint32_t nr = get16(buf + cs * DHL_SLOT_SIZE + DHL_SLOT_NREC);
        /* push children right to left so the walk visits them left to right */
        for (uint32_t i = nr; i-- > 0;) {
            uint32_t child =
                get32(buf + get16(buf + DHL_PAGE_ARRAY + 4 * i + 2 * cs) + DHL_REC_HDR);
            if (child == 0 || child >= pc || seen[child])
                continue;
            seen[child] = 1;
            stk[sp++] = child;
            stk[sp++] = pgno;
        }
    }
    free(seen);
    free(stk);
    free(buf);
    return rc;
}

/* dhl_image_headers: see dhl.h. */
int dhl_image_headers(const void *buf, uint32_t ps, uint32_t first_pgno, uint32_t npages,
                      uint32_t ntrees, uint32_t *out)
{
    if (ps < DHL_MIN_PAGE_SIZE || ps > DHL_MAX_PAGE_SIZE || (ps & (ps - 1)) || ntrees < 1 ||
        ntrees > DHL_MAX_TREES)
        return DHL_EINVAL;
    for (uint32_t i = 0; i < npages; i++) {
        const uint8_t *b = (const uint8_t *)buf + (size_t)i * ps;
        uint32_t *o = out + 6 * (size_t)i;
        if (first_pgno + i == 0) {
            for (int s = 0; s < 2; s++) {
                const uint8_t *m = b + DHL_HDR_META0 + (uint32_t)s * DHL_META_SIZE(ntrees);
                o[s] = get32(m + DHL_META_TID);
                o[2 + s] = get32(m + DHL_META_COMMIT);
                o[4 + s] = get32(m + DHL_META_PAGECOUNT);
            }
        } else {
            for (int s = 0; s < 2; s++) {
                const uint8_t *h = b + s * DHL_SLOT_SIZE;
                o[s] = get32(h + DHL_SLOT_TID);
                o[2 + s] = get16(h + DHL_SLOT_COMMIT);
                o[4 + s] = get16(h + DHL_SLOT_NREC);
            }
        }
    }
    return DHL_OK;
}

/* dhl_image_commit: see dhl.h. */
int dhl_image_commit(const void *hdr, size_t n, uint32_t out[3])
{
    const uint8_t *b = hdr;
    out[0] = out[1] = out[2] = 0;
    if (n < DHL_HDR_META0)
        return DHL_EINVAL;
    uint32_t nt = get32(b + DHL_HDR_NTREES);
    if (nt < 1 || nt > DHL_MAX_TREES || n < DHL_HDR_COMMIT(nt) + 8)
        return DHL_EINVAL;
    if (!(get32(b + DHL_HDR_FLAGS) & DHL_FLAG_THESIS))
        return DHL_OK;
    out[0] = 1;
    out[1] = get32(b + DHL_HDR_COMMIT(nt));
    out[2] = get32(b + DHL_HDR_COMMIT(nt) + 4);
    return DHL_OK;
}
