"""The work done for one crash state, in a worker process:
materialise → file-system recovery → SUT recovery and checkers.

One :class:`StateChecker` per process holds the run (its log, oracle,
engine: ``harness/check/context.py``) and a durable image that advances
through the log as states are handed out in log order, and checks every
state by one path chosen once (:func:`state_path`):

* the file path (``harness/check/filepath.py``): the state's image a file,
  recovered by its file system, the database examined on the files — every
  run can take it, and it is the reference;
* the raw tier's in-memory path and its native twin
  (``harness/check/rawpath.py``), with byte-identical verdicts; a state
  they do not take (kept, or with a misdirect or corrupt fault) takes the
  file path.

A state's faults are part of its image (a misdirected write's two places,
flipped bits); a state with a misdirect or corrupt fault is judged on
CORRUPT-DETECT too (``checkers/detect.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from checkers.protocol import RunFacts
from checkers.verdict import Verdict
from harness.check.context import CheckContext, StatePath, context_of
from harness.check.filepath import FilePath
from harness.check.rawpath import MemoryPath, NativePath
from harness.check.records import StateRecord
from harness.check.usercheck import PyChecker, UserChecker
from harness.env import native_checks, reference_recovery
from harness.fs import FsRecovery
from harness.materialize import DurableImage
from harness.rundir import RunDir
from harness.states import State
from harness.states.inject import Spans


def state_path(ctx: CheckContext, files: FilePath, *, fast: bool) -> StatePath:
    """How a worker checks the run's states, chosen once: in memory on the
    raw tier, where the engine examines an image in memory and a state
    needs its checks alone (not the user's checkers, which read files, nor
    the error invariants, which the file path adds), and natively where
    the engine has a native twin, built (CRASHLAB_RECOVERY=python: not);
    else by ``files``.  ``fast``: not CRASHLAB_RECOVERY=reference."""
    engine = ctx.engine
    examine_image = engine.examine_image if engine is not None else None
    if (
        engine is None
        or examine_image is None
        or not (fast and ctx.blockdev)
        or files.user is not None
        or files.judge_errors
    ):
        return files
    memory = MemoryPath(ctx, files, examine_image)
    native = engine.native_examiner(ctx.image.path) if native_checks() else None
    return memory if native is None else NativePath(ctx, memory, native)


class StateChecker:
    """Checks states of one run; ``workdir`` is private to this process."""

    def __init__(
        self,
        run: RunDir,
        workdir: Path,
        *,
        fsck: bool = True,
        fast: bool | None = None,
        run_facts: RunFacts | None = None,
        checkers: Sequence[UserChecker | PyChecker] = (),
        db_spans: Spans | None = None,
        shared: Path | None = None,
    ) -> None:
        """``fast``: the fast paths (None: unless CRASHLAB_RECOVERY=reference,
        a full image copy and fresh e2fsprogs processes per state, verdicts
        identical: tests/test_sweep_perf.py); ``run_facts``: the run-level
        stage's, for the engine's judge; ``checkers``: the user's;
        ``db_spans``: the database file's device spans (whether a fault
        touched it; None: unknown); ``shared``: a folder the processes
        checking this run share (the fast recovery's reusable results)."""
        self.ctx = context_of(run, workdir, run_facts)
        fast = not reference_recovery() if fast is None else fast
        self.files = FilePath(
            self.ctx, fsck=fsck, fast=fast, shared=shared, checkers=checkers, db_spans=db_spans
        )
        self.path = state_path(self.ctx, self.files, fast=fast)

    @property
    def keep(self) -> Path | None:
        """``crashlab repro`` sets it to a folder: :meth:`check` then leaves
        there crash.img (before recovery), recovered.img and files/ (as the
        file system recovered them, before the SUT's own recovery)."""
        return self.files.keep

    @keep.setter
    def keep(self, folder: Path | None) -> None:
        self.files.keep = folder

    @property
    def last_recovery(self) -> FsRecovery | None:
        """The file-system recovery of the last state checked by files."""
        return self.files.last_recovery

    @property
    def workdir(self) -> Path:
        return self.ctx.workdir

    @property
    def image(self) -> DurableImage:
        return self.ctx.image

    def close(self) -> None:
        self.path.close()  # and the paths it falls back to
        self.ctx.image.close()

    def check(self, state: State) -> list[Verdict]:
        """Every verdict for ``state``, FS-RECOVER first."""
        return self.path.check(state)

    def record(self, state: State) -> StateRecord:
        """The states.jsonl record of ``state``."""
        return self.path.record(state)

    def lines(self, states: Sequence[State]) -> bytes:
        """The states.jsonl lines of ``states`` (a chunk: one epoch's)."""
        return self.path.lines(states)

    def marks(self, state: State) -> tuple[int, int]:
        """(acknowledged, begun) the state is judged against."""
        return self.ctx.marks(state)

    def recover_files(self, state: State, *, reference: bool = False) -> FsRecovery:
        """The files of ``state`` as its file system recovers them, in
        ``workdir/files`` (:meth:`FilePath.recover_files`)."""
        return self.files.recover_files(state, reference=reference)
