/*
** errorf(): the runner's one way to set an error message.  Every module
** keeps its last error in a fixed char buffer and returns -1 on failure;
** each defines `fail(x, ...)` as errorf((x)->err, sizeof (x)->err, ...).
*/
#ifndef CRASHLAB_ERRORF_H
#define CRASHLAB_ERRORF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format FMT into BUF (N bytes, truncated if longer); returns -1 for the
** caller to pass on. */
__attribute__((format(printf, 3, 4))) static inline int errorf(char *buf, size_t n, const char *fmt,
                                                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return -1;
}

#endif
