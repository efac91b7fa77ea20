"""What checking the states of one run reads of the run, made once per
worker process (:func:`context_of`), and the small interface every state
path of ``harness/check/worker.py`` offers (:class:`StatePath`).

A run of a built-in SUT is judged by its engine's checker (asked of the
engine table, ``checkers/engines.py``) against the oracle; a run recorded
with ``crashlab record -- COMMAND`` has no engine, only the user's
checkers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from checkers.content import NOTHING_ACKED
from checkers.engines import engine_of
from checkers.protocol import AnyEngineChecker, RunFacts
from checkers.verdict import Verdict, passed
from harness.check.records import StateRecord
from harness.check.window import SETUP_MARK, setup_entry
from harness.faults import Fault
from harness.fs import FileSystem, get_fs
from harness.fs.raw import DEVICE_NAME
from harness.images import verified_base_for_run
from harness.materialize import DurableImage
from harness.materialize.nvram import nvram_region
from harness.rundir import RunDir, RunMeta
from harness.states import State
from workloads.jlang.oracle import JlangOracle
from workloads.oracle import Oracle
from workloads.run import oracle_from_meta, spec_from_meta
from workloads.suts import Sut


class StatePath(Protocol):
    """One way of checking a run's states, chosen once per worker."""

    def check(self, state: State) -> list[Verdict]:
        """Every verdict for ``state``, FS-RECOVER first."""
        ...

    def record(self, state: State) -> StateRecord:
        """The states.jsonl record of ``state``."""
        ...

    def lines(self, states: Sequence[State]) -> bytes:
        """The states.jsonl lines of ``states`` (one epoch's chunk)."""
        ...

    def close(self) -> None: ...


@dataclass
class CheckContext:
    """The run, its engine and oracle, and the worker's durable image (it
    advances through the log as states are handed out in log order)."""

    run: RunDir
    meta: RunMeta
    workdir: Path
    faults: tuple[Fault, ...]  # the run's (harness/faults.py), parsed
    image: DurableImage
    fsobj: FileSystem
    # On the raw tier the database is the recorded block device itself:
    # the checks run the SUT's recovery as on a block device.
    blockdev: bool
    db_name: str
    nvram: tuple[int, int] | None  # a SUT with an emulated NVRAM: where the image keeps it
    # A continuation (multicrash) starts from a crash state whose
    # acknowledged and recovered transactions hold for its whole log.
    floor: tuple[int, int]
    # the log entry of the run's setup-done mark (None: none): the states
    # whose crash lies before it are the creation window (:meth:`creating`)
    setup_at: int | None = None
    sut: Sut | None = None
    engine: AnyEngineChecker | None = None  # None: no built-in SUT, the user's checkers only
    oracle: Oracle | JlangOracle | None = None  # the engine's (a j-lang run's: FS-*)
    # what the run-level stage learnt from the whole log, for the engine's
    # judge (None: none; harness/check/runlevel.py)
    run_facts: RunFacts | None = None

    def creating(self, state: State) -> bool:
        """Whether ``state``'s crash lies before the run's ``setup-done``
        mark wherever it lies in its cut: the database (or a user's first
        file) was being created, nothing was acknowledged, so an absent or
        empty database is a legal outcome there."""
        return self.setup_at is not None and state.cut.hi <= self.setup_at

    def marks(self, state: State) -> tuple[int, int]:
        """(acknowledged, begun) at the state's crash: its cut's, raised to
        the floor a continuation inherits from its first crash; in the
        creation window ``(NOTHING_ACKED, 0)``: the set-up may or may not
        show."""
        if self.creating(state):
            return NOTHING_ACKED, 0
        acked = max(state.cut.acked, self.floor[0])
        return acked, max(state.cut.begun, self.floor[1], acked)

    def unborn(self) -> list[Verdict]:
        """The engine's verdicts on a blank database (absent, or never
        written) in the creation window: every one passes, not exercised —
        nothing was acknowledged, so nothing can be lost, and there is no
        database to be corrupt."""
        assert self.engine is not None
        why = f"before {SETUP_MARK}: the database does not exist yet (nothing acknowledged)"
        return [passed(i, why, exercised=False) for i in self.engine.IDS]

    def judge(self, facts: object, marks: tuple[int, int]) -> list[Verdict]:
        """The engine's verdicts of ``facts`` (its examination's) at ``marks``."""
        assert self.engine is not None and self.oracle is not None
        # each engine judges by its own oracle: oracle_from_meta made the one
        # its runs need (a j-lang run's engine takes a JlangOracle)
        oracle = cast(Oracle, self.oracle)
        return list(self.engine.judge(facts, oracle, *marks, run_facts=self.run_facts))


def context_of(run: RunDir, workdir: Path, run_facts: RunFacts | None) -> CheckContext:
    """The :class:`CheckContext` of ``run`` for a worker whose private
    folder is ``workdir`` (made here; the durable image lives in it)."""
    meta = run.meta()
    sut = engine = oracle = None
    if meta.sut is not None:
        sut, _ = spec_from_meta(meta)
        engine = engine_of(sut).checker
        oracle = oracle_from_meta(meta)
    fsobj = get_fs(meta.fs)
    cont = meta.continues
    workdir.mkdir(parents=True, exist_ok=True)
    return CheckContext(
        run=run,
        meta=meta,
        workdir=workdir,
        faults=meta.faults,
        image=DurableImage(verified_base_for_run(run), run.log, workdir),
        fsobj=fsobj,
        blockdev=not fsobj.has_files,
        db_name=meta.db or DEVICE_NAME,
        nvram=nvram_region(meta.extra),
        floor=(cont.acked, cont.recovered_txn) if cont is not None else (0, 0),
        setup_at=setup_entry(run) if cont is None else None,  # a continuation's DB exists
        sut=sut,
        engine=engine,
        oracle=oracle,
        run_facts=run_facts,
    )
