#include "marks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { CH_NONE, CH_FILE, CH_DM };

struct marks {
    int kind;
    int fd;        /* CH_FILE */
    char *dm_name; /* CH_DM */
    char *path;    /* CH_FILE, for messages */
};

int marks_open(marks **out, const char *marks_file, char *err, size_t errlen)
{
    const char *env_file = getenv("CRASHLAB_MARK");
    const char *env_dm = getenv("CRASHLAB_MARK_DM");
    if (env_file && !*env_file)
        env_file = NULL;
    if (env_dm && !*env_dm)
        env_dm = NULL;
    marks *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->fd = -1;
    if (!marks_file && env_file && env_dm) {
        snprintf(err, errlen, "both CRASHLAB_MARK and CRASHLAB_MARK_DM are set: set one");
        free(m);
        return -1;
    }
    if (marks_file || env_file) {
        const char *path = marks_file ? marks_file : env_file;
        /* The recorder's control file exists already: never create it. */
        int flags = O_WRONLY | O_APPEND | O_CLOEXEC | (marks_file ? O_CREAT : 0);
        m->fd = open(path, flags, 0644);
        if (m->fd < 0) {
            snprintf(err, errlen, "mark file %s: %s", path, strerror(errno));
            free(m);
            return -1;
        }
        m->path = strdup(path);
        m->kind = CH_FILE;
    } else if (env_dm) {
        m->dm_name = strdup(env_dm);
        m->kind = CH_DM;
    } else {
        m->kind = CH_NONE;
    }
    *out = m;
    return 0;
}

/* Run `dmsetup message NAME 0 mark LABEL` and wait for it to succeed. */
static int emit_dm(marks *m, const char *label, char *err, size_t errlen)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "mark %s: fork: %s", label, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        char *argv[] = {"dmsetup", "message", m->dm_name, "0", "mark", (char *)label, NULL};
        execvp("dmsetup", argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "mark %s: waitpid: %s", label, strerror(errno));
            return -1;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "mark %s: dmsetup message %s failed (status %d)", label, m->dm_name,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return -1;
    }
    return 0;
}

int marks_emit(marks *m, const char *label, char *err, size_t errlen)
{
    size_t n = strlen(label);
    if (n == 0 || n > 255) {
        snprintf(err, errlen, "mark label of %zu bytes (1..255)", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (label[i] < 0x21 || label[i] > 0x7e) {
            snprintf(err, errlen, "mark label %s: not printable ASCII", label);
            return -1;
        }
    }
    if (m->kind == CH_NONE)
        return 0;
    if (m->kind == CH_DM)
        return emit_dm(m, label, err, errlen);
    char line[257];
    memcpy(line, label, n);
    line[n] = '\n';
    /* One write() per mark: the recorder logs each write as one label. */
    ssize_t w;
    do {
        w = write(m->fd, line, n + 1);
    } while (w < 0 && errno == EINTR);
    if (w != (ssize_t)(n + 1)) {
        snprintf(err, errlen, "mark %s: write to %s: %s", label, m->path,
                 w < 0 ? strerror(errno) : "short write");
        return -1;
    }
    return 0;
}

const char *marks_channel(const marks *m)
{
    return m->kind == CH_FILE ? "file" : m->kind == CH_DM ? "dm" : "none";
}

void marks_close(marks *m)
{
    if (!m)
        return;
    if (m->fd >= 0)
        close(m->fd);
    free(m->dm_name);
    free(m->path);
    free(m);
}
