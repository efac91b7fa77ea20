#include "opstream.h"
#include "errorf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = {'C', 'L', 'O', 'P', 'S', 'T', 'R', 'M'};
#define HEADER_SIZE 24u

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Set X->err from a printf format; returns -1. */
#define fail(x, ...) errorf((x)->err, sizeof(x)->err, __VA_ARGS__)

/* Check the header of the stream already in s->data. */
static int read_header(ops_stream *s)
{
    if (s->size < HEADER_SIZE)
        return fail(s, "op stream: truncated header");
    if (memcmp(s->data, MAGIC, sizeof MAGIC) != 0)
        return fail(s, "op stream: bad magic");
    uint32_t version = get32(s->data + 8);
    if (version != 1)
        return fail(s, "op stream: version %u (this runner knows 1)", version);
    s->ntables = get32(s->data + 12);
    s->ntxns = get32(s->data + 16);
    if (s->ntables == 0)
        return fail(s, "op stream: zero tables");
    s->pos = HEADER_SIZE;
    s->next_txn = 1;
    return 0;
}

int ops_open_buffer(ops_stream *s, const uint8_t *data, size_t size)
{
    memset(s, 0, sizeof *s);
    s->data = (uint8_t *)data;
    s->size = size;
    return read_header(s);
}

int ops_open_file(ops_stream *s, const char *path)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(s, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf)
        return fail(s, "%s: out of memory", path);
    s->data = buf;
    s->size = n;
    s->owned = 1;
    if (err)
        return fail(s, "%s: read error", path);
    return read_header(s);
}

void ops_close(ops_stream *s)
{
    if (s->owned)
        free(s->data);
    s->data = NULL;
    s->owned = 0;
}

/* Nonzero when N more bytes are available at s->pos. */
static int have(const ops_stream *s, size_t n) { return s->size - s->pos >= n; }

/* long: one case per record type of the stream, each read and checked in place */
int ops_next(ops_stream *s, ops_record *r)
{
    if (s->done)
        return 0;
    size_t off = s->pos;
    memset(r, 0, sizeof *r);
    if (!have(s, 1))
        return fail(s, "op stream: byte %zu: missing END", off);
    r->type = s->data[s->pos++];
    const uint8_t *p = s->data + s->pos;
    switch (r->type) {
    case OPS_BEGIN:
    case OPS_COMMIT:
        if (!have(s, 4))
            return fail(s, "op stream: byte %zu: truncated", off);
        r->txn = get32(p);
        s->pos += 4;
        if (r->type == OPS_BEGIN) {
            if (s->in_txn)
                return fail(s, "op stream: byte %zu: BEGIN inside a transaction", off);
            if (r->txn != 0 && r->txn != s->next_txn)
                return fail(s, "op stream: byte %zu: txn %u out of order (expected %u)", off,
                            r->txn, s->next_txn);
            if (r->txn != 0)
                s->next_txn++;
            s->in_txn = 1;
            s->open_txn = r->txn;
        } else {
            if (!s->in_txn || r->txn != s->open_txn)
                return fail(s, "op stream: byte %zu: COMMIT %u without its BEGIN", off, r->txn);
            s->in_txn = 0;
        }
        return 1;
    case OPS_INSERT:
    case OPS_UPDATE:
    case OPS_DELETE:
    case OPS_SELECT: {
        int with_value = r->type == OPS_INSERT || r->type == OPS_UPDATE;
        if (!have(s, with_value ? 16 : 12))
            return fail(s, "op stream: byte %zu: truncated", off);
        r->table = get32(p);
        r->key = (int64_t)get64(p + 4);
        s->pos += 12;
        if (with_value) {
            r->len = get32(p + 12);
            s->pos += 4;
            if (!have(s, r->len))
                return fail(s, "op stream: byte %zu: value past the end", off);
            r->value = s->data + s->pos;
            s->pos += r->len;
        }
        if (!s->in_txn)
            return fail(s, "op stream: byte %zu: operation outside a transaction", off);
        if (r->table >= s->ntables)
            return fail(s, "op stream: byte %zu: table %u of %u", off, r->table, s->ntables);
        return 1;
    }
    case OPS_MARK: {
        if (!have(s, 1))
            return fail(s, "op stream: byte %zu: truncated", off);
        size_t n = s->data[s->pos++];
        if (n == 0 || !have(s, n))
            return fail(s, "op stream: byte %zu: bad mark label", off);
        for (size_t i = 0; i < n; i++) {
            uint8_t c = s->data[s->pos + i];
            if (c < 0x21 || c > 0x7e)
                return fail(s, "op stream: byte %zu: bad mark label", off);
            r->label[i] = (char)c;
        }
        s->pos += n;
        return 1;
    }
    case OPS_END: {
        if (s->in_txn)
            return fail(s, "op stream: byte %zu: END inside a transaction", off);
        if (!have(s, 4))
            return fail(s, "op stream: byte %zu: truncated", off);
        r->txn = get32(p);
        s->pos += 4;
        if (r->txn != s->ntxns || r->txn != s->next_txn - 1)
            return fail(s, "op stream: byte %zu: END counts %u transactions, header %u, seen %u",
                        off, r->txn, s->ntxns, s->next_txn - 1);
        if ((s->size - s->pos) / 8 != r->txn || (s->size - s->pos) % 8 != 0)
            return fail(s, "op stream: byte %zu: END index has the wrong length", off);
        for (uint32_t i = 0; i < r->txn; i++) {
            uint64_t b = get64(s->data + s->pos + 8 * (size_t)i);
            if (b >= off || b + 5 > off || s->data[b] != OPS_BEGIN ||
                get32(s->data + b + 1) != i + 1)
                return fail(s, "op stream: byte %zu: END index entry %u is not BEGIN %u", off, i,
                            i + 1);
        }
        s->pos = s->size;
        s->done = 1;
        return 1;
    }
    default: return fail(s, "op stream: byte %zu: unknown record type %d", off, r->type);
    }
}
