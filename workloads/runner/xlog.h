/*
** xLog (Luo, Jiang, Yan, Yang, "Fast Transaction Logging for Smartphones"):
** each transaction is one checksummed log record in battery-backed RAM
** (NVRAM), acknowledged once the record is there; when the NVRAM is full
** its records are written back to a SQLite database (WAL, synchronous=FULL)
** in one SQLite transaction, and opening the database replays the valid
** records the database does not hold yet.
**
** The source is the paper's talk slides (idea and results only): the record
** format, the write-back and the replay here are crashlab's own design.
**
** NVRAM layout (XLOG_NVRAM_SIZE bytes, little-endian):
**   header  at 0:  u32 magic "XLH1", u32 0, u64 base_lsn, u32 crc, u32 0
**   records from XLOG_HDR_SIZE on, back to back:
**           u32 magic "XLR1", u32 len, u64 lsn, len payload bytes, u32 crc
**   crc: CRC-32C of the bytes before it (header: its first 16 bytes).
** The valid records are the longest run from XLOG_HDR_SIZE whose magic and
** crc hold and whose lsn go base_lsn, base_lsn + 1, ...: a torn record or a
** stale one (from before the last reset, lsn < base_lsn) ends the run.
** The database keeps the last lsn written back in PRAGMA user_version, in
** the same SQLite transaction as the rows, so a replay is idempotent.
**
** A payload is the transaction's operations (command logging):
**   u8 op (1 insert, 2 update, 3 delete), u32 table, i64 key,
**   then for insert and update: u32 len, len value bytes.
*/
#ifndef CRASHLAB_XLOG_H
#define CRASHLAB_XLOG_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define XLOG_NVRAM_SIZE 2048U /* the emulated NVRAM (the SUT's capacity) */
#define XLOG_HDR_SIZE   24U
#define XLOG_REC_HEAD   16U         /* magic, len, lsn */
#define XLOG_REC_TAIL   4U          /* crc */
#define XLOG_MAGIC_HDR  0x31484c58U /* "XLH1" */
#define XLOG_MAGIC_REC  0x31524c58U /* "XLR1" */

enum { XLOG_INSERT = 1, XLOG_UPDATE = 2, XLOG_DELETE = 3 };

/* One valid record found by xlog_scan (payload points into the NVRAM copy). */
typedef struct xlog_record {
    uint64_t lsn;
    const uint8_t *payload;
    uint32_t len;
} xlog_record;

/* One operation of a payload (value points into the payload). */
typedef struct xlog_op {
    int op; /* XLOG_INSERT, XLOG_UPDATE, XLOG_DELETE */
    uint32_t table;
    int64_t key;
    const uint8_t *value;
    uint32_t len;
} xlog_op;

/* CRC-32C (Castagnoli) of N bytes at P. */
uint32_t xlog_crc32c(const void *p, size_t n);

/* Write the header for BASE_LSN into OUT (XLOG_HDR_SIZE bytes). */
void xlog_header_encode(uint8_t *out, uint64_t base_lsn);

/* The base_lsn of a valid header at IN (XLOG_HDR_SIZE bytes) in *BASE;
** returns 0, or -1 if the magic or crc does not hold. */
int xlog_header_decode(const uint8_t *in, uint64_t *base);

/* The bytes a record with a LEN-byte payload takes. */
size_t xlog_record_size(uint32_t len);

/* Write the record (LSN, LEN payload bytes at PAYLOAD) into OUT, which has
** room for xlog_record_size(LEN) bytes; returns that size. */
size_t xlog_record_encode(uint8_t *out, uint64_t lsn, const uint8_t *payload, uint32_t len);

/* Scan NV (SIZE bytes, a header at 0) for the valid records (see above),
** storing at most MAX of them in OUT; *END gets the offset just past the
** last valid one (XLOG_HDR_SIZE when there is none) and *BASE the header's
** base_lsn.  Returns the number of valid records, or -1 when the header is
** not valid (then *END and *BASE are untouched). */
int xlog_scan(const uint8_t *nv, size_t size, xlog_record *out, int max, size_t *end,
              uint64_t *base);

/* Write operation OP on TABLE, KEY (for insert and update, LEN value bytes
** at VALUE) into OUT, which has room for it (13 bytes, 17 + LEN with a value). */
void xlog_op_encode(uint8_t *out, int op, uint32_t table, int64_t key, const void *value,
                    uint32_t len);

/* The operation of PAYLOAD (LEN bytes) at *POS into *OP, advancing *POS.
** Returns 1, 0 at the end, -1 if the payload is malformed. */
int xlog_op_next(const uint8_t *payload, uint32_t len, uint32_t *pos, xlog_op *op);

/* The engine, engine_xlog (engine.h), takes its NVRAM from the file named
** by CRASHLAB_NVRAM (the recorder's emulated NVRAM), else DB".nvram". */

/* Open DB with NVRAM file NVRAM exactly as the engine's open does (replay
** included) and close it: what a restart after a crash runs, for the
** checkers.  Returns 0, or -1 with a message in ERR. */
int xlog_recover(const char *db, const char *nvram, char *err, size_t errlen);

#endif
