/*
** crashlab's WALDIO VFS: SQLite's WAL written with direct I/O into a
** pre-allocated file, one 4 KiB block per frame, a transaction's frames
** written as one aligned write (after Lee et al., "WALDIO: Eliminating the
** Filesystem Journaling in Resolving the Journaling of Journal Anomaly",
** USENIX ATC '15).  SQLite itself is not modified: the shim sits under it
** and translates between the WAL as SQLite lays it out and the WAL on disk.
**
** SQLite's view (wal.c's format, unchanged): a 32-byte header, then per
** frame a 24-byte frame header and a page.  On disk (page size 4096 only):
**
**   block 0      the 32-byte WAL header, then zeros
**   block k + 1  frame k: the page's first 4072 bytes, then its 24-byte
**                frame header in the page's last 24 bytes
**
** The page's last 24 bytes are reserved bytes (the database is given 24
** reserved bytes per page, header byte 20, before anything is written), so
** SQLite keeps nothing there; a page read back from the WAL has them zero.
** Header embedding makes a frame exactly one block: no frame header spills
** into the next block, and every WAL write is 4 KiB-aligned.
**
** Writes.  The WAL file is opened with O_DIRECT.  Frames written by SQLite
** collect in an aligned group buffer (contiguous blocks) and go to disk as
** one aligned write (above 124 KiB, several: the unix VFS writes at most
** 128 KiB - 1 per call) when the transaction's commit frame is complete (its frame
** header's database-size field is nonzero), on xSync, on close, or when the
** buffer is full.  xSync writes what is buffered, then syncs (fdatasync):
** with synchronous=FULL, wal.c syncs the WAL after every commit frame, so a
** transaction costs one aligned write and one fdatasync, and nothing is
** acknowledged before both (the group is one transaction: the paper's
** multi-transaction group commit, which can lose acknowledged commits, is
** not emulated).  Before the group write every frame's checksum is
** recomputed over the page as SQLite will read it back (reserved bytes
** zero), chained from the frame before as stored: the WAL on disk always
** satisfies wal.c's recovery, which is SQLite's own.
**
** Pre-allocation with explicit journaling.  When the runner opens a WAL
** with fewer than N frames (waldiovfs_register(N), N > 0), the file is
** fallocate()d to 1 + N blocks, the new blocks are written with zeros (so
** no extent is left unwritten) and the file is synced once (unix VFS: with
** its directory, the WAL being new): the file system journals the file's
** metadata then, and later commits overwrite allocated, written blocks, so
** their fdatasync has no metadata to commit.  A zeroed block fails WAL
** recovery's salt check, so the blocks past the last commit mean nothing.
** A WAL that outgrows its blocks grows by N more the same way (zeros, then
** a sync) before the write that needs them.
**
** Only the WAL is translated; the database file and every other file go
** to the underlying VFS untouched.  The checkers open a recovered database
** through the same code (libcrashlab-waldiovfs.so, N = 0: no writes of its
** own); there, a file system that refuses O_DIRECT gets buffered I/O with
** the same layout.  The runner (N > 0) refuses to run without O_DIRECT.
*/
#ifndef CRASHLAB_WALDIOVFS_H
#define CRASHLAB_WALDIOVFS_H

#include <stdint.h>

#define WALDIOVFS_NAME    "crashlab-waldio"
#define WALDIOVFS_BLOCK   4096 /* the one page size it supports: a frame is a block */
#define WALDIOVFS_RESERVE 24   /* reserved bytes per page: the embedded frame header */

/* Register the shim as the VFS named WALDIOVFS_NAME over the default VFS at
** the time of the first call (not as the default).  PREALLOC_FRAMES: frames
** a WAL is pre-allocated to when opened (0: none, and buffered I/O where
** O_DIRECT is refused).  A later call only changes PREALLOC_FRAMES.
** Returns an SQLite result code. */
int waldiovfs_register(int prealloc_frames);

/* Whether pre-allocation writes zeros into the blocks it allocates (ON, the
** default: no extent is left unwritten) or leaves them as fallocate()
** returns them, unwritten (0: WALDIO §5.1's hazard, a broken variant: the
** frames' direct writes then convert the extents, and the conversion is
** metadata the log-commit's fdatasync must journal). */
void waldiovfs_set_zero_fill(int on);

/* What the shim did since the process started. */
typedef struct waldiovfs_stats {
    uint64_t group_writes;   /* aligned writes of buffered blocks */
    uint64_t blocks_written; /* blocks in them */
    uint64_t syncs;          /* xSync calls passed down */
    uint64_t prealloc_syncs; /* syncs of a pre-allocation or growth */
    uint64_t direct_opens;   /* WAL files opened with O_DIRECT */
    uint64_t buffered_opens; /* WAL files opened without it (checkers only) */
} waldiovfs_stats;

void waldiovfs_get_stats(waldiovfs_stats *out);

#endif
