/*
** DASH, database file shadowing (DHL thesis §IV, after Won et al., "DASH:
** Database Shadowing for Mobile DBMS", VLDB 2019), as a SQLite VFS over the
** default VFS (the counting VFS in the runner).
**
** A database PATH is two files, PATH and PATH-shadow, that take turns.
** PATH always names the committed database; a transaction's writes go to the
** shadow only.  Commit (SQLite's xSync of the database, journal_mode=OFF,
** synchronous FULL): bring the shadow up to date (copy the pages the previous
** transaction changed and this one did not overwrite), fsync it,
** renameat2(PATH, PATH-shadow, RENAME_EXCHANGE), fsync the directory.  The
** committed file is never written while PATH names it, so a crash leaves PATH
** naming a whole, synced database: the old one or, once the exchange is
** durable, the new one.  Opening after a crash needs no recovery: PATH is
** opened as it is and the shadow is rebuilt from it (every page is marked
** stale in the shadow), so a checker opening PATH with stock SQLite sees
** exactly what this VFS serves.
**
** Contract: one connection in one process (locking_mode=EXCLUSIVE; the locks
** are taken on the file first opened, whatever name it has later),
** journal_mode=OFF (there is no journal: the shadow is the undo), no WAL, no
** memory mapping (the io methods are version 1).
*/
#ifndef CRASHLAB_DASHVFS_H
#define CRASHLAB_DASHVFS_H

#define DASHVFS_NAME   "crashlab-dash"
#define DASHVFS_SUFFIX "-shadow"

/* The commit order. */
enum dash_order {
    DASH_SHADOW = 1,       /* fsync the shadow, exchange, fsync the directory */
    DASH_RENAME_FIRST = 2, /* broken on purpose: exchange and fsync the directory, then
                              fsync the new database (a crash in between names a file
                              whose pages are not on disk) */
};

/* Register the DASH VFS over the current default VFS (not as the default),
** committing in ORDER; idempotent for one order.  Returns an SQLite result code. */
int dashvfs_register(enum dash_order order);

#endif
