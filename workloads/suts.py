"""The SUT registry: the one definition of every system under test, the
runner arguments that make it, its expected guarantee and its known
weaknesses (what a sweep must keep finding; ``Sut``, workloads/sut.py).

For each SUT and each database-level invariant of checkers/INVARIANTS.md (DB-OPEN,
DB-INTEGRITY, DB-ATOMIC, DB-DURABLE, DB-PREFIX) the registry says whether the
SUT *promises* it after a power loss or only *may* keep it, and cites the
documented rule the expectation rests on.  The setting assumed is the one
crashlab records: a journaling Linux file system (ext4 data=ordered, xfs,
btrfs) on a disk that honours flushes, power cut at any point of the write log.

SQLite SUTs are names of a grammar, ``sqlite:journal=J,sync=S[,...]``
(workloads/sqlite_grammar.py): any valid name is a SUT (``get_sut``), its
runner options come from the name and its guarantees are derived from one
table of cited rules.  The ten hand-named SQLite SUTs (``SQLITE_ALIASES``,
e.g. ``sqlite-delete-full``) are aliases with the same options and guarantees.

DHL SUTs (engine "dhl", workloads/runner/engine_dhl.c): ``dhl-tc``,
``dhl-cc``, ``dhl-tc-opt``, ``dhl-cc-opt`` and the unsafe ``dhl-nolog``, each
on the database file in the recorded file system, and a ``…-raw`` twin
(``raw=True``) that runs on the recorded block device itself with no file
system (``crashlab record --fs raw``; the fast tier of the sweep).
"""

from __future__ import annotations

from functools import cache

from harness.errors import CrashlabError
from workloads.guarantee import DB_INVARIANTS, Guarantee
from workloads.sqlite_grammar import (
    DOC_CRASHLAB,
    GRAMMAR,
    PREFIX,
    PREFIX_RULE,
    SqliteConfig,
    derive,
    derive_error_weaknesses,
    derive_errors,
    derive_weaknesses,
    grid,
    parse_sqlite_name,
)
from workloads.sut import TORN_WAIVED, Sut
from workloads.vfs import CKSUM_VFS, SELECTIVE_VFS, WALDIO_VFS

__all__ = [
    "DB_INVARIANTS",
    "PAGE_SIZE",
    "SUTS",
    "SQLITE_ALIASES",
    "TORN_WAIVED",
    "Guarantee",
    "Sut",
    "get_sut",
    "sqlite_grid",
]

PAGE_SIZE = 4096


# --- DHL: the thesis (Doubleheader Logging, §III)
# as restated in dhl/DESIGN.md and dhl/FORMAT.md ------------------

DOC_DHL = "DHL thesis §III (Doubleheader Logging); dhl/DESIGN.md"
_DHL_TC = (
    "DHL traditional commit (thesis §3.2-3.3, Fig. 4): dirty pages are written "
    "with the new slot header beside the committed one, fsync, then the header page "
    "with FCC = T, fsync; 'if the system crashes after we flush the dirty page but "
    "before the transaction commits ... a recovery process must ... invalidate the "
    "updated slot-header whose TID is greater than the FCC'"
)
_DHL_CC = (
    "DHL counting commit (thesis §3.4): dirty pages and the commit record (FCC = T "
    "and the transaction size) are written with one fsync and no ordering; recovery "
    "counts the slot headers with TID = FCC and 'will rollback to the previous "
    "consistent state' when the count is short"
)
_DHL_OPT = (
    "; metadata embedding (thesis §IV, after Kim et al.): FCC and the transaction "
    "size live in the most recently updated data page and recovery scans every page "
    "for the largest FCC"
)
_DHL_DURABLE = (
    "dhl_commit returns only after the sync that makes the commit record durable "
    "(the last of TC's two syncs, CC's only one), and recovery never rolls back "
    "a complete commit record (T+1 never overwrites T's slot headers: dhl/DESIGN.md)"
)
_DHL_NOLOG = (
    "DHL NOLOG, the thesis's OFF_OPT lower bound (§IV, Fig. 7-8): pages are "
    "rewritten in place through one slot header, the header page after them, one "
    "fsync, and there is no recovery (dhl/FORMAT.md: 'unsafe by design'); a power "
    "loss mid-transaction can leave some pages of it, a split's parent pointing "
    "past the stored page count, or a torn page"
)
# In place, no recovery: a crash between the page writes of a multi-page
# transaction leaves part of it, or a parent that points past the stored page
# count (then it does not open: on ext4, app:gmail prefix showed only DB-OPEN
# failures, 79 of 104 states).
_DHL_NOLOG_SHOWS = ("DB-ATOMIC", "DB-OPEN", "DB-INTEGRITY")
_DHL_NOLOG_DURABLE = (
    "NOLOG syncs every page of a transaction before dhl_commit returns, "
    "and with no log there is nothing that can undo a durable page"
)


def _g(invariant: str, promised: bool, rule: str, source: str) -> Guarantee:
    return Guarantee(invariant, promised, rule, source)


def _sqlite(config: SqliteConfig, name: str = "", description: str = "") -> Sut:
    """The SUT of ``config``, named ``name`` (default: its canonical name);
    runner options and guarantees come from the configuration alone."""
    return Sut(
        name=name or config.name,
        engine="sqlite",
        description=description or config.describe(),
        runner_options=config.runner_options(),
        guarantees=derive(config),
        error_guarantees=derive_errors(config),
        mode=config.journal,
        in_place=config.journal in ("off", "memory"),
        config=config,
        vfs=CKSUM_VFS if config.cksum else WALDIO_VFS if config.waldio else "",
        weaknesses=derive_weaknesses(config),
        error_weaknesses=derive_error_weaknesses(config),
    )


_DHL_ERR_NOACK = (
    "dhl_commit returns DHL_EIO when a write or sync fails and then poisons the "
    "handle: nothing more is committed through it (dhl/DESIGN.md, 'After an I/O "
    "error'); the runner acknowledges only a commit that returned DHL_OK and stops"
)
_DHL_ERR_ATOMIC = (
    "the failed transaction is left exactly as a power loss at that point would "
    "leave it, and the recovery that makes power loss atomic resolves it"
)
_DHL_ERR_DURABLE = (
    "fail-stop: after an error nothing more is acknowledged, so there is no "
    "later transaction to lose"
)


def _dhl_errors(guarantees: list[Guarantee]) -> tuple[Guarantee, ...]:
    """DHL under device faults: fail-stop, so ERR-NOACK and ERR-DURABLE
    always; ERR-ATOMIC where recovery makes power loss atomic."""
    atomic = next(g for g in guarantees if g.invariant == "DB-ATOMIC")
    return (
        _g("ERR-NOACK", True, _DHL_ERR_NOACK, DOC_DHL),
        _g(
            "ERR-ATOMIC",
            atomic.promised,
            _DHL_ERR_ATOMIC if atomic.promised else atomic.rule,
            DOC_DHL,
        ),
        _g("ERR-DURABLE", True, _DHL_ERR_DURABLE, DOC_DHL),
    )


def _dhl(
    name: str, mode: str, description: str, guarantees: list[Guarantee], *, raw: bool = False
) -> Sut:
    guarantees.append(_g("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
    where = (
        "on the raw recorded block device, no file system"
        if raw
        else "on a file in the recorded file system"
    )
    return Sut(
        name=name + ("-raw" if raw else ""),
        engine="dhl",
        description=f"{description}, {where}",
        runner_options=(("--dhl-mode", mode), ("--sync", "fsync"), ("--page-size", str(PAGE_SIZE))),
        guarantees=tuple(guarantees),
        error_guarantees=_dhl_errors(guarantees),
        raw=raw,
        commit_after_sync=mode in ("tc", "tc_opt"),
        mode=mode,
        recovery=mode != "nolog",
        torn_safe=mode in ("tc", "nolog"),
        in_place=mode == "nolog",
        weaknesses=_DHL_NOLOG_SHOWS if mode == "nolog" else (),
    )


def _dhl_suts() -> list[Sut]:
    """Every DHL SUT, file and raw."""
    modes = [
        ("dhl-tc", "tc", "DHL, traditional commit (two syncs per transaction)", _DHL_TC),
        ("dhl-cc", "cc", "DHL, counting commit (one sync per transaction)", _DHL_CC),
        (
            "dhl-tc-opt",
            "tc_opt",
            "DHL, traditional commit with metadata embedding",
            _DHL_TC + _DHL_OPT,
        ),
        (
            "dhl-cc-opt",
            "cc_opt",
            "DHL, counting commit with metadata embedding",
            _DHL_CC + _DHL_OPT,
        ),
    ]
    out = []
    for raw in (False, True):
        for name, mode, desc, rule in modes:
            out.append(
                _dhl(
                    name,
                    mode,
                    desc,
                    _safe(rule, DOC_DHL, _g("DB-DURABLE", True, _DHL_DURABLE, DOC_DHL)),
                    raw=raw,
                )
            )
        out.append(
            _dhl(
                "dhl-nolog",
                "nolog",
                "DHL without logging: in place, no recovery (UNSAFE)",
                _unsafe(_DHL_NOLOG, DOC_DHL, _g("DB-DURABLE", True, _DHL_NOLOG_DURABLE, DOC_DHL)),
                raw=raw,
            )
        )
    return out


def _safe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    """Open, integrity and atomicity promised by ``rule``; durability as given."""
    return [
        _g("DB-OPEN", True, rule, source),
        _g("DB-INTEGRITY", True, rule, source),
        _g("DB-ATOMIC", True, rule, source),
        durable,
    ]


def _unsafe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    return [
        _g("DB-OPEN", False, rule, source),
        _g("DB-INTEGRITY", False, rule, source),
        _g("DB-ATOMIC", False, rule, source),
        durable,
    ]


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
    guarantees.append(_g("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
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


def _maw_suts() -> list[Sut]:
    """``maw`` and its broken variants ``maw-noioctl`` (no atomic write at
    all) and ``maw-full`` (SQLite's default synchronous=FULL).  Their
    weaknesses (qemu matrix): with the ioctls faked F2FS rewrites the pages
    in place, one write each (insert:txns=5,ops=3,tables=3,warmup=100:
    DB-ATOMIC 10, DB-OPEN 1 of 43 prefix states); under FULL the first
    transaction's journal comes back and empties the database (warmup=20:
    DB-DURABLE 27 of 41 prefix states)."""
    durable = _g("DB-DURABLE", True, _MAW_DURABLE, DOC_MAW)
    return [
        _maw(
            "maw",
            "require",
            "EXTRA",
            "SQLite batch atomic write on F2FS (MAW): every commit "
            "through F2FS_IOC_START/COMMIT_ATOMIC_WRITE, no journal on disk, synchronous=EXTRA",
            _safe(_MAW_ATOMIC, DOC_MAW, durable),
        ),
        _maw(
            "maw-noioctl",
            "noioctl",
            "EXTRA",
            "MAW with the atomic-write ioctls faked: pages "
            "written in place with no journal (UNSAFE, a broken variant)",
            _unsafe(_MAW_NOIOCTL, DOC_MAW, durable),
            ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
        ),
        _maw(
            "maw-full",
            "require",
            "FULL",
            "MAW under synchronous=FULL: the first "
            "transaction's journal unlink is not synced (UNSAFE: loses the database)",
            _safe(_MAW_ATOMIC, DOC_MAW, _g("DB-DURABLE", False, _MAW_FULL, DOC_MAW)),
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


def _xlog_suts() -> list[Sut]:
    """xLog: transactions logged to emulated NVRAM, written back to SQLite."""
    return [
        Sut(
            name="xlog",
            engine="xlog",
            description=(
                f"xLog: one checksummed record per transaction in {XLOG_NVRAM_BYTES} bytes "
                "of emulated NVRAM (acknowledged there), written back to SQLite (WAL, "
                "FULL) when full, replayed on open"
            ),
            # the engine always runs WAL+FULL: said so that --stats reports it
            runner_options=(
                ("--journal-mode", "WAL"),
                ("--synchronous", "FULL"),
                ("--page-size", str(PAGE_SIZE)),
            ),
            guarantees=(
                _g("DB-OPEN", True, _XLOG_DB, DOC_XLOG),
                _g("DB-INTEGRITY", True, _XLOG_DB, DOC_XLOG),
                _g("DB-ATOMIC", True, _XLOG_ATOMIC, DOC_XLOG),
                _g("DB-DURABLE", True, _XLOG_NVRAM, DOC_XLOG),
                _g("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB),
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
            _g(
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
            *_unsafe(weak, DOC_SELECTIVE, _g("DB-DURABLE", True, _SEL_DURABLE, DOC_SELECTIVE)),
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


# The hand-named SQLite SUTs: aliases of grammar names (the same runner
# options and guarantees), kept for the matrices, runs and tests that use them.
SQLITE_ALIASES: dict[str, tuple[str, str]] = {
    "sqlite-delete-full": (
        "sqlite:journal=delete,sync=full",
        "rollback journal deleted at commit, synchronous=FULL (SQLite's default)",
    ),
    "sqlite-delete-extra": (
        "sqlite:journal=delete,sync=extra",
        "rollback journal deleted at commit, directory synced after the unlink",
    ),
    "sqlite-delete-normal": (
        "sqlite:journal=delete,sync=normal",
        "rollback journal deleted at commit, synchronous=NORMAL (one journal sync)",
    ),
    "sqlite-delete-off": (
        "sqlite:journal=delete,sync=off",
        "rollback journal deleted at commit, no syncs at all",
    ),
    "sqlite-truncate-full": (
        "sqlite:journal=truncate,sync=full",
        "rollback journal truncated at commit, synchronous=FULL",
    ),
    "sqlite-persist-full": (
        "sqlite:journal=persist,sync=full",
        "rollback journal header zeroed at commit, synchronous=FULL",
    ),
    "sqlite-wal-full": (
        "sqlite:journal=wal,sync=full",
        "write-ahead log, WAL synced at every commit",
    ),
    "sqlite-wal-normal": (
        "sqlite:journal=wal,sync=normal",
        "write-ahead log, synced only at checkpoints",
    ),
    "sqlite-memory": (
        "sqlite:journal=memory,sync=full",
        "rollback journal kept in memory only, synchronous=FULL",
    ),
    "sqlite-off": ("sqlite:journal=off,sync=full", "no rollback journal, synchronous=FULL"),
}

# --- WALDIO (Lee et al., USENIX ATC '15): SQLite's WAL written with direct
# I/O into a pre-allocated file, one 4 KiB block per frame, one aligned write
# and one fdatasync per transaction, through crashlab's WALDIO VFS
# (workloads/runner/waldiovfs.h); pre-allocated to 100 frames and
# checkpointed every 100 pages, as WAL_OPT is.  Its guarantees are derived
# like any grammar name's (sqlite_grammar.WALDIO_RULES).
WALDIO = "sqlite:journal=wal,sync=full,waldio=100"
WALDIO_ALIASES: dict[str, tuple[str, str]] = {
    "waldio": (
        WALDIO,
        "WALDIO: the WAL in 4 KiB direct-I/O blocks with embedded frame headers, "
        "pre-allocated, one aligned write and one fdatasync per transaction",
    ),
}

# --- OFF_OPT and DASH (DHL thesis §IV; workloads/README.md, "OFF_OPT and DASH") ---------

DOC_DASH = (
    "DHL thesis §IV (DASH: Won et al., 'DASH: Database Shadowing for Mobile DBMS', "
    "PVLDB 12(7), 2019); workloads/runner/dashvfs.h; rename(2), fsync(2), ext4(5)"
)
# OFF_OPT: journal OFF whose commit writes only the pages it changed.  Stock
# journal OFF rewrites page 1 only to bump the file change counter, once per
# lock acquisition; locking_mode=EXCLUSIVE never releases the lock, so page 1
# is written only when its content changes (page count, free list, schema):
# the thesis's "FCC in the last modified page" costs exactly that.  Its
# guarantees are journal OFF's, derived from the grammar's rule table.
OFF_OPT = (
    "off-opt",
    "sqlite:journal=off,sync=full,locking=exclusive",
    "OFF_OPT (thesis §IV): journal OFF, only the changed pages written per commit "
    "(locking_mode=EXCLUSIVE: no change-counter write to page 1), UNSAFE",
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
    guarantees.append(_g("DB-PREFIX", True, PREFIX_RULE, DOC_CRASHLAB))
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
            _g(
                "ERR-NOACK",
                True,
                "a failed shadow write, fsync or exchange fails xSync, and SQLite fails the COMMIT",
                DOC_DASH,
            ),
            _g(
                "ERR-ATOMIC",
                atomic.promised,
                "before the exchange a failure discards the "
                "shadow's units of the transaction; the committed file was never written"
                if atomic.promised
                else atomic.rule,
                DOC_DASH,
            ),
            _g("ERR-DURABLE", False, _DASH_ERR_DURABLE, DOC_DASH),
        ),
        mode="dash",
        weaknesses=shows,
    )


def _shadow_suts() -> list[Sut]:
    """OFF_OPT (an alias of a grammar name) and DASH with its broken order."""
    name, canonical, description = OFF_OPT
    return [
        _sqlite(parse_sqlite_name(canonical), name, description),
        _dash(
            "dash",
            "shadow",
            "DASH: two database files take turns, the shadow fsynced and "
            "exchanged with the database name per transaction",
            _safe(_DASH_RULE, DOC_DASH, _g("DB-DURABLE", True, _DASH_DURABLE, DOC_DASH)),
        ),
        # the exchange before the shadow's fsync names a file whose pages
        # are not on disk: acknowledged transactions lost, or a mix of them
        _dash(
            "dash-rename-first",
            "rename-first",
            "DASH with the exchange before the shadow's fsync (UNSAFE, broken on purpose)",
            _unsafe(
                _DASH_RENAME_FIRST, DOC_DASH, _g("DB-DURABLE", False, _DASH_RENAME_FIRST, DOC_DASH)
            ),
            ("DB-DURABLE", "DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
        ),
    ]


_ALL: tuple[Sut, ...] = (
    *(
        _sqlite(parse_sqlite_name(canonical), name, description)
        for name, (canonical, description) in SQLITE_ALIASES.items()
    ),
    *_dhl_suts(),
    *(
        _sqlite(parse_sqlite_name(canonical), name, description)
        for name, (canonical, description) in WALDIO_ALIASES.items()
    ),
    *_maw_suts(),
    *_shadow_suts(),
    *_xlog_suts(),
    *selective_suts(),
)

# The named SUTs (the SQLite aliases and every DHL SUT); any SQLite grammar
# name is a SUT too (get_sut).
SUTS: dict[str, Sut] = {s.name: s for s in _ALL}


def sqlite_grid() -> tuple[str, ...]:
    """The canonical names of every journal x sync combination (24)."""
    return tuple(c.name for c in grid())


@cache
def _grammar_sut(canonical: str) -> Sut:
    return _sqlite(parse_sqlite_name(canonical))


def get_sut(name: str) -> Sut:
    """The SUT called ``name``: a registered name, or any SQLite grammar name
    (named canonically).  CrashlabError lists the valid names."""
    if name in SUTS:
        return SUTS[name]
    if name.startswith(PREFIX):
        return _grammar_sut(parse_sqlite_name(name).name)
    raise CrashlabError(f"unknown SUT {name!r} (choose from {', '.join(SUTS)}, or {GRAMMAR})")
