"""Sweep matrices: which SUT × workload × fs × strategy cells
(harness/sweep/cell.py) a sweep runs.

Each cell holds its SUT to the SUT's promises and, for a known-unsafe SUT,
to showing its weaknesses (after a power loss, under a device fault, under
a state fault): both are the SUT registry's (workloads/suts.py,
workloads/fault_guarantees.py), so a matrix names SUTs and never says what
they promise or lack.

``default`` (what `make sweep` and a nightly CI job run) takes about a
minute on a 2-core machine; ``nightly`` is the long one; ``sqlite-grid``
runs every SQLite journal x sync combination once; ``large`` has the
papers' workload sizes (for a cluster: hours on one machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from harness.errors import CrashlabError
from harness.faults import KINDS, STATE, Fault, parse_fault
from harness.fs import DEFAULT_FS, FILESYSTEMS, NO_FS, get_fs
from harness.sweep.builtin_workloads import (
    DELETE,
    DHL_DELETE,
    DHL_INSERT,
    DHL_UPDATE,
    FILL,
    MULTI,
    SINGLE,
    UPDATE,
)
from harness.sweep.cell import Cell
from harness.sweep.matrixfile import MATRICES_DIR, load_matrix
from workloads.fault_guarantees import fault_weaknesses
from workloads.suts import SUTS, get_sut, sqlite_grid

# The matrices' API, and (their home: cell.py, builtin_workloads.py) the cell
# and the workloads that callers of a built-in matrix name beside it.
__all__ = [
    "DELETE",
    "DHL_DELETE",
    "DHL_INSERT",
    "DHL_UPDATE",
    "FILL",
    "MATRICES",
    "MULTI",
    "SINGLE",
    "UPDATE",
    "Cell",
    "Shard",
    "matrix",
    "parse_shard",
    "shard",
    "unshard",
]

# Faults beyond power loss (harness/faults.py) the nightly matrix injects:
# the device fails the first write or flush once transaction 5 has begun, the
# file system is full, the application dies right after transaction 5 is
# acknowledged.
EIO_WRITE = parse_fault("eio:write,after=txn-begin:5")
EIO_WRITE_2ND = parse_fault("eio:write,after=txn-begin:5,nth=2")
EIO_FLUSH = parse_fault("eio:flush,after=txn-begin:5")
ENOSPC = parse_fault("enospc,left=96K")
PROCESS_CRASH = parse_fault("process-crash,at=txn-ack:5")


def _cell(
    sut: str, workload: str, strategies: tuple[str, ...] = ("prefix", "reorder"), fs: str = "ext4"
) -> Cell:
    """A cell held to the SUT's promises that must keep showing its
    weaknesses (Sut.weaknesses)."""
    return Cell(sut, workload, fs, strategies, get_sut(sut).weaknesses)


def _default() -> list[Cell]:
    """The default matrix: a matrix file (harness/sweep/matrices/default.toml)."""
    return load_matrix(MATRICES_DIR / "default.toml")


# The nightly workloads of each engine (DHL's with 400-byte values, so that
# transactions split pages)
NIGHTLY_WORKLOADS = {
    "dhl": (DHL_INSERT, DHL_UPDATE, DHL_DELETE, "app:gmail,txns=10,seed=1"),
    "sqlite": (MULTI, UPDATE, DELETE, "app:gmail,txns=10,seed=1"),
    "xlog": (MULTI, UPDATE, DELETE, "app:gmail,txns=10,seed=1"),
}


# A copy-on-write fsync (FileSystem.cow_fsync: btrfs) persists a file's new
# extents all or nothing, which hides the partial transactions of in-place
# SUTs (Sut.in_place) at the database level.  Measured on MULTI: dhl-nolog
# prefix states fail only DHL-T1 (87 of 102); sqlite-off shows no violation
# in 119 prefix and 2,724 reorder states.  Such cells are reported, not
# required to violate.
def _nightly() -> list[Cell]:
    """Every SUT on every workload of its engine with prefix, reorder and
    torn on its own device kind (raw or ext4), and MULTI with prefix on
    every other file system the host can record (F2FS, guest-only, is in the
    qemu matrix); then every other SQLite journal x sync combination
    (``_grid_cells``) and the SQLite options (``_option_cells``)."""
    cells = []
    every = ("prefix", "reorder", "torn")
    others = [
        f
        for f in FILESYSTEMS
        if get_fs(f).has_files and f != DEFAULT_FS and not get_fs(f).guest_only
    ]
    for name, sut in SUTS.items():
        if sut.needs_fs and get_fs(sut.needs_fs).guest_only:
            continue  # recorded only in a guest: its cells are in the qemu matrix
        if sut.engine == "jlang":
            continue  # the file systems under j-lang suites: seq1_cells
        fs = NO_FS if sut.raw else DEFAULT_FS
        for wl in NIGHTLY_WORKLOADS[sut.engine]:
            if sut.torn_safe:
                cells.append(_cell(name, wl, every, fs))
            else:
                cells.append(_cell(name, wl, ("prefix", "reorder"), fs))
                cells.append(Cell(name, wl, fs, ("torn",), sut.weaknesses, sut.torn_waived))
        if sut.raw or sut.needs_fs:  # a SUT bound to one file system: only there
            continue
        for other in others:
            if sut.in_place and get_fs(other).cow_fsync:
                cells.append(Cell(name, MULTI, other, ("prefix",)))  # reported, not required
            else:
                cells.append(_cell(name, MULTI, ("prefix",), other))
    return (
        cells
        + _grid_cells()
        + _option_cells()
        + _device_fault_cells()
        + _state_fault_cells()
        + seq1_cells()
    )


# The file systems CrashMonkey's seq-1 runs on here (F2FS, guest-only, is in
# the qemu matrix: seq1_cells("f2fs")).
SEQ1_FS = ("ext4", "xfs", "btrfs")


def seq1_cells(*fss: str, backend: str | None = None) -> list[Cell]:
    """Every workload of crashlab's seq-1 suite (workloads/jlang/suite.py)
    on each file system's SUT (``fs-FS``), prefix and reorder, held to its
    FS-* rules but for a known deviation of that file system on that
    workload, which it must keep showing (workloads/jlang/suts.py,
    ``deviation``); ``backend``: the cells'."""
    from workloads.jlang.suite import seq1
    from workloads.jlang.suts import deviation

    cells = []
    for fs in fss or SEQ1_FS:
        for i in range(1, len(seq1()) + 1):
            wl = f"jlang:seq1/{i}"
            dev = deviation(fs, wl)
            cells.append(Cell(f"fs-{fs}", wl, fs, ("prefix", "reorder"), dev, dev, backend=backend))
    return cells


# A SQLite SUT that promises everything, rollback journal and WAL, each plain
# and with the checksum VFS; DHL's two commit protocols on the raw device.
FAULT_SUTS = (
    ("sqlite-delete-extra", MULTI),
    ("sqlite:journal=delete,sync=extra,cksum=1", MULTI),
    ("sqlite-wal-full", MULTI),
    ("sqlite:journal=wal,sync=full,cksum=1", MULTI),
    ("dhl-tc-raw", DHL_INSERT),
    ("dhl-cc-raw", DHL_INSERT),
)
STATE_FAULTS = tuple(kind for kind, (where, *_) in KINDS.items() if where == STATE)


# the faults aimed at SQLite's WAL (file=wal), on the WAL SUT: its frames'
# salts and checksums must keep a damaged transaction out whole (the DHL
# thesis, §3.6, doubts it)
WAL_FAULTS = (
    parse_fault("misdirect,file=wal"),
    parse_fault("corrupt,file=wal"),
)
WAL_FAULT_SUT = "sqlite-wal-full"


def _state_fault_cells() -> list[Cell]:
    """Each state fault on each SUT family of ``FAULT_SUTS``, prefix and
    reorder, with the weakness it must keep showing there
    (workloads/fault_guarantees.py, ``fault_weaknesses``); the promises are
    the SUT's under the fault (Cell.expectation).  Then ``WAL_FAULTS``
    aimed at the WAL."""
    cells = []
    for fault in STATE_FAULTS:
        for name, wl in FAULT_SUTS:
            sut = get_sut(name)
            cells.append(
                Cell(
                    name,
                    wl,
                    NO_FS if sut.raw else DEFAULT_FS,
                    ("prefix", "reorder"),
                    fault_weaknesses(sut, fault),
                    faults=(Fault(fault),),
                )
            )
    for aimed in WAL_FAULTS:
        weak = fault_weaknesses(get_sut(WAL_FAULT_SUT), aimed.kind, aimed.aim)
        cells.append(
            Cell(WAL_FAULT_SUT, MULTI, DEFAULT_FS, ("prefix", "reorder"), weak, faults=(aimed,))
        )
    return cells


def _grid_cells() -> list[Cell]:
    """Every SQLite journal x sync combination that has no named alias, on
    MULTI on ext4 with prefix, reorder and torn (the aliased ones are the
    SUT cells above)."""
    named = {s.canonical for s in SUTS.values()}
    every = ("prefix", "reorder", "torn")
    return [_cell(name, MULTI, every) for name in sqlite_grid() if name not in named]


def _option_cells() -> list[Cell]:
    """SQLite options whose code paths the grid does not run: WAL_OPT (a
    pre-allocated WAL; with 8 frames it is checkpointed and overwritten from
    its start during the workload), and exclusive locking, under which
    DELETE keeps and zeroes its journal and so promises durability."""
    every = ("prefix", "reorder", "torn")
    return [
        _cell("sqlite:journal=wal,sync=full,walopt=100", MULTI, every),
        _cell("sqlite:journal=wal,sync=full,walopt=8", MULTI, every),
        _cell("sqlite:journal=wal,sync=full,walopt=8", UPDATE, every),
        _cell("sqlite:journal=delete,sync=full,locking=exclusive", MULTI, every),
    ]


def _device_fault_cells() -> list[Cell]:
    """Each device and process fault on each SUT family, prefix and reorder:
    SQLite WAL and rollback journal, DHL on a file and on the raw device;
    the application retrying a failed transaction (onerror=retry); the
    fsyncgate bug on purpose (syncretry=1), which must keep losing data, and
    no journal, which must keep the failed transaction's first pages (each
    SUT's Sut.error_weaknesses)."""
    safe = ("sqlite-wal-full", "sqlite-delete-extra", "dhl-cc", "dhl-tc")
    cells = [Cell(s, MULTI, faults=(f,)) for f in (EIO_WRITE, EIO_FLUSH) for s in safe]
    cells += [
        Cell(s, DHL_INSERT, NO_FS, faults=(f,))
        for f in (EIO_WRITE, EIO_FLUSH)
        for s in ("dhl-cc-raw", "dhl-tc-raw")
    ]
    for j in ("wal,sync=full", "delete,sync=extra"):
        cells += [
            Cell(f"sqlite:journal={j},onerror=retry", MULTI, faults=(f,))
            for f in (EIO_WRITE, EIO_FLUSH)
        ]
        swallows = f"sqlite:journal={j},syncretry=1"
        cells.append(
            Cell(
                swallows,
                MULTI,
                faults=(EIO_WRITE,),
                must_violate_any=get_sut(swallows).error_weaknesses,
            )
        )
    # the second write after txn-begin:5 fails: the first is part of the
    # file's growth
    cells.append(
        Cell(
            "sqlite-off",
            MULTI,
            faults=(EIO_WRITE_2ND,),
            must_violate_any=get_sut("sqlite-off").error_weaknesses,
        )
    )
    cells += [Cell(s, FILL, faults=(ENOSPC,)) for s in safe[:3]]
    cells += [Cell(s, MULTI, faults=(PROCESS_CRASH,)) for s in safe[:3]]
    return cells


def _sqlite_grid() -> list[Cell]:
    """Every SQLite journal x sync combination by its grammar name, on MULTI
    on ext4 with prefix and reorder: what docs/findings.md's grid finding ran."""
    return [_cell(name, MULTI) for name in sqlite_grid()]


def _qemu() -> list[Cell]:
    """The qemu matrix: a matrix file (harness/sweep/matrices/qemu.toml),
    and the seq-1 suite on F2FS, which only a guest records."""
    return load_matrix(MATRICES_DIR / "qemu.toml") + seq1_cells("f2fs", backend="qemu")


def _large() -> list[Cell]:
    """The papers' workload sizes on SQLite and DHL, sampled large epochs: a
    matrix file (harness/sweep/matrices/large.toml)."""
    return load_matrix(MATRICES_DIR / "large.toml")


MATRICES = {
    "default": _default,
    "nightly": _nightly,
    "sqlite-grid": _sqlite_grid,
    "qemu": _qemu,
    "large": _large,
}


def matrix(name: str) -> list[Cell]:
    """A built-in matrix by name, or the cells of a matrix file (a path)."""
    if name in MATRICES:
        return MATRICES[name]()
    if name.endswith(".toml") or "/" in name:
        return load_matrix(Path(name))
    raise CrashlabError(
        f"unknown matrix {name!r} (choose from {', '.join(MATRICES)}, "
        "or give a matrix file: ./crashlab.toml)"
    )


Shard = tuple[int, int]  # (i, N): the i-th of N shards, 1-based
T = TypeVar("T")


def parse_shard(spec: str) -> Shard:
    """``"i/N"`` as ``(i, N)``; CrashlabError when it is not one."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise CrashlabError(f"--shard {spec!r}: expected i/N, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise CrashlabError(f"--shard {spec!r}: need 1 <= i <= N")
    return i, n


def shard(cells: list[T], which: Shard | None) -> list[T]:
    """The cells of shard ``(i, N)``: every N-th cell from the i-th, so that
    N CI jobs split a matrix deterministically and evenly by cell count."""
    if which is None:
        return cells
    i, n = which
    return cells[i - 1 :: n]


def unshard(parts: list[list[T]]) -> list[T]:
    """The inverse of :func:`shard`: ``parts[i - 1]`` is shard ``(i, N)``'s
    cells (N = ``len(parts)``); returns them in the matrix's order."""
    n = len(parts)
    total = sum(len(p) for p in parts)
    if any(len(p) != len(range(i, total, n)) for i, p in enumerate(parts)):
        raise CrashlabError(
            f"shards of {total} cells in all cannot be 1/{n} .. {n}/{n} "
            f"of one matrix ({', '.join(str(len(p)) for p in parts)} cells)"
        )
    return [parts[k % n][k // n] for k in range(total)]
