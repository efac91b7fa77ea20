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
e.g. ``sqlite-delete-full``), ``waldio`` and ``off-opt`` are aliases with the
same options and guarantees.

The other SUTs are defined beside their sources: DHL's in
workloads/dhl_suts.py, those of the papers crashlab reproduces (MAW, xLog,
selective journaling, DASH) in workloads/paper_suts.py.
"""

from __future__ import annotations

import dataclasses
from functools import cache

from harness.errors import CrashlabError
from workloads.dhl_suts import dhl_suts
from workloads.guarantee import DB_INVARIANTS, Guarantee
from workloads.jlang.suts import fs_suts
from workloads.paper_suts import (
    MAW_RUNNER,
    XLOG_NVRAM_BYTES,
    dash_suts,
    maw_suts,
    selective_suts,
    xlog_suts,
)
from workloads.sqlite_grammar import GRAMMAR, PREFIX, SqliteConfig, grid, parse_sqlite_name
from workloads.sqlite_rules import (
    derive,
    derive_error_weaknesses,
    derive_errors,
    derive_weaknesses,
)
from workloads.sut import PAGE_SIZE, TORN_WAIVED, Sut
from workloads.vfs import CKSUM_VFS, WALDIO_VFS

__all__ = [
    "DB_INVARIANTS",
    "MAW_RUNNER",
    "PAGE_SIZE",
    "SUTS",
    "SQLITE_ALIASES",
    "TORN_WAIVED",
    "XLOG_NVRAM_BYTES",
    "Guarantee",
    "Sut",
    "get_sut",
    "sqlite_grid",
]


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
# like any grammar name's (sqlite_rules.WALDIO_RULES).
WALDIO = "sqlite:journal=wal,sync=full,waldio=100"
WALDIO_ALIASES: dict[str, tuple[str, str]] = {
    "waldio": (
        WALDIO,
        "WALDIO: the WAL in 4 KiB direct-I/O blocks with embedded frame headers, "
        "pre-allocated, one aligned write and one fdatasync per transaction",
    ),
}

# WALDIO §5.1's hazard: the pre-allocated blocks left as fallocate() returns
# them (unwritten extents), not zero-filled; the frames' direct writes then
# convert the extents, metadata the paper says a crash can lose.  Promised
# what WALDIO promises: whether this kernel keeps it is what its cells show
# (docs/papers.md, "WALDIO §5.1").
WALDIO_NOFILL = (
    "waldio-nofill",
    "WALDIO without the zero-fill of §5.1: the WAL's pre-allocated blocks left "
    "unwritten (fallocate only), converted by the frames' direct writes",
)


def _waldio_nofill() -> Sut:
    base = _alias(WALDIO_NOFILL[0], WALDIO, WALDIO_NOFILL[1])
    return dataclasses.replace(base, runner_options=(*base.runner_options, ("--waldio-fill", "0")))


# --- OFF_OPT (DHL thesis §IV; workloads/README.md, "OFF_OPT and DASH") ---------
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


def _alias(name: str, canonical: str, description: str) -> Sut:
    """The SUT ``name``: the grammar name ``canonical`` under another name."""
    return _sqlite(parse_sqlite_name(canonical), name, description)


_ALL: tuple[Sut, ...] = (
    *(_alias(name, *alias) for name, alias in SQLITE_ALIASES.items()),
    *dhl_suts(),
    *(_alias(name, *alias) for name, alias in WALDIO_ALIASES.items()),
    _waldio_nofill(),
    *maw_suts(),
    _alias(*OFF_OPT),
    *dash_suts(),
    *xlog_suts(),
    *selective_suts(),
    *fs_suts(),
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
