/*
** xlog_format.c — xLog's NVRAM format (xlog.h): the header, the records,
** the scan for the valid ones and the operations of a payload.  Pure: no
** I/O, no SQLite (test_xlog.c tests it alone).
*/
#include "xlog.h"

#include <string.h>

uint32_t xlog_crc32c(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t crc = 0xffffffffU;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78U & (0U - (crc & 1U)));
    }
    return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void xlog_header_encode(uint8_t *out, uint64_t base_lsn)
{
    memset(out, 0, XLOG_HDR_SIZE);
    put32(out, XLOG_MAGIC_HDR);
    put64(out + 8, base_lsn);
    put32(out + 16, xlog_crc32c(out, 16));
}

int xlog_header_decode(const uint8_t *in, uint64_t *base)
{
    if (get32(in) != XLOG_MAGIC_HDR || get32(in + 16) != xlog_crc32c(in, 16))
        return -1;
    *base = get64(in + 8);
    return 0;
}

size_t xlog_record_size(uint32_t len) { return XLOG_REC_HEAD + (size_t)len + XLOG_REC_TAIL; }

size_t xlog_record_encode(uint8_t *out, uint64_t lsn, const uint8_t *payload, uint32_t len)
{
    put32(out, XLOG_MAGIC_REC);
    put32(out + 4, len);
    put64(out + 8, lsn);
    if (len)
        memcpy(out + XLOG_REC_HEAD, payload, len);
    put32(out + XLOG_REC_HEAD + len, xlog_crc32c(out, XLOG_REC_HEAD + (size_t)len));
    return xlog_record_size(len);
}

int xlog_scan(const uint8_t *nv, size_t size, xlog_record *out, int max, size_t *end,
              uint64_t *base)
{
    uint64_t b;
    if (size < XLOG_HDR_SIZE || xlog_header_decode(nv, &b) != 0)
        return -1;
    size_t pos = XLOG_HDR_SIZE;
    int n = 0;
    while (n < max && size - pos >= XLOG_REC_HEAD + XLOG_REC_TAIL) {
        const uint8_t *r = nv + pos;
        uint32_t len = get32(r + 4);
        if (get32(r) != XLOG_MAGIC_REC || len > size - pos - XLOG_REC_HEAD - XLOG_REC_TAIL)
            break;
        if (get64(r + 8) != b + (uint64_t)n)
            break; /* stale: from before the last reset */
        if (get32(r + XLOG_REC_HEAD + len) != xlog_crc32c(r, XLOG_REC_HEAD + (size_t)len))
            break; /* torn */
        out[n] = (xlog_record){b + (uint64_t)n, r + XLOG_REC_HEAD, len};
        n++;
        pos += xlog_record_size(len);
    }
    *end = pos;
    *base = b;
    return n;
}

int xlog_op_next(const uint8_t *payload, uint32_t len, uint32_t *pos, xlog_op *op)
{
    uint32_t p = *pos;
    if (p == len)
        return 0;
    if (len - p < 13)
        return -1;
    op->op = payload[p];
    op->table = get32(payload + p + 1);
    op->key = (int64_t)get64(payload + p + 5);
    op->value = NULL;
    op->len = 0;
    p += 13;
    if (op->op == XLOG_INSERT || op->op == XLOG_UPDATE) {
        if (len - p < 4)
            return -1;
        op->len = get32(payload + p);
        p += 4;
        if (op->len > len - p)
            return -1;
        op->value = payload + p;
        p += op->len;
    } else if (op->op != XLOG_DELETE) {
        return -1;
    }
    *pos = p;
    return 1;
}

void xlog_op_encode(uint8_t *out, int op, uint32_t table, int64_t key, const void *value,
                    uint32_t len)
{
    out[0] = (uint8_t)op;
    put32(out + 1, table);
    put64(out + 5, (uint64_t)key);
    if (op != XLOG_DELETE) {
        put32(out + 13, len);
        if (len)
            memcpy(out + 17, value, len);
    }
}
