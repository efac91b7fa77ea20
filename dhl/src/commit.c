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
** An empty ordering sync (nothing written before the commit page) is
** skipped, so a one-page TC_OPT transaction syncs once.
*/
#include "internal.h"

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

int dhl__commit(dhl *db)
{
    uint32_t nd = 0;
    for (uint32_t i = 0; i < db->pages_cap; i++)
        if (db->pages[i] && db->pages[i]->dirty)
            nd++;
    bool mchg = meta_changed(db);
    if (nd == 0 && !mchg) { /* nothing to write: no TID is used */
        db->in_txn = false;
        return DHL_OK;
    }
    bool nolog = db->hflags & DHL_FLAG_NOLOG;
    bool opt = db->mode == DHL_MODE_TC_OPT || db->mode == DHL_MODE_CC_OPT;
    bool two_syncs = db->mode == DHL_MODE_TC || db->mode == DHL_MODE_TC_OPT;
    bool write_hdr = (opt || nolog) ? mchg : true;
    uint32_t nslots = nd + (write_hdr ? 1 : 0);
    if (nslots > DHL_MAX_TXN_PAGES) {
        dhl__rollback(db);
        return dhl__err(db, DHL_EFULL, "transaction writes %u pages, more than %u", nslots,
                        DHL_MAX_TXN_PAGES);
    }
    uint32_t T = db->next_tid;
    if (T == DHL_TID_INV || T <= db->fcc) {
        dhl__rollback(db);
        return dhl__err(db, DHL_EFULL, "transaction IDs exhausted");
    }

    struct page **dp = malloc(sizeof *dp * (nd + 1));
    uint8_t **img = calloc(nd + 1, sizeof *img);
    uint8_t *hdr = malloc(db->ps);
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
    if (!opt || nolog)
        cp = NULL;
    for (uint32_t i = 0; !rc && i < nd; i++) {
        if (!(img[i] = malloc(db->ps)))
            rc = dhl__err(db, DHL_ENOMEM, "out of memory");
        else
            rc = dhl__materialize(db, dp[i], T, dp[i] == cp ? (uint16_t)nslots : 0, img[i]);
    }
    int hw = nolog ? 0 : 1 - db->valid_meta;
    struct meta m = db->work;
    if (!rc && write_hdr) {
        memcpy(hdr, db->hdr, db->ps);
        m.tid = T;
        m.commit = (!opt && !nolog) ? nslots : 0;
        dhl__meta_encode(db, hdr, hw, &m);
    }
    if (rc) {
        dhl__rollback(db);
        goto out;
    }

    /* Write.  Any failure from here on leaves storage in an unknown state:
    ** the handle is poisoned and the next open recovers. */
    uint32_t before = 0;
    if (write_hdr && opt) {
        rc = dhl__write(db, 0, hdr);
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
    if (!rc && write_hdr && !opt)
        rc = dhl__write(db, 0, hdr);
    if (!rc)
        rc = dhl__sync(db);
    if (rc) {
        db->poisoned = true;
        db->in_txn = false;
        goto out;
    }

    /* Committed: install the new images and the new state. */
    db->fcc = T;
    db->next_tid = T + 1;
    db->txn_size = nslots;
    if (write_hdr) {
        memcpy(db->hdr, hdr, db->ps);
        db->mslot[hw] = m;
        db->valid_meta = hw;
    }
    for (uint32_t i = 0; i < nd; i++) {
        struct page *pg = dp[i];
        free(pg->img);
        pg->img = img[i];
        img[i] = NULL;
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
out:
    if (img)
        for (uint32_t i = 0; i < nd; i++)
            free(img[i]);
    free(img);
    free(dp);
    free(hdr);
    return rc;
}
