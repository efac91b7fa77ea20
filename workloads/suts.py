"""The SUT registry: the one definition of every system under test, the
runner arguments that make it, and its expected guarantee.

For each SUT and each database-level invariant of checkers/INVARIANTS.md (DB-OPEN,
DB-INTEGRITY, DB-ATOMIC, DB-DURABLE, DB-PREFIX) the registry says whether the
SUT *promises* it after a power loss or only *may* keep it, and cites the
documented rule the expectation rests on.  The setting assumed is the one
crashlab records: a journaling Linux file system (ext4 data=ordered, xfs,
btrfs) on a disk that honours flushes, power cut at any point of the write log.

DHL SUTs (engine "dhl", workloads/runner/engine_dhl.c): ``dhl-tc``,
``dhl-cc``, ``dhl-tc-opt``, ``dhl-cc-opt`` and the unsafe ``dhl-nolog``, each
on the database file in the recorded file system, and a ``…-raw`` twin
(``raw=True``) that runs on the recorded block device itself with no file
system (``crashlab record --fs raw``; the fast tier of the sweep).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import CrashlabError

DB_INVARIANTS = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")
PAGE_SIZE = 4096

DOC_SYNC = "https://www.sqlite.org/pragma.html#pragma_synchronous"
DOC_JOURNAL = "https://www.sqlite.org/pragma.html#pragma_journal_mode"
DOC_ATOMIC = "https://www.sqlite.org/atomiccommit.html"
DOC_WAL = "https://www.sqlite.org/wal.html"
DOC_CRASHLAB = "crashlab README, What a sweep does"


@dataclass(frozen=True)
class Guarantee:
    """One invariant of one SUT: promised or not, and the rule that says so."""

    invariant: str
    promised: bool
    rule: str
    source: str


@dataclass(frozen=True)
class Sut:
    name: str
    engine: str
    description: str
    runner_options: tuple[tuple[str, str], ...]  # (--flag, value) for crashlab-runner
    guarantees: tuple[Guarantee, ...]  # one per DB_INVARIANTS entry, in that order
    # True: the database is the raw recorded block device (no file system);
    # such a SUT is recorded only with fs "raw", and every other one never is.
    raw: bool = False
    # The commit record is written only after the transaction's pages are
    # synced (DHL TC, TC_OPT): a short commit record never persists, so the
    # rollback path (CC-ROLLBACK) has nothing to do and is not promised.
    commit_after_sync: bool = False
    # The engine's mode: DHL's commit protocol, SQLite's journal mode.
    mode: str = ""
    # The engine recovers after a crash (DHL NOLOG does not): its own
    # invariants (checkers/engines.py) are promised only then.
    recovery: bool = True
    # Its promises hold under sector-torn page writes (NOLOG promises no
    # atomicity to begin with).  DHL assumes a page write is atomic
    # with respect to its slot-header area (thesis §III; dhl/DESIGN.md
    # "Limits"): whenever the commit record can persist with a torn data
    # page — in the same epoch (CC, CC_OPT) or inside the torn page itself
    # (TC_OPT, CC_OPT: the record is embedded) — a transaction commits with
    # garbage records.  Measured on DHL_INSERT, raw, torn: CC/CC_OPT 107,
    # TC_OPT 100 violations of DB-ATOMIC/INTEGRITY/OPEN; TC (a sync before a
    # header-page-only commit) 0.
    torn_safe: bool = True
    # Overwrites database pages in place with no log (SQLite journal OFF,
    # DHL NOLOG): a copy-on-write fsync (btrfs) hides its partial
    # transactions at the database level.
    in_place: bool = False

    def runner_args(self) -> list[str]:
        """The engine arguments of ``crashlab-runner`` (without --ops/--db)."""
        args = ["--engine", self.engine]
        for flag, value in self.runner_options:
            args += [flag, value]
        return args

    @property
    def promises(self) -> tuple[str, ...]:
        return tuple(g.invariant for g in self.guarantees if g.promised)

    @property
    def may_violate(self) -> tuple[str, ...]:
        return tuple(g.invariant for g in self.guarantees if not g.promised)

    def guarantee(self, invariant: str) -> Guarantee:
        for g in self.guarantees:
            if g.invariant == invariant:
                return g
        raise CrashlabError(
            f"unknown invariant {invariant!r} (choose from {', '.join(DB_INVARIANTS)})"
        )


# --- the documented rules, quoted from SQLite's documentation --------------

_FULL = ("synchronous=FULL: 'SQLite ... will use the xSync method of the VFS to ensure that "
         "all content is safely written to the disk surface prior to continuing. This ensures "
         "that an operating system crash or power failure will not corrupt the database.'")
_ATOMIC = ("atomic commit: rollback-journal transactions 'appear to be atomic even if the "
           "transaction is interrupted by an operating system crash or power failure'; a hot "
           "journal left behind is rolled back when the database is next opened")
_EXTRA_DIR = ("synchronous=EXTRA: 'like FULL with the addition that the directory containing a "
              "rollback journal is synced after that journal is unlinked to commit a transaction "
              "in DELETE mode. EXTRA provides additional durability if the commit is followed "
              "closely by a power loss.' Under FULL the unlink (the commit point) may not be "
              "durable when COMMIT returns: the journal can reappear and roll the acknowledged "
              "transaction back (observed on this machine, harness/record/NOTES.md)")
_EXTRA_OK = ("synchronous=EXTRA syncs the directory after unlinking the journal, so the "
             "commit point is durable when COMMIT returns")
_NORMAL_DELETE = ("synchronous=NORMAL: 'There is a very small (though non-zero) chance that a "
                  "power failure at just the wrong time could corrupt the database in "
                  "journal_mode=DELETE on an older filesystem ... probably DELETE mode is safe "
                  "too on modern filesystems.'")
_TRUNCATE = ("journal_mode=TRUNCATE 'commits transactions by truncating the rollback journal to "
             "zero-length instead of deleting it'; with synchronous=FULL the truncation is "
             "synced before COMMIT returns, so no directory sync is needed")
_PERSIST = ("journal_mode=PERSIST: 'the header of the journal is overwritten with zeros' to "
            "commit; with synchronous=FULL that header write is synced before COMMIT returns")
_WAL_FULL = ("WAL + synchronous=FULL: 'an additional sync operation of the WAL file happens "
             "after each transaction commit'; WAL recovery replays only committed frames "
             "(checksummed commit records)")
_WAL_NORMAL_ATOMIC = ("synchronous=NORMAL: 'WAL mode is safe from corruption with "
                      "synchronous=NORMAL ... WAL mode is always consistent with "
                      "synchronous=NORMAL'")
_WAL_NORMAL_DURABLE = ("synchronous=NORMAL: 'WAL mode does lose durability. A transaction "
                       "committed in WAL mode with synchronous=NORMAL might roll back following "
                       "a power loss or system crash.'")
_SYNC_OFF = ("synchronous=OFF: 'SQLite continues without syncing as soon as it has handed data "
             "off to the operating system ... the database might become corrupted if the "
             "operating system crashes or the computer loses power before that data has been "
             "written to the disk surface.'")
_MEMORY = ("journal_mode=MEMORY 'stores the rollback journal in volatile RAM. This saves disk "
           "I/O but at the expense of database safety and integrity. If the application using "
           "SQLite crashes in the middle of a transaction ... the database file will very likely "
           "go corrupt.' A power loss loses the journal the same way")
_OFF = ("journal_mode=OFF 'disables the rollback journal completely ... If the application "
        "crashes in the middle of a transaction when the OFF journaling mode is set, then the "
        "database file will very likely go corrupt.'")
_SYNCED_COMMIT = ("synchronous=FULL syncs the database file before COMMIT returns, and with no "
                  "journal there is nothing that can undo it")
_PREFIX = ("a crash state holds only writes issued before the cut, and no SUT writes a "
           "transaction's rows before the transaction is issued")

# --- DHL: the thesis (Doubleheader Logging, §III)
# as restated in dhl/DESIGN.md and dhl/FORMAT.md ------------------

DOC_DHL = "DHL thesis §III (Doubleheader Logging); dhl/DESIGN.md"
_DHL_TC = ("DHL traditional commit (thesis §3.2-3.3, Fig. 4): dirty pages are written "
           "with the new slot header beside the committed one, fsync, then the header page "
           "with FCC = T, fsync; 'if the system crashes after we flush the dirty page but "
           "before the transaction commits ... a recovery process must ... invalidate the "
           "updated slot-header whose TID is greater than the FCC'")
_DHL_CC = ("DHL counting commit (thesis §3.4): dirty pages and the commit record (FCC = T "
           "and the transaction size) are written with one fsync and no ordering; recovery "
           "counts the slot headers with TID = FCC and 'will rollback to the previous "
           "consistent state' when the count is short")
_DHL_OPT = ("; metadata embedding (thesis §IV, after Kim et al.): FCC and the transaction "
            "size live in the most recently updated data page and recovery scans every page "
            "for the largest FCC")
_DHL_DURABLE = ("dhl_commit returns only after the sync that makes the commit record durable "
                "(the last of TC's two syncs, CC's only one), and recovery never rolls back "
                "a complete commit record (T+1 never overwrites T's slot headers: dhl/DESIGN.md)")
_DHL_NOLOG = ("DHL NOLOG, the thesis's OFF_OPT lower bound (§IV, Fig. 7-8): pages are "
              "rewritten in place through one slot header, the header page after them, one "
              "fsync, and there is no recovery (dhl/FORMAT.md: 'unsafe by design'); a power "
              "loss mid-transaction can leave some pages of it, a split's parent pointing "
              "past the stored page count, or a torn page")
_DHL_NOLOG_DURABLE = ("NOLOG syncs every page of a transaction before dhl_commit returns, "
                      "and with no log there is nothing that can undo a durable page")


def _g(invariant: str, promised: bool, rule: str, source: str) -> Guarantee:
    return Guarantee(invariant, promised, rule, source)


def _sqlite(name: str, journal: str, sync: str, description: str,
            guarantees: list[Guarantee]) -> Sut:
    guarantees.append(_g("DB-PREFIX", True, _PREFIX, DOC_CRASHLAB))
    return Sut(
        name=name,
        engine="sqlite",
        description=description,
        runner_options=(("--journal-mode", journal), ("--synchronous", sync),
                        ("--page-size", str(PAGE_SIZE))),
        guarantees=tuple(guarantees),
        mode=journal.lower(),
        in_place=journal == "OFF",
    )


def _dhl(name: str, mode: str, description: str, guarantees: list[Guarantee],
         *, raw: bool = False) -> Sut:
    guarantees.append(_g("DB-PREFIX", True, _PREFIX, DOC_CRASHLAB))
    where = "on the raw recorded block device, no file system" if raw else \
        "on a file in the recorded file system"
    return Sut(
        name=name + ("-raw" if raw else ""),
        engine="dhl",
        description=f"{description}, {where}",
        runner_options=(("--dhl-mode", mode), ("--sync", "fsync"),
                        ("--page-size", str(PAGE_SIZE))),
        guarantees=tuple(guarantees),
        raw=raw,
        commit_after_sync=mode in ("tc", "tc_opt"),
        mode=mode,
        recovery=mode != "nolog",
        torn_safe=mode in ("tc", "nolog"),
        in_place=mode == "nolog",
    )


def _dhl_suts() -> list[Sut]:
    """Every DHL SUT, file and raw."""
    modes = [
        ("dhl-tc", "tc", "DHL, traditional commit (two syncs per transaction)", _DHL_TC),
        ("dhl-cc", "cc", "DHL, counting commit (one sync per transaction)", _DHL_CC),
        ("dhl-tc-opt", "tc_opt", "DHL, traditional commit with metadata embedding",
         _DHL_TC + _DHL_OPT),
        ("dhl-cc-opt", "cc_opt", "DHL, counting commit with metadata embedding",
         _DHL_CC + _DHL_OPT),
    ]
    out = []
    for raw in (False, True):
        for name, mode, desc, rule in modes:
            out.append(_dhl(name, mode, desc, _safe(rule, DOC_DHL,
                                                    _g("DB-DURABLE", True, _DHL_DURABLE, DOC_DHL)),
                            raw=raw))
        out.append(_dhl("dhl-nolog", "nolog", "DHL without logging: in place, no recovery (UNSAFE)",
                        _unsafe(_DHL_NOLOG, DOC_DHL,
                                _g("DB-DURABLE", True, _DHL_NOLOG_DURABLE, DOC_DHL)),
                        raw=raw))
    return out


def _safe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    """Open, integrity and atomicity promised by ``rule``; durability as given."""
    return [_g("DB-OPEN", True, rule, source), _g("DB-INTEGRITY", True, rule, source),
            _g("DB-ATOMIC", True, rule, source), durable]


def _unsafe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    return [_g("DB-OPEN", False, rule, source), _g("DB-INTEGRITY", False, rule, source),
            _g("DB-ATOMIC", False, rule, source), durable]


_ALL: tuple[Sut, ...] = (
    _sqlite("sqlite-delete-full", "DELETE", "FULL",
            "rollback journal deleted at commit, synchronous=FULL (SQLite's default)",
            _safe(_FULL + "; " + _ATOMIC, DOC_ATOMIC,
                  _g("DB-DURABLE", False, _EXTRA_DIR, DOC_SYNC))),
    _sqlite("sqlite-delete-extra", "DELETE", "EXTRA",
            "rollback journal deleted at commit, directory synced after the unlink",
            _safe(_FULL + "; " + _ATOMIC, DOC_ATOMIC,
                  _g("DB-DURABLE", True, _EXTRA_OK, DOC_SYNC))),
    _sqlite("sqlite-delete-normal", "DELETE", "NORMAL",
            "rollback journal deleted at commit, synchronous=NORMAL (one journal sync)",
            _safe(_NORMAL_DELETE, DOC_SYNC,
                  _g("DB-DURABLE", False, _EXTRA_DIR, DOC_SYNC))),
    _sqlite("sqlite-delete-off", "DELETE", "OFF",
            "rollback journal deleted at commit, no syncs at all",
            _unsafe(_SYNC_OFF, DOC_SYNC, _g("DB-DURABLE", False, _SYNC_OFF, DOC_SYNC))),
    _sqlite("sqlite-truncate-full", "TRUNCATE", "FULL",
            "rollback journal truncated at commit, synchronous=FULL",
            _safe(_FULL + "; " + _ATOMIC, DOC_ATOMIC,
                  _g("DB-DURABLE", True, _TRUNCATE, DOC_JOURNAL))),
    _sqlite("sqlite-persist-full", "PERSIST", "FULL",
            "rollback journal header zeroed at commit, synchronous=FULL",
            _safe(_FULL + "; " + _ATOMIC, DOC_ATOMIC,
                  _g("DB-DURABLE", True, _PERSIST, DOC_JOURNAL))),
    _sqlite("sqlite-wal-full", "WAL", "FULL",
            "write-ahead log, WAL synced at every commit",
            _safe(_WAL_FULL, DOC_WAL, _g("DB-DURABLE", True, _WAL_FULL, DOC_SYNC))),
    _sqlite("sqlite-wal-normal", "WAL", "NORMAL",
            "write-ahead log, synced only at checkpoints",
            _safe(_WAL_NORMAL_ATOMIC, DOC_SYNC,
                  _g("DB-DURABLE", False, _WAL_NORMAL_DURABLE, DOC_SYNC))),
    _sqlite("sqlite-memory", "MEMORY", "FULL",
            "rollback journal kept in memory only, synchronous=FULL",
            _unsafe(_MEMORY, DOC_JOURNAL, _g("DB-DURABLE", True, _SYNCED_COMMIT, DOC_SYNC))),
    _sqlite("sqlite-off", "OFF", "FULL",
            "no rollback journal, synchronous=FULL",
            _unsafe(_OFF, DOC_JOURNAL, _g("DB-DURABLE", True, _SYNCED_COMMIT, DOC_SYNC))),
    *_dhl_suts(),
)

SUTS: dict[str, Sut] = {s.name: s for s in _ALL}


def get_sut(name: str) -> Sut:
    """The SUT called ``name``; CrashlabError lists the valid names."""
    try:
        return SUTS[name]
    except KeyError:
        raise CrashlabError(f"unknown SUT {name!r} (choose from {', '.join(SUTS)})") from None
