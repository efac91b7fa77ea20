/*
** SQLite's WAL checksum (wal.c: running sums over pairs of 32-bit words)
** and the byte orders around it, shared by the shims that write WAL frames
** or page checksums themselves (cksumvfs.c, waldiovfs.c) and their tests.
** Header-only: each user is one translation unit.
*/
#ifndef CRASHLAB_WALSUM_H
#define CRASHLAB_WALSUM_H

#include <stddef.h>
#include <stdint.h>

/* The 32-bit little-endian word at P. */
static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 32-bit big-endian word at P. */
static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* V at P, little-endian. */
static inline void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* V at P, big-endian. */
static inline void put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

/* wal.c's checksum: the running sums over N bytes of A (a multiple of 8)
** taken as pairs of 32-bit words, little- or big-endian; S carries them in
** and out. */
static inline void sums(const unsigned char *a, size_t n, int big_endian, uint32_t s[2])
{
    uint32_t (*word)(const unsigned char *) = big_endian ? be32 : le32;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        s[0] += word(a + i) + s[1];
        s[1] += word(a + i + 4) + s[0];
    }
}

#endif
