/*
** recover.c — finding the committed state after a crash, and repairing.
**
** The FCC is the greatest TID that carries a commit record (in a header
** meta slot, or embedded in a data page's slot header in the _OPT modes)
** and whose transaction is complete: the number of slot headers carrying
** that TID, in pages below the page count that transaction saw, equals the
** recorded transaction size.  Only the newest commit record may be
** incomplete (counting commit: the in-flight transaction); it is then
** rolled back and the next one must be complete.  Every slot header with a
** TID above the FCC is invalidated (TID and commit field set to 0), the
** repaired pages written and synced.  Recovery is idempotent and crash-safe:
** it only ever invalidates headers of the rolled-back or never-committed
** transaction, so a crash in the middle leaves fewer of them, and running it
** again reaches the same FCC.  NOLOG databases have no recovery.
**
** Every page of the store is scanned, a file or a block device alike: a
** block device is not truncated when a transaction is rolled back or a new
** database is formatted on it, so pages past the page count can hold slot
** headers of a rolled-back transaction or of an older database.  Left
** alone, such a header with the TID a later transaction takes would be
** counted toward it and make a partial transaction look complete.  Two
** rules close that: recovery invalidates every header above the FCC on the
** whole store, and the next transaction's TID is above every TID recovery
** saw (next_tid), so a TID is never used twice on a store (the thesis's
** format below excepted).
**
** The thesis's format (DHL_FLAG_THESIS, thesis_fcc) keeps one commit
** record, FCC and size, in the header page, overwritten in place.  Size 0
** (TC_THESIS) is trusted as is: the FCC alone decides (§3.2-3.3, relying
** on the sync before the commit record).  Otherwise the slot headers with
** TID == FCC are counted; a short count rolls back (§3.4): FCC - 1 (the
** thesis's TIDs are consecutive: the next TID is FCC + 1) with the count
** of its own slot headers as size is written back into the commit record,
** in the same page write as the invalidation of the header page's meta
** slot above it — restored at once, so a crash in the middle of recovery
** leaves either the old record (still short: rolled back again) or the
** restored one (complete).
*/
#include "internal.h"

struct cand {
    uint32_t tid, size, pgno;
};

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return x->tid > y->tid ? -1 : x->tid < y->tid;
}

/* page count seen by transaction tid: the meta slot with the greatest
** TID <= tid (0 if none). */
static uint32_t pagecount_at(const struct meta m[2], uint32_t tid)
{
    int s = dhl_valid_slot(m[0].tid, m[1].tid, tid);
    return s < 0 ? 0 : m[s].page_count;
}

/* Every slot header of the store, read once by read_slots: tid[2p+s] and
** cm[2p+s] are the TID and commit field of slot s of page p (page 0: the
** header's meta slots); cd[0..nc) the commit records, newest first. */
struct slots {
    uint32_t np; /* pages scanned */
    uint32_t *tid, *cm;
    struct cand *cd;
    uint32_t nc;
    uint8_t *buf; /* one page */
};

/* scan_size: *maxpc = the greatest page count of the meta slots (at least
** 1), *np = the pages to scan: every page of the store; DHL_ETRUNC when the
** store is shorter than the smaller page count. */
static int scan_size(dhl *db, uint64_t fpages, uint32_t *maxpc_out, uint32_t *np)
{
    /* Page counts only grow, so the smaller one is a floor of the committed one. */
    uint32_t maxpc = 1, minpc = UINT32_MAX;
    for (int s = 0; s < 2; s++)
        if (db->mslot[s].tid != DHL_TID_INV) {
            if (db->mslot[s].page_count > maxpc)
                maxpc = db->mslot[s].page_count;
            if (db->mslot[s].page_count < minpc)
                minpc = db->mslot[s].page_count;
        }
    if (minpc != UINT32_MAX && minpc > fpages)
        return dhl__err(db, DHL_ETRUNC,
                        "file is truncated: %llu pages, the database has at least %u",
                        (unsigned long long)fpages, minpc);
    uint64_t scan = fpages;
    if (scan < 1)
        scan = 1;
    if (scan > UINT32_MAX)
        scan = UINT32_MAX;
    *maxpc_out = maxpc;
    *np = (uint32_t)scan;
    return DHL_OK;
}

/* read_slots: allocate sl's arrays for sl->np pages and read every slot
** header into tid and cm; DHL_ENOMEM or the read's error. */
static int read_slots(dhl *db, struct slots *sl)
{
    uint32_t np = sl->np;
    sl->tid = calloc(2 * (size_t)np, sizeof *sl->tid);
    sl->cm = calloc(2 * (size_t)np, sizeof *sl->cm);
    sl->cd = malloc(sizeof *sl->cd * (2 * (size_t)np + 1));
    sl->buf = malloc(db->ps);
    if (!sl->tid || !sl->cm || !sl->cd || !sl->buf)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    uint32_t *tid = sl->tid, *cm = sl->cm;
    uint8_t *buf = sl->buf;
    for (int s = 0; s < 2; s++) {
        tid[s] = db->mslot[s].tid;
        cm[s] = db->mslot[s].commit;
    }
    int rc = DHL_OK;
    for (uint32_t p = 1; p < np && !rc; p++) {
        if ((rc = dhl__read(db, p, buf, NULL)))
            break;
        for (int s = 0; s < 2; s++) {
            tid[2 * p + s] = get32(buf + s * DHL_SLOT_SIZE + DHL_SLOT_TID);
            cm[2 * p + s] = get16(buf + s * DHL_SLOT_SIZE + DHL_SLOT_COMMIT);
        }
    }
    return rc;
}

/* find_commits: sl->cd = the commit records (slot headers with a commit
** field, below the page count their transaction saw), newest first. */
static void find_commits(const dhl *db, struct slots *sl)
{
    const uint32_t *tid = sl->tid, *cm = sl->cm;
    uint32_t nc = 0;
    for (uint32_t p = 0; p < sl->np; p++)
        for (int s = 0; s < 2; s++) {
            uint32_t t = tid[2 * p + s];
            if (t == DHL_TID_INV || cm[2 * p + s] == 0 || p >= pagecount_at(db->mslot, t))
                continue;
            sl->cd[nc++] = (struct cand){t, cm[2 * p + s], p};
        }
    qsort(sl->cd, nc, sizeof *sl->cd, cand_cmp);
    sl->nc = nc;
}

/* count_tid: the slot headers carrying tid in the pages below the page
** count transaction tid saw (header meta slots included). */
static uint32_t count_tid(const dhl *db, const struct slots *sl, uint32_t tid)
{
    uint32_t pc = pagecount_at(db->mslot, tid), cnt = 0;
    for (uint32_t p = 0; p < pc && p < sl->np; p++)
        cnt += (sl->tid[2 * p] == tid) + (sl->tid[2 * p + 1] == tid);
    return cnt;
}

/* set_fcc: FCC = fcc with transaction size size; the next TID is one
** above every TID found (the thesis's format: FCC + 1). */
static void set_fcc(dhl *db, const struct slots *sl, uint32_t fcc, uint32_t size)
{
    db->fcc = fcc;
    db->txn_size = size;
    db->rec.fcc = fcc;
    db->rec.txn_size = size;
    for (uint32_t i = 0; i < 2 * sl->np; i++)
        if (sl->tid[i] > db->rec.max_tid)
            db->rec.max_tid = sl->tid[i];
    uint32_t above = db->rec.max_tid > fcc ? db->rec.max_tid : fcc;
    db->next_tid = ((db->hflags & DHL_FLAG_THESIS) ? fcc : above) + 1;
    db->rec.next_tid = db->next_tid;
}

/* choose_fcc: the FCC is the newest commit record whose transaction is
** complete, of the newest two (only the newest may be partial); set fcc,
** txn_size, next_tid and the report in db->rec, or DHL_ECORRUPT/ETRUNC. */
static int choose_fcc(dhl *db, const struct slots *sl, uint32_t maxpc, uint64_t fpages)
{
    const struct cand *cd = sl->cd;
    uint32_t nc = sl->nc;
    int chosen = -1;
    for (uint32_t i = 0; i < nc && i < 2; i++) {
        if (i + 1 < nc && cd[i + 1].tid == cd[i].tid)
            return dhl__err(db, DHL_ECORRUPT,
                            "two commit records for transaction %u (pages %u and %u)", cd[i].tid,
                            cd[i].pgno, cd[i + 1].pgno);
        uint32_t cnt = count_tid(db, sl, cd[i].tid);
        if (i == 0) {
            db->rec.max_commit_tid = cd[0].tid;
            db->rec.max_commit_size = cd[0].size;
            db->rec.max_commit_count = cnt;
        }
        if (cnt == cd[i].size) {
            chosen = (int)i;
            break;
        }
        db->rec.rolled_back = 1;
    }
    if (chosen < 0) {
        if (nc > 0 && maxpc > fpages)
            return dhl__err(db, DHL_ETRUNC, "file is truncated: %llu pages, the database has %u",
                            (unsigned long long)fpages, maxpc);
        if (nc == 0)
            return dhl__err(db, DHL_ECORRUPT, "no commit record found: no committed state");
        return dhl__err(db, DHL_ECORRUPT,
                        "commit records of transactions %u and %u are both "
                        "incomplete",
                        cd[0].tid, nc > 1 ? cd[1].tid : 0);
    }
    set_fcc(db, sl, cd[chosen].tid, cd[chosen].size);
    return DHL_OK;
}

/* thesis_fcc: the thesis's rule for its one in-place commit record (see
** the top of this file); *restore: it is rolled back and must be written
** back.  DHL_ECORRUPT when it cannot be. */
static int thesis_fcc(dhl *db, const struct slots *sl, bool *restore)
{
    uint32_t f = get32(db->hdr + DHL_HDR_COMMIT(db->ntrees));
    uint32_t size = get32(db->hdr + DHL_HDR_COMMIT(db->ntrees) + 4);
    *restore = false;
    if (f == DHL_TID_INV)
        return dhl__err(db, DHL_ECORRUPT, "no commit record found: no committed state");
    uint32_t cnt = count_tid(db, sl, f);
    db->rec.max_commit_tid = f;
    db->rec.max_commit_size = size;
    db->rec.max_commit_count = cnt;
    if (size != 0 && cnt > size)
        return dhl__err(db, DHL_ECORRUPT,
                        "transaction %u: %u slot headers carry its TID, more than its size %u", f,
                        cnt, size);
    if (size != 0 && cnt < size) {
        if (f == 1)
            return dhl__err(db, DHL_ECORRUPT, "the creation (transaction 1) is incomplete");
        f--;
        size = count_tid(db, sl, f);
        db->rec.rolled_back = 1;
        *restore = true;
    }
    set_fcc(db, sl, f, size);
    return DHL_OK;
}

/* repair_page: rewrite page p (its image read into buf) with every slot
** header above the FCC invalidated (TID and commit field 0); page 0's meta
** slots are decoded again. */
static int repair_page(dhl *db, uint32_t p, const uint32_t *tid, uint8_t *buf)
{
    int rc = dhl__read(db, p, buf, NULL);
    if (rc)
        return rc;
    for (int s = 0; s < 2; s++) {
        if (tid[2 * p + s] == DHL_TID_INV || tid[2 * p + s] <= db->fcc)
            continue;
        if (p == 0) {
            uint8_t *m = buf + DHL_HDR_META0 + (uint32_t)s * DHL_META_SIZE(db->ntrees);
            put32(m + DHL_META_TID, DHL_TID_INV);
            put32(m + DHL_META_COMMIT, 0);
        } else {
            put32(buf + s * DHL_SLOT_SIZE + DHL_SLOT_TID, DHL_TID_INV);
            put16(buf + s * DHL_SLOT_SIZE + DHL_SLOT_COMMIT, 0);
        }
    }
    if (p == 0 && (db->hflags & DHL_FLAG_THESIS)) /* the restore, if any: the same write */
        dhl__commit_encode(db, buf, db->fcc, db->txn_size);
    if ((rc = dhl__write(db, p, buf)))
        return rc;
    db->ctr.recovered_pages++;
    if (p == 0) {
        memcpy(db->hdr, buf, db->ps);
        dhl__meta_decode(db, db->hdr, 0, &db->mslot[0]);
        dhl__meta_decode(db, db->hdr, 1, &db->mslot[1]);
    }
    return DHL_OK;
}

/* invalidate: count the slot headers above the FCC in db->rec and, if
** write, repair every page holding one (and the header page if restore),
** then sync. */
static int invalidate(dhl *db, const struct slots *sl, bool write, bool restore)
{
    const uint32_t *tid = sl->tid;
    uint32_t bad_pages = 0;
    int rc;
    for (uint32_t p = 0; p < sl->np; p++) {
        bool bad = p == 0 && restore;
        for (int s = 0; s < 2; s++)
            if (tid[2 * p + s] != DHL_TID_INV && tid[2 * p + s] > db->fcc) {
                db->rec.invalid_headers++;
                bad = true;
            }
        if (!bad || !write)
            continue;
        bad_pages++;
        if ((rc = repair_page(db, p, tid, sl->buf)))
            return rc;
    }
    if (bad_pages && (rc = dhl__sync(db)))
        return rc;
    return DHL_OK;
}

/* recover_logged: find the FCC of a logging database from every slot
** header of the store, invalidate the headers above it (on storage only if
** write) and pick the header meta slot committed at the FCC. */
static int recover_logged(dhl *db, bool write, uint64_t fpages)
{
    struct slots sl = {0};
    uint32_t maxpc = 0;
    int rc = scan_size(db, fpages, &maxpc, &sl.np);
    if (rc)
        return rc;
    db->rec.scanned_pages = sl.np;
    bool restore = false;
    if ((rc = read_slots(db, &sl))) {
    } else if (db->hflags & DHL_FLAG_THESIS) {
        rc = thesis_fcc(db, &sl, &restore);
    } else {
        find_commits(db, &sl);
        rc = choose_fcc(db, &sl, maxpc, fpages);
    }
    /* Invalidate every slot header above the FCC. */
    if (!rc)
        rc = invalidate(db, &sl, write, restore);
    if (!rc) {
        db->valid_meta = dhl_valid_slot(db->mslot[0].tid, db->mslot[1].tid, db->fcc);
        if (db->valid_meta < 0)
            rc = dhl__err(db, DHL_ECORRUPT, "no header meta slot is committed at FCC %u", db->fcc);
    }
    free(sl.tid);
    free(sl.cm);
    free(sl.cd);
    free(sl.buf);
    return rc;
}

/* committed_state: make the valid meta slot the committed and working
** state, and check it against the store (page count, free list, roots). */
static int committed_state(dhl *db, uint64_t fpages)
{
    db->committed = db->mslot[db->valid_meta];
    db->work = db->committed;
    struct meta *m = &db->committed;
    if (m->page_count < 1)
        return dhl__err(db, DHL_ECORRUPT, "page count %u in the header", m->page_count);
    if (m->page_count > fpages)
        return dhl__err(db, DHL_ETRUNC, "database has %u pages but the file only %llu",
                        m->page_count, (unsigned long long)fpages);
    if (m->freelist != 0)
        return dhl__err(db, DHL_ECORRUPT, "free-list head %u (pages are never freed)", m->freelist);
    for (uint32_t t = 0; t < db->ntrees; t++)
        if (m->roots[t] >= m->page_count)
            return dhl__err(db, DHL_ECORRUPT, "root of tree %u is page %u, past the page count %u",
                            t, m->roots[t], m->page_count);
    return DHL_OK;
}

/* dhl__recover: read the header page, find the committed state of the
** store (repairing it if write) and make it the connection's state. */
int dhl__recover(dhl *db, bool write)
{
    dhl__drop_cache(db, false);
    memset(&db->rec, 0, sizeof db->rec);
    int rc = dhl__read(db, 0, db->hdr, NULL);
    if (rc)
        return rc;
    dhl__meta_decode(db, db->hdr, 0, &db->mslot[0]);
    dhl__meta_decode(db, db->hdr, 1, &db->mslot[1]);
    uint64_t fpages = dhl__file_pages(db);
    if (db->hflags & DHL_FLAG_NOLOG) {
        db->valid_meta = 0;
        db->fcc = db->mslot[0].tid;
        db->next_tid = db->fcc + 1;
        db->txn_size = 0;
        db->rec.fcc = db->fcc;
    } else if ((rc = recover_logged(db, write, fpages))) {
        return rc;
    }
    return committed_state(db, fpages);
}
