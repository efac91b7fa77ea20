"""Crashing twice, and crashing during recovery.

Every log strategy crashes once and recovers.  Some bugs need more: crash,
recover, run more transactions, crash again (a rolled-back transaction's
leftovers counted toward the next one), or a crash in the middle of the
recovery itself.  Both are *continuations* of a recorded run:

1. **First crash.**  The run's ``first`` strategy states (prefix by default)
   are checked as usual; each state whose recovered content is a correct
   oracle state j (acknowledged A <= j <= begun) is a candidate.  Candidates
   whose crash images are byte-identical are one (the continuation depends
   only on the image).  At most ``max_first`` are continued, states with a
   transaction in flight first (their recovery has work to do), evenly
   spaced, in log order: deterministic.
2. **Continuation.**  The crash image becomes the base image of a new
   recording, on the same backend and file system: the file system's own
   recovery (the kernel replays its journal at mount), the SUT's recovery
   (SQLite's first open rolls back a hot journal or replays the WAL; DHL's
   open recovers) and then the workload's transactions j+1.. run on the
   recorded device (the runner's ``--from-txn``).  The continuation's
   meta.json keeps the first crash's acknowledged A and recovered j: every
   state of the continuation is judged with at least A acknowledged and j
   begun (``StateChecker.marks``), so the acknowledged set is the first
   crash's plus what the continuation acknowledges.  With ``recovery-crash``
   the continuation runs no transaction: its log is the recovery's own
   writes.
3. **Second crash.**  The continuation is a run folder of its own,
   ``RUN/multicrash/<first-id>/``, checked with the normal pipeline (the
   ``then`` strategy, reorder by default) against the same oracle.  With
   ``depth`` > 2 it is itself continued.  State IDs compose:
   ``e7.k0-2/e3.p1`` is state ``e3.p1`` of the continuation of ``e7.k0-2``,
   ``e7.k0-2/recovery/e0.p3`` state ``e0.p3`` of the recovery-only one;
   ``crashlab repro RUN e7.k0-2/e3.p1`` finds it (:func:`resolve`).

4. **The SUT's own restart.**  The continuation's runner reports the content
   digest of what its open saw before any transaction (meta.json
   ``runner.opened``); REC-AGREE (checkers/agree.py) compares it with the
   content the checkers recovered for the first crash, a line of
   ``out/run.jsonl`` under the first crash's ID.

The continuation's base image (a sparse copy of the first crash's image,
with its digest in meta.json) is kept in its folder so that the folder is a
self-contained run; its meta.json also names the parent run and state.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from checkers.agree import judge_agree
from checkers.verdict import Verdict
from harness.atomic import write_text_atomic
from harness.check.records import CheckResult, CompositeResult, Continuation, verdict_record
from harness.check.window import workload_window
from harness.check.worker import StateChecker
from harness.errors import CrashlabError
from harness.images import file_digest, file_sha256
from harness.logformat import LogReader
from harness.materialize import sparse_copy
from harness.rundir import IDENTITY_NAME, RUN_NAME, STATES_NAME, RunDir
from harness.states import Enumeration, Options
from workloads.run import db_oracle_from_meta, record_workload, spec_from_meta

COMPOSITE = ("multicrash", "recovery-crash")
RECOVERY_PART = "recovery"  # marks a recovery-crash continuation in a composed ID
CONTINUED_KEY = "continued"  # check.json of a composite check: the crashes continued


def compose(kind: str, first_id: str, second_id: str) -> str:
    """The ID of state ``second_id`` of the ``kind`` continuation after
    ``first_id``."""
    middle = f"/{RECOVERY_PART}" if kind == "recovery-crash" else ""
    return f"{first_id}{middle}/{second_id}"


def resolve(run: RunDir, state_id: str) -> tuple[RunDir, str]:
    """The run and plain state ID a (possibly composed) ID names; a folder
    that holds no continuation is a one-line error."""
    parts = state_id.split("/")
    i = 0
    while i < len(parts) - 1:
        kind = "multicrash"
        if i + 2 < len(parts) and parts[i + 1] == RECOVERY_PART:
            kind = "recovery-crash"
        folder = run.path / kind / parts[i]
        if not (folder / "meta.json").exists():
            raise CrashlabError(
                f"{state_id}: {run.path} has no {kind} continuation after "
                f"{parts[i]} (check it with --strategy {kind} first)"
            )
        run = RunDir(folder)
        i += 2 if kind == "recovery-crash" else 1
    return run, parts[-1]


@dataclass(frozen=True)
class Composite:
    """A multi-crash strategy and its options (documented defaults)."""

    kind: str = "multicrash"  # or "recovery-crash": the continuation runs no transaction
    first: str = "prefix"  # strategy of the first crash
    then: str = "reorder"  # strategy of the continuations' states
    max_first: int = 3  # first-crash states continued (distinct crash images)
    depth: int = 2  # crashes in a row (2: crash, recover + continue, crash)
    backend: str = "auto"  # recording backend of the continuations


@dataclass(frozen=True)
class FirstCrash:
    """A first-crash state to continue from."""

    state_id: str
    acked: int
    begun: int
    recovered: int  # the oracle index of its recovered content
    image: Path  # its crash image (before any recovery)


def _recovered_index(verdicts: list[Any]) -> int | None:
    """j of a state whose content check passed (DB-DURABLE's ``actual``)."""
    by_id = {v.invariant: v for v in verdicts}
    durable = by_id.get("DB-DURABLE")
    if (
        durable is None
        or durable.status != "pass"
        or any(
            by_id[i].status == "fail" for i in ("DB-ATOMIC", "DB-PREFIX", "DB-OPEN") if i in by_id
        )
    ):
        return None
    return int(durable.actual)


def first_crashes(
    run: RunDir, comp: Composite, work: Path
) -> tuple[list[FirstCrash], dict[str, int]]:
    """The first-crash states to continue, and counts of how they were chosen."""
    opts = workload_window(run, Options(strategy=comp.first))
    keep = work / "keep"
    checker = StateChecker(run, work / "check", fsck=False)
    candidates: list[FirstCrash] = []
    seen: set[bytes] = set()
    counts = {"states": 0, "violating": 0, "duplicates": 0}
    try:
        with LogReader(run.log) as reader:
            for state in Enumeration(reader, opts):
                counts["states"] += 1
                keep.mkdir(parents=True, exist_ok=True)
                checker.keep = keep
                verdicts = checker.check(state)
                acked, begun = checker.marks(state)
                j = _recovered_index(verdicts)
                if j is None:
                    counts["violating"] += 1
                    continue
                crash = keep / "crash.img"
                key = file_digest(crash, xxhash.xxh3_128()).digest()
                if key in seen:
                    counts["duplicates"] += 1
                    continue
                seen.add(key)
                image = work / f"first-{len(candidates)}.img"
                sparse_copy(crash, image)
                candidates.append(FirstCrash(state.id, acked, begun, j, image))
    finally:
        checker.close()
    chosen = _choose(candidates, comp.max_first)
    counts["distinct"] = len(candidates)
    counts["continued"] = len(chosen)
    return chosen, counts


def _choose(cands: list[FirstCrash], k: int) -> list[FirstCrash]:
    """``k`` of ``cands``: those with a transaction in flight first, each
    group evenly spaced, returned in log order."""
    inflight = [c for c in cands if c.begun > c.acked]
    rest = [c for c in cands if c.begun == c.acked]
    picked: list[FirstCrash] = []
    for group in (inflight, rest):
        want = min(k - len(picked), len(group))
        if want > 0:
            picked += [group[(i * len(group)) // want] for i in range(want)]
    order = {c.state_id: i for i, c in enumerate(cands)}
    return sorted(picked, key=lambda c: order[c.state_id])


def continue_from(
    run: RunDir, first: FirstCrash, comp: Composite, folder: Path, resume: bool
) -> RunDir:
    """Record the continuation of ``run`` after ``first`` into ``folder``."""
    nested = RunDir(folder)
    if resume and nested.meta_path.exists():
        return nested
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    base = folder / "base.img"
    sparse_copy(first.image, base)
    meta = run.meta()
    _, spec = spec_from_meta(meta)
    last = spec.txns
    start = last + 1 if comp.kind == "recovery-crash" else first.recovered + 1
    return record_workload(
        str(meta.sut),
        str(meta.workload),
        folder,
        fs=meta.fs,
        backend=comp.backend,
        base=(base, file_sha256(base)),
        from_txn=start,
        extra_meta={
            "continues": {
                "run": str(run.path),
                "state": first.state_id,
                "kind": comp.kind,
                "recovered_txn": first.recovered,
                "acked": first.acked,
                "begun": first.begun,
            }
        },
    )


def agree_record(nested: RunDir, first: FirstCrash, oracle: list[str]) -> dict[str, Any]:
    """The run.jsonl line of REC-AGREE for ``first``: what the SUT's own
    open saw in the continuation ``nested`` against what the checkers
    recovered (checkers/agree.py)."""
    meta = nested.meta()
    verdict = judge_agree(meta.runner, oracle, first.recovered, meta.exit_status)
    return dict(verdict_record(first.state_id, [verdict], acked=first.acked, begun=first.begun))


def restart_verdicts(run: RunDir, state_id: str) -> list[Verdict]:
    """REC-AGREE of each continuation already recorded after ``state_id``
    of ``run`` (what ``crashlab repro`` shows beside the state's own
    verdicts), judged as the composite check judged it."""
    out: list[Verdict] = []
    folders = [run.path / kind / state_id for kind in COMPOSITE]
    metas = [RunDir(f).meta() for f in folders if (f / "meta.json").exists()]
    oracle = db_oracle_from_meta(run.meta()).digests if metas else []
    for meta in metas:
        if meta.continues is None:  # not a continuation's folder
            continue
        v = judge_agree(meta.runner, oracle, meta.continues.recovered_txn, meta.exit_status)
        v.explanation = f"{meta.continues.kind} continuation: {v.explanation}"
        out.append(v)
    return out


Checker = Callable[[RunDir, Path], CheckResult]


def check_composite(
    run: RunDir,
    comp: Composite,
    out: Path,
    check_nested: Checker,
    work: Path,
    *,
    resume: bool = False,
) -> tuple[CompositeResult, list[str]]:
    """Continue ``run`` after its chosen first crashes, check each
    continuation with ``check_nested(nested_run, out_folder)`` (the normal
    check, or this one again for a deeper ``depth``), and write
    ``out/states.jsonl`` and ``out/run.jsonl`` with composed state IDs.
    Returns what the continuations add to result.json, and the composed
    IDs of the crashes that were continued and checked (a deeper one's
    too: ``a``, ``a/b``), what triage may move a crash to.  Each
    continuation also gives its first crash a REC-AGREE verdict in
    ``out/run.jsonl`` (:func:`agree_record`)."""
    chosen, counts = first_crashes(run, comp, work / "first")
    oracle = db_oracle_from_meta(run.meta()).digests if chosen else []
    lines: dict[str, list[str]] = {STATES_NAME: [], RUN_NAME: []}
    continuations: list[Continuation] = []
    continued: list[str] = []
    for first in chosen:
        folder = run.path / comp.kind / first.state_id
        nested = continue_from(run, first, comp, folder, resume)
        lines[RUN_NAME].append(json.dumps(agree_record(nested, first, oracle), sort_keys=True))
        status = nested.meta().exit_status
        if status != 0:
            continuations.append(
                {
                    "state": first.state_id,
                    "error": f"the continuation exited {status} (see {folder}/meta.json)",
                }
            )
            continue
        nested_out = folder / "check-then"
        result = check_nested(nested, nested_out)
        continued.append(first.state_id)
        continued += [compose(comp.kind, first.state_id, x) for x in _continued(nested_out)]
        for name in lines:
            path = nested_out / name
            if path.exists():
                for line in path.read_text().splitlines():
                    rec = json.loads(line)
                    rec["id"] = compose(comp.kind, first.state_id, rec["id"])
                    lines[name].append(json.dumps(rec, sort_keys=True))
        nested_meta = nested.meta()
        continuations.append(
            {
                "state": first.state_id,
                "from_txn": nested_meta.continues_at,
                "recovered_txn": first.recovered,
                "states": result["states"]["checked"],
                "generated": result["states"].get("generated", result["states"]["checked"]),
                "folded": result["states"].get("folded", 0),
                "log_entries": (nested_meta.log or {}).get("entries"),
            }
        )
    for name, ls in lines.items():
        write_text_atomic(out / name, "".join(x + "\n" for x in ls))
    return {"kind": comp.kind, "first": counts, "continuations": continuations}, continued


def _continued(nested_out: Path) -> list[str]:
    """The crashes a deeper composite check in ``nested_out`` continued
    (its check.json, just written by this process; none for a log
    strategy's)."""
    path = nested_out / IDENTITY_NAME
    doc = json.loads(path.read_text()) if path.exists() else {}
    return [str(x) for x in doc.get(CONTINUED_KEY, [])]
