/*
** btree.c — B+-trees of int64 keys over DHL pages.  Leaves hold key ->
** value; an interior record (k, child) says child holds keys >= k (up to the
** next record's key); an interior page's first key is its lower bound
** (INT64_MIN at the left edge).  Roots live in the header meta slot, so a
** root split allocates a new root instead of rewriting the old one.
**
** Splits never destroy committed state: the page that overflows keeps a
** prefix of its records (its committed records stay in place) and the rest
** go to freshly allocated pages; when not even the first record fits next to
** the committed ones, all records move to fresh pages and the parent points
** at those instead (the old page is left as it is, unreferenced).  Pages are
** never freed or merged (a leaf emptied by deletes stays in the tree).
*/
#include "internal.h"

#define MAX_DEPTH 48

struct path {
    struct page *pg[MAX_DEPTH];
    uint32_t idx[MAX_DEPTH]; /* idx[d]: index of pg[d] in pg[d-1] */
    int depth;
};

/* lower_bound: first i with recs[i].key >= key. */
static uint32_t lower_bound(const struct page *pg, int64_t key)
{
    uint32_t lo = 0, hi = pg->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pg->recs[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t child_of(const struct rec *r) { return get32(r->val); }

/* child_index: the interior record covering key (last with key <= key). */
static int child_index(dhl *db, const struct page *pg, int64_t key, uint32_t *i)
{
    uint32_t lb = lower_bound(pg, key);
    if (lb < pg->n && pg->recs[lb].key == key) {
        *i = lb;
        return DHL_OK;
    }
    if (lb == 0)
        return dhl__err(db, DHL_ECORRUPT, "page %u: key %lld below the page's lower bound",
                        pg->pgno, (long long)key);
    *i = lb - 1;
    return DHL_OK;
}

static int check_tree(dhl *db, uint32_t tree)
{
    if (tree >= db->ntrees)
        return dhl__err(db, DHL_EINVAL, "tree %u does not exist (database has %u trees)", tree,
                        db->ntrees);
    return DHL_OK;
}

/* descend: fill p with the path from tree's root to the leaf for key.
** p->depth = 0 for an empty tree. */
static int descend(dhl *db, uint32_t tree, int64_t key, struct path *p)
{
    p->depth = 0;
    uint32_t pgno = db->work.roots[tree];
    uint32_t idx = 0;
    while (pgno) {
        if (p->depth == MAX_DEPTH)
            return dhl__err(db, DHL_ECORRUPT, "tree %u deeper than %d levels (cycle?)", tree,
                            MAX_DEPTH);
        struct page *pg;
        int rc = dhl__get(db, pgno, &pg);
        if (rc)
            return rc;
        p->pg[p->depth] = pg;
        p->idx[p->depth] = idx;
        p->depth++;
        if (pg->type == DHL_PAGE_LEAF)
            return DHL_OK;
        if (pg->n == 0)
            return dhl__err(db, DHL_ECORRUPT, "interior page %u has no children", pg->pgno);
        if ((rc = child_index(db, pg, key, &idx)))
            return rc;
        pgno = child_of(&pg->recs[idx]);
    }
    return DHL_OK;
}

static uint8_t *dup_bytes(const void *v, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, v, n);
    return p;
}

/* rec_insert: insert an owned copy of (key, val) at position i of pg. */
static int rec_insert(dhl *db, struct page *pg, uint32_t i, int64_t key, const void *val,
                      size_t len)
{
    uint8_t *v = dup_bytes(val, len);
    if (!v || dhl__rec_reserve(pg, pg->n + 1)) {
        free(v);
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    }
    memmove(pg->recs + i + 1, pg->recs + i, sizeof *pg->recs * (pg->n - i));
    pg->recs[i] = (struct rec){key, (uint16_t)len, 0, true, v};
    pg->n++;
    dhl__touch(db, pg);
    return DHL_OK;
}

static int child_insert(dhl *db, struct page *pg, uint32_t i, int64_t key, uint32_t child)
{
    uint8_t b[4];
    put32(b, child);
    return rec_insert(db, pg, i, key, b, 4);
}

static uint32_t rec_bytes(const struct rec *r) { return DHL_REC_HDR + r->len; }

static int fix(dhl *db, uint32_t tree, struct path *p, int d, uint32_t hint);

/* make_root: a new interior root over children[0..m) with keys[0..m). */
static int make_root(dhl *db, uint32_t tree, const int64_t *keys, const uint32_t *kids, uint32_t m)
{
    struct page *nr;
    int rc = dhl__new_page(db, DHL_PAGE_INTERIOR, &nr);
    for (uint32_t i = 0; !rc && i < m; i++)
        rc = child_insert(db, nr, i, i ? keys[i] : INT64_MIN, kids[i]);
    if (rc)
        return rc;
    db->work.roots[tree] = nr->pgno;
    struct path q = {.pg = {nr}, .idx = {0}, .depth = 1};
    return fix(db, tree, &q, 1, UINT32_MAX);
}

/* The fresh pages a split moved records to: page kids[i] starts at key
** keys[i], for i < m (cap: room in both arrays). */
struct split {
    uint32_t m, cap;
    uint32_t *kids;
    int64_t *keys;
};

/* keep_count: how many records [0, k) the overflowing page pg keeps: from
** all but the last (hint at the end: an append) or the first half by bytes,
** down to as many as fit next to its committed records; 0 when none do. */
static uint32_t keep_count(const dhl *db, const struct page *pg, uint32_t hint)
{
    uint32_t n = pg->n, k = 0;
    if (n > 1) {
        uint32_t total = 0, acc = 0, mid = 1;
        for (uint32_t i = 0; i < n; i++)
            total += rec_bytes(&pg->recs[i]);
        for (mid = 0; mid < n - 1 && acc < total / 2; mid++)
            acc += rec_bytes(&pg->recs[mid]);
        if (mid < 1)
            mid = 1;
        uint32_t start = (hint == n - 1) ? n - 1 : mid;
        for (k = start; k > 0; k--)
            if (dhl__fits(db, pg, 0, k))
                break;
    }
    return k;
}

/* copy_recs: give the empty page np owned copies of the c records r. */
static int copy_recs(dhl *db, struct page *np, const struct rec *r, uint32_t c)
{
    if (dhl__rec_reserve(np, c))
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < c; j++) {
        uint8_t *v = dup_bytes(r[j].val, r[j].len);
        if (!v)
            return dhl__err(db, DHL_ENOMEM, "out of memory");
        np->recs[np->n++] = (struct rec){r[j].key, r[j].len, 0, true, v};
    }
    return DHL_OK;
}

/* split_add: append fresh page pgno, starting at key, to sp. */
static int split_add(dhl *db, struct split *sp, uint32_t pgno, int64_t key)
{
    if (sp->m == sp->cap) {
        sp->cap *= 2;
        uint32_t *nk = realloc(sp->kids, sizeof *nk * sp->cap);
        if (nk)
            sp->kids = nk;
        int64_t *nkey = realloc(sp->keys, sizeof *nkey * sp->cap);
        if (nkey)
            sp->keys = nkey;
        if (!nk || !nkey)
            return dhl__err(db, DHL_ENOMEM, "out of memory");
    }
    sp->kids[sp->m] = pgno;
    sp->keys[sp->m] = key;
    sp->m++;
    return DHL_OK;
}

/* spill: copy records [k, n) of pg to fresh pages of its type, packed
** greedily, and list those pages in sp. */
static int spill(dhl *db, const struct page *pg, uint32_t k, struct split *sp)
{
    uint32_t n = pg->n;
    int rc = DHL_OK;
    for (uint32_t s = k; !rc && s < n;) {
        uint32_t c = 1;
        while (s + c < n && dhl__fits_fresh(db, pg->recs + s, c + 1))
            c++;
        struct page *np;
        if ((rc = dhl__new_page(db, pg->type, &np)))
            break;
        if ((rc = copy_recs(db, np, pg->recs + s, c)))
            break;
        rc = split_add(db, sp, np->pgno, pg->recs[s].key);
        s += c;
    }
    return rc;
}

/* shrink: after a spill, pg keeps records [0, k); with k = 0 it is left as
** stored (unreferenced from now on) and its view is parsed again. */
static int shrink(dhl *db, struct page *pg, uint32_t k)
{
    if (k > 0) { /* the page keeps records [0, k) */
        for (uint32_t i = k; i < pg->n; i++)
            if (pg->recs[i].owned)
                free(pg->recs[i].val);
        pg->n = k;
        dhl__touch(db, pg);
        return DHL_OK;
    }
    pg->dirty = false; /* everything moved: leave the old page as stored, unreferenced */
    return dhl__parse(db, pg);
}

/* split_root: the root pg split, keeping k records: the tree's root becomes
** the one fresh page, or a new interior root over pg (if it kept any) and
** the fresh pages. */
static int split_root(dhl *db, uint32_t tree, const struct page *pg, uint32_t k,
                      const struct split *sp)
{
    uint32_t m = sp->m;
    if (k == 0 && m == 1) {
        db->work.roots[tree] = sp->kids[0];
        return DHL_OK;
    }
    if (k == 0)
        return make_root(db, tree, sp->keys, sp->kids, m);
    uint32_t *k2 = malloc(sizeof *k2 * (m + 1));
    int64_t *y2 = malloc(sizeof *y2 * (m + 1));
    int rc;
    if (!k2 || !y2)
        rc = dhl__err(db, DHL_ENOMEM, "out of memory");
    else {
        k2[0] = pg->pgno;
        y2[0] = INT64_MIN;
        memcpy(k2 + 1, sp->kids, sizeof *k2 * m);
        memcpy(y2 + 1, sp->keys, sizeof *y2 * m);
        rc = make_root(db, tree, y2, k2, m + 1);
    }
    free(k2);
    free(y2);
    return rc;
}

/* link_parent: the page at depth d of p split, keeping k records: insert
** the fresh pages into its parent after its own record (which points at
** the first fresh page instead if it kept none), then fix the parent. */
static int link_parent(dhl *db, uint32_t tree, struct path *p, int d, uint32_t k,
                       const struct split *sp)
{
    struct page *parent = p->pg[d - 2];
    uint32_t pi = p->idx[d - 1], at = pi + 1, first = 0;
    if (k == 0) { /* repoint the parent's record at the first fresh page */
        struct rec *r = &parent->recs[pi];
        uint8_t *v = malloc(4);
        if (!v)
            return dhl__err(db, DHL_ENOMEM, "out of memory");
        put32(v, sp->kids[0]);
        if (r->owned)
            free(r->val);
        r->val = v;
        r->owned = true;
        r->pin = 0;
        dhl__touch(db, parent);
        first = 1;
    }
    int rc = DHL_OK;
    for (uint32_t i = first; !rc && i < sp->m; i++)
        rc = child_insert(db, parent, at++, sp->keys[i], sp->kids[i]);
    if (!rc)
        rc = fix(db, tree, p, d - 1, at - 1);
    return rc;
}

/* fix: make the page at depth d (1-based) of path p fit, splitting it (and
** then its parent) when its view no longer fits next to its committed
** records.  hint is the index of the record just changed (or UINT32_MAX):
** an append at the end keeps the page full, anything else splits by bytes
** in the middle. */
static int fix(dhl *db, uint32_t tree, struct path *p, int d, uint32_t hint)
{
    struct page *pg = p->pg[d - 1];
    if (dhl__fits(db, pg, 0, pg->n))
        return DHL_OK;
    uint32_t k = keep_count(db, pg, hint); /* how many records the page keeps */
    /* Records [k, n) go to fresh pages, packed greedily. */
    struct split sp = {0, 8, NULL, NULL};
    sp.kids = malloc(sizeof *sp.kids * sp.cap);
    sp.keys = malloc(sizeof *sp.keys * sp.cap);
    int rc = (sp.kids && sp.keys) ? DHL_OK : dhl__err(db, DHL_ENOMEM, "out of memory");
    if (!rc)
        rc = spill(db, pg, k, &sp);
    if (!rc)
        rc = shrink(db, pg, k);
    if (!rc)
        rc = d == 1 ? split_root(db, tree, pg, k, &sp) : link_parent(db, tree, p, d, k, &sp);
    free(sp.kids);
    free(sp.keys);
    return rc;
}

static int check_value(dhl *db, size_t len)
{
    if (len > DHL_MAX_VALUE(db->ps))
        return dhl__err(db, DHL_EINVAL,
                        "value of %zu bytes is larger than the %zu a %u-byte page holds", len,
                        DHL_MAX_VALUE(db->ps), db->ps);
    return DHL_OK;
}

int dhl__insert(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len)
{
    int rc = check_tree(db, tree);
    if (!rc)
        rc = check_value(db, len);
    struct path p;
    if (!rc)
        rc = descend(db, tree, key, &p);
    if (rc)
        return rc;
    if (p.depth == 0) {
        struct page *pg;
        if ((rc = dhl__new_page(db, DHL_PAGE_LEAF, &pg)))
            return rc;
        db->work.roots[tree] = pg->pgno;
        return rec_insert(db, pg, 0, key, val, len);
    }
    struct page *leaf = p.pg[p.depth - 1];
    uint32_t i = lower_bound(leaf, key);
    if (i < leaf->n && leaf->recs[i].key == key)
        return dhl__err(db, DHL_EEXISTS, "key %lld already in tree %u", (long long)key, tree);
    if ((rc = rec_insert(db, leaf, i, key, val, len)))
        return rc;
    return fix(db, tree, &p, p.depth, i);
}

/* find: path to the leaf holding key and its index, or DHL_ENOTFOUND. */
static int find(dhl *db, uint32_t tree, int64_t key, struct path *p, uint32_t *i)
{
    int rc = check_tree(db, tree);
    if (!rc)
        rc = descend(db, tree, key, p);
    if (rc)
        return rc;
    if (p->depth) {
        struct page *leaf = p->pg[p->depth - 1];
        *i = lower_bound(leaf, key);
        if (*i < leaf->n && leaf->recs[*i].key == key)
            return DHL_OK;
    }
    return dhl__err(db, DHL_ENOTFOUND, "key %lld not in tree %u", (long long)key, tree);
}

int dhl__update(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len)
{
    struct path p;
    uint32_t i;
    int rc = check_value(db, len);
    if (!rc)
        rc = find(db, tree, key, &p, &i);
    if (rc)
        return rc;
    struct page *leaf = p.pg[p.depth - 1];
    uint8_t *v = dup_bytes(val, len);
    if (!v)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    struct rec *r = &leaf->recs[i];
    if (r->owned)
        free(r->val);
    *r = (struct rec){key, (uint16_t)len, 0, true, v};
    dhl__touch(db, leaf);
    return fix(db, tree, &p, p.depth, i);
}

int dhl__delete(dhl *db, uint32_t tree, int64_t key)
{
    struct path p;
    uint32_t i;
    int rc = find(db, tree, key, &p, &i);
    if (rc)
        return rc;
    struct page *leaf = p.pg[p.depth - 1];
    if (leaf->recs[i].owned)
        free(leaf->recs[i].val);
    memmove(leaf->recs + i, leaf->recs + i + 1, sizeof *leaf->recs * (leaf->n - i - 1));
    leaf->n--;
    dhl__touch(db, leaf);
    return fix(db, tree, &p, p.depth, UINT32_MAX);
}

int dhl__get_rec(dhl *db, uint32_t tree, int64_t key, void *buf, size_t cap, size_t *len)
{
    struct path p;
    uint32_t i;
    int rc = find(db, tree, key, &p, &i);
    if (rc)
        return rc;
    const struct rec *r = &p.pg[p.depth - 1]->recs[i];
    if (buf && cap)
        memcpy(buf, r->val, r->len < cap ? r->len : cap);
    if (len)
        *len = r->len;
    return DHL_OK;
}

/* scan_page: visit records of page pgno within [lo, hi] in key order. */
static int scan_page(dhl *db, uint32_t pgno, int depth, int64_t lo, int64_t hi, dhl_scan_cb cb,
                     void *arg)
{
    if (depth >= MAX_DEPTH)
        return dhl__err(db, DHL_ECORRUPT, "tree deeper than %d levels (cycle?)", MAX_DEPTH);
    struct page *pg;
    int rc = dhl__get(db, pgno, &pg);
    if (rc)
        return rc;
    uint32_t i = lower_bound(pg, lo);
    if (pg->type == DHL_PAGE_LEAF) {
        for (; i < pg->n && pg->recs[i].key <= hi; i++)
            if ((rc = cb(arg, pg->recs[i].key, pg->recs[i].val, pg->recs[i].len)))
                return rc;
        return DHL_OK;
    }
    if (i == pg->n || (i > 0 && pg->recs[i].key > lo))
        i = i ? i - 1 : 0;
    for (; i < pg->n && pg->recs[i].key <= hi; i++) {
        /* the child page may be dropped from the cache by nothing here:
        ** eviction only happens at transaction boundaries */
        if ((rc = scan_page(db, child_of(&pg->recs[i]), depth + 1, lo, hi, cb, arg)))
            return rc;
    }
    return DHL_OK;
}

int dhl__scan(dhl *db, uint32_t tree, int64_t lo, int64_t hi, dhl_scan_cb cb, void *arg)
{
    int rc = check_tree(db, tree);
    if (rc || !db->work.roots[tree] || lo > hi)
        return rc;
    return scan_page(db, db->work.roots[tree], 0, lo, hi, cb, arg);
}
