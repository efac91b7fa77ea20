/*
** faultrules.c: parsing and matching of the daemon's device-fault rules
** (the contract is in faultrules.h).
*/
#include "faultrules.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const OP_NAMES[] = {"write", "flush", "read"};

/* next_u64: parse a decimal number ending at ':' or the end of *P into *OUT
** and step past the ':'.  Returns 0, or -1 on anything else. */
static int next_u64(const char **p, uint64_t *out)
{
    char *end;
    if (**p < '0' || **p > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (errno || (*end != ':' && *end != '\0'))
        return -1;
    *out = v;
    *p = *end ? end + 1 : end;
    return 0;
}

int fault_rules_add(fault_rules *rules, const char *text, char *err, size_t errlen)
{
    if (rules->n == FAULT_MAX_RULES) {
        snprintf(err, errlen, "at most %d fault rules", FAULT_MAX_RULES);
        return -1;
    }
    fault_rule f;
    memset(&f, 0, sizeof f);
    const char *colon = strchr(text, ':');
    size_t oplen = colon ? (size_t)(colon - text) : strlen(text);
    int op = -1;
    for (int i = 0; i < 3; i++)
        if (strlen(OP_NAMES[i]) == oplen && strncmp(text, OP_NAMES[i], oplen) == 0)
            op = i;
    const char *p = colon ? colon + 1 : "";
    uint64_t sticky = 0;
    if (op < 0 || next_u64(&p, &f.nth) || next_u64(&p, &sticky) || next_u64(&p, &f.lo) ||
        next_u64(&p, &f.hi) || f.nth == 0 || sticky > 1 || (f.hi && f.hi <= f.lo)) {
        snprintf(err, errlen, "bad fault rule %.80s (OP:NTH:STICKY:LO:HI[:AFTER])", text);
        return -1;
    }
    if (strlen(p) >= sizeof f.after) {
        snprintf(err, errlen, "fault rule %.40s: mark name too long", text);
        return -1;
    }
    f.op = (enum fault_op)op;
    f.sticky = (int)sticky;
    strcpy(f.after, p);
    f.armed = f.after[0] == '\0';
    rules->r[rules->n++] = f;
    return 0;
}

void fault_rules_mark(fault_rules *rules, const char *label, size_t len)
{
    const char *semi = memchr(label, ';', len);
    size_t name = semi ? (size_t)(semi - label) : len;
    for (int i = 0; i < rules->n; i++) {
        fault_rule *f = &rules->r[i];
        if (!f->armed && strlen(f->after) == name && memcmp(f->after, label, name) == 0)
            f->armed = 1;
    }
}

int fault_rules_hit(fault_rules *rules, enum fault_op op, uint64_t off, uint64_t len)
{
    int fail = 0;
    for (int i = 0; i < rules->n; i++) {
        fault_rule *f = &rules->r[i];
        if (!f->armed || f->op != op)
            continue;
        if (f->hi && (off >= f->hi || off + len <= f->lo))
            continue;
        f->seen++;
        if (f->seen == f->nth || (f->fired && f->sticky)) {
            f->fired = 1;
            fail = 1;
        }
    }
    rules->injected += (uint64_t)fail;
    return fail;
}

size_t fault_mark_label(enum fault_op op, uint64_t off, uint64_t len, char *out, size_t outlen)
{
    int n;
    if (op == FAULT_FLUSH)
        n = snprintf(out, outlen, "fault:eio-flush");
    else
        n = snprintf(out, outlen, "fault:eio-%s;sector=%" PRIu64 ";sectors=%" PRIu64, OP_NAMES[op],
                     off / 512, (len + 511) / 512);
    return n < 0 ? 0 : (size_t)n < outlen ? (size_t)n : outlen - 1;
}
