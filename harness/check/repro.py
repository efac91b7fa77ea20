"""One crash state, reproduced: materialised exactly as the sweep checks it,
every write of its epoch explained, every checker run on it (what ``crashlab
repro`` shows; the CLI only renders a :class:`Repro`).

Two steps, so that bad input fails before any work or output folder:
:func:`locate` resolves a (possibly composed) state ID to its run and parses
it once, into a :class:`Target`; :func:`reproduce` checks and explains that
state and keeps its artifacts in a folder.

    target = locate(Path("runs/cell"), "e17.k0-3,5")  # CrashlabError on bad input
    r = reproduce(target, folder)  # keeps crash.img, recovered.img, files/, repro.json
    r.failed, r.verdicts, r.explanation.writes
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checkers.engines import Engine, engine_of
from checkers.verdict import Verdict
from harness.atomic import write_json_atomic
from harness.check.multicrash import resolve, restart_verdicts
from harness.check.runlevel import prepare_run_level
from harness.check.usercheck import PyChecker, UserChecker
from harness.check.worker import StateChecker
from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.explain.sqlitefile import describe_files
from harness.explain.state import Explanation, explain_state
from harness.faults import Fault
from harness.filetrace import fault_targets
from harness.fs.confined import links_on_way
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.rundir import RunDir, RunMeta
from harness.states import State, state_from_id
from harness.validate import validate

REPRO_NAME = "repro.json"  # what makes a folder hold a repro's results
STATE_FAULTS = (Fault("misdirect"), Fault("corrupt"))  # the state faults an ID can place


@dataclass(frozen=True)
class Target:
    """A state ID resolved and parsed: the run that holds the state (a
    continuation's folder for a composed ID such as ``e7.k0-2/e3.p1``), its
    validated meta.json, and the state within it."""

    run: RunDir
    meta: RunMeta
    state: State

    @property
    def state_id(self) -> str:
        """The plain ID within :attr:`run` (canonical: as given)."""
        return self.state.id


@dataclass(frozen=True)
class ReproOptions:
    """How to check the state: ``fsck`` as in check (False: skip the
    read-only e2fsck); ``checkers``: the user's, beside the built-in ones."""

    fsck: bool = True
    checkers: Sequence[UserChecker | PyChecker] = ()


@dataclass(frozen=True)
class Recovery:
    """What the file system's recovery did to the crash image."""

    ok: bool
    journal_replayed: bool
    needed_repair: bool
    steps: tuple[str, ...]  # each step, then fsck's complaints or why it failed

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "journal_replayed": self.journal_replayed,
            "needed_repair": self.needed_repair,
            "steps": list(self.steps),
        }


@dataclass(frozen=True)
class Repro:
    """A reproduced state: its explanation, recovery and verdicts (its own,
    then the SUT's restart after it where a continuation was recorded), with
    the artifacts kept in :attr:`folder`."""

    target: Target
    explanation: Explanation
    recovery: Recovery
    files: tuple[str, ...]  # the database's files described, for engines with side files
    verdicts: tuple[Verdict, ...]
    folder: Path  # crash.img, recovered.img, files/, repro.json
    engine: Engine | None = field(repr=False)  # None: the run is of the user's command
    db_name: str = ""
    # why opening the database would follow a symbolic link of the
    # recovered tree (no shell is offered then); None: it would not
    linked: str | None = None

    @property
    def failed(self) -> bool:
        """Whether a verdict fails or errs (``crashlab repro`` exits 1)."""
        return any(v.status in ("fail", "error") for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        """repro.json's content."""
        return {
            "run": str(self.target.run.path),
            "state": self.target.state_id,
            "explanation": asdict(self.explanation),
            "recovery": self.recovery.to_json(),
            "files": list(self.files),
            "verdicts": [v.to_json() for v in self.verdicts],
        }

    def shell_command(self, where: Path) -> list[str]:
        """The command that opens the database kept in ``where/files`` with
        its engine's tool (a shell among the files for the user's command)."""
        if self.engine is None:
            return ["sh", "-c", f"cd {shlex.quote(str(where / 'files'))} && exec sh"]
        return self.engine.shell_command(where / "files" / self.db_name)


def locate(run: Path, state_id: str) -> Target:
    """The run and state ``state_id`` names in ``run`` (a composed ID goes
    into the continuation's folder).  A one-line :class:`CrashlabError` for
    an unknown run, a missing continuation, a malformed or impossible ID."""
    if not run.is_dir():
        raise CrashlabError(f"{run}: no such run directory")
    rd, plain = resolve(RunDir(run), state_id)
    meta = validate(rd)
    with LogReader(rd.log) as reader:
        state = state_from_id(reader, plain, rd.log_order)
    return Target(rd, meta, state)


def state_checker(rd: RunDir, work: Path, options: ReproOptions, *, faulted: bool) -> StateChecker:
    """A :class:`StateChecker` that judges states of ``rd`` as its check
    did (scratch in ``work``): with the run's facts from its whole log, and
    where a state may carry faults (``faulted``), where its database lies
    (whether a fault touched it).  The caller closes it."""
    level = prepare_run_level(rd, work)
    faults = STATE_FAULTS if faulted else ()
    return StateChecker(
        rd,
        work / "check",
        fsck=options.fsck,
        run_facts=level.facts,
        checkers=options.checkers,
        db_spans=fault_targets(rd, faults, work / "dbmap"),
    )


def reproduce(
    target: Target,
    folder: Path,
    options: ReproOptions = ReproOptions(),
    scratch: Path | None = None,
) -> Repro:
    """Check and explain ``target``'s state as the sweep checks it, keeping
    crash.img, recovered.img, files/ and repro.json in ``folder`` (which
    exists); scratch work goes to a temporary folder (in ``scratch``; None:
    the temporary folders' own), removed."""
    rd, state = target.run, target.state
    with temporary_folder("crashlab-repro-work-", scratch) as work:
        checker = state_checker(rd, work, options, faulted=state.key.faulted)
        try:
            checker.keep = folder
            # and, where it was continued, whether the SUT's own restart agreed
            verdicts = checker.check(state) + restart_verdicts(rd, target.state_id)
            rec = checker.last_recovery
        finally:
            checker.close()
        assert rec is not None
        ctx = checker.ctx
        with LogReader(rd.log) as reader:
            x = explain_state(
                reader,
                state,
                fs=ctx.fsobj,
                base=verified_base_for_run(rd),
                crash_image=folder / "crash.img",
                recovered=folder / "recovered.img" if rec.ok and ctx.fsobj.has_files else None,
                db_name=ctx.db_name,
                workdir=work / "explain",
                mode=ctx.sut.mode if ctx.sut else "",
                nvram_at=ctx.nvram[0] if ctx.nvram else None,
            )
    engine = engine_of(ctx.sut) if ctx.sut else None
    files = describe_files(folder / "files", ctx.db_name) if engine and engine.sidecar_files else []
    out = Repro(
        target,
        x,
        Recovery(
            rec.ok,
            rec.journal_replayed,
            rec.needed_repair,
            tuple(rec.steps + ([rec.detail] if rec.detail else [])),
        ),
        tuple(files),
        tuple(verdicts),
        folder,
        engine,
        ctx.db_name,
        links_on_way(folder / "files", ctx.db_name) if engine else None,
    )
    write_json_atomic(folder / REPRO_NAME, out.to_json())
    return out
