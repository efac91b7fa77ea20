/*
** crashlab's checksum VFS: a shim with the page format and the contract of
** SQLite's cksumvfs extension (ext/misc/cksumvfs.c in SQLite's source),
** written for crashlab because no Debian package here ships that extension.
**
** Page format.  A database whose header says 8 reserved bytes per page
** (header byte 20 is 8) keeps, in the last 8 bytes of every page, a
** checksum of the page's other bytes: two 32-bit sums s1, s2 over the page's
** 32-bit little-endian words taken in pairs (s1 += w[2i] + s2; s2 +=
** w[2i+1] + s1, from 0), stored s1 then s2, little-endian.  A database with
** any other number of reserved bytes goes through the shim untouched.
**
** Contract.  The checksum is computed into every whole page written to the
** main database file or to its WAL, and verified on every whole page read
** from them: a page whose checksum does not match fails the read with
** SQLITE_IOERR_DATA ("disk I/O error"), which the caller sees as an error,
** never as data.  Other files (rollback journals, temporary files) pass
** through: a journal holds page images with their checksums, which are
** verified when rollback has written them back and they are read again.
** Memory-mapped reads are refused on a checksummed database, so that every
** read is verified.
**
** What it detects: any change to a page's bytes after the page was written
** (flipped bits, a sector of another write inside the page, a torn page).
** What it cannot detect: a page that is whole and valid but not the one
** expected.  The checksum covers only the page's own bytes, not its page
** number or its version, so a misdirected write of a valid page (it reads
** as valid at its wrong place) and a lost write (the older, valid page
** stays) go unseen; so does a corrupted WAL frame, which WAL recovery
** drops as the end of the log (its own frame checksums) before any page of
** it is read.
**
** One difference from SQLite's extension: wal.c checksums a WAL frame
** (header and page) before writing it, so a page checksum computed into the
** page during the write leaves a frame whose WAL checksum no longer matches,
** and WAL recovery after a crash drops it and every frame after it.  This
** shim re-seals the frame: after computing the page checksum it recomputes
** the frame's WAL checksum from the one before it, as stored, and rewrites
** the frame header, so a crash loses no committed frame.
*/
#ifndef CRASHLAB_CKSUMVFS_H
#define CRASHLAB_CKSUMVFS_H

#include <stddef.h>
#include <stdint.h>

#define CKSUMVFS_NAME    "crashlab-cksum"
#define CKSUMVFS_RESERVE 8 /* reserved bytes per page that turn checksums on */

/* Register the shim as the VFS named CKSUMVFS_NAME over the default VFS at
** the time of the call (not as the default; idempotent).  Returns an SQLite
** result code. */
int cksumvfs_register(void);

/* The checksum of the first N bytes of A (N a multiple of 8) into OUT[8]. */
void cksumvfs_compute(const unsigned char *a, size_t n, unsigned char out[8]);

#endif
