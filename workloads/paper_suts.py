"""The SUTs that reproduce a paper's commit design on SQLite, each with its
guarantees quoted from the paper: MAW (batch atomic write on F2FS), xLog
(transactions logged to emulated NVRAM, written back to SQLite), selective
journaling (SQLite's journal or ext4's data journal per transaction) and
DASH (two database files, the shadow exchanged per transaction), with their
broken variants.  DHL's are workloads/dhl_suts.py's; the registry is
workloads/suts.py."""

from __future__ import annotations

from workloads.guarantee import DOC_CRASHLAB, PREFIX_RULE, Guarantee, safe, unsafe
from workloads.sqlite_grammar import parse_sqlite_name
from workloads.sqlite_rules import derive, derive_errors
from workloads.sut import PAGE_SIZE, Sut
from workloads.vfs import SELECTIVE_VFS

# --- MAW: SQLite's batch atomic write on F2FS (Cheon and Won, "Exploiting
# Multi-Block Atomic Write in SQLite Transaction"), SQLite's own code path:
# crashlab-runner-maw is the runner built against SQLite's amalgamation
# with SQLITE_ENABLE_BATCH_ATOMIC_WRITE (workloads/build.mk), and
# --batch-atomic makes every commit prove that it went through an atomic
# batch (workloads/runner/batchvfs.h) -------------------------------------

MAW_RUNNER = "crashlab-runner-maw"
DOC_MAW = (
    "Cheon and Won, Exploiting Multi-Block Atomic Write in SQLite Transaction, §IV; "
    "sqlite3.h (SQLITE_IOCAP_BATCH_ATOMIC, SQLITE_FCNTL_COMMIT_ATOMIC_WRITE); pager.c "
    "(sqlite3PagerCommitPhaseOne)"
)
_MAW_ATOMIC = (
    "MAW paper §IV.A: 'The atomic pages written in an atomic region will be shown in "
    "all or nothing by F2FS recovery procedure'; sqlite3.h: "
    "SQLITE_FCNTL_COMMIT_ATOMIC_WRITE 'causes all write operations since the previous "
    "successful call to SQLITE_FCNTL_BEGIN_ATOMIC_WRITE to be performed atomically'; "
    "pager.c: 'No rollback journal is created if batch-atomic-write is enabled' (the "
    "journal stays in memory, jrnlBufferSize -1, and the database's first "
    "transaction, on an empty file, uses the on-disk journal)"
)
_MAW_DURABLE = (
    "sqlite3.h: SQLITE_FCNTL_COMMIT_ATOMIC_WRITE 'returns SQLITE_OK if and only if "
    "the writes were all performed successfully and have been committed to "
    "persistent storage' (F2FS's commit ioctl syncs the file), and a batched commit "
    "leaves no journal that could roll it back"
)
_MAW_NOIOCTL = (
    "maw with the batch file controls answered SQLITE_OK without reaching F2FS (a "
    "bug on purpose, batchvfs.h): SQLite keeps its journal in memory and writes the "
    "pages in place believing them atomic, as journal OFF does; F2FS rewrites a "
    "file's pages in place on fdatasync (ipu_policy F2FS_IPU_FSYNC), so a power loss "
    "can keep part of a transaction"
)
_MAW_FULL = (
    "https://www.sqlite.org/pragma.html#pragma_synchronous: 'EXTRA synchronous is like "
    "FULL with the addition that the directory containing a rollback journal is synced "
    "after that journal is unlinked to commit a transaction in DELETE mode'; under FULL "
    "the on-disk journal of the database's first transaction (an empty file cannot be "
    "batched: pager.c jrnlBufferSize needs dbSize>0) is unlinked unsynced, and no "
    "batched commit writes the directory again: until F2FS's next checkpoint it can "
    "come back hot and roll the database back to empty"
)


def _maw(
    name: str,
    mode: str,
    sync: str,
    description: str,
    guarantees: list[Guarantee],
    shows: tuple[str, ...] = (),
) -> Sut:
    """A MAW SUT: SQLite DELETE journal (the mode batch atomic write keeps in
    memory), synchronous ``sync``, page size 4096, committed through F2FS's
    atomic write (``mode``: require, or the broken noioctl), F2FS only;
    ``shows``: its weaknesses."""
    guarantees.append(Guarantee("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
    return Sut(
        name=name,
        engine="sqlite",
        description=description,
        runner_options=(
            ("--journal-mode", "DELETE"),
            ("--synchronous", sync),
            ("--page-size", str(PAGE_SIZE)),
            ("--batch-atomic", mode),
        ),
        guarantees=tuple(guarantees),
        mode="delete",
        in_place=mode == "noioctl",
        needs_fs="f2fs",
        runner=MAW_RUNNER,
        weaknesses=shows,
    )


def maw_suts() -> list[Sut]:
    """``maw`` and its broken variants ``maw-noioctl`` (no atomic write at
    all) and ``maw-full`` (SQLite's default synchronous=FULL).  Their
    weaknesses (qemu matrix): with the ioctls faked F2FS rewrites the pages
    in place, one write each (insert:txns=5,ops=3,tables=3,warmup=100:
    DB-ATOMIC 10, DB-OPEN 1 of 43 prefix states); under FULL the first
    transaction's journal comes back and empties the database (warmup=20:
    DB-DURABLE 27 of 41 prefix states)."""
    durable = Guarantee("DB-DURABLE", True, _MAW_DURABLE, DOC_MAW)
    return [
        _maw(
            "maw",
            "require",
            "EXTRA",
            "SQLite batch atomic write on F2FS (MAW): every commit "
            "through F2FS_IOC_START/COMMIT_ATOMIC_WRITE, no journal on disk, synchronous=EXTRA",
            safe(_MAW_ATOMIC, DOC_MAW, durable),
        ),
        _maw(
            "maw-noioctl",
            "noioctl",
            "EXTRA",
            "MAW with the atomic-write ioctls faked: pages "
            "written in place with no journal (UNSAFE, a broken variant)",
            unsafe(_MAW_NOIOCTL, DOC_MAW, durable),
            ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
        ),
        _maw(
            "maw-full",
            "require",
            "FULL",
            "MAW under synchronous=FULL: the first "
            "transaction's journal unlink is not synced (UNSAFE: loses the database)",
            safe(_MAW_ATOMIC, DOC_MAW, Guarantee("DB-DURABLE", False, _MAW_FULL, DOC_MAW)),
            ("DB-DURABLE",),
        ),
    ]


# --- xLog: Luo, Jiang, Yan, Yang, "Fast Transaction Logging for Smartphones"
# (the xLog paper's talk) --------------------------------------------------

DOC_XLOG = (
    "H. Luo, H. Jiang, Z. Yan, Y. Yang, 'Fast Transaction Logging for Smartphones' "
    "(xLog); workloads/runner/xlog.h"
)
XLOG_NVRAM_BYTES = 2048  # xlog.h XLOG_NVRAM_SIZE
_XLOG_NVRAM = (
    "xLog 'uses qNVRAM as a buffer' for transaction logging, and qNVRAM data "
    "'survive almost all the failure conditions: application crash, kernel panic, "
    "hard reset': a transaction is acknowledged once its log record is in the "
    "NVRAM (crashlab: a FUA write, durable at completion)"
)
_XLOG_ATOMIC = (
    "one checksummed log record per transaction (command logging: the "
    "transaction's operations); replay applies only whole records whose checksum "
    "and sequence number hold, and the write-back is one SQLite transaction"
)
_XLOG_DB = (
    "the NVRAM is written back to a SQLite database in WAL mode with synchronous=FULL, "
    "synced before the NVRAM drops the records; opening the database runs SQLite's WAL "
    "recovery, then replays the NVRAM's records the database lacks (its PRAGMA "
    "user_version holds the last one written back, so a replay is idempotent)"
)


def xlog_suts() -> list[Sut]:
    """xLog: transactions logged to emulated NVRAM, written back to SQLite."""
    return [
        Sut(
            name="xlog",
            engine="xlog",
            description=(
                f"xLog: one checksummed record per transaction in {XLOG_NVRAM_BYTES} bytes "
                "of emulated NVRAM (acknowledged there), written back to SQLite (WAL, "
                "FULL) when full, replayed on open (record format, write-back and replay: "
                "crashlab's own design; the source is the talk's slides)"
            ),
            # the engine always runs WAL+FULL: said so that --stats reports it
            runner_options=(
                ("--journal-mode", "WAL"),
                ("--synchronous", "FULL"),
                ("--page-size", str(PAGE_SIZE)),
            ),
            guarantees=(
                Guarantee("DB-OPEN", True, _XLOG_DB, DOC_XLOG),
                Guarantee("DB-INTEGRITY", True, _XLOG_DB, DOC_XLOG),
                Guarantee("DB-ATOMIC", True, _XLOG_ATOMIC, DOC_XLOG),
                Guarantee("DB-DURABLE", True, _XLOG_NVRAM, DOC_XLOG),
                Guarantee("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB),
            ),
            mode="wal",
            nvram=XLOG_NVRAM_BYTES,
        )
    ]


# --- Selective journaling (Park, "Selective Journaling for Resolving
# Journaling of Journal anomaly", master's thesis, UNIST 2016, ch. 4):
# per transaction SQLite's rollback journal or ext4's data journal, by the
# number of pages the transaction changes (workloads/runner/selvfs.h) ---------

DOC_SELECTIVE = (
    "Park, Selective Journaling for Resolving Journaling of Journal anomaly "
    "(UNIST 2016), ch. 4; "
    "https://docs.kernel.org/admin-guide/ext4.html (data=journal)"
)
_SEL_FS = (
    "thesis ch. 4: 'Selective Journaling use file system journal mode and turn off the "
    "SQLite journaling if only one page modified ... partial database update don't need to "
    "be considered because only one page need to be registered'; ext4 data=journal: 'All "
    "data are committed into the journal prior to being written into the main file system', "
    "and fsync commits the running transaction"
)
_SEL_JOURNAL = (
    "; 'If the page changes more than one ... file system data journal is replaced to "
    "SQLite journal': those transactions commit as journal_mode=DELETE, "
    "synchronous=EXTRA does: "
)
_SEL_SPLIT = (
    "thesis ch. 4: 'If the page changes more than one, there is no guarantee that I/O "
    "computing is included in the database transaction. This lead to partial computing "
    "that could be happened while checkpoint is working'; jbd2 closes a transaction at "
    "a quarter of the journal's size, so a larger fsync spans commits"
)
_SEL_NOMOUNT = (
    "thesis ch. 5, the 'No Mount' configuration (ordered mode, no mount option "
    "change): 'No Mount cannot be used as a SQLite because every one page modification "
    "does not save recovery journal; there is no file system journaling and database "
    "journaling'"
)
_SEL_DURABLE = (
    "every transaction returns from COMMIT only after the database file's fsync (and "
    "on the rollback path the journal unlink's directory sync, synchronous=EXTRA)"
)


def _selective(name: str, pages: int, mount_options: str, description: str) -> Sut:
    """A selective-journaling SUT: at most ``pages`` pages besides page 1
    through the file system's journal alone (-1: every transaction), ext4
    mounted with ``mount_options``.  Its guarantees: every DB invariant when
    the thesis's rule holds (one page, data=journal); otherwise the in-place
    path promises only durability and the prefix."""
    rollback = parse_sqlite_name("sqlite:journal=delete,sync=extra")
    sound = pages == 1 and "data=journal" in mount_options
    derived = {g.invariant: g for g in derive(rollback)}
    if sound:
        guarantees = tuple(
            Guarantee(
                g.invariant,
                g.promised,
                (_SEL_FS + _SEL_JOURNAL + g.rule) if g.invariant != "DB-PREFIX" else g.rule,
                f"{DOC_SELECTIVE}; {g.source}",
            )
            for g in derive(rollback)
        )
    else:
        weak = _SEL_SPLIT if pages < 0 else _SEL_NOMOUNT
        guarantees = (
            *unsafe(
                weak, DOC_SELECTIVE, Guarantee("DB-DURABLE", True, _SEL_DURABLE, DOC_SELECTIVE)
            ),
            derived["DB-PREFIX"],
        )
    in_place = parse_sqlite_name("sqlite:journal=off,sync=extra")
    return Sut(
        name=name,
        engine="sqlite",
        description=description,
        runner_options=(
            ("--journal-mode", "DELETE"),
            ("--synchronous", "EXTRA"),
            ("--page-size", str(PAGE_SIZE)),
            ("--selective", str(pages)),
        ),
        guarantees=guarantees,
        error_guarantees=derive_errors(rollback if sound else in_place),
        mode="delete",
        vfs=SELECTIVE_VFS,
        needs_fs="ext4",
        mount_options=mount_options,
    )


def selective_suts() -> list[Sut]:
    """Selective journaling and its two broken variants."""
    return [
        _selective(
            "selective",
            1,
            "data=journal",
            "selective journaling: one page besides the header through ext4's data "
            "journal (SQLite journal off), more through SQLite's rollback journal",
        ),
        _selective(
            "selective-fsonly",
            -1,
            "data=journal",
            "every transaction through ext4's data journal alone (UNSAFE: a transaction "
            "larger than a jbd2 transaction is split)",
        ),
        _selective(
            "selective-ordered",
            1,
            "",
            "selective journaling's choice on ext4 data=ordered: one-page transactions "
            "in place with no journal at all (UNSAFE: the thesis's 'No Mount')",
        ),
    ]


# --- DASH (DHL thesis §IV; workloads/README.md, "OFF_OPT and DASH") ---------

DOC_DASH = (
    "DHL thesis §IV (DASH: Won et al., 'DASH: Database Shadowing for Mobile DBMS', "
    "PVLDB 12(7), 2019); workloads/runner/dashvfs.h; rename(2), fsync(2), ext4(5)"
)
_DASH_RULE = (
    "DASH (thesis §IV: 'DASH maintains two database files, one of which behaves as a "
    "shadow file ... DASH swaps the names of the two files per transaction'): a "
    "transaction is written to the shadow file only, the shadow is fsynced, then "
    "renameat2(RENAME_EXCHANGE) swaps it with the database name ('Atomically exchange "
    "oldpath and newpath. Both pathnames must exist', rename(2)), and the directory "
    "is fsynced; the file the database name points at is never written, so after a "
    "crash the name points at a whole, synced file, the old or the new one (ext4 "
    "data=ordered journals the rename as one metadata transaction)"
)
_DASH_DURABLE = (
    "the commit returns only after fsync of the directory: 'Calling fsync() does "
    "not necessarily ensure that the entry in the directory containing the file "
    "has also reached disk. For that an explicit fsync() on a file descriptor for "
    "the directory is also needed' (fsync(2)), and the file it names was fsynced "
    "before the exchange"
)
_DASH_RENAME_FIRST = (
    "DASH with the exchange (and the directory fsync) before the shadow's "
    "fsync, broken on purpose: a crash between them leaves the database name "
    "on a file whose pages are still in the page cache (on disk: the state of "
    "two transactions ago, partly overwritten)"
)
_DASH_ERR_DURABLE = (
    "not promised: a failed directory fsync after the exchange leaves it "
    "unknown whether the new name is durable, and the VFS does not redo it"
)


def _dash(
    name: str,
    order: str,
    description: str,
    guarantees: list[Guarantee],
    shows: tuple[str, ...] = (),
) -> Sut:
    """A DASH SUT: SQLite through the DASH VFS (workloads/runner/dashvfs.c),
    journal OFF (the shadow is the undo), one exclusive connection;
    ``shows``: its weaknesses."""
    guarantees.append(Guarantee("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
    atomic = guarantees[2]
    return Sut(
        name=name,
        engine="sqlite",
        description=description,
        runner_options=(
            ("--journal-mode", "OFF"),
            ("--synchronous", "FULL"),
            ("--locking-mode", "EXCLUSIVE"),
            ("--page-size", str(PAGE_SIZE)),
            ("--dash", order),
        ),
        guarantees=tuple(guarantees),
        error_guarantees=(
            Guarantee(
                "ERR-NOACK",
                True,
                "a failed shadow write, fsync or exchange fails xSync, and SQLite fails the COMMIT",
                DOC_DASH,
            ),
            Guarantee(
                "ERR-ATOMIC",
                atomic.promised,
                "before the exchange a failure discards the "
                "shadow's units of the transaction; the committed file was never written"
                if atomic.promised
                else atomic.rule,
                DOC_DASH,
            ),
            Guarantee("ERR-DURABLE", False, _DASH_ERR_DURABLE, DOC_DASH),
        ),
        mode="dash",
        weaknesses=shows,
    )


def dash_suts() -> list[Sut]:
    """DASH and its broken order."""
    return [
        _dash(
            "dash",
            "shadow",
            "DASH: two database files take turns, the shadow fsynced and "
            "exchanged with the database name per transaction",
            safe(_DASH_RULE, DOC_DASH, Guarantee("DB-DURABLE", True, _DASH_DURABLE, DOC_DASH)),
        ),
        # the exchange before the shadow's fsync names a file whose pages
        # are not on disk: acknowledged transactions lost, or a mix of them
        _dash(
            "dash-rename-first",
            "rename-first",
            "DASH with the exchange before the shadow's fsync (UNSAFE, broken on purpose)",
            unsafe(
                _DASH_RENAME_FIRST,
                DOC_DASH,
                Guarantee("DB-DURABLE", False, _DASH_RENAME_FIRST, DOC_DASH),
            ),
            ("DB-DURABLE", "DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
        ),
    ]
