/*
** faultrules: the device faults the recording daemon injects (eio:write,
** eio:flush, eio:read of harness/faults.py, which defines the grammar users
** write; the recorder hands the daemon each rule in the wire form below).
**
**   --fault OP:NTH:STICKY:LO:HI[:AFTER]
**
** OP is write, flush or read; NTH >= 1; STICKY 0 or 1; LO and HI a byte
** range of the device ([LO, HI), HI = 0: the whole device); AFTER, when
** present, the name of a mark (the label before any ';' payload) that arms
** the rule.  AFTER may itself contain ':' (txn-begin:5): it is the rest of
** the string.  A rule without AFTER is armed from the start.
**
** Once armed, each request of OP that touches the range counts; the NTH
** fails, and with STICKY every later matching one too.  The daemon fails a
** request by replying EIO without applying or logging it, and logs a MARK
** "fault:eio-OP;sector=S;sectors=N" (for a flush: "fault:eio-flush") in its
** place, so the checkers know when the device failed and what.
*/
#ifndef CRASHLAB_FAULTRULES_H
#define CRASHLAB_FAULTRULES_H

#include <stddef.h>
#include <stdint.h>

#define FAULT_MAX_RULES 16
#define FAULT_MARK_MAX  400

enum fault_op { FAULT_WRITE, FAULT_FLUSH, FAULT_READ };

typedef struct fault_rule {
    enum fault_op op;
    uint64_t nth, seen;
    int sticky, armed, fired;
    uint64_t lo, hi;            /* hi == 0: any offset */
    char after[FAULT_MARK_MAX]; /* "" : armed from the start */
} fault_rule;

typedef struct fault_rules {
    fault_rule r[FAULT_MAX_RULES];
    int n;
    uint64_t injected; /* requests failed so far */
} fault_rules;

/* fault_rules_add: parse one wire-form rule TEXT into RULES.  Returns 0, or
** -1 with a one-line reason in ERR. */
int fault_rules_add(fault_rules *rules, const char *text, char *err, size_t errlen);

/* fault_rules_mark: the workload logged mark LABEL: arm the rules waiting
** for its name. */
void fault_rules_mark(fault_rules *rules, const char *label, size_t len);

/* fault_rules_hit: whether request OP on bytes [OFF, OFF+LEN) fails (LEN 0
** for a flush).  Counts the request against every armed rule it matches. */
int fault_rules_hit(fault_rules *rules, enum fault_op op, uint64_t off, uint64_t len);

/* fault_mark_label: the label of the MARK logged for a failed request, in
** OUT (at most OUTLEN bytes with its NUL); returns its length. */
size_t fault_mark_label(enum fault_op op, uint64_t off, uint64_t len, char *out, size_t outlen);

#endif
