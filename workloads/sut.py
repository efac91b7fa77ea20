"""What one system under test is (``Sut``): its engine and runner options,
its promises (one cited guarantee per database invariant, and per error
invariant under device faults) and its known weaknesses, the invariants a
sweep must keep finding violated.  The SUTs themselves are
workloads/suts.py's registry."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import CrashlabError
from workloads.guarantee import DB_INVARIANTS, Guarantee
from workloads.sqlite_grammar import SqliteConfig

# The page size of the SUTs that are not grammar names (a SQLite grammar
# name has its own, ``page=``).
PAGE_SIZE = 4096

# The promises a SUT that is not torn-safe (Sut.torn_safe) does not keep
# under torn writes: its torn states are checked and reported, not held to
# these.
TORN_WAIVED = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DHL-READ")


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
    # Overwrites database pages in place with no log on disk (SQLite journal
    # OFF or MEMORY, DHL NOLOG): a copy-on-write fsync (btrfs) hides its
    # partial transactions at the database level.
    in_place: bool = False
    # A SQLite SUT's configuration (workloads/sqlite_grammar.py): its
    # canonical grammar name, runner options and derived guarantees.
    config: SqliteConfig | None = None
    # One per ERR_INVARIANTS entry: what it promises when the device fails
    # requests (checkers/ioerror.py); judged only on runs with device faults.
    error_guarantees: tuple[Guarantee, ...] = ()
    # The VFS shim its database is opened through, by the SUT and by the
    # checkers ("": none; the checksum, WALDIO or selective-journaling VFS:
    # workloads/vfs.py ``connect`` opens through any of them).
    vfs: str = ""
    # The one file system the SUT can be recorded on ("": any), and extra
    # mount options every recorder applies to it (kept in meta.json).
    needs_fs: str = ""
    mount_options: str = ""
    # The runner build (workloads/build/NAME) that runs it ("": crashlab-runner).
    runner: str = ""
    # Bytes of emulated battery-backed RAM (NVRAM) the SUT logs to, beside
    # its database (0: none): recorded as a region of the same log, FUA
    # writes past the disk's sectors (harness/states/README.md, "NVRAM").
    nvram: int = 0
    # Its known weaknesses: invariants of which a sweep must keep finding
    # one failing (a sweep that stops finding them has lost its power to
    # find bugs), measured on this machine; none of them is promised.  After
    # a power loss, and under device faults (harness/faults.py); what each
    # state fault must show is workloads/fault_guarantees.py's.
    weaknesses: tuple[str, ...] = ()
    error_weaknesses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for shown, promised in (
            (self.weaknesses, self.promises),
            (self.error_weaknesses, self.error_promises),
        ):
            both = set(shown) & set(promised)
            if both:
                raise ValueError(f"SUT {self.name}: {sorted(both)} both promised and a weakness")

    @property
    def canonical(self) -> str:
        """The grammar name of a SQLite SUT (an alias's too); else the name."""
        return self.config.name if self.config else self.name

    def runner_args(self) -> list[str]:
        """The engine arguments of ``crashlab-runner`` (without --ops/--db)."""
        args = ["--engine", self.engine]
        for flag, value in self.runner_options:
            args += [flag, value] if value else [flag]  # "": a flag without a value
        return args

    @property
    def promises(self) -> tuple[str, ...]:
        return tuple(g.invariant for g in self.guarantees if g.promised)

    @property
    def error_promises(self) -> tuple[str, ...]:
        """The ERR invariants promised under device faults."""
        return tuple(g.invariant for g in self.error_guarantees if g.promised)

    @property
    def torn_waived(self) -> tuple[str, ...]:
        """The promises its torn cells are not held to (TORN_WAIVED unless
        it is torn-safe)."""
        return () if self.torn_safe else TORN_WAIVED

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
