/*
** The oracle content digest of a SQLite database as one connection reads it
** (workloads/oracle.py defines the digest; libdhl's dhl_digest computes the
** same for DHL): the sum modulo 2^128 of XXH3-128(u32le t || i64le key ||
** value) over every row of every table t<N>, as 32 lowercase hex digits.
**
** The runner reports it right after a restart's open (--from-txn), through
** the SUT's own connection (its VFS, its recovery), so that the check stage
** can compare what the SUT's own open sees with what the checkers recovered
** (REC-AGREE, checkers/agree.py).  Header-only (xxHash inlined) so that every
** program built from an engine (the runner, crashlab-xlog-recover, the C
** tests) gets it without another object or library.
*/
#ifndef CRASHLAB_CONTENTDIGEST_H
#define CRASHLAB_CONTENTDIGEST_H

#define XXH_INLINE_ALL
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* content_digest_add: add the row (T, KEY, VAL of LEN bytes) to *SUM; 0, or
** -1 when out of memory. */
static inline int content_digest_add(unsigned __int128 *sum, uint32_t t, int64_t key,
                                     const void *val, size_t len)
{
    uint8_t *b = malloc(12 + len);
    if (!b)
        return -1;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(t >> (8 * i));
    for (int i = 0; i < 8; i++)
        b[4 + i] = (uint8_t)((uint64_t)key >> (8 * i));
    if (len)
        memcpy(b + 12, val, len);
    XXH128_hash_t h = XXH3_128bits(b, 12 + len);
    free(b);
    *sum += ((unsigned __int128)h.high64 << 64) | h.low64;
    return 0;
}

/* content_digest_table: add every row of table T (named NAME) of DB to *SUM
** (a value that is not a BLOB counts as its text, as oracle.py reads it).
** Returns 0, or -1 with a message in ERR. */
static inline int content_digest_table(sqlite3 *db, const char *name, uint32_t t,
                                       unsigned __int128 *sum, char *err, size_t errlen)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT id, value FROM \"%s\"", name);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        int blob = sqlite3_column_type(q, 1) == SQLITE_BLOB;
        const void *v = blob ? sqlite3_column_blob(q, 1) : (const void *)sqlite3_column_text(q, 1);
        size_t n = (size_t)sqlite3_column_bytes(q, 1);
        if (content_digest_add(sum, t, sqlite3_column_int64(q, 0), v, n) != 0) {
            sqlite3_finalize(q);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE)
        snprintf(err, errlen, "reading %s: %s", name, sqlite3_errmsg(db));
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* content_digest_sqlite: the digest of every table of DB in HEX (32 hex
** digits and a NUL).  A table not named t<N> is an error, as in oracle.py.
** Returns 0, or -1 with a message in ERR. */
static inline int content_digest_sqlite(sqlite3 *db, char hex[33], char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    unsigned __int128 sum = 0;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT "
                                "LIKE 'sqlite_%'",
                                -1, &q, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "reading the schema: %s", sqlite3_errmsg(db));
        return -1;
    }
    int bad = 0;
    while (!bad && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 0);
        char *end = NULL;
        unsigned long t = name && name[0] == 't' ? strtoul(name + 1, &end, 10) : 0;
        char canon[32];
        snprintf(canon, sizeof canon, "t%lu", t);
        if (!end || *end || t > UINT32_MAX || strcmp(canon, name) != 0) {
            snprintf(err, errlen, "unexpected table %.60s (expected t0, t1, ...)",
                     name ? name : "(null)");
            bad = 1;
        } else {
            bad = content_digest_table(db, name, (uint32_t)t, &sum, err, errlen) != 0;
        }
    }
    if (!bad && rc != SQLITE_DONE) {
        snprintf(err, errlen, "reading the schema: %s", sqlite3_errmsg(db));
        bad = 1;
    }
    sqlite3_finalize(q);
    if (bad)
        return -1;
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)(sum >> 64), (unsigned long long)sum);
    return 0;
}

#endif
