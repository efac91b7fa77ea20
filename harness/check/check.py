"""``crashlab check RUN``: check every crash state of one recorded run.

States are enumerated in the parent (streaming, deterministic), grouped
into chunks of one epoch each, and checked by worker processes (local ones
or a Dask cluster's: ``pool.py``, ``cluster.py``); results come back in
enumeration order (``imap``), so ``states.jsonl`` is the same whatever the
number of workers.  A chunk travels as its epoch's number and its states'
keys (:data:`harness.check.pool.Task`), and the task pipe bounds how far
the enumeration runs ahead of the workers, so memory does not grow with
the number of states.  ``states.jsonl`` is appended chunk by chunk and fsynced:
``--resume`` keeps its complete lines, skips that many states of the
(identical) enumeration, and continues.  ``result.json`` is written last,
atomically, from ``states.jsonl`` alone, so an interrupted and resumed check
gives the same result as an uninterrupted one — also when the client was
killed outright (SIGKILL, a lost machine): a torn last line is dropped,
``check.json`` (the options and the recording, written at the start)
makes sure the lines are of the same check, and the dead client's working
folders are reaped (:func:`harness.env.reap_work_folders`).

State faults (``Options.faults``: asked for, and the state kinds of the
run's meta.json, :func:`harness.check.window.default_window`) travel in
each state's key; where misdirect and corrupt aim (the database file's
device spans) is worked out once here (``harness.filetrace.fault_targets``)
and handed to the enumeration and to every worker (CORRUPT-DETECT asks
whether a fault touched the database).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from checkers.content import NOTHING_ACKED
from checkers.invariants import invariant
from checkers.protocol import RunFacts
from checkers.verdict import VerdictJson
from harness.atomic import write_json_atomic, write_text_atomic
from harness.check.cluster import dask_imap
from harness.check.multicrash import (
    COMPOSITE,
    CONTINUED_KEY,
    Composite,
    check_composite,
    resolve,
)
from harness.check.pool import SHARED, local_imap, task_of
from harness.check.records import CheckResult, StateRecord, Violation
from harness.check.runlevel import CRASHSAFE_ID, TRACE_ID, prepare_run_level, run_level_records
from harness.check.usercheck import PyChecker, UserChecker, repro_flags
from harness.check.window import default_window
from harness.check.worker import StateChecker
from harness.env import reap_work_folders, temporary_folder
from harness.errors import CrashlabError, writing
from harness.faults import fault_specs
from harness.filetrace import fault_targets
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.outlock import locked_output
from harness.rundir import IDENTITY_NAME, RESULT_NAME, RUN_NAME, STATES_NAME, RunDir
from harness.states import Enumeration, Options, State, coverage
from harness.states.inject import Spans
from harness.sysops import signals_raise
from harness.validate import validate
from workloads.run import oracle_from_meta

CHUNK = 32  # states per task: small enough to balance two workers, large enough to amortise IPC


@dataclass
class CheckOptions:
    states: Options = field(default_factory=Options)
    max_states: int | None = None  # stop after checking this many states
    jobs: int = 0  # worker processes; 0 = every core
    fsck: bool = True  # a full read-only e2fsck per state for FS-RECOVER
    crashsafe_sample: int = 4  # DHL: states whose recovery is itself crashed (REC-CRASHSAFE)
    # multicrash / recovery-crash (harness/check/multicrash.py): ``states``
    # is then the strategy of the continuations' states
    composite: Composite | None = None
    # the user's own checkers, run on every state (harness/check/usercheck.py)
    checkers: tuple[UserChecker | PyChecker, ...] = ()
    # where states are checked: "local" worker processes, or "dask" (the
    # cluster at ``scheduler``; None: a LocalCluster of ``jobs`` workers).
    # Neither changes a result, so neither is in the tag.
    executor: str = "local"
    scheduler: str | None = None

    @property
    def strategy(self) -> str:
        """The strategy's name: the composite one, or the log strategy."""
        return self.composite.kind if self.composite else self.states.strategy

    def tag(self) -> str:
        """Names the output folder: the strategy and a digest of every
        option that changes which states are checked or how."""
        d = self.states.record() | self.extra_options()
        h = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.strategy}-{h}"

    def extra_options(self) -> dict[str, Any]:
        extra: dict[str, Any] = {
            "max_states": self.max_states,
            "fsck": self.fsck,
            "crashsafe_sample": self.crashsafe_sample,
        }
        if self.composite:
            extra["composite"] = asdict(self.composite)
        if self.checkers:  # absent otherwise: a check without them keeps its folder name
            extra["checkers"] = [
                {"spec": c.spec, "timeout": c.timeout, "recover": c.recover} for c in self.checkers
            ]
        return extra


def options_for(strategy: str, base: CheckOptions) -> CheckOptions:
    """``base`` for one strategy: a log strategy, or a composite one
    (multicrash, recovery-crash), whose continuations use ``then``."""
    if strategy in COMPOSITE:
        comp = dataclasses.replace(base.composite or Composite(), kind=strategy)
        return dataclasses.replace(
            base, states=dataclasses.replace(base.states, strategy=comp.then), composite=comp
        )
    return dataclasses.replace(
        base, states=dataclasses.replace(base.states, strategy=strategy), composite=None
    )


def _chunks(states: Iterator[State], skip: int, limit: int | None) -> Iterator[list[State]]:
    """Chunks of at most CHUNK states, never spanning two epochs, after
    skipping ``skip`` states and stopping at ``limit`` states in all."""
    chunk: list[State] = []
    n = 0
    for state in states:
        if limit is not None and n >= limit:
            break
        n += 1
        if n <= skip:
            continue
        if chunk and (len(chunk) >= CHUNK or chunk[0].epoch is not state.epoch):
            yield chunk
            chunk = []
        chunk.append(state)
    if chunk:
        yield chunk


def _complete_lines(path: Path) -> int:
    """Keep only the complete lines of an interrupted states.jsonl; return
    how many there are."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end != len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    return data[:end].count(b"\n")


def _identity(run: RunDir, opts: CheckOptions) -> dict[str, Any]:
    """check.json's content: the check's options and a digest of the
    recording's meta.json, which differs for every recording."""
    return {
        "options": opts.states.to_json() | opts.extra_options(),
        "recording": hashlib.sha256(run.meta_path.read_bytes()).hexdigest(),
    }


def _claim(out: Path, run: RunDir, opts: CheckOptions, resume: bool) -> None:
    """Write ``out/check.json``: what this check is (:func:`_identity`).  On
    resume, the states already in ``out`` must be of the same check."""
    ident = _identity(run, opts)
    ident = json.loads(json.dumps(ident))  # as read back: lists, not tuples
    path = out / IDENTITY_NAME
    if resume and (out / STATES_NAME).exists() and path.exists():
        if json.loads(path.read_text()) != ident:
            raise CrashlabError(
                f"{out}: holds a check of other options or another recording; "
                "--resume continues only the same check (choose another --out)"
            )
    write_json_atomic(path, ident)


@contextlib.contextmanager
def _appending(path: Path) -> Iterator[BinaryIO]:
    """``path`` open for appending; a full or read-only disk, at the open or
    the close, is a one-line error naming it."""
    with writing(path):
        f = open(path, "ab")  # noqa: SIM115 (closed below, inside writing())
    try:
        yield f
    finally:
        with writing(path):
            f.close()


def count_states(run: RunDir, opts: Options) -> int:
    """How many states the strategy generates in the window, before dedup:
    the total of its progress."""
    with LogReader(run.log) as reader:
        cheap = dataclasses.replace(opts, dedup=False)
        e = Enumeration(reader, cheap)
        return sum(1 for _ in e)


def check_run(
    run: RunDir,
    opts: CheckOptions,
    out: Path | None = None,
    *,
    resume: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> CheckResult:
    """Check the states of ``run``; return (and write) ``result.json``.
    ``on_progress(done, checked)`` is called after every chunk: ``done``
    of the :func:`count_states` states are settled (checked, folded into
    an earlier one or left out), ``checked`` of them checked.
    SIGINT and SIGTERM raise :class:`harness.sysops.Interrupted`, also one
    that Python swallowed on the way (checked after every chunk and before
    ``result.json`` is written).  The run is validated first
    (:func:`harness.validate.validate`)."""
    with signals_raise() as stopped:
        return _check_run(run, opts, out, resume, on_progress, stopped)


def _check_run(
    run: RunDir,
    opts: CheckOptions,
    out: Path | None,
    resume: bool,
    on_progress: Callable[[int, int], None] | None,
    stopped: Callable[[], None],
) -> CheckResult:
    validate(run)
    if opts.composite is not None:
        if default_window(run, opts.states).faults:
            raise CrashlabError(
                f"{run.path}: state faults apply to the log strategies, not to "
                f"{opts.composite.kind}"
            )
        out = out or run.check_dir(opts.tag())
        with locked_output(out, (IDENTITY_NAME,)):
            return _check_composite(run, opts, out, resume)
    opts.states = default_window(run, opts.states)
    out = out or run.check_dir(opts.tag())
    with locked_output(out, (IDENTITY_NAME,)):  # one writer per check folder
        return _check_states(run, opts, out, resume, on_progress, stopped)


def _check_states(
    run: RunDir,
    opts: CheckOptions,
    out: Path,
    resume: bool,
    on_progress: Callable[[int, int], None] | None,
    stopped: Callable[[], None],
) -> CheckResult:
    """:func:`check_run` of a log strategy, into the locked folder ``out``
    (``stopped()`` raises an interrupt that Python swallowed)."""
    reap_work_folders()
    states_path = out / STATES_NAME
    _claim(out, run, opts, resume)
    done = _complete_lines(states_path) if resume else 0
    if not resume:
        states_path.unlink(missing_ok=True)
    (out / RESULT_NAME).unlink(missing_ok=True)
    jobs = opts.jobs or os.cpu_count() or 1
    t0 = time.monotonic()
    with temporary_folder("crashlab-check-") as workroot:
        # the run-level stage's trace first: its facts judge every state
        level = prepare_run_level(run, workroot)
        if run.meta().sut is not None:  # made once here: the forked workers inherit it
            oracle_from_meta(run.meta())
        verified_base_for_run(run)  # digested once here, as well
        spans = fault_targets(run, opts.states.faults, workroot / "dbmap")
        with LogReader(run.log) as reader, _appending(states_path) as sink:
            enum = Enumeration(reader, opts.states, targets=spans)
            chunks = _chunks(iter(enum), done, opts.max_states)
            if opts.checkers:  # before any chunk is dispatched
                chunks = _fail_fast(run, opts, chunks, workroot, level.facts, spans)
            checked = done

            def emit(lines: bytes) -> None:
                nonlocal checked
                with writing(states_path):
                    sink.write(lines)
                    sink.flush()
                    os.fsync(sink.fileno())
                checked += lines.count(b"\n")  # one line per state, no newline inside
                if on_progress:  # the pool runs ahead: folded states count as done at once
                    on_progress(checked + enum.stats.generated - enum.stats.emitted, checked)
                stopped()

            init_args = (str(run.path), str(workroot), opts.fsck, level.facts, opts.checkers, spans)
            if opts.executor == "dask":
                for lines in dask_imap(map(task_of, chunks), init_args, opts.scheduler, jobs):
                    emit(lines)
            else:
                with local_imap(chunks, init_args, jobs) as results:
                    for lines in results:
                        emit(lines)
            stats = enum.stats
        run_path = out / RUN_NAME
        if not (resume and run_path.exists()):
            records = run_level_records(run, states_path, workroot, opts.crashsafe_sample, level)
            write_text_atomic(
                run_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
            )
    result = summarise(run, states_path, opts)
    result["states"]["generated"] = stats.generated
    result["states"]["folded"] = stats.folded
    planned = opts.states.budget if enum.quotas is not None else None
    result["coverage"] = coverage.summary(stats.coverage, planned)
    stopped()
    write_json_atomic(out / RESULT_NAME, result)
    result["timing"] = {"seconds": round(time.monotonic() - t0, 3), "resumed_from": done}
    return result


def _fail_fast(
    run: RunDir,
    opts: CheckOptions,
    chunks: Iterator[list[State]],
    workroot: Path,
    facts: RunFacts | None,
    spans: Spans | None,
) -> Iterator[list[State]]:
    """``chunks`` again, once the user's checkers judged their first state
    here: a checker error on it (a checker that cannot start, crashes,
    hangs or answers garbage) is a CrashlabError, before any worker
    starts."""
    first = next(chunks, None)
    if first is None:
        return chunks
    work = workroot / "first-state"
    work.mkdir()
    checker = StateChecker(
        run,
        work,
        fsck=opts.fsck,
        run_facts=facts,
        checkers=opts.checkers,
        db_spans=spans,
        shared=workroot / SHARED,
    )
    try:
        verdicts = checker.check(first[0])
    finally:
        checker.close()
    mine = {c.invariant for c in opts.checkers}
    for v in verdicts:
        if v.invariant in mine and v.status == "error":
            why = " ".join(v.explanation.split())
            why = why if len(why) <= 400 else why[:150] + " … " + why[-250:]
            raise CrashlabError(
                f"checker {v.invariant} failed on the first state {first[0].id}, "
                f"nothing checked: {why}"
            )
    return itertools.chain([first], chunks)


def _check_composite(run: RunDir, opts: CheckOptions, out: Path, resume: bool) -> CheckResult:
    """multicrash / recovery-crash: continue the run after its first
    crashes and check the continuations (harness/check/multicrash.py)."""
    comp = opts.composite
    assert comp is not None
    t0 = time.monotonic()
    deeper = dataclasses.replace(comp, depth=comp.depth - 1) if comp.depth > 2 else None
    then = dataclasses.replace(opts, composite=deeper)

    def check_nested(nested: RunDir, nested_out: Path) -> CheckResult:
        return check_run(nested, dataclasses.replace(then), nested_out, resume=resume)

    with temporary_folder("crashlab-multicrash-") as work:
        extra, continued = check_composite(run, comp, out, check_nested, work, resume=resume)
    # what triage reads: the options (the continuations' window among
    # them) and the crashes continued, the only ones it may move a crash to
    write_json_atomic(out / IDENTITY_NAME, _identity(run, opts) | {CONTINUED_KEY: continued})
    states_path = out / STATES_NAME
    result = summarise(run, states_path, opts, allow_empty=True)
    result["multicrash"] = extra
    done = [c for c in extra["continuations"] if "error" not in c]
    result["states"]["generated"] = sum(c["generated"] for c in done)
    result["states"]["folded"] = sum(c["folded"] for c in done)
    write_json_atomic(out / RESULT_NAME, result)
    result["timing"] = {"seconds": round(time.monotonic() - t0, 3), "resumed_from": 0}
    return result


def _violation(
    run: RunDir, rec: StateRecord, v: VerdictJson, checkers: tuple[UserChecker | PyChecker, ...]
) -> Violation:
    """One violations.jsonl record; a trace-level one (DHL-T2, CC-NEXT,
    CC-MONO) names log entries, not a state, and is shown with `log show`;
    a user checker's names the checker, so that repro runs it again."""
    if rec["id"].rsplit("/", 1)[-1] == TRACE_ID:  # a continuation's trace: its own log
        repro = f"crashlab log show {resolve(run, rec['id'])[0].path}"
    else:
        repro = f"crashlab repro {run.path} {rec['id']}" + repro_flags(checkers, v["invariant"])
    return {
        "state": rec["id"],
        "acked": rec.get("acked"),
        "begun": rec.get("begun"),
        "category": invariant(v["invariant"]).category,
        **v,
        "dropped": rec.get("dropped", []),
        "torn": rec.get("torn", []),
        "repro": repro,
    }


def summarise(
    run: RunDir, states_path: Path, opts: CheckOptions, *, allow_empty: bool = False
) -> CheckResult:
    """Per-invariant counts and the failures of one run, from states.jsonl
    and the run-level records of run.jsonl (not counted as states)."""
    meta = run.meta()
    counts: dict[str, dict[str, int]] = {}
    violations: list[Violation] = []
    checked = creation = 0
    crashsafe = {"states": 0, "recovery_states": 0}
    skips: dict[str, dict[str, int]] = {}
    errors: dict[str, dict[str, int]] = {}
    run_path = states_path.with_name(RUN_NAME)
    for path in (states_path, run_path):
        if not path.exists():
            continue
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                checked += path == states_path
                creation += path == states_path and rec.get("acked") == NOTHING_ACKED
                if "REC-CRASHSAFE" in rec["v"] and rec["id"].rsplit("/", 1)[-1] != CRASHSAFE_ID:
                    crashsafe["states"] += 1
                    crashsafe["recovery_states"] += rec.get("recovery_states", 0)
                for inv, status in rec["v"].items():
                    c = counts.setdefault(inv, {"pass": 0, "fail": 0, "skip": 0})
                    c[status] = c.get(status, 0) + 1
                for inv in rec.get("ne", []):  # of the passes: not exercised
                    counts[inv]["not_exercised"] = counts[inv].get("not_exercised", 0) + 1
                for v in rec.get("fail", []):
                    violations.append(_violation(run, rec, v, opts.checkers))
                for group, key in ((skips, "skip"), (errors, "error")):
                    for inv, why in rec.get(key, {}).items():
                        per = group.setdefault(inv, {})
                        per[why] = per.get(why, 0) + 1
    if opts.max_states is None and checked == 0 and not allow_empty:
        raise CrashlabError(f"{run.path}: no crash state in the window (empty log?)")
    return {
        "run": str(run.path),
        "sut": meta.sut_label(),
        "workload": meta.workload_label(),
        "fs": meta.fs,
        "strategy": opts.strategy,
        "options": opts.states.record() | opts.extra_options(),
        # the state faults injected on top of every state (their IDs show each one)
        **({"faults": fault_specs(opts.states.faults)} if opts.states.faults else {}),
        # creation: of the states checked, those before the setup-done mark
        "states": {"checked": checked, **({"creation": creation} if creation else {})},
        "verdicts": {k: counts[k] for k in sorted(counts)},
        "violations": violations,
        "skips": {inv: skips[inv] for inv in sorted(skips)},  # invariant -> reason -> states
        # a user checker that crashed, hung or exited neither 0 nor 1
        **({"errors": {inv: errors[inv] for inv in sorted(errors)}} if errors else {}),
        # REC-CRASHSAFE: states whose recovery was crashed, and the crash
        # states of recovery that were recovered again for them
        **({"crashsafe": crashsafe} if crashsafe["states"] else {}),
    }
