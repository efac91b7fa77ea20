/*
** internal.h — shared internals of libdhl (not installed; dhl.h is the
** public API and the format definition).
*/
#ifndef DHL_INTERNAL_H
#define DHL_INTERNAL_H

#include "dhl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Little-endian accessors: every on-disk integer goes through these. */
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32);
}
static inline void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* A record as seen by the B+-tree: a view into the page image (pin != 0,
** the committed record at that offset is reused in place) or an owned copy
** that the next page write must place in free space. */
struct rec {
    int64_t key;
    uint16_t len;
    uint16_t pin; /* offset of the identical committed record, 0 = new */
    bool owned;   /* val was malloc'd by us */
    uint8_t *val;
};

/* A cached page.  img is the stored image; cslot its committed slot (the
** read rule at the connection's FCC).  The record view recs[] is built from
** img lazily and then edited by the current transaction (dirty). */
struct page {
    uint32_t pgno;
    uint8_t *img;
    int cslot;
    uint8_t type; /* type of the view */
    bool parsed, dirty, fresh;
    uint64_t dirty_seq; /* when last modified: picks the _OPT commit page */
    struct rec *recs;
    uint32_t n, cap;
};

struct meta {
    uint32_t tid, commit, page_count, freelist;
    uint32_t roots[DHL_MAX_TREES];
};

struct dhl {
    char *path;
    struct dhl_io io;
    bool own_io;
    int fd;
    bool blockdev; /* the store is a block device (informational: the
                   ** engine does the same on both kinds of store) */
    uint32_t ps, ntrees, hflags;
    enum dhl_mode mode;
    uint32_t oflags;
    uint32_t cache_pages;
    bool readonly, poisoned, in_txn, opened;

    uint8_t *hdr; /* stored header page */
    struct meta mslot[2];
    int valid_meta;
    struct meta committed, work; /* database-wide state */
    uint32_t fcc, txn_size;
    uint32_t next_tid; /* TID of the next write transaction: above every
                       ** TID ever seen on the store, so none is reused */
    struct dhl_recovery rec;

    struct page **pages; /* cache indexed by page number */
    uint32_t pages_cap, ncached;
    uint64_t seq;

    struct dhl_counters ctr;
    char err[256];
};

/* err.c */
int dhl__err(dhl *db, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* io.c */
int dhl__posix_io(dhl *db, const char *path, bool create, bool truncate);
int dhl__read(dhl *db, uint32_t pgno, uint8_t *buf, bool *short_read);
int dhl__write(dhl *db, uint32_t pgno, const uint8_t *buf);
int dhl__sync(dhl *db);
uint64_t dhl__file_pages(dhl *db);
/* page.c */
void dhl__meta_decode(const dhl *db, const uint8_t *hdr, int s, struct meta *m);
void dhl__meta_encode(const dhl *db, uint8_t *hdr, int s, const struct meta *m);
void dhl__commit_encode(const dhl *db, uint8_t *hdr, uint32_t fcc, uint32_t size);
int dhl__slot_tid(const uint8_t *img, int s);
int dhl__page_cslot(const dhl *db, const uint8_t *img);
int dhl__parse(dhl *db, struct page *pg);
void dhl__free_recs(struct page *pg);
int dhl__rec_reserve(struct page *pg, uint32_t n);
bool dhl__fits(const dhl *db, const struct page *pg, uint32_t from, uint32_t to);
bool dhl__fits_fresh(const dhl *db, const struct rec *r, uint32_t n);
int dhl__materialize(dhl *db, const struct page *pg, uint32_t tid, uint16_t commit, uint8_t *out);
int dhl__slot_check(const dhl *db, const uint8_t *img, int s, uint32_t pgno);
/* pager.c */
int dhl__get(dhl *db, uint32_t pgno, struct page **out);
int dhl__new_page(dhl *db, uint8_t type, struct page **out);
void dhl__touch(dhl *db, struct page *pg);
void dhl__drop_cache(dhl *db, bool keep_dirty);
void dhl__free_page(struct page *pg);
/* btree.c */
int dhl__insert(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len);
int dhl__update(dhl *db, uint32_t tree, int64_t key, const void *val, size_t len);
int dhl__delete(dhl *db, uint32_t tree, int64_t key);
int dhl__get_rec(dhl *db, uint32_t tree, int64_t key, void *buf, size_t cap, size_t *len);
int dhl__scan(dhl *db, uint32_t tree, int64_t lo, int64_t hi, dhl_scan_cb cb, void *arg);
/* recover.c */
int dhl__recover(dhl *db, bool write);
/* commit.c */
int dhl__commit(dhl *db);
void dhl__rollback(dhl *db);

#endif
