/*
** pager.c — the buffer cache.  Pages are cached by page number; a page read
** from storage keeps its stored image (img) and a record view built from
** the committed slot.  Dirty pages stay until commit or rollback; clean
** pages are dropped at transaction boundaries when the cache is over its
** limit (never in the middle of an operation, which holds page pointers).
*/
#include "internal.h"

void dhl__free_page(struct page *pg)
{
    if (!pg)
        return;
    dhl__free_recs(pg);
    free(pg->recs);
    free(pg->img);
    free(pg);
}

static int cache_slot(dhl *db, uint32_t pgno)
{
    if (pgno < db->pages_cap)
        return 0;
    uint32_t cap = db->pages_cap ? db->pages_cap : 64;
    while (cap <= pgno)
        cap *= 2;
    struct page **p = realloc(db->pages, sizeof *p * cap);
    if (!p)
        return -1;
    memset(p + db->pages_cap, 0, sizeof *p * (cap - db->pages_cap));
    db->pages = p;
    db->pages_cap = cap;
    return 0;
}

/* dhl__get: the cached page pgno (1 <= pgno < page count), read and parsed
** through the read rule on a miss.  A page without a committed slot header
** or with an impossible one is DHL_ECORRUPT; one past the end DHL_ETRUNC. */
int dhl__get(dhl *db, uint32_t pgno, struct page **out)
{
    if (pgno == 0 || pgno >= db->work.page_count)
        return dhl__err(db, DHL_ECORRUPT, "page number %u outside the database (1..%u)", pgno,
                        db->work.page_count - 1);
    if (pgno < db->pages_cap && db->pages[pgno]) {
        *out = db->pages[pgno];
        return DHL_OK;
    }
    if (cache_slot(db, pgno))
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    struct page *pg = calloc(1, sizeof *pg);
    if (!pg || !(pg->img = malloc(db->ps))) {
        free(pg);
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    }
    pg->pgno = pgno;
    bool shortr = false;
    int rc = dhl__read(db, pgno, pg->img, &shortr);
    if (!rc && shortr)
        rc = dhl__err(db, DHL_ETRUNC, "page %u is past the end of the file (database has %u pages)",
                      pgno, db->work.page_count);
    if (!rc) {
        pg->cslot = dhl__page_cslot(db, pg->img);
        if (pg->cslot < 0)
            rc = dhl__err(db, DHL_ECORRUPT, "page %u has no committed slot header (FCC %u)", pgno,
                          db->fcc);
    }
    if (!rc)
        rc = dhl__parse(db, pg);
    if (rc) {
        dhl__free_page(pg);
        return rc;
    }
    db->pages[pgno] = pg;
    db->ncached++;
    *out = pg;
    return DHL_OK;
}

/* dhl__new_page: allocate page number work.page_count for the current
** transaction: an empty view of the given type on a zeroed image. */
int dhl__new_page(dhl *db, uint8_t type, struct page **out)
{
    uint32_t pgno = db->work.page_count;
    if (pgno == UINT32_MAX || (uint64_t)pgno * db->ps > (1ull << 46))
        return dhl__err(db, DHL_EFULL, "database size limit reached");
    if (cache_slot(db, pgno))
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    struct page *pg = calloc(1, sizeof *pg);
    if (!pg || !(pg->img = calloc(1, db->ps))) {
        free(pg);
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    }
    if (db->pages[pgno]) { /* stale page from a rolled-back allocation */
        dhl__free_page(db->pages[pgno]);
        db->ncached--;
    }
    pg->pgno = pgno;
    pg->cslot = -1;
    pg->fresh = true;
    pg->parsed = true;
    pg->type = type;
    db->pages[pgno] = pg;
    db->ncached++;
    db->work.page_count++;
    dhl__touch(db, pg);
    *out = pg;
    return DHL_OK;
}

void dhl__touch(dhl *db, struct page *pg)
{
    pg->dirty = true;
    pg->dirty_seq = ++db->seq;
}

/* dhl__drop_cache: free cached pages: all of them, or only clean ones. */
void dhl__drop_cache(dhl *db, bool keep_dirty)
{
    for (uint32_t i = 0; i < db->pages_cap; i++) {
        struct page *pg = db->pages[i];
        if (!pg || (keep_dirty && pg->dirty))
            continue;
        dhl__free_page(pg);
        db->pages[i] = NULL;
        db->ncached--;
    }
}
