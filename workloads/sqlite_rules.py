"""SQLite's guarantees, derived from one table of documented rules: for a
configuration of the SUT name grammar (workloads/sqlite_grammar.py) what it
promises after a power loss and under device faults, and the weaknesses a
sweep must keep finding.

The guarantees (``derive``): for each DB invariant the first rule of ``RULES``
that decides it and matches the configuration.  Only journal, sync and locking
enter the table.  page, autockpt, jlimit and walopt change how much is written
and when a checkpoint or a journal truncation happens, never which syncs come
before a commit point: a checkpoint syncs the WAL before copying frames unless
synchronous=OFF, and a journal is truncated to its limit only after the commit
point ('There is no need to sync the file following this operation', pager.c).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import CrashlabError
from workloads.guarantee import (
    DB_INVARIANTS,
    DOC_CRASHLAB,
    ERR_INVARIANTS,
    PREFIX_RULE,
    Guarantee,
)
from workloads.sqlite_grammar import JOURNALS, SYNCS, SqliteConfig

DOC_SYNC = "https://www.sqlite.org/pragma.html#pragma_synchronous"
DOC_JOURNAL = "https://www.sqlite.org/pragma.html#pragma_journal_mode"
DOC_JLIMIT = "https://www.sqlite.org/pragma.html#pragma_journal_size_limit"
DOC_ATOMIC = "https://www.sqlite.org/atomiccommit.html"
DOC_WAL = "https://www.sqlite.org/wal.html"
DOC_PAGER = "https://sqlite.org/src/file/src/pager.c"
DOC_RESCODE = "https://www.sqlite.org/rescode.html#ioerr"
DOC_TXN = "https://www.sqlite.org/lang_transaction.html"
DOC_FSYNCGATE = "https://lwn.net/Articles/752063/"


# --- the documented rules, quoted from SQLite's documentation --------------

_FULL = (
    "synchronous=FULL: 'SQLite ... will use the xSync method of the VFS to ensure that "
    "all content is safely written to the disk surface prior to continuing. This ensures "
    "that an operating system crash or power failure will not corrupt the database.'"
)
_ATOMIC = (
    "atomic commit: rollback-journal transactions 'appear to be atomic even if the "
    "transaction is interrupted by an operating system crash or power failure'; a hot "
    "journal left behind is rolled back when the database is next opened"
)
_EXTRA_DIR = (
    "synchronous=EXTRA: 'like FULL with the addition that the directory containing a "
    "rollback journal is synced after that journal is unlinked to commit a transaction "
    "in DELETE mode. EXTRA provides additional durability if the commit is followed "
    "closely by a power loss.' Under FULL the unlink (the commit point) may not be "
    "durable when COMMIT returns: the journal can reappear and roll the acknowledged "
    "transaction back (observed on this machine, harness/record/NOTES.md)"
)
_EXTRA_OK = (
    "synchronous=EXTRA syncs the directory after unlinking the journal, so the "
    "commit point is durable when COMMIT returns"
)
_NORMAL_DELETE = (
    "synchronous=NORMAL: 'There is a very small (though non-zero) chance that a "
    "power failure at just the wrong time could corrupt the database in "
    "journal_mode=DELETE on an older filesystem ... probably DELETE mode is safe "
    "too on modern filesystems.'"
)
_NORMAL_ROLLBACK = (
    "; TRUNCATE and PERSIST write and sync the rollback journal exactly as "
    "DELETE does (under NORMAL one journal sync before the database file is "
    "written, and the database synced before the commit point) and differ only "
    "in how the commit point is made, so the same rule covers them"
)
_TRUNCATE = (
    "journal_mode=TRUNCATE 'commits transactions by truncating the rollback journal to "
    "zero-length instead of deleting it'; with synchronous=FULL the truncation is "
    "synced before COMMIT returns, so no directory sync is needed"
)
_TRUNCATE_EXTRA = (
    "journal_mode=TRUNCATE 'commits transactions by truncating the rollback "
    "journal to zero-length instead of deleting it'; synchronous=EXTRA is 'like "
    "FULL' plus a directory sync after an unlink TRUNCATE never does, so the "
    "truncation is synced before COMMIT returns as under FULL"
)
_TRUNCATE_NORMAL = (
    "journal_mode=TRUNCATE with synchronous=NORMAL: the truncation that commits "
    "is not synced (pager.c syncs it only under FULL or EXTRA, 'Otherwise the "
    "journal might resurrect following a power loss and cause the last "
    "transaction to roll back'), so, as with DELETE under FULL, an acknowledged "
    "transaction can be rolled back"
)
_PERSIST = (
    "journal_mode=PERSIST: 'the header of the journal is overwritten with zeros' to "
    "commit; with synchronous=FULL that header write is synced before COMMIT returns"
)
_PERSIST_SYNCED = (
    "journal_mode=PERSIST: 'the header of the journal is overwritten with zeros' "
    "to commit; that header write is synced whenever synchronous is not OFF "
    "(pager.c zeroJournalHdr), so under NORMAL and EXTRA as under FULL it is "
    "durable when COMMIT returns"
)
_EXCLUSIVE_DELETE = (
    "locking_mode=EXCLUSIVE: 'If a database connection is operating in "
    "exclusive locking mode or in persistent journal mode ... then after "
    "committing a transaction the rollback journal file may remain in the "
    "file-system': in exclusive mode DELETE commits as PERSIST does, by zeroing "
    "the journal header and syncing it unless synchronous=OFF (pager.c "
    "pager_end_transaction, zeroJournalHdr; on this machine the -journal stays "
    "until the connection closes), so the commit point needs no directory sync"
)
_WAL_FULL = (
    "WAL + synchronous=FULL: 'an additional sync operation of the WAL file happens "
    "after each transaction commit'; WAL recovery replays only committed frames "
    "(checksummed commit records)"
)
_WAL_EXTRA = (
    "; synchronous=EXTRA is 'like FULL with the addition that the directory "
    "containing a rollback journal is synced after that journal is unlinked': WAL "
    "has no rollback journal, so EXTRA syncs exactly what FULL does"
)
_WAL_NORMAL_ATOMIC = (
    "synchronous=NORMAL: 'WAL mode is safe from corruption with "
    "synchronous=NORMAL ... WAL mode is always consistent with "
    "synchronous=NORMAL'"
)
_WAL_NORMAL_DURABLE = (
    "synchronous=NORMAL: 'WAL mode does lose durability. A transaction "
    "committed in WAL mode with synchronous=NORMAL might roll back following "
    "a power loss or system crash.'"
)
_SYNC_OFF = (
    "synchronous=OFF: 'SQLite continues without syncing as soon as it has handed data "
    "off to the operating system ... the database might become corrupted if the "
    "operating system crashes or the computer loses power before that data has been "
    "written to the disk surface.'"
)
_WAL_OFF = (
    "; the documentation's 'WAL mode is safe from corruption' is said of NORMAL only: "
    "under OFF a checkpoint (at the latest when the last connection closes) copies "
    "frames into the database file with no sync of the WAL before and none of the "
    "database after, and then deletes the WAL, so a power loss can keep the deletion or "
    "part of the copy without the rest"
)
_MEMORY = (
    "journal_mode=MEMORY 'stores the rollback journal in volatile RAM. This saves disk "
    "I/O but at the expense of database safety and integrity. If the application using "
    "SQLite crashes in the middle of a transaction ... the database file will very likely "
    "go corrupt.' A power loss loses the journal the same way"
)
_OFF = (
    "journal_mode=OFF 'disables the rollback journal completely ... If the application "
    "crashes in the middle of a transaction when the OFF journaling mode is set, then the "
    "database file will very likely go corrupt.'"
)
_SYNCED_COMMIT = (
    "synchronous=FULL syncs the database file before COMMIT returns, and with no "
    "journal there is nothing that can undo it"
)
_SYNCED_COMMIT_NORMAL = (
    "synchronous=NORMAL and EXTRA sync the database file before COMMIT "
    "returns as FULL does: NORMAL leaves out only rollback-journal syncs "
    "(pager.c sqlite3PagerCommitPhaseOne syncs the database unless "
    "synchronous=OFF), and with no journal on disk there is nothing that "
    "can undo the synced pages"
)

SAFETY = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC")
ROLLBACK = ("delete", "truncate", "persist")


@dataclass(frozen=True)
class Rule:
    """For the configurations it matches, whether ``decides`` are promised."""

    decides: tuple[str, ...]
    journals: tuple[str, ...]
    syncs: tuple[str, ...]
    promised: bool
    text: str
    source: str
    locking: str | None = None  # matches only this locking mode (None: any)

    def matches(self, c: SqliteConfig) -> bool:
        return (
            c.journal in self.journals
            and c.sync in self.syncs
            and self.locking in (None, c.locking)
        )


def _r(
    decides: tuple[str, ...],
    journals: tuple[str, ...] | str,
    syncs: tuple[str, ...] | str,
    promised: bool,
    text: str,
    source: str,
    locking: str | None = None,
) -> Rule:
    return Rule(decides, _tuple(journals), _tuple(syncs), promised, text, source, locking)


def _tuple(v: tuple[str, ...] | str) -> tuple[str, ...]:
    return (v,) if isinstance(v, str) else v


# The rule table: for each invariant the first matching rule decides.
RULES: tuple[Rule, ...] = (
    # corruption and atomicity (DB-OPEN, DB-INTEGRITY, DB-ATOMIC)
    _r(SAFETY, "memory", SYNCS, False, _MEMORY, DOC_JOURNAL),
    _r(SAFETY, "off", SYNCS, False, _OFF, DOC_JOURNAL),
    _r(SAFETY, ROLLBACK, "off", False, _SYNC_OFF, DOC_SYNC),
    _r(SAFETY, "wal", "off", False, _SYNC_OFF + _WAL_OFF, DOC_SYNC),
    _r(SAFETY, ROLLBACK, ("full", "extra"), True, _FULL + "; " + _ATOMIC, DOC_ATOMIC),
    _r(SAFETY, "delete", "normal", True, _NORMAL_DELETE, DOC_SYNC),
    _r(
        SAFETY, ("truncate", "persist"), "normal", True, _NORMAL_DELETE + _NORMAL_ROLLBACK, DOC_SYNC
    ),
    _r(SAFETY, "wal", "full", True, _WAL_FULL, DOC_WAL),
    _r(SAFETY, "wal", "extra", True, _WAL_FULL + _WAL_EXTRA, DOC_WAL),
    _r(SAFETY, "wal", "normal", True, _WAL_NORMAL_ATOMIC, DOC_SYNC),
    # durability (DB-DURABLE)
    _r(("DB-DURABLE",), JOURNALS, "off", False, _SYNC_OFF, DOC_SYNC),
    _r(("DB-DURABLE",), ("memory", "off"), "full", True, _SYNCED_COMMIT, DOC_SYNC),
    _r(
        ("DB-DURABLE",),
        ("memory", "off"),
        ("normal", "extra"),
        True,
        _SYNCED_COMMIT_NORMAL,
        f"{DOC_SYNC}; {DOC_PAGER}",
    ),
    _r(("DB-DURABLE",), "delete", "extra", True, _EXTRA_OK, DOC_SYNC),
    _r(
        ("DB-DURABLE",),
        "delete",
        ("normal", "full"),
        True,
        _EXCLUSIVE_DELETE,
        f"{DOC_JLIMIT}; {DOC_PAGER}",
        locking="exclusive",
    ),
    _r(("DB-DURABLE",), "delete", ("normal", "full"), False, _EXTRA_DIR, DOC_SYNC),
    _r(("DB-DURABLE",), "truncate", "full", True, _TRUNCATE, DOC_JOURNAL),
    _r(("DB-DURABLE",), "truncate", "extra", True, _TRUNCATE_EXTRA, DOC_JOURNAL),
    _r(
        ("DB-DURABLE",),
        "truncate",
        "normal",
        False,
        _TRUNCATE_NORMAL,
        f"{DOC_JOURNAL}; {DOC_PAGER}",
    ),
    _r(("DB-DURABLE",), "persist", "full", True, _PERSIST, DOC_JOURNAL),
    _r(
        ("DB-DURABLE",),
        "persist",
        ("normal", "extra"),
        True,
        _PERSIST_SYNCED,
        f"{DOC_JOURNAL}; {DOC_PAGER}",
    ),
    _r(("DB-DURABLE",), "wal", "full", True, _WAL_FULL, DOC_SYNC),
    _r(("DB-DURABLE",), "wal", "extra", True, _WAL_FULL + _WAL_EXTRA, DOC_SYNC),
    _r(("DB-DURABLE",), "wal", "normal", False, _WAL_NORMAL_DURABLE, DOC_SYNC),
    # nothing unissued (DB-PREFIX)
    _r(("DB-PREFIX",), JOURNALS, SYNCS, True, PREFIX_RULE, DOC_CRASHLAB),
)


# --- WALDIO (waldio=N): the WAL through crashlab's WALDIO VFS ---------------

DOC_WALDIO = (
    "Lee et al., WALDIO: Eliminating the Filesystem Journaling in Resolving the "
    "Journaling of Journal Anomaly, USENIX ATC '15, §5; workloads/runner/waldiovfs.h"
)
_WALDIO_SAFE = (
    "WALDIO keeps the WAL's format and its recovery: 'we embed ... the frame header "
    "into ... the WAL frame' (§5.2), so each frame is one 4 KiB block holding its "
    "page and, in the page's 24 reserved bytes, wal.c's frame header with its salts "
    "and checksum, recomputed over the page as SQLite reads it back; SQLite's own WAL "
    "recovery replays frames up to the last valid commit frame, so a torn or missing "
    "block ends the log before the transaction it belongs to. 'Preallocation with "
    "Explicit Journaling' (§5.1): the file is allocated, written with zeros and "
    "synced at open, so a commit needs no file-system metadata to be readable. "
)
_WALDIO_FULL = (
    "WALDIO with Full Sync (§5.4): 'the log commit operation consists of two phases: "
    "(i) writing a log to the storage via DIO write and (ii) flush the writeback "
    "cache of the storage device via calling fdatasync()'. The group is one "
    "transaction: its frames go to disk as one aligned O_DIRECT write when its commit "
    "frame is complete, and WAL+FULL's 'additional sync operation of the WAL file "
    "after each transaction commit' is that fdatasync, so COMMIT returns after both, "
    "as in WAL+FULL (the paper's grouping of several transactions, which 'provides "
    "weaker transactional guarantee', is not emulated)"
)
_WALDIO_NORMAL = (
    "WALDIO with Normal Sync (§5.4): 'the individual DIO based log-commit operations "
    "are relieved from the burden of calling the expensive fdatasync()': the "
    "direct write can still sit in the device's writeback cache at a power loss, "
    "as WAL with synchronous=NORMAL 'might roll back following a power loss'"
)

# Consulted before RULES for a waldio configuration (sync=off falls through
# to RULES: WAL's own rules for OFF).
WALDIO_RULES: tuple[Rule, ...] = (
    _r(SAFETY, "wal", "full", True, _WALDIO_SAFE + _WAL_FULL, f"{DOC_WALDIO}; {DOC_WAL}"),
    _r(
        SAFETY,
        "wal",
        "extra",
        True,
        _WALDIO_SAFE + _WAL_FULL + _WAL_EXTRA,
        f"{DOC_WALDIO}; {DOC_WAL}",
    ),
    _r(
        SAFETY,
        "wal",
        "normal",
        True,
        _WALDIO_SAFE + _WAL_NORMAL_ATOMIC,
        f"{DOC_WALDIO}; {DOC_SYNC}",
    ),
    _r(("DB-DURABLE",), "wal", ("full", "extra"), True, _WALDIO_FULL, f"{DOC_WALDIO}; {DOC_SYNC}"),
    _r(("DB-DURABLE",), "wal", "normal", False, _WALDIO_NORMAL, f"{DOC_WALDIO}; {DOC_SYNC}"),
)


# --- the known weaknesses: what a sweep must keep finding -------------------


@dataclass(frozen=True)
class Weakness:
    """For the configurations it matches, a weakness a crash sweep must keep
    finding: at least one of ``shows`` fails in some state (a sweep that
    stops finding it has lost its power to find bugs).  ``measured`` says
    where it was seen; each invariant of ``shows`` is one RULES does not
    promise for them."""

    shows: tuple[str, ...]
    journals: tuple[str, ...]
    syncs: tuple[str, ...]
    measured: str
    locking: str | None = None  # matches only this locking mode (None: any)

    def matches(self, c: SqliteConfig) -> bool:
        return (
            c.journal in self.journals
            and c.sync in self.syncs
            and self.locking in (None, c.locking)
        )


# The first that matches decides.  Not listed: synchronous=OFF.  Nothing it
# writes is synced, so a short workload reaches the disk only at the final
# writeback and its states before it lose every transaction (sqlite-grid,
# MULTI, ext4: DB-OPEN, the file missing, in 10 of 20 prefix states; WAL:
# DB-DURABLE, an empty database).  That rests on no writeback timer (jbd2
# commit, dirty expiry) firing during the run, not on SQLite's order of
# writes, so it is reported, not required.  Nor the other unpromised
# durability (DELETE and WAL under NORMAL): not seen to fail on this machine.
WEAKNESSES: tuple[Weakness, ...] = (
    Weakness(
        ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
        ("memory", "off"),
        ("normal", "full", "extra"),
        "journal MEMORY writes what journal OFF writes (its journal never reaches the "
        "disk), and NORMAL or EXTRA what FULL writes: the same database syncs, so the same "
        "partial transactions (sqlite-grid, MULTI, ext4: DB-ATOMIC in 20 of 65 prefix and "
        "120 of 295 reorder states each); OFF_OPT (locking=exclusive) likewise "
        "(docs/findings.md, OFF_OPT and DASH). With no journal a crash while the database "
        "is created can also leave it malformed (sqlite-off, MULTI, ext4, prefix: DB-OPEN "
        "in 6 of 19 creation-window states); which of the new file's pages write-back had "
        "sent is timing, so that is reported, not what the sweep relies on",
    ),
    Weakness(
        ("DB-DURABLE",),
        ("delete",),
        ("full",),
        "the journal's unlink is not synced under FULL: it reappears and rolls an "
        "acknowledged transaction back (harness/record/NOTES.md)",
        locking="normal",
    ),
    Weakness(
        ("DB-DURABLE",),
        ("truncate",),
        ("normal",),
        "the truncation that commits is not synced under NORMAL: the journal of the last "
        "transaction (or the set-up's) resurrects and rolls it back (sqlite-grid, MULTI, "
        "ext4: 78 of 137 prefix, 768 of 948 reorder states)",
    ),
)


def derive_weaknesses(c: SqliteConfig) -> tuple[str, ...]:
    """What a sweep of ``c`` under power loss must keep finding (one of
    them failing), from WEAKNESSES: () when none matches."""
    return next((w.shows for w in WEAKNESSES if w.matches(c)), ())


def rule_for(c: SqliteConfig, invariant: str) -> Rule:
    """The rule that decides ``invariant`` for ``c``: the first that matches
    (WALDIO_RULES first for a waldio configuration)."""
    for rule in (WALDIO_RULES if c.waldio else ()) + RULES:
        if invariant in rule.decides and rule.matches(c):
            return rule
    raise CrashlabError(f"no SQLite rule decides {invariant} for {c.name}")


def derive(c: SqliteConfig) -> tuple[Guarantee, ...]:
    """One guarantee per DB invariant (DB_INVARIANTS order), from RULES."""
    out = []
    for inv in DB_INVARIANTS:
        rule = rule_for(c, inv)
        out.append(Guarantee(inv, rule.promised, rule.text, rule.source))
    return tuple(out)


# --- under device faults (checkers/ioerror.py) -------------------------------

ERR_NOACK_RULE = (
    "SQLite returns an error code from COMMIT when a write or a sync fails "
    "('SQLITE_IOERR ... the operating system reported an I/O error'), and the "
    "runner acknowledges only a COMMIT that returned SQLITE_OK "
    "(workloads/runner/main.c)"
)
ERR_ATOMIC_RULE = (
    "after SQLITE_IOERR or SQLITE_FULL 'the transaction may or may not be rolled "
    "back automatically'; either way the runner issues ROLLBACK, and the journal "
    "or WAL that makes a power loss atomic makes the abandoned transaction "
    "wholly absent, or (the commit point already durable) wholly present"
)
ERR_DURABLE_RULE = (
    "a commit is acknowledged only after its syncs returned success, and a "
    "retried transaction (onerror=retry) writes and syncs its pages anew"
)
SYNCRETRY_RULE = (
    "syncretry=1 retries a failed fsync and reports the retry's success: after a "
    "failed writeback Linux marks the pages clean and reports the error once "
    "(the 2018 'fsyncgate' finding), so the retry succeeds and the data is lost"
)


# What a SUT that swallows an I/O error (syncretry=1) must keep showing
# under a device fault: the refused write is lost — a WAL frame
# (ERR-DURABLE, with every later transaction: WAL recovery stops at the
# first bad frame), or a rollback-journal page (the hot journal then rolls
# back only part of the transaction: DB-ATOMIC)
SWALLOWED = ("ERR-DURABLE", "DB-DURABLE", "DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN")


def derive_error_weaknesses(c: SqliteConfig) -> tuple[str, ...]:
    """What a sweep of ``c`` under device faults must keep finding (one of
    them failing): with syncretry=1 the write whose error it swallowed
    (SWALLOWED); with no journal the failed transaction's pages written
    before the error, which nothing rolls back (ERR-ATOMIC)."""
    if c.syncretry:
        return SWALLOWED
    return ("ERR-ATOMIC",) if c.journal == "off" else ()


def derive_errors(c: SqliteConfig) -> tuple[Guarantee, ...]:
    """One guarantee per ERR invariant (ERR_INVARIANTS order): ERR-NOACK
    always; ERR-ATOMIC where a power loss keeps transactions atomic;
    ERR-DURABLE where it keeps them durable, unless syncretry=1."""
    atomic, durable = rule_for(c, "DB-ATOMIC"), rule_for(c, "DB-DURABLE")
    noack = Guarantee("ERR-NOACK", True, ERR_NOACK_RULE, DOC_RESCODE)
    err_atomic = Guarantee(
        "ERR-ATOMIC", atomic.promised, ERR_ATOMIC_RULE if atomic.promised else atomic.text, DOC_TXN
    )
    if c.syncretry:
        # the error never reaches the application: no transaction is ever in
        # doubt (ERR-ATOMIC does not arise), and the swallowed one is lost
        err_atomic = Guarantee("ERR-ATOMIC", False, SYNCRETRY_RULE, DOC_FSYNCGATE)
        err_durable = Guarantee("ERR-DURABLE", False, SYNCRETRY_RULE, DOC_FSYNCGATE)
    else:
        err_durable = Guarantee(
            "ERR-DURABLE",
            durable.promised,
            ERR_DURABLE_RULE if durable.promised else durable.text,
            durable.source,
        )
    out = (noack, err_atomic, err_durable)
    assert tuple(g.invariant for g in out) == ERR_INVARIANTS
    return out
