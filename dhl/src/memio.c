/*
** memio.c — struct dhl_io over a caller-owned memory buffer (dhl_mem_io):
** checkers open, recover and re-recover crash images in memory instead of
** on scratch files.
*/
#include "internal.h"

#include <errno.h>

/* mem_pread: copy up to n bytes at off; past the end *got is short. */
static int mem_pread(void *ctx, void *buf, size_t n, uint64_t off, size_t *got)
{
    const struct dhl_mem *m = ctx;
    size_t k = 0;
    if (off < m->size)
        k = (size_t)(m->size - off) < n ? (size_t)(m->size - off) : n;
    if (k)
        memcpy(buf, m->data + off, k);
    *got = k;
    return 0;
}

/* mem_pwrite: store n bytes at off, growing size up to cap (-ENOSPC past
** it; the gap a write past the end leaves reads as whatever the buffer
** holds there, which the caller zeroed). */
static int mem_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    struct dhl_mem *m = ctx;
    uint64_t end = m->blockdev ? m->size : m->cap;
    if (off > end || n > end - off)
        return -ENOSPC;
    memcpy(m->data + off, buf, n);
    if (off + n > m->size)
        m->size = off + n;
    if (off + n > m->hiwater)
        m->hiwater = off + n;
    m->writes++;
    return 0;
}

/* mem_sync: nothing to make durable; counted. */
static int mem_sync(void *ctx, int datasync)
{
    (void)datasync;
    ((struct dhl_mem *)ctx)->syncs++;
    return 0;
}

static int mem_size(void *ctx, uint64_t *bytes)
{
    *bytes = ((const struct dhl_mem *)ctx)->size;
    return 0;
}

/* dhl_mem_io: see dhl.h. */
void dhl_mem_io(struct dhl_io *io, struct dhl_mem *m)
{
    *io = (struct dhl_io){m, mem_pread, mem_pwrite, mem_sync, mem_size, NULL, m->blockdev != 0};
}
