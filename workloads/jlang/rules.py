"""What each file system promises after a crash about what a persistence op
made durable: the one table (:data:`RULES`) the FS-* oracle
(checkers/fssemantics.py) applies and the file-system SUTs
(workloads/jlang/suts.py) cite.

A rule says: facts of this invariant, made by these ops
(workloads/jlang/model.py, ``Fact.op``), hold on these file systems, because
of this documented guarantee.  A fact no rule covers on a file system is
not judged there: the oracle holds a file system only to what a rule
promises for it.  Where POSIX is silent and a file system promises more
(ext4's auto_da_alloc, a new file's name kept by a file fsync), the rule
names that file system and its source.
"""

from __future__ import annotations

from dataclasses import dataclass

ANY = ("ext4", "xfs", "btrfs", "f2fs")

FSYNC_2 = "fsync(2), Linux man-pages 6.x"
POSIX_FSYNC = "POSIX.1-2017, fsync(); fdatasync(); open() O_SYNC; msync() MS_SYNC"


@dataclass(frozen=True)
class Rule:
    invariant: str
    ops: tuple[str, ...]  # the ops whose facts it covers (Fact.op)
    fss: tuple[str, ...]
    text: str  # the guarantee, quoted or paraphrased from the source
    source: str


RULES: tuple[Rule, ...] = (
    Rule(
        "FS-FSYNC-DATA",
        ("fsync", "fdatasync", "dwrite", "msync"),
        ANY,
        "fsync() transfers all modified data of the file to the storage device and "
        "returns after it is done; fdatasync() the data and the metadata needed to read "
        "it back (its size); a write on an O_SYNC descriptor completes as with "
        "fsync's file integrity; msync(MS_SYNC) writes the mapped range and waits",
        POSIX_FSYNC + "; " + FSYNC_2,
    ),
    Rule(
        "FS-DIR-ENTRIES",
        ("fsync",),
        ANY,
        "calling fsync() on a file does not necessarily make its directory entry "
        "durable: an explicit fsync() on a file descriptor for the directory is also "
        "needed; fsync of the directory makes its entries (names created, removed, "
        "renamed in it) durable",
        FSYNC_2,
    ),
    Rule(
        "FS-SYNC",
        ("sync",),
        ANY,
        "sync() causes all pending modifications to file system metadata and cached "
        "file data to be written to the underlying file systems (Linux waits for it)",
        "sync(2), Linux man-pages 6.x",
    ),
    Rule(
        "FS-FSYNC-NAME",
        ("fsync", "fdatasync"),
        ("ext4",),
        "ext4 journals a file's creation, link or rename in a jbd2 transaction, and "
        "fsync/fdatasync of the file waits for the commit of the transaction that "
        "last changed the inode (i_sync_tid / i_datasync_tid), which holds its names",
        "fs/ext4/fsync.c ext4_sync_file (jbd2_complete_transaction); "
        "Documentation/filesystems/ext4 'Journal (jbd2)'",
    ),
    Rule(
        "FS-FSYNC-NAME",
        ("fsync", "fdatasync"),
        ("xfs",),
        "xfs logs a file's creation, link or rename in its metadata log, and "
        "fsync forces the log up to the inode's last change (ili_commit_seq), "
        "with every earlier transaction",
        "fs/xfs/xfs_file.c xfs_file_fsync (xfs_log_force_seq); "
        "Documentation/filesystems/xfs/xfs-delayed-logging-design",
    ),
    Rule(
        "FS-FSYNC-NAME",
        ("fsync", "fdatasync"),
        ("btrfs",),
        "btrfs fsync logs the inode in the log tree with its new names and the "
        "folders created on their way (btrfs_log_inode_parent, log_new_ancestors), "
        "replayed at mount",
        "fs/btrfs/tree-log.c; kernel commit 'btrfs: fix fsync of a file with new "
        "hard links / new parent' series (F. Manana)",
    ),
    Rule(
        "FS-FSYNC-NAME",
        ("fsync",),
        ("f2fs",),
        "f2fs fsync writes a checkpoint when the file's parent entry is not yet "
        "persistent (need_do_checkpoint: CP_NO_PARENT / CP_WRONG_PINO)",
        "fs/f2fs/file.c f2fs_do_sync_file",
    ),
    Rule(
        "FS-LINK",
        ("fsync", "sync"),
        ANY,
        "fsync flushes the file's metadata (inode(7): st_nlink among it); sync "
        "everything: a durable file has its durable link count, and its durable "
        "hard links name one inode",
        FSYNC_2 + "; inode(7)",
    ),
    Rule(
        "FS-XATTR",
        ("fsync", "sync"),
        ("ext4", "btrfs", "xfs"),
        "extended attributes are inode metadata changed in the same journal "
        "transaction as the inode (ext4, xfs) or logged with it "
        "(btrfs_log_all_xattrs), so fsync and sync make them durable",
        "Documentation/filesystems/ext4/attributes.rst; fs/btrfs/tree-log.c; "
        "fs/xfs/libxfs/xfs_attr.c (attr changes are logged transactions)",
    ),
    Rule(
        "FS-REPLACE",
        ("fsync",),
        ("ext4",),
        "auto_da_alloc: 'if auto_da_alloc is enabled, ext4 will detect the "
        "replace-via-rename ... and force that any delayed allocation blocks are "
        "allocated such that at the next journal commit, in the default "
        "data=ordered mode, the data blocks of the new file are forced to disk "
        "before the rename() operation is committed'",
        "Documentation/admin-guide/ext4.rst, mount option auto_da_alloc",
    ),
)

# every FS-* invariant, in report order (checkers/invariants.py's FS_LEVEL;
# each described in its INVARIANTS)
FS_INVARIANTS: tuple[str, ...] = (
    "FS-FSYNC-DATA",
    "FS-FSYNC-NAME",
    "FS-DIR-ENTRIES",
    "FS-SYNC",
    "FS-LINK",
    "FS-XATTR",
    "FS-REPLACE",
)


def covered(fs: str) -> dict[str, frozenset[str]]:
    """Invariant -> the ops whose facts ``fs`` promises."""
    out: dict[str, set[str]] = {}
    for r in RULES:
        if fs in r.fss:
            out.setdefault(r.invariant, set()).update(r.ops)
    return {k: frozenset(v) for k, v in out.items()}


def rules_of(fs: str, invariant: str) -> list[Rule]:
    return [r for r in RULES if r.invariant == invariant and fs in r.fss]
