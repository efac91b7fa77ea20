/*
** crashlab-jlang: runs a j-lang program in canonical form (workloads/jlang/lang.py,
** `canonical`) inside the recorded file system, writing crashlab's marks.
**
**   crashlab-jlang --program FILE --root NAME [--marks FILE]
**
** The cwd is the file system's root.  First a control for the checker
** (checkers/fssemantics.py): PROBE with a second hard link PROBE_LINK and
** the attribute user.crashlab=probe; then the folder NAME (the program's
** "."), the setup's ops, sync(), the mark `setup-done`.  Then the run:
** `txn-begin:K` before the first op after checkpoint K-1, and at
** `checkpoint K` the mark `txn-ack:K;op=OP;path=PATH` (the persistence op
** before it); `workload-end` last.  Ops are executed as the model
** (workloads/jlang/model.py) says; what a write writes: byte i of the op at
** flat position n (the setup's ops, the sync, the run's, from 0) is
** 'a' + (n + i) % 26.  A failing call: one line on stderr, exit 1; bad
** arguments or a malformed program: exit 2.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "marks.h"

#define PROBE      ".crashlab-probe"
#define PROBE_LINK ".crashlab-probe-link"
#define MAX_FDS    64
#define MAX_WORDS  6
#define MAX_LINE   512
#define ALIGN      4096

struct fdname {
    char path[MAX_LINE];
    int fd;
};

struct run {
    const char *root;
    marks *mk;
    struct fdname fds[MAX_FDS];
    int nfds;
    long pos;            /* flat position of the op being run */
    int lineno;          /* in the program file */
    int segment;         /* the last txn-begin written (0: none) */
    int pending;         /* a txn-begin is due before the next op */
    char last[MAX_LINE]; /* the last persistence op, for the ack's payload */
    char err[256];
};

static int fail(struct run *r, const char *what)
{
    fprintf(stderr, "crashlab-jlang: line %d: %s: %s\n", r->lineno, what, strerror(errno));
    return -1;
}

static int mark(struct run *r, const char *label)
{
    if (marks_emit(r->mk, label, r->err, sizeof r->err) != 0) {
        fprintf(stderr, "crashlab-jlang: mark %s: %s\n", label, r->err);
        return -1;
    }
    return 0;
}

static void full(const struct run *r, const char *path, char *out)
{
    if (strcmp(path, ".") == 0)
        snprintf(out, MAX_LINE, "%s", r->root);
    else
        snprintf(out, MAX_LINE, "%s/%s", r->root, path);
}

static int *fd_of(struct run *r, const char *path)
{
    for (int i = 0; i < r->nfds; i++)
        if (strcmp(r->fds[i].path, path) == 0)
            return &r->fds[i].fd;
    return NULL;
}

static int keep_fd(struct run *r, const char *path, int fd)
{
    int *old = fd_of(r, path);
    if (old != NULL) {
        close(*old);
        *old = fd;
        return 0;
    }
    if (r->nfds == MAX_FDS) {
        fprintf(stderr, "crashlab-jlang: more than %d open names\n", MAX_FDS);
        return -1;
    }
    snprintf(r->fds[r->nfds].path, MAX_LINE, "%s", path);
    r->fds[r->nfds++].fd = fd;
    return 0;
}

static int need_fd(struct run *r, const char *path)
{
    int *fd = fd_of(r, path);
    if (fd == NULL) {
        fprintf(stderr, "crashlab-jlang: line %d: %s is not open\n", r->lineno, path);
        return -1;
    }
    return *fd;
}

static void fill(char *buf, long pos, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + (pos + (long)i) % 26);
}

static int flags_of(const char *spec, int falloc)
{
    static const struct {
        const char *name;
        int value;
    } table[] = {
        {"O_RDONLY", O_RDONLY},
        {"O_WRONLY", O_WRONLY},
        {"O_RDWR", O_RDWR},
        {"O_CREAT", O_CREAT},
        {"O_EXCL", O_EXCL},
        {"O_TRUNC", O_TRUNC},
        {"O_APPEND", O_APPEND},
        {"FALLOC_FL_KEEP_SIZE", 0x01},
        {"FALLOC_FL_PUNCH_HOLE", 0x02},
        {"FALLOC_FL_ZERO_RANGE", 0x10},
    };
    int out = 0;
    char copy[MAX_LINE];
    snprintf(copy, sizeof copy, "%s", spec);
    if (strcmp(copy, "0") == 0)
        return 0;
    for (char *save = NULL, *w = strtok_r(copy, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
        int found = 0;
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (strcmp(table[i].name, w) == 0 && (strncmp(w, "FALLOC", 6) == 0) == falloc) {
                out |= table[i].value;
                found = 1;
            }
        if (!found)
            return -1;
    }
    return out;
}

static int do_write(struct run *r, const char *path, long off, long len, int how)
{
    char *buf = NULL;
    if (posix_memalign((void **)&buf, ALIGN, (size_t)len) != 0)
        return fail(r, "posix_memalign");
    fill(buf, r->pos, (size_t)len);
    int rc = 0;
    if (how == 'w') {
        int fd = need_fd(r, path);
        if (fd < 0 || pwrite(fd, buf, (size_t)len, off) != len)
            rc = fd < 0 ? -1 : fail(r, "pwrite");
    } else if (how == 'd') {
        char p[MAX_LINE];
        full(r, path, p);
        int fd = open(p, O_RDWR | O_DIRECT | O_SYNC);
        if (fd < 0 || pwrite(fd, buf, (size_t)len, off) != len)
            rc = fail(r, "dwrite");
        if (fd >= 0)
            close(fd);
    } else {
        int fd = need_fd(r, path);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            free(buf);
            return fd < 0 ? -1 : fail(r, "fstat");
        }
        if (st.st_size < off + len && ftruncate(fd, off + len) != 0)
            rc = fail(r, "ftruncate");
        char *map = rc ? MAP_FAILED
                       : mmap(NULL, (size_t)(off + len), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (!rc && map == MAP_FAILED)
            rc = fail(r, "mmap");
        if (!rc) {
            memcpy(map + off, buf, (size_t)len);
            if (msync(map, (size_t)(off + len), MS_SYNC) != 0)
                rc = fail(r, "msync");
            munmap(map, (size_t)(off + len));
        }
    }
    free(buf);
    return rc;
}

static int do_open(struct run *r, const char *path, const char *flags, int dir)
{
    char p[MAX_LINE];
    full(r, path, p);
    int fl = dir ? O_RDONLY | O_DIRECTORY : flags_of(flags, 0);
    if (fl < 0) {
        fprintf(stderr, "crashlab-jlang: line %d: bad flags %s\n", r->lineno, flags);
        return -1;
    }
    int fd = open(p, fl, 0777);
    if (fd < 0)
        return fail(r, dir ? "opendir" : "open");
    return keep_fd(r, path, fd);
}

static int do_close(struct run *r, const char *path)
{
    for (int i = 0; i < r->nfds; i++) {
        if (strcmp(r->fds[i].path, path) != 0)
            continue;
        close(r->fds[i].fd);
        r->fds[i] = r->fds[--r->nfds];
        return 0;
    }
    fprintf(stderr, "crashlab-jlang: line %d: close %s: not open\n", r->lineno, path);
    return -1;
}

static int pathop(struct run *r, const char *what, int rc) { return rc != 0 ? fail(r, what) : 0; }

/* One op of words W (N of them); 0, or -1 after a message. */
static int step(struct run *r, char **w, int n)
{
    char a[MAX_LINE], b[MAX_LINE];
    const char *op = w[0];
    if (n > 1)
        full(r, w[1], a);
    if (n > 2)
        full(r, w[2], b);
    if (strcmp(op, "open") == 0 && n == 4)
        return do_open(r, w[1], w[2], 0);
    if (strcmp(op, "creat") == 0 && n == 2)
        return do_open(r, w[1], "O_CREAT|O_RDWR|O_TRUNC", 0);
    if (strcmp(op, "opendir") == 0 && n == 3)
        return do_open(r, w[1], "", 1);
    if (strcmp(op, "close") == 0 && n == 2)
        return do_close(r, w[1]);
    if (strcmp(op, "mkdir") == 0 && n == 3)
        return pathop(r, "mkdir", mkdir(a, (mode_t)strtol(w[2], NULL, 8)));
    if (strcmp(op, "rmdir") == 0 && n == 2)
        return pathop(r, "rmdir", rmdir(a));
    if ((strcmp(op, "unlink") == 0 || strcmp(op, "remove") == 0) && n == 2)
        return pathop(r, op, unlink(a));
    if (strcmp(op, "link") == 0 && n == 3)
        return pathop(r, "link", link(a, b));
    if (strcmp(op, "symlink") == 0 && n == 3)
        return pathop(r, "symlink", symlink(w[1], b)); /* the target as written */
    if (strcmp(op, "rename") == 0 && n == 3)
        return pathop(r, "rename", rename(a, b));
    if (strcmp(op, "truncate") == 0 && n == 3)
        return pathop(r, "truncate", truncate(a, atol(w[2])));
    if (strcmp(op, "write") == 0 && n == 4)
        return do_write(r, w[1], atol(w[2]), atol(w[3]), 'w');
    if (strcmp(op, "dwrite") == 0 && n == 4)
        return do_write(r, w[1], atol(w[2]), atol(w[3]), 'd');
    if (strcmp(op, "mmapwrite") == 0 && n == 4)
        return do_write(r, w[1], atol(w[2]), atol(w[3]), 'm');
    if (strcmp(op, "falloc") == 0 && n == 5) {
        int fd = need_fd(r, w[1]), mode = flags_of(w[2], 1);
        if (fd < 0 || mode < 0)
            return -1;
        return pathop(r, "fallocate", fallocate(fd, mode, atol(w[3]), atol(w[4])));
    }
    if (strcmp(op, "fsetxattr") == 0 && n == 2) {
        int fd = need_fd(r, w[1]);
        return fd < 0 ? -1 : pathop(r, "fsetxattr", fsetxattr(fd, "user.xattr1", "val1", 4, 0));
    }
    if (strcmp(op, "removexattr") == 0 && n == 2)
        return pathop(r, "removexattr", removexattr(a, "user.xattr1"));
    if ((strcmp(op, "fsync") == 0 || strcmp(op, "fdatasync") == 0) && n == 2) {
        int fd = need_fd(r, w[1]);
        if (fd < 0)
            return -1;
        snprintf(r->last, sizeof r->last, "op=%s;path=%s", op, w[1]);
        return pathop(r, op, op[1] == 's' ? fsync(fd) : fdatasync(fd));
    }
    if (strcmp(op, "sync") == 0 && n == 1) {
        sync();
        snprintf(r->last, sizeof r->last, "op=sync");
        return 0;
    }
    if (strcmp(op, "mark") == 0 && n == 2)
        return mark(r, w[1]);
    fprintf(stderr, "crashlab-jlang: line %d: bad op '%s' with %d words\n", r->lineno, op, n);
    return -2;
}

static int checkpoint(struct run *r, const char *k)
{
    char label[MAX_LINE + 64];
    snprintf(label, sizeof label, "txn-ack:%s;%s", k, r->last[0] ? r->last : "op=none");
    r->last[0] = '\0';
    r->pending = 1;
    return mark(r, label);
}

static int probe(void)
{
    int fd = open(PROBE, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0 || link(PROBE, PROBE_LINK) != 0) {
        perror("crashlab-jlang: the control " PROBE);
        return -1;
    }
    if (fsetxattr(fd, "user.crashlab", "probe", 5, 0) != 0 && errno != ENOTSUP)
        perror("crashlab-jlang: the control's attribute");
    close(fd);
    return 0;
}

/* Run every line of F; 0, 1 (a call failed) or 2 (a malformed program). */
static int run_program(struct run *r, FILE *f)
{
    char line[MAX_LINE];
    int in_setup = 1;
    while (fgets(line, sizeof line, f) != NULL) {
        r->lineno++;
        char *w[MAX_WORDS + 1];
        int n = 0;
        for (char *save = NULL, *t = strtok_r(line, " \n", &save); t && n <= MAX_WORDS;
             t = strtok_r(NULL, " \n", &save))
            w[n++] = t;
        if (n == 0 || n > MAX_WORDS)
            return 2;
        if (in_setup && strcmp(w[0], "setup") == 0 && n == 1) {
            in_setup = 0;
            sync();
            r->pos++;
            r->pending = 1;
            if (mark(r, "setup-done") != 0)
                return 1;
            continue;
        }
        if (!in_setup && r->pending) {
            char label[32];
            snprintf(label, sizeof label, "txn-begin:%d", ++r->segment);
            r->pending = 0;
            if (mark(r, label) != 0)
                return 1;
        }
        int rc = strcmp(w[0], "checkpoint") == 0 && n == 2 && !in_setup ? checkpoint(r, w[1])
                                                                        : step(r, w, n);
        if (rc != 0)
            return rc == -2 ? 2 : 1;
        r->pos++;
    }
    return in_setup ? 2 : 0;
}

int main(int argc, char **argv)
{
    const char *program = NULL, *marks_file = NULL;
    struct run r = {0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--program") == 0)
            program = argv[i + 1];
        else if (strcmp(argv[i], "--root") == 0)
            r.root = argv[i + 1];
        else if (strcmp(argv[i], "--marks") == 0)
            marks_file = argv[i + 1];
    }
    if (program == NULL || r.root == NULL || argc % 2 == 0) {
        fprintf(stderr, "usage: crashlab-jlang --program FILE --root NAME [--marks FILE]\n");
        return 2;
    }
    FILE *f = fopen(program, "r");
    if (f == NULL) {
        perror(program);
        return 2;
    }
    if (marks_open(&r.mk, marks_file, r.err, sizeof r.err) != 0) {
        fprintf(stderr, "crashlab-jlang: %s\n", r.err);
        fclose(f);
        return 2;
    }
    int rc = probe() != 0 || mkdir(r.root, 0777) != 0 ? 1 : run_program(&r, f);
    if (rc == 2)
        fprintf(stderr, "crashlab-jlang: line %d: malformed program\n", r.lineno);
    for (int i = 0; i < r.nfds; i++)
        close(r.fds[i].fd);
    if (rc == 0 && mark(&r, "workload-end") != 0)
        rc = 1;
    marks_close(r.mk);
    fclose(f);
    return rc;
}
