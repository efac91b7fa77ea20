"""One cell of a sweep matrix: a SUT × workload × file system × strategies,
with its faults, its extra checkers and what it expects of each strategy
(``Cell.expectation``); and a SUT a project describes itself (``UserSut``).

A cell's *guaranteed* invariants come from the SUT registry (the SUT's
documented promises, workloads/suts.py), the engine's own invariants for a
SUT with recovery, and FS-RECOVER on a file system (not under torn writes);
``must_violate_any`` holds a known-unsafe SUT's weaknesses (Sut.weaknesses),
so that a sweep that stops finding them fails too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

from checkers.engines import engine_of
from checkers.invariants import RESTART_LEVEL
from checkers.invariants import TRACE_LEVEL as TRACE_IDS
from harness.check.multicrash import COMPOSITE
from harness.check.usercheck import UserChecker
from harness.faults import DEVICE, STATE, Fault, by_stage, unique_faults
from harness.fs import get_fs
from harness.states import Options
from harness.states.inject import StateFaults
from harness.states.strategies import TEARING
from harness.sweep.expectations import Expectation, Floor
from workloads.fault_guarantees import promised_under
from workloads.suts import get_sut

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
    """One cell of a matrix: what to record and check, and what to expect;
    ``name`` is its folder in a sweep."""

    sut: str
    workload: str = ""
    fs: str = "ext4"
    strategies: tuple[str, ...] = ("prefix", "reorder")
    must_violate_any: tuple[str, ...] = field(default=())
    # Promises of the SUT this cell does not hold it to: its fault model goes
    # beyond what the promise assumes (Sut.torn_waived).  Such a cell is named
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
    # coverage floors by strategy (harness/sweep/floors.py: from the matrix
    # file's floors file): the fewest states it may check, and kept sets
    floors: tuple[tuple[str, Floor], ...] = field(default=())

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
    def workload_label(self) -> str:
        """The workload a table shows: a built-in SUT's spec, a user SUT's command."""
        return self.workload or (self.user.run if self.user is not None else "")

    def state_options(self, base: Options) -> Options:
        """``base`` with this cell's own enumeration options (``states``)."""
        # a matrix file's `states` values were checked against Options'
        # field types when it was read (harness/sweep/matrixfile.py)
        return dataclasses.replace(base, **cast(dict[str, Any], dict(self.states)))

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
                promised = (
                    ("FS-RECOVER",) if fs.has_files and strategy not in TEARING else ()
                ) + mine
            return Expectation(
                tuple(i for i in promised if i not in self.waived),
                self.must_violate_any,
                dict(self.floors).get(strategy),
            )
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
                promised = tuple(
                    i for i in promised if i in ("ERR-NOACK", "DB-PREFIX") or i in mine
                )
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
                promised = tuple(i for i in promised if i not in ("REC-CRASHSAFE", "REC-MINIMAL"))
        if fs.has_files and strategy not in TEARING:
            promised = ("FS-RECOVER", *promised)
        promised = self._under_state_faults(promised)
        return Expectation(
            tuple(i for i in promised if i not in self.waived),
            self.must_violate_any,
            dict(self.floors).get(strategy),
        )

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
        aim = StateFaults.of(self.state_faults).aim
        waived, added = promised_under(get_sut(self.sut), kinds, aim)
        own = set(engine_of(get_sut(self.sut)).own_invariants) - set(FAULT_KEPT)
        fs_ok = "lost-flush" not in kinds and get_fs(self.fs).block_mapped
        return (
            tuple(
                i
                for i in promised
                if i not in waived and i not in own and (i != "FS-RECOVER" or fs_ok)
            )
            + added
        )


def _slug(text: str) -> str:
    """A SUT, workload or fault name as part of a folder name (no ':', '/', ',',
    '=' or '+')."""
    return (
        text.replace(":", "-")
        .replace("/", "-")
        .replace(",", "-")
        .replace("=", "")
        .replace("+", "-")
    )
