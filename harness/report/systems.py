"""The seed papers' systems and the crashlab SUT that implements each one:
the one table ``crashlab paper`` measures (harness/paper/).

A system whose SUT is not registered in this build, or that nothing here
implements, still gets its row: :func:`resolve` computes why it is not
measured (never typed per run), so a SUT registered later fills its row in
with no change here.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import CrashlabError

DHL = "DHL thesis"
WALDIO = "WALDIO (ATC'15)"
MAW = "MAW"
SELECTIVE = "selective journaling thesis"
XLOG = "xLog"

# The baseline every throughput is normalised to (DHL thesis Fig. 10).
BASELINE = "WAL"


@dataclass(frozen=True)
class System:
    key: str  # the papers' name (Fig. 7/8/10 legends, Table 1, Table I)
    sut: str | None  # the crashlab SUT; None: not implemented here
    papers: tuple[str, ...]
    what: str
    not_built: str = ""  # why nothing implements it (sut None)


SYSTEMS: tuple[System, ...] = (
    System(
        "WAL",
        "sqlite-wal-full",
        (DHL, WALDIO, MAW),
        "SQLite write-ahead log, synchronous=FULL, checkpoint every 1000 pages",
    ),
    System(
        "DELETE", "sqlite-delete-full", (WALDIO, MAW), "SQLite rollback journal deleted at commit"
    ),
    System(
        "TRUNCATE",
        "sqlite-truncate-full",
        (WALDIO, MAW),
        "SQLite rollback journal truncated at commit",
    ),
    System(
        "PERSIST",
        "sqlite-persist-full",
        (WALDIO, MAW),
        "SQLite rollback journal header zeroed at commit",
    ),
    System("OFF", "sqlite-off", (DHL, WALDIO), "SQLite without a journal"),
    System(
        "WAL_OPT",
        "sqlite:journal=wal,sync=full,walopt=100",
        (DHL,),
        "WAL pre-allocated to 100 frames, checkpoint every 100 pages",
    ),
    System("OFF_OPT", "off-opt", (DHL,), "journal OFF with metadata embedding"),
    System("DHL_TC", "dhl-tc", (DHL,), "DHL, traditional commit"),
    System("DHL_CC", "dhl-cc", (DHL,), "DHL, counting commit"),
    System("DHL_TC_OPT", "dhl-tc-opt", (DHL,), "DHL, traditional commit, metadata embedding"),
    System("DHL_CC_OPT", "dhl-cc-opt", (DHL,), "DHL, counting commit, metadata embedding"),
    System("DHL_NOLOG", "dhl-nolog", (DHL,), "DHL pages in place, no log (unsafe lower bound)"),
    System("WALDIO", "waldio", (WALDIO,), "WAL written with direct I/O into a pre-allocated log"),
    System("DASH", "dash", (DHL,), "two database files swapped per transaction"),
    System("SELECTIVE", "selective", (SELECTIVE,), "selective journaling"),
    System(
        "XLOG",
        "xlog",
        (XLOG,),
        "xLog: the slides' design; record format, write-back and replay are crashlab's own",
    ),
    System("MAW", "maw", (MAW,), "multi-block atomic write, SQLite on F2FS"),
    System(
        "MVBT",
        None,
        (DHL,),
        "multi-version B-tree",
        not_built="not built: MVBT replaces SQLite's B-tree (about 8,000 lines in the "
        "thesis), with its own page format, version-based recovery and "
        "garbage collection; crashlab would also need a checker for that format",
    ),
)

BY_KEY = {s.key: s for s in SYSTEMS}


@dataclass(frozen=True)
class Resolved:
    """A system as this build can measure it: ``sut_name`` (canonical) and
    ``fs`` (the file system it is recorded on) when measurable, else
    ``why`` (one sentence)."""

    system: System
    sut_name: str | None
    fs: str
    guest_only: bool  # its file system runs only in a qemu guest here
    why: str = ""

    @property
    def measured(self) -> bool:
        return self.sut_name is not None


def resolve(system: System) -> Resolved:
    """Look the system's SUT up in this build's registry
    (``workloads.suts.get_sut``).  An unknown SUT gives a row that says so;
    a SUT that needs a guest-only file system (``Sut.needs_fs``, absent on
    builds before that field) is recorded through the qemu backend."""
    from harness.fs import get_fs
    from workloads.suts import get_sut

    if system.sut is None:
        return Resolved(system, None, "", False, system.not_built)
    try:
        sut = get_sut(system.sut)
    except CrashlabError as e:
        return Resolved(
            system,
            None,
            "",
            False,
            f"SUT {system.sut!r} not registered in this build ({_first(str(e))})",
        )
    needs = getattr(sut, "needs_fs", "") or "ext4"
    try:
        fs = get_fs(needs)
    except CrashlabError as e:
        return Resolved(system, None, needs, False, f"file system {needs!r}: {e}")
    return Resolved(system, sut.name, needs, bool(getattr(fs, "guest_only", False)))


def _first(message: str) -> str:
    """The head of a registry error, without the list of every name."""
    return message.split(" (choose from", 1)[0]


def select(names: str | None) -> list[System]:
    """The systems named in ``names`` ("A,B", case-insensitive), in table
    order; every system when None.  An unknown name: CrashlabError."""
    if names is None:
        return list(SYSTEMS)
    wanted = [n.strip().upper() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_KEY]
    if unknown or not wanted:
        raise CrashlabError(
            f"unknown system {unknown[0] if unknown else names!r} (choose from {', '.join(BY_KEY)})"
        )
    return [s for s in SYSTEMS if s.key in wanted]
