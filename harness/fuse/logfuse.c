/*
** logfuse: the fuse recording daemon of crashlab.
**
**   logfuse --image IMG --log LOG [--nvram BYTES] [--fault RULE]... MOUNTPOINT
**
** Mounts a FUSE file system at MOUNTPOINT holding two files:
**   disk   the block device's content, backed by IMG (read and written in
**          place: IMG must be a working copy, never a base image);
**   mark   a control file: every line written to it is logged as a MARK;
**   nvram  with --nvram BYTES only: the last BYTES of IMG (then not part of
**          `disk`), an emulated battery-backed RAM.  Each write to it is
**          logged as a FUA write (durable once it completes, no FLUSH) at
**          the sectors after the disk's: sector disk_sectors + off / 512.
** The driver (harness/record/fuse.py) attaches `disk` to a loop device with
** `losetup --direct-io=on` and mounts a real file system on that.
**
** Every request that changes the device is appended to LOG, in the
** dm-log-writes format (logwrites.h), BEFORE the daemon replies:
**   write                            -> a write entry with the data
**   fsync / fdatasync                -> a FLUSH entry
**   fallocate PUNCH_HOLE|KEEP_SIZE   -> a DISCARD entry
**   fallocate ZERO_RANGE[|KEEP_SIZE] -> write entries of zeros
**   a line written to `mark`         -> a MARK entry
**   write to `nvram`                 -> a FUA write entry past the disk's sectors
** The daemon is single-threaded (one request at a time), so the log's order
** is the order in which requests completed.  Like the kernel, it rewrites the
** super block's nr_entries after every FLUSH, FUA and MARK entry and at exit.
**
** Pitfalls this file follows (harness/record/NOTES.md): direct_io on both files
** and no writeback cache (otherwise writes reach the daemon late and merged);
** fsync is always implemented (an ENOSYS reply makes the kernel stop sending
** fsync and flushes vanish); setattr is a no-op that succeeds; the daemon
** never touches the file system stacked on top of it, and asks to be treated
** as an I/O flusher with its memory locked, against reclaim deadlocks.
**
** Device faults (--fault, faultrules.h): a request a rule fails is answered
** EIO, neither applied nor logged; a MARK "fault:eio-..." is logged in its
** place.  Marks arm the rules that wait for them.
**
** After mounting it prints "ready" on stdout and closes stdout.  It exits 0
** when unmounted (fusermount3 -u) or on SIGTERM/SIGINT/SIGHUP, and 1 if any
** log write failed (the log is then incomplete: every later request gets EIO).
*/
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logfuse.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif
struct logfuse_state g = {.img_fd = -1, .log_fd = -1};
fault_rules faults;

static void usage(void)
{
    fprintf(stderr, "usage: logfuse --image IMG --log LOG [--nvram BYTES] "
                    "[--fault OP:NTH:STICKY:LO:HI[:AFTER]]... MOUNTPOINT\n");
    exit(2);
}

/* open_files: open and map the image IMG (its last g.nv_size bytes are the
** NVRAM), create the log LOG with its super block and map that; on failure
** a message on stderr and -1. */
static int open_files(const char *image, const char *log)
{
    g.img_fd = open(image, O_RDWR | O_CLOEXEC);
    if (g.img_fd < 0) {
        fprintf(stderr, "logfuse: %s: %s\n", image, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(g.img_fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size % LOG_SECTOR_SIZE ||
        st.st_size <= g.nv_size) {
        fprintf(stderr,
                "logfuse: %s: not a regular file of whole %u-byte sectors (past the NVRAM)\n",
                image, LOG_SECTOR_SIZE);
        return -1;
    }
    g.img_size = st.st_size - g.nv_size;
    g.img = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, g.img_fd, 0);
    if (g.img == MAP_FAILED) {
        fprintf(stderr, "logfuse: mmap %s: %s\n", image, strerror(errno));
        return -1;
    }
    g.log_fd = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.log_fd < 0) {
        fprintf(stderr, "logfuse: %s: %s\n", log, strerror(errno));
        return -1;
    }
    g.log_off = LOG_SECTOR_SIZE;
    if (write_super())
        return -1;
    g.super = mmap(NULL, LOG_SECTOR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g.log_fd, 0);
    if (g.super == MAP_FAILED) {
        fprintf(stderr, "logfuse: mmap %s: %s\n", log, strerror(errno));
        return -1;
    }
    return 0;
}

/* parse_args: the options into *image, *log, g.nv_size and faults; the
** mount point's index in argv, or -1 after a message (exit code 2). */
static int parse_args(int argc, char **argv, const char **image, const char **log)
{
    static const struct option longopts[] = {
        {"image", required_argument, NULL, 'i'}, {"log", required_argument, NULL, 'l'},
        {"fault", required_argument, NULL, 'f'}, {"nvram", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    int c;
    char err[160];
    while ((c = getopt_long(argc, argv, "i:l:f:n:h", longopts, NULL)) != -1) {
        if (c == 'i')
            *image = optarg;
        else if (c == 'l')
            *log = optarg;
        else if (c == 'n') {
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v <= 0 || v % LOG_SECTOR_SIZE || v > (1 << 20)) {
                fprintf(stderr, "logfuse: bad --nvram %s (whole %u-byte sectors, at most 1 MiB)\n",
                        optarg, LOG_SECTOR_SIZE);
                return -1;
            }
            g.nv_size = (off_t)v;
        } else if (c == 'f') {
            if (fault_rules_add(&faults, optarg, err, sizeof err) != 0) {
                fprintf(stderr, "logfuse: %s\n", err);
                return -1;
            }
        } else
            usage();
    }
    if (!*image || !*log || optind != argc - 1)
        usage();
    return optind;
}

/* report: the daemon's counts and CPU time on stderr. */
static void report(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr,
            "logfuse: %llu entries: %llu writes (%llu bytes), %llu flushes, %llu discards, "
            "%llu zero-ranges, %llu marks, %llu injected faults, %llu nvram writes; "
            "cpu user %.3f s sys %.3f s\n",
            (unsigned long long)g.nr_entries, (unsigned long long)g.n_writes,
            (unsigned long long)g.bytes, (unsigned long long)g.n_flushes,
            (unsigned long long)g.n_discards, (unsigned long long)g.n_zero,
            (unsigned long long)g.n_marks, (unsigned long long)faults.injected,
            (unsigned long long)g.n_nvram, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
            ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
}

int main(int argc, char **argv)
{
    const char *image = NULL, *log = NULL;
    int at = parse_args(argc, argv, &image, &log);
    if (at < 0)
        return 2;
    const char *mountpoint = argv[at];

    if (open_files(image, log))
        return 2;

    /* Reclaim may need this daemon to make progress: never let it wait on
    ** reclaim itself. */
    if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0)
        fprintf(stderr, "logfuse: warning: PR_SET_IO_FLUSHER: %s\n", strerror(errno));

    /* Single-threaded; no writeback cache; a recognisable name in mtab. */
    char *fargv[] = {argv[0], "-o", "fsname=crashlab-logfuse,subtype=logfuse", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &logfuse_ops, sizeof logfuse_ops, NULL);
    if (!se)
        return 2;
    int rc = 2;
    if (fuse_set_signal_handlers(se) != 0)
        goto out_destroy;
    if (fuse_session_mount(se, mountpoint) != 0)
        goto out_signals;
#ifndef __SANITIZE_ADDRESS__ /* ASan's shadow memory cannot be locked */
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        fprintf(stderr, "logfuse: warning: mlockall: %s\n", strerror(errno));
#endif
    printf("ready\n");
    fflush(stdout);
    fclose(stdout);
    rc = fuse_session_loop(se) < 0 ? 1 : 0;
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_destroy:
    fuse_session_destroy(se);
    fuse_opt_free_args(&args);
    munmap(g.super, LOG_SECTOR_SIZE);
    g.super = NULL;
    if (write_super())
        rc = 1;
    if (g.failed)
        rc = 1;
    close(g.log_fd);
    munmap(g.img, (size_t)(g.img_size + g.nv_size));
    close(g.img_fd);
    report();
    return rc;
}
