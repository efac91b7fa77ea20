/*
** db.c — connections: open (format or validate, then recover), close,
** transactions and the record operations of the public API.
*/
#include "internal.h"

static const char *const mode_names[] = {"tc",    "cc",        "tc_opt",    "cc_opt",
                                         "nolog", "tc_thesis", "cc_thesis", "auto"};
#define NMODES ((int)(sizeof mode_names / sizeof mode_names[0]))

const char *dhl_mode_name(enum dhl_mode m) { return (int)m < NMODES ? mode_names[m] : "?"; }

int dhl_mode_parse(const char *name, enum dhl_mode *m)
{
    for (int i = 0; i < NMODES; i++)
        if (strcmp(name, mode_names[i]) == 0) {
            *m = (enum dhl_mode)i;
            return DHL_OK;
        }
    return DHL_EINVAL;
}

void dhl_options_default(struct dhl_options *o)
{
    memset(o, 0, sizeof *o);
    o->mode = DHL_MODE_TC;
}

size_t dhl_abi_size(int which)
{
    switch (which) {
    case 0: return sizeof(struct dhl_options);
    case 1: return sizeof(struct dhl_counters);
    case 2: return sizeof(struct dhl_recovery);
    case 3: return sizeof(struct dhl_info);
    case 4: return sizeof(struct dhl_page_info);
    case 5: return sizeof(struct dhl_mem);
    case 6: return sizeof(struct dhl_io);
    default: return 0;
    }
}

static bool pow2_ok(uint32_t ps)
{
    return ps >= DHL_MIN_PAGE_SIZE && ps <= DHL_MAX_PAGE_SIZE && !(ps & (ps - 1));
}

/* mode_flags: the header flags of a database created in mode m: the
** format family, which every mode that opens it must share. */
static uint32_t mode_flags(enum dhl_mode m)
{
    if (m == DHL_MODE_NOLOG)
        return DHL_FLAG_NOLOG;
    return (m == DHL_MODE_TC_THESIS || m == DHL_MODE_CC_THESIS) ? DHL_FLAG_THESIS : 0;
}

static const char *family_name(uint32_t hflags)
{
    return (hflags & DHL_FLAG_NOLOG) ? "NOLOG" : (hflags & DHL_FLAG_THESIS) ? "thesis" : "logging";
}

/* wipe: zero every page after the header page that is not zero already.
** A file is emptied by truncation; a block device cannot be, and pages of
** an older database (or anything else) left on it would hold slot headers
** that recovery could count toward this database's transactions.  Zero
** pages are only read, so formatting a fresh device writes nothing more. */
static int wipe(dhl *db)
{
    uint64_t n = dhl__file_pages(db);
    uint8_t *buf = malloc(db->ps), *zero = calloc(1, db->ps);
    int rc = (buf && zero) ? DHL_OK : dhl__err(db, DHL_ENOMEM, "out of memory");
    for (uint64_t p = 1; !rc && p < n && p <= UINT32_MAX; p++) {
        if ((rc = dhl__read(db, (uint32_t)p, buf, NULL)))
            break;
        if (memcmp(buf, zero, db->ps) != 0)
            rc = dhl__write(db, (uint32_t)p, zero);
    }
    free(buf);
    free(zero);
    return rc;
}

/* format: write a new empty database (header page, transaction 1) on an
** emptied store. */
static int format(dhl *db, const struct dhl_options *o)
{
    db->ps = o->page_size ? o->page_size : DHL_DEFAULT_PAGE_SIZE;
    if (!pow2_ok(db->ps))
        return dhl__err(db, DHL_EPAGESIZE, "page size %u is not a power of two in [%d, %d]", db->ps,
                        DHL_MIN_PAGE_SIZE, DHL_MAX_PAGE_SIZE);
    db->ntrees = o->ntrees ? o->ntrees : 1;
    if (db->ntrees > DHL_MAX_TREES)
        return dhl__err(db, DHL_EINVAL, "%u trees requested, at most %d", db->ntrees,
                        DHL_MAX_TREES);
    if (o->mode == DHL_MODE_AUTO)
        return dhl__err(db, DHL_EINVAL, "mode auto opens a database; it cannot create one");
    db->hflags = mode_flags(o->mode);
    if (!(db->hdr = calloc(1, db->ps)))
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    memcpy(db->hdr + DHL_HDR_MAGIC, DHL_MAGIC, DHL_MAGIC_LEN);
    put32(db->hdr + DHL_HDR_PAGE_SIZE, db->ps);
    put32(db->hdr + DHL_HDR_FLAGS, db->hflags);
    put32(db->hdr + DHL_HDR_NTREES, db->ntrees);
    put32(db->hdr + DHL_HDR_VERSION, DHL_FORMAT_VERSION);
    bool thesis = db->hflags & DHL_FLAG_THESIS;
    uint32_t size = (!thesis || o->mode == DHL_MODE_CC_THESIS) ? 1 : 0;
    struct meta m = {.tid = 1, .commit = thesis ? 0 : 1, .page_count = 1};
    dhl__meta_encode(db, db->hdr, 0, &m);
    if (thesis)
        dhl__commit_encode(db, db->hdr, 1, size);
    int rc = wipe(db);
    if (!rc)
        rc = dhl__write(db, 0, db->hdr);
    if (!rc)
        rc = dhl__sync(db);
    if (rc)
        return rc;
    db->mslot[0] = m;
    memset(&db->mslot[1], 0, sizeof db->mslot[1]);
    db->valid_meta = 0;
    db->fcc = 1;
    db->next_tid = 2;
    db->txn_size = size;
    db->committed = db->work = m;
    db->rec.fcc = 1;
    db->rec.txn_size = size;
    return DHL_OK;
}

/* validate: check the header page's static part against the options. */
static int validate(dhl *db, const struct dhl_options *o, uint64_t bytes)
{
    uint8_t first[DHL_MIN_PAGE_SIZE];
    size_t got = 0;
    int r = db->io.pread(db->io.ctx, first, sizeof first, 0, &got);
    if (r < 0)
        return dhl__err(db, DHL_EIO, "read of the header page failed: %s", strerror(-r));
    if (got < 32 || memcmp(first, DHL_MAGIC, DHL_MAGIC_LEN) != 0)
        return dhl__err(db, DHL_ENOTDHL, "%s is not a DHL database (bad magic)", db->path);
    if (get32(first + DHL_HDR_VERSION) != DHL_FORMAT_VERSION)
        return dhl__err(db, DHL_ENOTDHL, "%s: unsupported DHL format version %u", db->path,
                        get32(first + DHL_HDR_VERSION));
    db->ps = get32(first + DHL_HDR_PAGE_SIZE);
    if (!pow2_ok(db->ps))
        return dhl__err(db, DHL_EPAGESIZE, "%s: invalid page size %u in the header", db->path,
                        db->ps);
    if (o->page_size && o->page_size != db->ps)
        return dhl__err(db, DHL_EPAGESIZE, "%s has page size %u, not the %u asked for", db->path,
                        db->ps, o->page_size);
    db->hflags = get32(first + DHL_HDR_FLAGS);
    if ((db->hflags & ~(DHL_FLAG_NOLOG | DHL_FLAG_THESIS)) ||
        db->hflags == (DHL_FLAG_NOLOG | DHL_FLAG_THESIS))
        return dhl__err(db, DHL_ECORRUPT, "%s: unknown header flags 0x%x", db->path, db->hflags);
    db->ntrees = get32(first + DHL_HDR_NTREES);
    if (db->ntrees < 1 || db->ntrees > DHL_MAX_TREES)
        return dhl__err(db, DHL_ECORRUPT, "%s: %u trees in the header (1..%d)", db->path,
                        db->ntrees, DHL_MAX_TREES);
    if (o->ntrees && o->ntrees != db->ntrees)
        return dhl__err(db, DHL_EINVAL, "%s has %u trees, not the %u asked for", db->path,
                        db->ntrees, o->ntrees);
    if (bytes < db->ps)
        return dhl__err(db, DHL_ETRUNC, "%s is truncated: %llu bytes, less than one %u-byte page",
                        db->path, (unsigned long long)bytes, db->ps);
    if (o->mode == DHL_MODE_AUTO)
        db->mode = (db->hflags & DHL_FLAG_NOLOG)    ? DHL_MODE_NOLOG
                   : (db->hflags & DHL_FLAG_THESIS) ? DHL_MODE_TC_THESIS
                                                    : DHL_MODE_TC;
    if (mode_flags(db->mode) != db->hflags)
        return dhl__err(db, DHL_EMODE, "%s was created in a %s mode; cannot open it in mode %s",
                        db->path, family_name(db->hflags), dhl_mode_name(o->mode));
    if (!(db->hdr = malloc(db->ps)))
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    return DHL_OK;
}

static int open_inner(const char *path, const struct dhl_options *opts, dhl **out)
{
    struct dhl_options o;
    if (opts)
        o = *opts;
    else
        dhl_options_default(&o);
    dhl *db = calloc(1, sizeof *db);
    *out = db;
    if (!db)
        return DHL_ENOMEM;
    db->fd = -1;
    db->path = strdup(path ? path : "(io)");
    if (!db->path)
        return dhl__err(db, DHL_ENOMEM, "out of memory");
    if ((unsigned)o.mode > DHL_MODE_AUTO)
        return dhl__err(db, DHL_EINVAL, "unknown mode %d", (int)o.mode);
    db->mode = o.mode;
    db->oflags = o.flags;
    db->readonly = o.flags & DHL_OPEN_READONLY;
    db->cache_pages = o.cache_pages ? o.cache_pages : 4096;
    bool create = o.flags & (DHL_OPEN_CREATE | DHL_OPEN_TRUNCATE);
    bool trunc = o.flags & DHL_OPEN_TRUNCATE;
    if (db->readonly && trunc)
        return dhl__err(db, DHL_EINVAL, "TRUNCATE with READONLY");
    int rc;
    if (o.io) {
        db->io = *o.io;
        db->blockdev = o.io->blockdev != 0;
    } else if (!path) {
        return dhl__err(db, DHL_EINVAL, "no path and no io");
    } else if ((rc = dhl__posix_io(db, path, create, trunc))) {
        return rc;
    }
    uint64_t bytes = 0;
    if (db->io.size && (rc = db->io.size(db->io.ctx, &bytes)) < 0)
        return dhl__err(db, DHL_EIO, "cannot size %s: %s", db->path, strerror(-rc));
    if (bytes == 0 || trunc) {
        if (!create)
            return dhl__err(db, DHL_ENOTDHL, "%s is empty: not a DHL database (create it first)",
                            db->path);
        if (db->readonly)
            return dhl__err(db, DHL_EMISUSE, "cannot create %s read-only", db->path);
        return format(db, &o);
    }
    if ((rc = validate(db, &o, bytes)))
        return rc;
    return dhl__recover(db, !(o.flags & (DHL_OPEN_NORECOVER | DHL_OPEN_READONLY)));
}

int dhl_open(const char *path, const struct dhl_options *opts, dhl **out)
{
    int rc = open_inner(path, opts, out);
    if (rc == DHL_OK)
        (*out)->opened = true;
    return rc;
}

int dhl_close(dhl *db)
{
    if (!db)
        return DHL_OK;
    if (db->in_txn)
        dhl__rollback(db);
    dhl__drop_cache(db, false);
    free(db->pages);
    int rc = DHL_OK;
    if (db->own_io && db->io.close && db->io.close(db->io.ctx) < 0)
        rc = DHL_EIO;
    free(db->hdr);
    free(db->path);
    free(db);
    return rc;
}

/* usable: common guard of every operation. */
static int usable(dhl *db, bool writes)
{
    if (!db)
        return DHL_EMISUSE;
    db->err[0] = 0;
    if (db->poisoned)
        return dhl__err(db, DHL_EMISUSE,
                        "a commit failed: close and reopen the database to recover");
    if (!db->opened)
        return dhl__err(db, DHL_EMISUSE, "the database was not opened successfully");
    if (writes && db->readonly)
        return dhl__err(db, DHL_EMISUSE, "the database is open read-only");
    if (writes && (db->oflags & DHL_OPEN_NORECOVER) && db->rec.invalid_headers)
        return dhl__err(db, DHL_EMISUSE, "opened without recovery and it is needed: cannot write");
    return DHL_OK;
}

int dhl_begin(dhl *db)
{
    int rc = usable(db, true);
    if (rc)
        return rc;
    if (db->in_txn)
        return dhl__err(db, DHL_EMISUSE, "a transaction is already open");
    if (db->ncached > db->cache_pages)
        dhl__drop_cache(db, true);
    db->in_txn = true;
    return DHL_OK;
}

int dhl_commit(dhl *db)
{
    int rc = usable(db, true);
    if (rc)
        return rc;
    if (!db->in_txn)
        return dhl__err(db, DHL_EMISUSE, "no transaction is open");
    return dhl__commit(db);
}

int dhl_rollback(dhl *db)
{
    int rc = usable(db, true);
    if (rc)
        return rc;
    if (!db->in_txn)
        return dhl__err(db, DHL_EMISUSE, "no transaction is open");
    dhl__rollback(db);
    return DHL_OK;
}

int dhl_in_txn(const dhl *db) { return db && db->in_txn; }

/* A write operation: inside the open transaction, or as its own. */
#define WRITE_OP(call)                                                                             \
    do {                                                                                           \
        int rc_ = usable(db, true);                                                                \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
        bool auto_ = !db->in_txn;                                                                  \
        if (auto_ && (rc_ = dhl_begin(db)))                                                        \
            return rc_;                                                                            \
        rc_ = (call);                                                                              \
        if (auto_) {                                                                               \
            if (rc_ == DHL_OK)                                                                     \
                return dhl__commit(db);                                                            \
            char save_[sizeof db->err];                                                            \
            memcpy(save_, db->err, sizeof save_);                                                  \
            dhl__rollback(db);                                                                     \
            memcpy(db->err, save_, sizeof save_);                                                  \
        }                                                                                          \
        return rc_;                                                                                \
    } while (0)

int dhl_insert(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len)
{
    WRITE_OP(dhl__insert(db, tree, key, val, len));
}

int dhl_update(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len)
{
    WRITE_OP(dhl__update(db, tree, key, val, len));
}

int dhl_delete(dhl *db, uint32_t tree, int64_t key) { WRITE_OP(dhl__delete(db, tree, key)); }

int dhl_get(dhl *db, uint32_t tree, int64_t key, void *buf, size_t cap, size_t *len)
{
    int rc = usable(db, false);
    return rc ? rc : dhl__get_rec(db, tree, key, buf, cap, len);
}

int dhl_scan(dhl *db, uint32_t tree, int64_t lo, int64_t hi, dhl_scan_cb cb, void *arg)
{
    int rc = usable(db, false);
    return rc ? rc : dhl__scan(db, tree, lo, hi, cb, arg);
}

static int count_cb(void *arg, int64_t k, const void *v, size_t n)
{
    (void)k, (void)v, (void)n;
    ++*(uint64_t *)arg;
    return 0;
}

int dhl_count(dhl *db, uint32_t tree, uint64_t *n)
{
    *n = 0;
    return dhl_scan(db, tree, INT64_MIN, INT64_MAX, count_cb, n);
}

int dhl_recover(dhl *db)
{
    int rc = usable(db, true);
    if (rc)
        return rc;
    if (db->in_txn)
        return dhl__err(db, DHL_EMISUSE, "cannot recover inside a transaction");
    return dhl__recover(db, true);
}

void dhl_recovery_info(const dhl *db, struct dhl_recovery *r) { *r = db->rec; }
void dhl_counters(const dhl *db, struct dhl_counters *c) { *c = db->ctr; }
void dhl_reset_counters(dhl *db) { memset(&db->ctr, 0, sizeof db->ctr); }
