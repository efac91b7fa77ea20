/*
** crashlab-xlog-recover --db PATH --nvram PATH
**
** Opens the xLog database PATH with the NVRAM content in the file --nvram
** exactly as the xLog engine's open does after a crash (xlog_recover: WAL
** recovery, then the replay of the NVRAM's valid records the database
** lacks, written back and synced), and closes it.  The checkers run it on
** each crash state's recovered files, so they see what the SUT would.
** Exit 0, or 1 with one line "crashlab-xlog-recover: ..." on stderr; 2 for
** bad arguments.
*/
#include <stdio.h>
#include <string.h>

#include "xlog.h"

int main(int argc, char **argv)
{
    const char *db = NULL, *nvram = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--db") == 0)
            db = argv[i + 1];
        else if (strcmp(argv[i], "--nvram") == 0)
            nvram = argv[i + 1];
    }
    if (!db || !nvram || argc != 5) {
        fprintf(stderr, "usage: crashlab-xlog-recover --db PATH --nvram PATH\n");
        return 2;
    }
    char err[600];
    if (xlog_recover(db, nvram, err, sizeof err) != 0) {
        fprintf(stderr, "crashlab-xlog-recover: %s: %s\n", db, err);
        return 1;
    }
    return 0;
}
