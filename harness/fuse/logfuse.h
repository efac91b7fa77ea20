/*
** logfuse.h — what the units of the fuse recording daemon share (logfuse.c:
** options, files, the session; logfuse_log.c: appending to the log;
** logfuse_requests.c: the FUSE requests).  The daemon is single-threaded:
** its state is one global, g.
*/
#ifndef CRASHLAB_LOGFUSE_H
#define CRASHLAB_LOGFUSE_H

#define FUSE_USE_VERSION 34

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "faultrules.h"
#include "logwrites.h"

#define INO_ROOT     1
#define INO_DISK     2
#define INO_MARK     3
#define INO_NVRAM    4
#define ZERO_CHUNK   (1U << 20) /* zero-range writes are logged in 1 MiB entries */
#define ATTR_TIMEOUT 86400.0

struct logfuse_state {
    int img_fd;          /* the working image */
    uint8_t *img;        /* ... mapped shared: reads and writes are memcpy */
    off_t img_size;      /* fixed: the disk never changes size */
    off_t nv_size;       /* --nvram: the NVRAM's bytes, after the disk's in IMG (0: none) */
    int log_fd;          /* the log, written at log_off */
    uint8_t *super;      /* the log's super block, mapped shared */
    off_t log_off;       /* where the next entry goes */
    uint64_t nr_entries; /* entries appended so far */
    int failed;          /* a log write failed: the log is incomplete */
    uint64_t n_writes, n_flushes, n_discards, n_zero, n_marks, n_nvram, bytes;
};

extern struct logfuse_state g;
extern fault_rules faults; /* the device faults to inject (--fault) */

/* The FUSE requests the daemon answers (logfuse_requests.c). */
extern const struct fuse_lowlevel_ops logfuse_ops;

/*
** Rewrite the log's super block with the current entry count (logfuse_log.c).
** Returns 0 or -1 (and marks the daemon failed).
*/
int write_super(void);

/*
** Append one entry (logfuse_log.c): a header block (sector, nr_sectors,
** flags, the label of a MARK) followed by `len` bytes of payload from `data`.
** Returns 0, or -1 after marking the daemon failed.
*/
int log_append(uint64_t sector, uint64_t nr_sectors, uint64_t flags, const char *label,
               size_t label_len, const void *data, size_t len);

#endif
