/*
** The dm-log-writes log format, C side.  The single definition of the format
** is harness/logformat.py; this header mirrors its constants for the fuse
** recording daemon (tests/test_record_format_mirror.py checks that the two
** agree).  Names follow the kernel's drivers/md/dm-log-writes.c.
**
** Layout (little-endian; S = the log's sector size):
**   bytes 0..S-1      super block: u64 magic, u64 version, u64 nr_entries,
**                     u32 sectorsize, zero padding to S
**   from byte S on    entries: a header padded with zeros to S bytes
**                     (u64 sector, u64 nr_sectors, u64 flags, u64 data_len,
**                     then a MARK's label without NUL), followed by
**                     nr_sectors * S payload bytes unless the entry is a
**                     DISCARD or a MARK.
*/
#ifndef CRASHLAB_LOGWRITES_H
#define CRASHLAB_LOGWRITES_H

#include <stdint.h>

#define WRITE_LOG_MAGIC   0x6a736677736872ULL
#define WRITE_LOG_VERSION 1ULL

#define LOG_FLUSH_FLAG    (1U << 0)
#define LOG_FUA_FLAG      (1U << 1)
#define LOG_DISCARD_FLAG  (1U << 2)
#define LOG_MARK_FLAG     (1U << 3)
#define LOG_METADATA_FLAG (1U << 4)

/* The sector size of logs written by the fuse daemon (loop devices have
** 512-byte logical blocks unless told otherwise). */
#define LOG_SECTOR_SIZE 512U

/* All fields little-endian on disk: convert with htole64/htole32. */
struct log_write_super {
    uint64_t magic;
    uint64_t version;
    uint64_t nr_entries;
    uint32_t sectorsize;
};

struct log_write_entry {
    uint64_t sector;
    uint64_t nr_sectors;
    uint64_t flags;
    uint64_t data_len;
};

/* The longest mark label that fits in one header block. */
#define LOG_MARK_MAX (LOG_SECTOR_SIZE - sizeof(struct log_write_entry))

#endif
