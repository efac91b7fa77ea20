/*
** Selective journaling (Park, "Selective Journaling for Resolving Journaling
** of Journal anomaly", UNIST 2016, chapter 4): per transaction, either
** SQLite's own rollback journal or the file system's data journal makes the
** transaction atomic, chosen by the number of pages the transaction changes.
**
** The shim sits over the default VFS of the time of registration; SQLite
** runs in journal_mode=DELETE.  From the moment SQLite creates a rollback
** journal (the first page a write transaction changes) until the first sync
** of the database file (the commit's), every operation on the journal and
** on the database is kept in memory, in order, and reads are served from it.
** At that sync the transaction's page set is known:
**   - at most MAX_PAGES pages, page 1 (the header page) not counted when
**     its only change is the header's change counter (bytes 24-27, and
**     92-95, its copy), as in a one-row transaction: the
**     database writes go to the file and the file is synced, and the journal
**     never reaches the disk.  On ext4 mounted data=journal the sync commits
**     the pages in one jbd2 transaction, atomically (the file system's
**     journal makes the transaction atomic: thesis §4, "use file system
**     journal mode and turn off the SQLite journaling if only one page
**     modified");
**   - more: the kept operations are replayed in their original order (the
**     journal is created, written and synced exactly as SQLite asked, then
**     the database pages), so the transaction commits as stock DELETE mode
**     does (the thesis: "file system data journal is replaced to SQLite
**     journal").
** A transaction rolled back before its commit sync leaves nothing: the kept
** operations are dropped when its journal is closed.
**
** Recovery is stock SQLite's.  A journal that exists when SQLite opens it
** (a hot journal left by a crash, found at the first read) is the real file,
** passed through untouched, so the rollback SQLite does through this VFS is
** the one stock SQLite does (the checkers open databases through this same
** code: workloads/vfs.py).
*/
#ifndef CRASHLAB_SELVFS_H
#define CRASHLAB_SELVFS_H

#define SELVFS_NAME "crashlab-selective"

/* Register the shim as the VFS named SELVFS_NAME over the default VFS at
** the time of the call (not as the default).  MAX_PAGES: the most pages
** other than page 1 a transaction may change and still go through the file
** system's journal alone (the thesis: 1; a negative value sends every
** transaction through the file system's journal).  The first call
** registers; a later one only sets MAX_PAGES.  Returns an SQLite result
** code. */
int selvfs_register(int max_pages);

/* The transactions committed so far through the file system's journal
** alone (*FS) and through SQLite's rollback journal (*JOURNAL). */
void selvfs_counts(unsigned long *fs, unsigned long *journal);

#endif
