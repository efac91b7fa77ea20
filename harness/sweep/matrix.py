"""Sweep matrices: which SUT × workload × fs × strategy cells a sweep runs,
and what each cell expects.

A cell's *guaranteed* invariants come from the SUT registry (the SUT's
documented promises), DHL's own invariants for DHL SUTs with recovery, and
FS-RECOVER on a file system (not under torn writes); a cell may add
``must_violate_any`` for a known-unsafe SUT, so that a sweep that stops
finding the documented weakness fails too.  ``default`` (what `make sweep`
and a nightly CI job run) takes about a minute on a 2-core machine;
``nightly`` is the long one; ``sqlite-grid`` runs every SQLite journal x
sync combination once; ``large`` has the papers' workload sizes (for a
cluster: hours on one machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from checkers.engines import engine_of
from checkers.invariants import RESTART_LEVEL
from checkers.invariants import TRACE_LEVEL as TRACE_IDS
from harness.check.multicrash import COMPOSITE
from harness.check.usercheck import UserChecker
from harness.errors import CrashlabError
from harness.faults import DEVICE, STATE, Fault, by_stage, parse_fault, unique_faults
from harness.fs import DEFAULT_FS, FILESYSTEMS, NO_FS, get_fs
from harness.states.strategies import TEARING
from harness.sweep.expectations import Expectation
from workloads.fault_guarantees import promised_under
from workloads.suts import SUTS, get_sut, sqlite_grid

# Mobibench's shape: one statement on each of 3 tables per transaction, so a
# transaction dirties several pages (what atomicity needs to be tested).  The
# warm-up rows matter: in a tiny database a transaction's dirty pages are
# adjacent, ext4 writes them back as one bio, and one logged write is never
# split by reordering (only by tearing).
MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"
SINGLE = "insert:txns=10,ops=1,tables=1,seed=1"
UPDATE = "update:txns=10,ops=3,tables=3,warmup=60,seed=1"
DELETE = "delete:txns=10,ops=3,tables=3,warmup=60,seed=1"
# DHL: 400-byte values, two per tree per transaction on 3 trees, so every
# transaction rewrites >= 3 leaves (plus the header page unless embedded) and
# the measured transactions split pages: 6 new pages in insert and update
# (dhl-cc, page count after txn 1 vs txn 10); delete frees space, no splits.
DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
DHL_UPDATE = "update:txns=10,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
DHL_DELETE = "delete:txns=10,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
# Enough 2 KB rows to fill the 96 KiB an enospc fault leaves (harness/faults.py):
# SQLite DELETE+EXTRA stops at about transaction 32, WAL earlier.
FILL = "insert:txns=60,size=2000,seed=1"
# the names a matrix file may use for them
BUILTIN_WORKLOADS = {"MULTI": MULTI, "SINGLE": SINGLE, "UPDATE": UPDATE, "DELETE": DELETE,
                     "DHL_INSERT": DHL_INSERT, "DHL_UPDATE": DHL_UPDATE,
                     "DHL_DELETE": DHL_DELETE, "FILL": FILL}

# Faults beyond power loss (harness/faults.py) the nightly matrix injects:
# the device fails the first write or flush once transaction 5 has begun, the
# file system is full, the application dies right after transaction 5 is
# acknowledged.
EIO_WRITE = parse_fault("eio:write,after=txn-begin:5")
EIO_WRITE_2ND = parse_fault("eio:write,after=txn-begin:5,nth=2")
EIO_FLUSH = parse_fault("eio:flush,after=txn-begin:5")
ENOSPC = parse_fault("enospc,left=96K")
PROCESS_CRASH = parse_fault("process-crash,at=txn-ack:5")
# What a SUT that swallows an I/O error (SQLite syncretry=1, the fsyncgate
# bug) must keep showing under a device fault: the refused write is lost —
# a WAL frame (ERR-DURABLE, with every later transaction: WAL recovery stops
# at the first bad frame), or a rollback-journal page (the hot journal then
# rolls back only part of the transaction: DB-ATOMIC)
SWALLOWED = ("ERR-DURABLE", "DB-DURABLE", "DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN")

# Known weaknesses a sweep must keep finding (see workloads/suts.py for the
# documented rules and harness/record/NOTES.md for the DELETE+FULL case).
UNSAFE = {
    "sqlite-delete-full": ("DB-DURABLE",),
    "sqlite-off": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    # journal MEMORY writes what journal OFF writes (its journal never
    # reaches the disk), and NORMAL or EXTRA what FULL writes: the same
    # database syncs, so the same partial transactions (sqlite-grid, MULTI,
    # ext4: DB-ATOMIC in 20 of 65 prefix and 120 of 295 reorder states each)
    "sqlite-memory": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "sqlite:journal=memory,sync=normal": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "sqlite:journal=memory,sync=extra": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "sqlite:journal=off,sync=normal": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "sqlite:journal=off,sync=extra": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    # the truncation that commits is not synced under NORMAL: the journal of
    # the last transaction (or the set-up's) resurrects and rolls it back
    # (sqlite-grid, MULTI, ext4: 78 of 137 prefix, 768 of 948 reorder states)
    "sqlite:journal=truncate,sync=normal": ("DB-DURABLE",),
    # in place, no recovery (workloads/suts.py): a crash between the page
    # writes of a multi-page transaction leaves part of it, or a parent that
    # points past the stored page count (then it does not open: on ext4,
    # app:gmail prefix showed only DB-OPEN failures, 79 of 104 states)
    "dhl-nolog": ("DB-ATOMIC", "DB-OPEN", "DB-INTEGRITY"),
    "dhl-nolog-raw": ("DB-ATOMIC", "DB-OPEN", "DB-INTEGRITY"),
    # MAW on F2FS (workloads/suts.py; qemu matrix): with the atomic-write
    # ioctls faked F2FS rewrites the pages in place, one write each
    # (insert:txns=5,ops=3,tables=3,warmup=100: DB-ATOMIC 10, DB-OPEN 1 of
    # 43 prefix states); under synchronous=FULL the first transaction's
    # journal comes back and empties the database (warmup=20: DB-DURABLE 27
    # of 41 prefix states)
    "maw-noioctl": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "maw-full": ("DB-DURABLE",),
    # OFF_OPT is journal OFF (docs/findings.md, OFF_OPT and DASH); DASH
    # with the exchange before the shadow's fsync names a file whose pages
    # are not on disk: acknowledged transactions lost, or a mix of them
    "off-opt": ("DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
    "dash-rename-first": ("DB-DURABLE", "DB-ATOMIC", "DB-INTEGRITY", "DB-OPEN"),
}
# Not listed: the synchronous=OFF SUTs.  Nothing they write is synced, so a
# short workload reaches the disk only at the final writeback and its states
# before it lose every transaction (sqlite-grid, MULTI, ext4: DB-OPEN, the
# file missing, in 10 of 20 prefix states; WAL: DB-DURABLE, an empty database).
# That rests on no writeback timer (jbd2 commit, dirty expiry) firing during
# the run, not on SQLite's order of writes, so it is reported, not required.

# The SUTs whose promises do not hold under torn writes (Sut.torn_safe,
# workloads/suts.py says why and what was measured) have their torn cells
# checked and reported but not held to these.
TORN_WAIVED = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DHL-READ")
# A copy-on-write fsync (FileSystem.cow_fsync: btrfs) persists a file's new
# extents all or nothing, which hides the partial transactions of in-place
# SUTs (Sut.in_place) at the database level.  Measured on MULTI: dhl-nolog
# prefix states fail only DHL-T1 (87 of 102); sqlite-off shows no violation
# in 119 prefix and 2,724 reorder states.  Such cells are reported, not
# required to violate.


# Engine invariants judged over the write trace only: the log a state fault
# leaves unchanged, so they are still promised in a cell with state faults.
FAULT_KEPT = ("DHL-T2", "CC-NEXT")


@dataclass(frozen=True)
class UserSut:
    """A SUT a project describes itself (a ``[sut.NAME]`` table of a matrix
    file, harness/sweep/matrixfile.py), or the command a run was recorded
    with (``crashlab record -- COMMAND``): what records it and what judges it."""

    name: str
    run: str = ""  # the workload: sh -c, in the mounted file system (or with $CRASHLAB_DEV)
    build: str = ""  # run once before recording, in ``folder``
    folder: str = "."  # where the commands' relative paths start (the file's folder)
    checkers: tuple[UserChecker, ...] = ()
    # None: FS-RECOVER on a file system (not under torn writes) and every
    # checker's invariant
    promises: tuple[str, ...] | None = None
    must_violate_any: tuple[str, ...] = ()  # its cells' default


@dataclass(frozen=True)
class Cell:
    sut: str
    workload: str = ""
    fs: str = "ext4"
    strategies: tuple[str, ...] = ("prefix", "reorder")
    must_violate_any: tuple[str, ...] = field(default=())
    # Promises of the SUT this cell does not hold it to: its fault model goes
    # beyond what the promise assumes (TORN_WAIVED).  Such a cell is named
    # after its strategies too, so it can sit beside the SUT's main cell.
    waived: tuple[str, ...] = field(default=())
    # the user's own checkers, run on every state beside the SUT's checkers
    checkers: tuple[UserChecker, ...] = field(default=())
    user: UserSut | None = None  # a SUT of the user's, not of the registry
    # faults beyond power loss (harness/faults.py, parsed): the device and
    # process ones injected while recording, the state ones when checking
    faults: tuple[Fault, ...] = field(default=())
    # the recording backend of this cell (None: the sweep's --backend);
    # named in the folder name, so one matrix can record a cell both ways
    backend: str | None = None
    blktrace: bool = False  # also trace the device while recording (qemu)
    # enumeration options of this cell's states ((name, value) pairs of
    # harness.states.Options; a matrix file's `states` table), over the sweep's
    states: tuple[tuple[str, object], ...] = field(default=())

    def __post_init__(self) -> None:
        # each fault once: names, meta.json and reports agree
        object.__setattr__(self, "faults", unique_faults(self.faults))

    @property
    def name(self) -> str:
        """A folder name: unique in a matrix, stable across runs."""
        slug = _slug(self.workload)
        name = f"{_slug(self.sut)}--{slug}--{self.fs}" if slug else f"{_slug(self.sut)}--{self.fs}"
        if self.backend is not None:
            name += f"--{self.backend}"
        name = name + "--" + "-".join(self.strategies) if self.waived else name
        return name + "--" + "-".join(_slug(str(f)) for f in self.faults) if self.faults else name

    @property
    def state_faults(self) -> tuple[Fault, ...]:
        """The faults of the cell the crash-state enumeration injects."""
        return by_stage(self.faults, STATE)

    @property
    def all_checkers(self) -> tuple[UserChecker, ...]:
        """Every user checker that runs on this cell's states."""
        return (self.user.checkers if self.user else ()) + self.checkers

    def expectation(self, strategy: str) -> Expectation:
        """What this cell promises under ``strategy``: the SUT's documented
        DB-level promises, DHL's own invariants for a DHL SUT with recovery,
        and FS-RECOVER on a file system — except under torn writes, which
        no file system here promises to survive (ext4 assumes a 4 KiB block
        write does not tear: torn in-place metadata can need fsck)."""
        fs = get_fs(self.fs)
        mine = tuple(c.invariant for c in self.all_checkers)
        if self.user is not None:
            promised = self.user.promises
            if promised is None:
                promised = (("FS-RECOVER",) if fs.has_files and strategy not in TEARING
                            else ()) + mine
            return Expectation(tuple(i for i in promised if i not in self.waived),
                               self.must_violate_any)
        sut = get_sut(self.sut)
        promised = (*sut.promises, *mine)
        if strategy in COMPOSITE:  # the SUT's own restart opens what the checkers judged
            promised = (*promised, *RESTART_LEVEL)
        if by_stage(self.faults, DEVICE):
            # under device faults the SUT is also held to its ERR promises;
            # one that swallows an error (no ERR-DURABLE) keeps only what
            # rests on no write: every other promise assumed that a write it
            # believed durable was (SWALLOWED lists what it loses)
            promised = (*promised, *sut.error_promises)
            if "ERR-DURABLE" not in sut.error_promises:
                promised = tuple(i for i in promised
                                 if i in ("ERR-NOACK", "DB-PREFIX") or i in mine)
        if sut.recovery:
            promised = (*promised, *engine_of(sut).own_invariants)
            if not fs.block_mapped:
                # the trace invariants need the database's pages mapped to
                # device blocks: skipped there, so not promised (it would
                # be "unverified")
                promised = tuple(i for i in promised if i not in TRACE_IDS)
            if sut.commit_after_sync:
                promised = tuple(i for i in promised if i != "CC-ROLLBACK")
            elif fs.cow_fsync:
                # measured (nightly, MULTI, prefix): dhl-cc 111 and dhl-cc-opt
                # 102 states on btrfs, none whose recovery writes anything —
                # a copy-on-write fsync never leaves their transaction partly
                # on disk — so recovery cannot be crashed there
                promised = tuple(i for i in promised if i != "REC-CRASHSAFE")
        if fs.has_files and strategy not in TEARING:
            promised = ("FS-RECOVER", *promised)
        promised = self._under_state_faults(promised)
        return Expectation(tuple(i for i in promised if i not in self.waived),
                           self.must_violate_any)

    def _under_state_faults(self, promised: tuple[str, ...]) -> tuple[str, ...]:
        """``promised`` under the cell's state faults: the SUT's database
        promises as workloads/fault_guarantees.py derives them; the engine's
        own per-state invariants dropped (DHL's theorems assume a device that
        returns what it acknowledged, where it was written), its trace ones
        kept (a state fault does not change the log they judge); FS-RECOVER
        dropped under a lost flush (ext4's journal orders its commits with
        flushes) and kept under misdirect and corrupt only where the run's
        block map aims them at the database file (elsewhere they may hit the
        file system's own blocks)."""
        kinds = tuple(f.kind for f in self.state_faults)
        if not kinds:
            return promised
        waived, added = promised_under(get_sut(self.sut), kinds)
        own = set(engine_of(get_sut(self.sut)).own_invariants) - set(FAULT_KEPT)
        fs_ok = "lost-flush" not in kinds and get_fs(self.fs).block_mapped
        return tuple(i for i in promised if i not in waived and i not in own
                     and (i != "FS-RECOVER" or fs_ok)) + added


def _slug(text: str) -> str:
    """A SUT, workload or fault name as part of a folder name (no ':', ',',
    '=' or '+')."""
    return text.replace(":", "-").replace(",", "-").replace("=", "").replace("+", "-")


def must_violate(sut: str) -> tuple[str, ...]:
    """The weaknesses UNSAFE lists for ``sut`` under any of its names (an
    alias and its grammar name are one SUT)."""
    if sut in UNSAFE:
        return UNSAFE[sut]
    canonical = get_sut(sut).canonical
    return next((weak for name, weak in UNSAFE.items()
                 if get_sut(name).canonical == canonical), ())


def _cell(sut: str, workload: str, strategies: tuple[str, ...] = ("prefix", "reorder"),
          fs: str = "ext4") -> Cell:
    return Cell(sut, workload, fs, strategies, must_violate(sut))


def _default() -> list[Cell]:
    """The default matrix: a matrix file (harness/sweep/matrices/default.toml)."""
    from harness.sweep.matrixfile import MATRICES_DIR, load_matrix

    return load_matrix(MATRICES_DIR / "default.toml")


# The nightly workloads of each engine (DHL's with 400-byte values, so that
# transactions split pages)
NIGHTLY_WORKLOADS = {
    "dhl": (DHL_INSERT, DHL_UPDATE, DHL_DELETE, "app:gmail,txns=10,seed=1"),
    "sqlite": (MULTI, UPDATE, DELETE, "app:gmail,txns=10,seed=1"),
    "xlog": (MULTI, UPDATE, DELETE, "app:gmail,txns=10,seed=1"),
}


def _nightly() -> list[Cell]:
    """Every SUT on every workload of its engine with prefix, reorder and
    torn on its own device kind (raw or ext4), and MULTI with prefix on
    every other file system the host can record (F2FS, guest-only, is in the
    qemu matrix); then every other SQLite journal x sync combination
    (``_grid_cells``) and the SQLite options (``_option_cells``)."""
    cells = []
    every = ("prefix", "reorder", "torn")
    others = [f for f in FILESYSTEMS
              if get_fs(f).has_files and f != DEFAULT_FS and not get_fs(f).guest_only]
    for name, sut in SUTS.items():
        if sut.needs_fs and get_fs(sut.needs_fs).guest_only:
            continue  # recorded only in a guest: its cells are in the qemu matrix
        fs = NO_FS if sut.raw else DEFAULT_FS
        for wl in NIGHTLY_WORKLOADS[sut.engine]:
            if sut.torn_safe:
                cells.append(_cell(name, wl, every, fs))
            else:
                cells.append(_cell(name, wl, ("prefix", "reorder"), fs))
                cells.append(Cell(name, wl, fs, ("torn",), must_violate(name), TORN_WAIVED))
        if sut.raw or sut.needs_fs:  # a SUT bound to one file system: only there
            continue
        for other in others:
            if sut.in_place and get_fs(other).cow_fsync:
                cells.append(Cell(name, MULTI, other, ("prefix",)))  # reported, not required
            else:
                cells.append(_cell(name, MULTI, ("prefix",), other))
    return (cells + _grid_cells() + _option_cells() + _device_fault_cells()
            + _state_fault_cells())


# A SQLite SUT that promises everything, rollback journal and WAL, each plain
# and with the checksum VFS; DHL's two commit protocols on the raw device.
FAULT_SUTS = {
    "sqlite-delete-extra": MULTI, "sqlite:journal=delete,sync=extra,cksum=1": MULTI,
    "sqlite-wal-full": MULTI, "sqlite:journal=wal,sync=full,cksum=1": MULTI,
    "dhl-tc-raw": DHL_INSERT, "dhl-cc-raw": DHL_INSERT,
}
# What each state fault must keep showing, per SUT (measured: MULTI on ext4,
# DHL_INSERT raw, prefix states; the counts are of failing states):
# * lost-flush: an acknowledged transaction lost (DB-DURABLE) on every SUT —
#   sqlite-delete-extra 10/220, sqlite-wal-full 10/97, dhl-tc-raw 10/52,
#   dhl-cc-raw 52/52 (reorder adds DB-ATOMIC, FS-RECOVER and, on DHL,
#   DB-OPEN);
# * misdirect: damage returned as data (CORRUPT-DETECT) with and without
#   the checksum VFS alike — 12/231 on the rollback journal either way; DHL
#   8/63; the WAL SUTs have database writes only at their checkpoints (3-4
#   of 28 states), reported, not required;
# * corrupt: plain SQLite and DHL return flipped bits as data
#   (sqlite-delete-extra 80/231, dhl-cc-raw 19/63, dhl-tc-raw 25/63; plain
#   WAL 2/110, reported), the checksum VFS never does (CORRUPT-DETECT is
#   promised there: fault_guarantees.py).
FAULT_MUST = {
    "lost-flush": {sut: ("DB-DURABLE",) for sut in FAULT_SUTS},
    "misdirect": {"sqlite-delete-extra": ("CORRUPT-DETECT",),
                  "sqlite:journal=delete,sync=extra,cksum=1": ("CORRUPT-DETECT",),
                  "dhl-tc-raw": ("CORRUPT-DETECT",), "dhl-cc-raw": ("CORRUPT-DETECT",)},
    "corrupt": {"sqlite-delete-extra": ("CORRUPT-DETECT",), "dhl-tc-raw": ("CORRUPT-DETECT",),
                "dhl-cc-raw": ("CORRUPT-DETECT",)},
}


def _state_fault_cells() -> list[Cell]:
    """Each state fault on each SUT family of ``FAULT_SUTS``, prefix and
    reorder, with the weakness it must keep showing (``FAULT_MUST``); the
    promises are the SUT's under the fault (Cell.expectation)."""
    cells = []
    for fault, must in FAULT_MUST.items():
        for sut, wl in FAULT_SUTS.items():
            fs = NO_FS if get_sut(sut).raw else DEFAULT_FS
            cells.append(Cell(sut, wl, fs, ("prefix", "reorder"), must.get(sut, ()),
                              faults=(Fault(fault),)))
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
    return [_cell("sqlite:journal=wal,sync=full,walopt=100", MULTI, every),
            _cell("sqlite:journal=wal,sync=full,walopt=8", MULTI, every),
            _cell("sqlite:journal=wal,sync=full,walopt=8", UPDATE, every),
            _cell("sqlite:journal=delete,sync=full,locking=exclusive", MULTI, every)]


def _device_fault_cells() -> list[Cell]:
    """Each device and process fault on each SUT family, prefix and reorder:
    SQLite WAL and rollback journal, DHL on a file and on the raw device;
    the application retrying a failed transaction (onerror=retry); and the
    fsyncgate bug on purpose (syncretry=1), which must keep losing data."""
    safe = ("sqlite-wal-full", "sqlite-delete-extra", "dhl-cc", "dhl-tc")
    cells = [Cell(s, MULTI, faults=(f,)) for f in (EIO_WRITE, EIO_FLUSH) for s in safe]
    cells += [Cell(s, DHL_INSERT, NO_FS, faults=(f,)) for f in (EIO_WRITE, EIO_FLUSH)
              for s in ("dhl-cc-raw", "dhl-tc-raw")]
    for j in ("wal,sync=full", "delete,sync=extra"):
        cells += [Cell(f"sqlite:journal={j},onerror=retry", MULTI, faults=(f,))
                  for f in (EIO_WRITE, EIO_FLUSH)]
        cells.append(Cell(f"sqlite:journal={j},syncretry=1", MULTI, faults=(EIO_WRITE,),
                          must_violate_any=SWALLOWED))
    # no journal: the failed transaction's pages written before the error
    # stay (the second write after txn-begin:5: the first is part of the
    # file's growth)
    cells.append(Cell("sqlite-off", MULTI, faults=(EIO_WRITE_2ND,),
                      must_violate_any=("ERR-ATOMIC",)))
    cells += [Cell(s, FILL, faults=(ENOSPC,)) for s in safe[:3]]
    cells += [Cell(s, MULTI, faults=(PROCESS_CRASH,)) for s in safe[:3]]
    return cells


def _sqlite_grid() -> list[Cell]:
    """Every SQLite journal x sync combination by its grammar name, on MULTI
    on ext4 with prefix and reorder: what docs/findings.md's grid finding ran."""
    return [_cell(name, MULTI) for name in sqlite_grid()]


def _qemu() -> list[Cell]:
    """The qemu matrix: a matrix file (harness/sweep/matrices/qemu.toml)."""
    from harness.sweep.matrixfile import MATRICES_DIR, load_matrix

    return load_matrix(MATRICES_DIR / "qemu.toml")


def _large() -> list[Cell]:
    """The papers' workload sizes on SQLite and DHL, sampled large epochs: a
    matrix file (harness/sweep/matrices/large.toml)."""
    from harness.sweep.matrixfile import MATRICES_DIR, load_matrix

    return load_matrix(MATRICES_DIR / "large.toml")


MATRICES = {"default": _default, "nightly": _nightly, "sqlite-grid": _sqlite_grid,
            "qemu": _qemu, "large": _large}


def matrix(name: str) -> list[Cell]:
    """A built-in matrix by name, or the cells of a matrix file (a path)."""
    if name in MATRICES:
        return MATRICES[name]()
    if name.endswith(".toml") or "/" in name:
        from harness.sweep.matrixfile import load_matrix

        return load_matrix(Path(name))
    raise CrashlabError(f"unknown matrix {name!r} (choose from {', '.join(MATRICES)}, "
                        "or give a matrix file: ./crashlab.toml)")


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
        raise CrashlabError(f"shards of {total} cells in all cannot be 1/{n} .. {n}/{n} "
                            f"of one matrix ({', '.join(str(len(p)) for p in parts)} cells)")
    return [parts[k % n][k // n] for k in range(total)]
