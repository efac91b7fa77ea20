/*
** dhl.h — Doubleheader Logging (DHL) storage engine: the public C API and
** THE definition of the on-disk format (dhl/FORMAT.md explains the bytes;
** this header is what code includes; nothing else restates the layout).
**
** A database is a file (or a block device) of fixed-size pages.  Page 0 is
** the header page; every other page is a slotted B+-tree page carrying two
** slot headers, one the journal of the other.  Keys are int64, values are
** byte strings.  Up to DHL_MAX_TREES independent trees ("tables") live in
** one database, addressed by index 0..ntrees-1.
**
** Concurrency: one connection, one thread; one write transaction at a time.
*/
#ifndef DHL_H
#define DHL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* On-disk format constants (little-endian everywhere).                */
/* ------------------------------------------------------------------ */

#define DHL_MAGIC             "DHL format 1\0\0\0" /* 16 bytes incl. padding NULs */
#define DHL_MAGIC_LEN         16
#define DHL_FORMAT_VERSION    1
#define DHL_MIN_PAGE_SIZE     512
#define DHL_MAX_PAGE_SIZE     65536
#define DHL_DEFAULT_PAGE_SIZE 4096
#define DHL_MAX_TREES         32
#define DHL_TID_INV           0u /* a slot header that holds nothing */

/* Header page (page 0).  The static part never changes after creation. */
#define DHL_HDR_MAGIC     0  /* 16 bytes DHL_MAGIC */
#define DHL_HDR_PAGE_SIZE 16 /* u32 */
#define DHL_HDR_FLAGS     20 /* u32: DHL_FLAG_* */
#define DHL_HDR_NTREES    24 /* u32: number of trees, 1..DHL_MAX_TREES */
#define DHL_HDR_VERSION   28 /* u32: DHL_FORMAT_VERSION */
#define DHL_HDR_META0     32 /* first meta slot */
#define DHL_FLAG_NOLOG    1u /* created in NOLOG mode: single-slot, unsafe */
#define DHL_FLAG_THESIS   2u /* created in a thesis mode: one commit record, in place */

/* A meta slot of the header page (two of them, at DHL_HDR_META0 and right
** after the first): the versioned database-wide state. */
#define DHL_META_TID          0  /* u32 TID of the transaction that wrote it */
#define DHL_META_COMMIT       4  /* u32 transaction size if it carries the commit record, else 0 */
#define DHL_META_PAGECOUNT    8  /* u32 pages in the database including page 0 */
#define DHL_META_FREELIST     12 /* u32 first free page (always 0: pages are never freed) */
#define DHL_META_ROOTS        16 /* u32 root page per tree, 0 = empty tree */
#define DHL_META_SIZE(ntrees) (16u + 4u * (uint32_t)(ntrees))
/* DHL_FLAG_THESIS databases: the one commit record of the thesis (§3.4),
** right after meta slot 1 and overwritten in place by every transaction:
** u32 FCC, then u32 transaction size (0: not counted, the thesis's TC).
** The meta slots' commit fields are 0 there.  Always within the first
** 512 bytes (at most byte 328), so one sector holds it whole. */
#define DHL_HDR_COMMIT(ntrees) (DHL_HDR_META0 + 2u * DHL_META_SIZE(ntrees))

/* Data page: two fixed slot headers, then the interleaved offset arrays,
** then free space, then records growing down from the end of the page. */
#define DHL_SLOT_SIZE     12 /* bytes of one slot header's fixed part */
#define DHL_SLOT_TID      0  /* u32 TID, DHL_TID_INV = nothing */
#define DHL_SLOT_NREC     4  /* u16 number of records */
#define DHL_SLOT_FREE     6  /* u16 free-space offset: lowest record offset; 0 = page size */
#define DHL_SLOT_COMMIT   8  /* u16 embedded commit record (_OPT modes): transaction size, or 0 */
#define DHL_SLOT_TYPE     10 /* u8 DHL_PAGE_LEAF / DHL_PAGE_INTERIOR */
#define DHL_SLOT_RESERVED 11 /* u8 0 */
#define DHL_PAGE_ARRAY    24 /* offset array: entry i at 24+4i = u16 off(slot0), u16 off(slot1) */
#define DHL_PAGE_LEAF     1
#define DHL_PAGE_INTERIOR 2
/* A record: i64 key, u16 value length, value bytes.  Interior records hold
** the child page number as a 4-byte value; child covers keys >= key. */
#define DHL_REC_HDR       10
#define DHL_MAX_TXN_PAGES 65535u /* slot-header count a commit can record */

/* Largest value a page of size ps accepts: one record alone in a page. */
#define DHL_MAX_VALUE(ps) ((size_t)(ps) - (DHL_PAGE_ARRAY + 4u + DHL_REC_HDR))

/* ------------------------------------------------------------------ */
/* Error codes: every function returns DHL_OK (0) or one of these;     */
/* dhl_errmsg(db) gives the one-line reason for the last error.        */
/* ------------------------------------------------------------------ */
#define DHL_OK        0
#define DHL_ENOTFOUND 1 /* key not present (get/update/delete) */
#define DHL_EEXISTS   2 /* key already present (insert) */
#define DHL_EINVAL    3 /* bad argument: tree index, value too large, bad option */
#define DHL_EIO       4 /* read/write/sync failed (errno in the message) */
#define DHL_ENOTDHL   5 /* not a DHL database (bad magic/version) */
#define DHL_EPAGESIZE 6 /* page size in the file invalid or not what was asked */
#define DHL_ETRUNC    7 /* file shorter than the database claims */
#define DHL_ECORRUPT  8 /* impossible structure (offsets, counts, tree shape) */
#define DHL_EMISUSE   9 /* API misuse: no transaction, read-only, poisoned handle */
#define DHL_ENOMEM    10
#define DHL_EFULL     11 /* transaction too large / database size limit */
#define DHL_EMODE     12 /* NOLOG file opened in a logging mode or vice versa */

/* Commit protocols. */
enum dhl_mode {
    DHL_MODE_TC = 0,     /* dirty pages, sync, header page with FCC, sync */
    DHL_MODE_CC = 1,     /* dirty pages + header page (FCC, txn size), one sync */
    DHL_MODE_TC_OPT = 2, /* TC with FCC embedded in the last dirty data page */
    DHL_MODE_CC_OPT = 3, /* CC with FCC + txn size embedded in the last dirty data page */
    DHL_MODE_NOLOG = 4,  /* in place, one slot header, no recovery: UNSAFE lower bound */
    /* The thesis as written (DHL_FLAG_THESIS: one in-place FCC + size): */
    DHL_MODE_TC_THESIS = 5, /* TC; recovery trusts the FCC alone (no size, no count) */
    DHL_MODE_CC_THESIS = 6, /* CC; a short count restores FCC - 1 and its size in
                            ** place (§3.4) */
    DHL_MODE_AUTO = 7       /* open only: the mode the file was created for (tc for the
                            ** engine's logging format, tc_thesis, nolog) */
};

/* Open flags. */
#define DHL_OPEN_CREATE    1u  /* create (format) if the file is empty / absent */
#define DHL_OPEN_TRUNCATE  2u  /* always format anew (destroys the content) */
#define DHL_OPEN_READONLY  4u  /* no writes at all; implies DHL_OPEN_NORECOVER */
#define DHL_OPEN_NORECOVER 8u  /* do not repair: read through the valid-header rule */
#define DHL_OPEN_FDATASYNC 16u /* sync with fdatasync instead of fsync */

/* Pluggable I/O (tests capture writes and syncs through it).  Each returns 0
** or -errno.  pread past the end returns the bytes read in *got. */
struct dhl_io {
    void *ctx;
    int (*pread)(void *ctx, void *buf, size_t n, uint64_t off, size_t *got);
    int (*pwrite)(void *ctx, const void *buf, size_t n, uint64_t off);
    int (*sync)(void *ctx, int datasync);
    int (*size)(void *ctx, uint64_t *bytes); /* current size in bytes */
    int (*close)(void *ctx);                 /* may be NULL */
    int blockdev; /* 1: a block device (fixed size; formatting cannot empty it) */
};

struct dhl_options {
    uint32_t page_size; /* 0 = DHL_DEFAULT_PAGE_SIZE on create, the file's on open */
    enum dhl_mode mode;
    uint32_t ntrees;         /* 0 = 1 on create, the file's on open */
    uint32_t flags;          /* DHL_OPEN_* */
    uint32_t cache_pages;    /* clean pages kept cached; 0 = 4096 */
    const struct dhl_io *io; /* NULL = the path, via POSIX calls */
};

/* Per-connection counters (since open; recovery's own I/O included). */
struct dhl_counters {
    uint64_t syncs;
    uint64_t pages_written;
    uint64_t bytes_written;
    uint64_t pages_read;
    uint64_t txns;            /* committed write transactions */
    uint64_t recovered_pages; /* pages repaired by recovery at open */
};

/* What recovery found (also computed, without writing, in NORECOVER). */
struct dhl_recovery {
    uint32_t max_commit_tid;   /* greatest TID carrying a commit record */
    uint32_t max_commit_size;  /* its recorded transaction size */
    uint32_t max_commit_count; /* slot headers found with that TID */
    uint32_t fcc;              /* the committed FCC chosen */
    uint32_t txn_size;         /* its transaction size */
    uint32_t rolled_back;      /* 1 if max_commit_tid was incomplete and rolled back */
    uint32_t invalid_headers;  /* slot headers with TID > fcc (repaired unless NORECOVER) */
    uint32_t scanned_pages;    /* every page of the file or device */
    uint32_t max_tid;          /* greatest TID of any slot header found */
    uint32_t next_tid;         /* the TID the next write transaction takes */
};

typedef struct dhl dhl;

/* dhl_options_default: fill *o with defaults (4 KiB, TC, 1 tree, no flags). */
void dhl_options_default(struct dhl_options *o);

/* dhl_open: open (and recover, unless NORECOVER/READONLY) the database at
** path (a file or a block device), or on o->io when set (path is then only
** a label).  On success *out is a handle; on failure *out is still a handle
** (unless allocation failed: NULL) whose dhl_errmsg explains, and which the
** caller must dhl_close.  Returns DHL_OK or an error code. */
int dhl_open(const char *path, const struct dhl_options *o, dhl **out);

/* dhl_close: roll back any open transaction, release everything.  NULL ok. */
int dhl_close(dhl *db);

/* dhl_errmsg: the one-line reason for the last error ("" after success). */
const char *dhl_errmsg(const dhl *db);
/* dhl_errstr: the name of an error code ("DHL_ECORRUPT"...). */
const char *dhl_errstr(int rc);
/* dhl_mode_name / dhl_mode_parse: "tc","cc","tc_opt","cc_opt","nolog",
** "tc_thesis","cc_thesis","auto". */
const char *dhl_mode_name(enum dhl_mode m);
int dhl_mode_parse(const char *name, enum dhl_mode *m);

/* Transactions.  Operations outside begin/commit run as their own
** (autocommit) transaction.  A failed commit poisons the handle: close and
** reopen (which recovers). */
int dhl_begin(dhl *db);
int dhl_commit(dhl *db);
int dhl_rollback(dhl *db);
int dhl_in_txn(const dhl *db);

int dhl_insert(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len);
int dhl_update(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len);
int dhl_delete(dhl *db, uint32_t tree, int64_t key);
/* dhl_get: copies up to cap bytes into buf, the full length into *len. */
int dhl_get(dhl *db, uint32_t tree, int64_t key, void *buf, size_t cap, size_t *len);

/* dhl_scan: calls cb for each record of the tree with lo <= key <= hi in
** key order; a non-zero return from cb stops the scan and is returned. */
typedef int (*dhl_scan_cb)(void *arg, int64_t key, const void *val, size_t len);
int dhl_scan(dhl *db, uint32_t tree, int64_t lo, int64_t hi, dhl_scan_cb cb, void *arg);

/* dhl_count: number of records in a tree (committed + own changes). */
int dhl_count(dhl *db, uint32_t tree, uint64_t *n);

/* dhl_digest: the oracle content digest of the whole database: the sum
** modulo 2^128 of XXH3-128(u32le tree || i64le key || value) over all
** records.  hex receives 32 lowercase hex digits and a NUL. */
int dhl_digest(dhl *db, char hex[33]);

/* dhl_check: structure check of the committed state (offsets in bounds,
** records do not overlap, keys ordered in and across pages, page count and
** free list consistent, each page reached once).  DHL_OK or DHL_ECORRUPT. */
int dhl_check(dhl *db);

/* dhl_recover: run recovery now (also done by dhl_open). */
int dhl_recover(dhl *db);
void dhl_recovery_info(const dhl *db, struct dhl_recovery *r);

void dhl_counters(const dhl *db, struct dhl_counters *c);
void dhl_reset_counters(dhl *db);

/* Introspection (for checkers and the dhl tool). */
struct dhl_info {
    uint32_t page_size, ntrees, flags, page_count, freelist;
    uint32_t fcc, txn_size; /* committed FCC and its transaction size */
    uint32_t roots[DHL_MAX_TREES];
    uint32_t valid_meta; /* header meta slot in use (0/1) */
    uint64_t file_pages; /* pages physically present */
};
int dhl_info(dhl *db, struct dhl_info *info);

struct dhl_slot_info {
    uint32_t tid, nrec, free_off, commit, type;
    uint32_t array_ok; /* 1 if nrec/offsets are within the page */
};
struct dhl_page_info {
    uint32_t pgno;
    uint32_t is_data;             /* 1 for a B+-tree page (pgno >= 1) */
    int32_t valid_slot;           /* slot chosen by the read rule, -1 none */
    struct dhl_slot_info slot[2]; /* for page 0: meta slots (nrec=page count) */
};
/* dhl_page_info: both slot headers of page pgno as on disk (the buffer cache
** is bypassed for a clean page: what is read is what is stored). */
int dhl_page_info(dhl *db, uint32_t pgno, struct dhl_page_info *pi);
/* dhl_slot_offsets: the record offsets of slot s of page pgno (up to cap). */
int dhl_slot_offsets(dhl *db, uint32_t pgno, int s, uint16_t *offs, uint32_t cap, uint32_t *n);
/* dhl_read_page: the raw stored bytes of page pgno (page_size bytes). */
int dhl_read_page(dhl *db, uint32_t pgno, void *buf);

/* dhl_reachable: walk every tree of the committed state from its root (the
** committed meta slot) through the read rule, without the buffer cache and
** without stopping at damage: for each page reached, in walk order, store its
** number in pages[i], the page whose committed slot points at it in
** parents[i] (0 = the header page's root pointer) and the slot the read rule
** picks in slots[i] (-1: no committed slot header; -2: the committed slot is
** impossible, see dhl_page_info's array_ok).  The walk does not descend
** below such pages, nor follow a pointer outside the page count or to a page
** already reached.  At most cap entries are stored; *n is the number
** reached.  DHL_OK, or DHL_EIO/DHL_ENOMEM. */
int dhl_reachable(dhl *db, uint32_t *pages, uint32_t *parents, int32_t *slots, uint32_t cap,
                  uint32_t *n);

/* dhl_image_headers: decode the slot headers of npages consecutive stored
** page images in buf (page size ps, the first one is page first_pgno; page 0
** is the header page of a database with ntrees trees).  For page i it stores
** 6 values at out[6i]: tid0, tid1, commit0, commit1, aux0, aux1 — for a data
** page aux is the slot's record count, for the header page the meta slot's
** page count.  No handle: checkers decode page images taken from a write log
** with it.  DHL_OK, or DHL_EINVAL for a bad page size or tree count. */
int dhl_image_headers(const void *buf, uint32_t ps, uint32_t first_pgno, uint32_t npages,
                      uint32_t ntrees, uint32_t *out);

/* dhl_image_commit: the thesis's in-place commit record of a stored header
** page (its first n bytes in hdr): out[0] = 1 if the page is a
** DHL_FLAG_THESIS database's (else 0, and out[1..2] = 0), out[1] = its FCC,
** out[2] = its transaction size (0: not counted).  No handle: checkers
** decode header pages taken from a write log with it.  DHL_OK, or
** DHL_EINVAL when n is too short or the tree count is bad. */
int dhl_image_commit(const void *hdr, size_t n, uint32_t out[3]);

/* An in-memory store for dhl_mem_io: data[0..size) is the database image,
** writes may grow it up to cap bytes.  The caller owns data (and keeps it
** and this struct alive while a handle uses them). */
struct dhl_mem {
    uint8_t *data;
    uint64_t size;     /* bytes of the image */
    uint64_t cap;      /* bytes data can hold; a write past it fails (ENOSPC) */
    uint64_t writes;   /* pwrite calls so far */
    uint64_t syncs;    /* sync calls so far (nothing to do in memory) */
    uint64_t blockdev; /* 1: the image is a block device: size is fixed, a
                       ** write past it fails (ENOSPC) as on the device */
    uint64_t hiwater;  /* one past the last byte a write reached, raised by
                       ** every write; the caller sets it when it loads data,
                       ** so that it knows data[hiwater..cap) is untouched */
};
/* dhl_mem_io: fill *io with an I/O over m (no allocation, close is NULL):
** pass it in dhl_options.io to open, recover and check an image held in
** memory.  A read past size is short, as on a file.  io->blockdev is
** m->blockdev: the engine then sees the kind of store the image came from. */
void dhl_mem_io(struct dhl_io *io, struct dhl_mem *m);

/* dhl_valid_slot: the read rule: among slots with TID != INV and TID <=
** fcc, the one with the greater TID; -1 if neither. */
int dhl_valid_slot(uint32_t tid0, uint32_t tid1, uint32_t fcc);

/* dhl_abi_size: sizeof the public structs, so bindings can verify their
** mirrors: 0 dhl_options, 1 dhl_counters, 2 dhl_recovery, 3 dhl_info,
** 4 dhl_page_info, 5 dhl_mem, 6 dhl_io.  0 for an unknown index. */
size_t dhl_abi_size(int which);

#ifdef __cplusplus
}
#endif
#endif /* DHL_H */
