/*
** rawcheck.h — the DHL checker's facts of one raw-tier crash state in one C
** call (checkers/README.md, "The raw tier's native twin").  The caller
** (checkers/dhl_native.py) hands in the *loaded* engine's entry points as
** a table, so that the engine examined is whichever libdhl the process
** loaded (a mutant's too).
**
** This header does not include the engine's: the few engine structures the
** checker passes across the call are declared here from the engine's ABI
** (their sizes are compared with the engine's own, dhl_abi_size, when the
** library is loaded), and the page format is read by the checker's own
** decoder (rawcheck.c), written from dhl/FORMAT.md alone.
*/
#ifndef RAWCHECK_H
#define RAWCHECK_H

#include <stddef.h>
#include <stdint.h>

/* The engine's ABI, as the engine documents it (sizes checked at load). */
struct rc_io {
    void *ctx;
    int (*pread)(void *ctx, void *buf, size_t n, uint64_t off, size_t *got);
    int (*pwrite)(void *ctx, const void *buf, size_t n, uint64_t off);
    int (*sync)(void *ctx, int datasync);
    int (*size)(void *ctx, uint64_t *bytes);
    int (*close)(void *ctx);
    int blockdev;
};

struct rc_options {
    uint32_t page_size;
    int mode; /* 0 = TC, 4 = NOLOG: the two the checker opens with */
    uint32_t ntrees;
    uint32_t flags; /* 4 = READONLY */
    uint32_t cache_pages;
    const struct rc_io *io;
};

struct rc_mem {
    uint8_t *data;
    uint64_t size, cap, writes, syncs, blockdev, hiwater;
};

struct rc_info {
    uint32_t page_size, ntrees, flags, page_count, freelist;
    uint32_t fcc, txn_size;
    uint32_t roots[32];
    uint32_t valid_meta;
    uint64_t file_pages;
};

struct rc_recovery {
    uint32_t max_commit_tid, max_commit_size, max_commit_count, fcc, txn_size;
    uint32_t rolled_back, invalid_headers, scanned_pages, max_tid, next_tid;
};

/* The engine's entry points the checker calls (filled from the loaded
** library by the caller; every one is required). */
struct rc_engine {
    int (*open)(const char *path, const struct rc_options *o, void **out);
    int (*close)(void *db);
    const char *(*errmsg)(const void *db);
    int (*info)(void *db, struct rc_info *info);
    void (*recovery_info)(const void *db, struct rc_recovery *r);
    int (*check)(void *db);
    int (*digest)(void *db, char hex[33]);
    int (*reachable)(void *db, uint32_t *pages, uint32_t *parents, int32_t *slots, uint32_t cap,
                     uint32_t *n);
    int (*image_headers)(const void *buf, uint32_t ps, uint32_t first_pgno, uint32_t npages,
                         uint32_t ntrees, uint32_t *out);
    int (*valid_slot)(uint32_t tid0, uint32_t tid1, uint32_t fcc);
};

/* rc_abi_size: sizeof the mirrored engine struct numbered as dhl_abi_size
** numbers it (0 options, 2 recovery, 3 info, 5 mem, 6 io; else 0). */
size_t rc_abi_size(int which);

typedef struct rc_ctx rc_ctx;

/* rc_new: a context over the engine table *eng (copied), with reusable
** buffers; NULL when out of memory.  rc_free(NULL) is a no-op. */
rc_ctx *rc_new(const struct rc_engine *eng);
void rc_free(rc_ctx *c);

/* Return codes of rc_examine. */
#define RC_OK       0
#define RC_FALLBACK 1  /* a case the checker's Python path must take (facts not made) */
#define RC_ENOMEM   -1 /* allocation failed */

/* rc_examine: build the crash state's image in the context's buffer — the
** first `size` bytes of `durable` (bytes past `used` are zero and are not
** read), then the `nwrites` writes, write i putting lens[i] bytes of `data`
** (consecutive) at byte offs[i] — and take its facts as checkers/dhl_examine.py's
** examine() takes them of a block device's image: read-only before
** recovery (labelled `label`), recovered in place (`label_rec`), recovered
** again on a copy (`label_again`).  On RC_OK *out / *outlen hold the facts
** serialised (the layout checkers/dhl_native.py parses), valid until the next
** call on c. */
int rc_examine(rc_ctx *c, const uint8_t *durable, uint64_t size, uint64_t used,
               const uint64_t *offs, const uint64_t *lens, const uint8_t *data, uint32_t nwrites,
               const char *label, const char *label_rec, const char *label_again,
               const uint8_t **out, size_t *outlen);

/* rc_examine_chunk: rc_examine of each of `nstates` states over one durable
** image, their overlays read from the log in memory (`log`, `loglen` bytes):
** state i writes, in order, its nitems[i] items — triples (device offset,
** log offset of the data or RC_ZEROS, length) — taken one state after the
** other from `items`.  rcs[i] is the state's RC_OK or RC_FALLBACK (an item
** past the device or the log) and lens[i] the length of its facts, which
** follow one another in *out (valid until the next call on c).  Returns
** RC_OK, or RC_ENOMEM (stops). */
#define RC_ZEROS UINT64_MAX
int rc_examine_chunk(rc_ctx *c, const uint8_t *durable, uint64_t size, uint64_t used,
                     const uint8_t *log, uint64_t loglen, const uint64_t *items,
                     const uint32_t *nitems, uint32_t nstates, const char *label,
                     const char *label_rec, const char *label_again, int32_t *rcs, uint64_t *lens,
                     const uint8_t **out, size_t *outlen);

/* rc_decode: only the checker's own decoder on an image (for tests): the
** FCC it reads, the content digest (32 hex digits + NUL in hex, "" when
** unreadable), the error ("" when none, up to errcap bytes), and how many
** reached pages lack a committed slot.  RC_OK, RC_FALLBACK or RC_ENOMEM. */
int rc_decode(rc_ctx *c, const uint8_t *image, uint64_t size, uint32_t *fcc, char hex[33],
              char *err, size_t errcap, uint32_t *no_committed);

#endif /* RAWCHECK_H */
