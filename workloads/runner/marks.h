/*
** The mark channel: how the runner tells the recorder where it is in the
** workload (labels like "setup-done", "txn-begin:7", "txn-ack:7").
**
** Chosen once at start, the first that applies:
**   --marks FILE given      append "label\n" to FILE (created if missing)
**   CRASHLAB_MARK_DM=NAME   `dmsetup message NAME 0 mark LABEL`, synchronous
**   CRASHLAB_MARK=PATH      one write() of "label\n" to PATH (the recorder's
**                           control file; opened once, never created)
**   none of these           marks are dropped
** Setting both environment variables is an error.  A new channel (a qemu
** guest port, say) is one more case in marks.c.
*/
#ifndef CRASHLAB_MARKS_H
#define CRASHLAB_MARKS_H

#include <stddef.h>

typedef struct marks marks;

/*
** Choose and open the channel (MARKS_FILE may be NULL).  Returns 0 and sets
** *OUT, or -1 with a one-line message in ERR.
*/
int marks_open(marks **out, const char *marks_file, char *err, size_t errlen);

/*
** Emit LABEL (1..255 printable ASCII characters, no space) and return only
** once the channel has taken it.  Returns 0, or -1 with a message in ERR.
*/
int marks_emit(marks *m, const char *label, char *err, size_t errlen);

/* The channel's name for reports: "file", "dm" or "none". */
const char *marks_channel(const marks *m);

/* Close the channel and free M (NULL is fine). */
void marks_close(marks *m);

#endif
