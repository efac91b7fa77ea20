/*
** err.c — errors: the error-setting helper every layer of the engine
** reports through, and the public functions that read errors back.
*/
#include "internal.h"

#include <stdio.h>

/* dhl__err: set db's error message from fmt and return rc. */
int dhl__err(dhl *db, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
    return rc;
}

const char *dhl_errmsg(const dhl *db) { return db ? db->err : "out of memory"; }

const char *dhl_errstr(int rc)
{
    static const char *const names[] = {
        "DHL_OK",      "DHL_ENOTFOUND", "DHL_EEXISTS", "DHL_EINVAL",   "DHL_EIO",
        "DHL_ENOTDHL", "DHL_EPAGESIZE", "DHL_ETRUNC",  "DHL_ECORRUPT", "DHL_EMISUSE",
        "DHL_ENOMEM",  "DHL_EFULL",     "DHL_EMODE"};
    return rc >= 0 && rc < (int)(sizeof names / sizeof *names) ? names[rc] : "DHL_E?";
}
