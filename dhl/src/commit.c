/*
** commit.c — the commit protocols.  A write transaction T = next_tid (FCC +
** 1, or above every TID recovery found on the store: see recover.c) builds
** the next image of every dirty page (its other slot header gets TID T) and
** writes them so that the commit record — FCC = T with the transaction size,
** i.e. the number of slot headers carrying TID T — reaches storage:
**
**   TC      data pages, sync, header page (commit record), sync
**   CC      data pages + header page (commit record), one sync
**   TC_OPT  [header page if changed +] data pages, sync, last-modified data
**           page (commit record embedded in its slot header), sync
**   CC_OPT  [header page if changed +] data pages with the commit record in
**           the last-modified data page, one sync
**   NOLOG   pages rewritten in place through slot 0, then the header page
**           if it changed, one sync (unsafe)
**
** The thesis as written (DHL_FLAG_THESIS databases): the header page
** carries one commit record, FCC = T and the size, overwritten in place
** (the meta slots keep their commit field 0):
**
**   TC_THESIS  data pages, sync, header page (FCC = T, size 0: recovery
**              trusts the FCC alone), sync
**   CC_THESIS  data pages + header page (FCC = T, size), one sync
**
** An empty ordering sync (nothing written before the commit page) is
** skipped, so a one-page TC_OPT transaction syncs once.
*/
#include "internal.h"

/* A transaction being committed: what it writes and where. */
struct txn {
    uint32_t T;       /* its TID */
    uint32_t nd;      /* dirty pages */
    uint32_t nslots;  /* slot headers carrying T: the transaction size */
    bool nolog, opt;  /* the NOLOG format; an _OPT mode */
    bool thesis;      /* the thesis's format: one commit record in place */
    bool hdr_first;   /* the header page is issued before the data pages */
    bool two_syncs;   /* TC, TC_OPT: a sync orders the commit record last */
    bool write_hdr;   /* the header page is written */
    struct page **dp; /* the dirty pages, by page number */
    uint8_t **img;    /* img[i]: the next image of dp[i] */
    uint8_t *hdr;     /* the next header page */
    struct page *cp;  /* _OPT: the page that carries the commit record */
    int hw;           /* the header meta slot written */
    struct meta m;    /* ... and what is written there */
};

/* meta_changed: the transaction changed the page count, free list or a root. */
static bool meta_changed(const dhl *db)
{
    if (db->work.page_count != db->committed.page_count ||
        db->work.freelist != db->committed.freelist)
        return true;
    return memcmp(db->work.roots, db->committed.roots, sizeof(uint32_t) * db->ntrees) != 0;
}

/* dhl__rollback: forget every change of the open transaction. */
void dhl__rollback(dhl *db)
{
    for (uint32_t i = 0; i < db->pages_cap; i++) {
        struct page *pg = db->pages[i];
        if (pg && pg->dirty) {
            dhl__free_page(pg);
            db->pages[i] = NULL;
            db->ncached--;
        }
    }
    db->work = db->committed;
    db->in_txn = false;
}

/* build_images: collect the dirty pages (and, _OPT, the last modified one,
** which carries the commit record) and build every page's next image and
** the next header page, in memory; DHL_ENOMEM or a materialize error. */
static int build_images(dhl *db, struct txn *x)
{
    uint32_t nd = x->nd, nslots = x->nslots;
    struct page **dp = x->dp = malloc(sizeof *dp * (nd + 1));
    uint8_t **img = x->img = calloc(nd + 1, sizeof *img);
    uint8_t *hdr = x->hdr = malloc(db->ps);
    int rc = (dp && img && hdr) ? DHL_OK : dhl__err(db, DHL_ENOMEM, "out of memory");
    struct page *cp = NULL; /* _OPT: the page that carries the commit record */
    uint32_t k = 0;
    for (uint32_t i = 0; !rc && i < db->pages_cap; i++) {
        struct page *pg = db->pages[i];
        if (!pg || !pg->dirty)
            continue;
        dp[k++] = pg;
        if (!cp || pg->dirty_seq > cp->dirty_seq)
            cp = pg;
    }
    if (!x->opt || x->nolog)
        cp = NULL;
    x->cp = cp;
    for (uint32_t i = 0; !rc && i < nd; i++) {
        if (!(img[i] = malloc(db->ps)))
            rc = dhl__err(db, DHL_ENOMEM, "out of memory");
        else
            rc = dhl__materialize(db, dp[i], x->T, dp[i] == cp ? (uint16_t)nslots : 0, img[i]);
    }
    x->hw = x->nolog ? 0 : 1 - db->valid_meta;
    x->m = db->work;
    if (!rc && x->write_hdr) {
        memcpy(hdr, db->hdr, db->ps);
        x->m.tid = x->T;
        x->m.commit = (!x->opt && !x->nolog && !x->thesis) ? nslots : 0;
        dhl__meta_encode(db, hdr, x->hw, &x->m);
        if (x->thesis)
            dhl__commit_encode(db, hdr, x->T, db->mode == DHL_MODE_CC_THESIS ? nslots : 0);
    }
    return rc;
}

/* write_txn: write the images and the header page in the order of the
** mode's commit protocol, with its syncs (see the top of this file). */
static int write_txn(dhl *db, const struct txn *x)
{
    struct page *const *dp = x->dp, *cp = x->cp;
    uint8_t *const *img = x->img;
    uint32_t nd = x->nd;
    bool two_syncs = x->two_syncs, write_hdr = x->write_hdr, hdr_first = x->hdr_first;
    int rc = DHL_OK;
    uint32_t before = 0;
    if (write_hdr && hdr_first) {
        rc = dhl__write(db, 0, x->hdr);
        before++;
    }
    for (uint32_t i = 0; !rc && i < nd; i++)
        if (dp[i] != cp) {
            rc = dhl__write(db, dp[i]->pgno, img[i]);
            before++;
        }
    if (!rc && two_syncs && before && (cp || write_hdr))
        rc = dhl__sync(db);
    if (!rc && cp)
        for (uint32_t i = 0; i < nd; i++)
            if (dp[i] == cp)
                rc = dhl__write(db, cp->pgno, img[i]);
    if (!rc && write_hdr && !hdr_first)
        rc = dhl__write(db, 0, x->hdr);
    if (!rc)
        rc = dhl__sync(db);
    return rc;
}

/* install: the transaction is durable: its images become the pages'
** stored images and its state the committed one. */
static void install(dhl *db, struct txn *x)
{
    db->fcc = x->T;
    db->next_tid = x->T + 1;
    db->txn_size = x->nslots;
    if (x->write_hdr) {
        memcpy(db->hdr, x->hdr, db->ps);
        db->mslot[x->hw] = x->m;
        db->valid_meta = x->hw;
    }
    for (uint32_t i = 0; i < x->nd; i++) {
        struct page *pg = x->dp[i];
        free(pg->img);
        pg->img = x->img[i];
        x->img[i] = NULL;
        pg->fresh = false;
        pg->dirty = false;
        pg->cslot = dhl__page_cslot(db, pg->img);
        dhl__parse(db, pg); /* cannot fail: we just built it */
    }
    db->committed = db->work;
    db->ctr.txns++;
    db->in_txn = false;
    if (db->ncached > db->cache_pages)
        dhl__drop_cache(db, true);
}

/* free_txn: free what build_images allocated (installed images are not
** x's any more). */
static void free_txn(struct txn *x)
{
    if (x->img)
        for (uint32_t i = 0; i < x->nd; i++)
            free(x->img[i]);
    free(x->img);
    free(x->dp);
    free(x->hdr);
}

/* dhl__commit: commit the open transaction under the mode's protocol; an
** error before any write rolls it back, one after poisons the handle. */
int dhl__commit(dhl *db)
{
    struct txn x = {0};
    for (uint32_t i = 0; i < db->pages_cap; i++)
        if (db->pages[i] && db->pages[i]->dirty)
            x.nd++;
    bool mchg = meta_changed(db);
    if (x.nd == 0 && !mchg) { /* nothing to write: no TID is used */
        db->in_txn = false;
        return DHL_OK;
    }
    x.nolog = db->hflags & DHL_FLAG_NOLOG;
    x.opt = db->mode == DHL_MODE_TC_OPT || db->mode == DHL_MODE_CC_OPT;
    x.thesis = db->hflags & DHL_FLAG_THESIS;
    x.hdr_first = x.opt;
    x.two_syncs =
        db->mode == DHL_MODE_TC || db->mode == DHL_MODE_TC_OPT || db->mode == DHL_MODE_TC_THESIS;
    x.write_hdr = (x.opt || x.nolog) ? mchg : true;
    x.nslots = x.nd + (x.write_hdr ? 1 : 0);
    if (x.nslots > DHL_MAX_TXN_PAGES) {
        dhl__rollback(db);
        return dhl__err(db, DHL_EFULL, "transaction writes %u pages, more than %u", x.nslots,
                        DHL_MAX_TXN_PAGES);
    }
    x.T = db->next_tid;
    if (x.T == DHL_TID_INV || x.T <= db->fcc) {
        dhl__rollback(db);
        return dhl__err(db, DHL_EFULL, "transaction IDs exhausted");
    }
    int rc = build_images(db, &x);
    if (rc) {
        dhl__rollback(db);
    } else if ((rc = write_txn(db, &x))) {
        /* Any failure from here on leaves storage in an unknown state:
        ** the handle is poisoned and the next open recovers. */
        db->poisoned = true;
        db->in_txn = false;
    } else {
        install(db, &x); /* committed */
    }
    free_txn(&x);
    return rc;
}
