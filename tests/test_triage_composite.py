"""Composite checks triaged end to end (issue 25: multicrash and
recovery-crash): the check writes check.json with the crashes it
continued; triage reads it as hostile input, stays among the check's
continuations and states, and its minimal composite witness is minimal;
the groups reach summary.json, violations.jsonl, JUnit and the table."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import crashlab

from harness.check.check import CheckOptions, check_run, options_for
from harness.check.multicrash import Composite, resolve
from harness.check.repro import ReproOptions, state_checker
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import State, iter_epochs
from harness.states.stateid import StateKey, format_id, iter_bits, parse_id
from harness.sweep.matrix import Cell
from harness.sweep.sweep import SweepOptions, run_sweep
from harness.triage.groups import triage
from harness.triage.minimise import split_id
from harness.triage.search import EpochSpace, dropped

pytestmark = pytest.mark.needs_fuse
# sqlite-off (no journal): after a first crash, the continuation's
# transaction is left half-written by a second one (DB-ATOMIC, measured: 40
# failing states over 3 continuations)
SUT, SMALL = "sqlite-off", "insert:txns=5,ops=3,tables=2,warmup=50,seed=1"


@pytest.fixture(scope="module")
def checked(recorded: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: ANN401
    """The multicrash check folder of a private copy of the run (the check
    records its continuations into the run folder)."""
    run = recorded.copy(tmp_path_factory.mktemp("mc") / SUT, SUT, SMALL, "ext4")
    opts = options_for("multicrash", CheckOptions(jobs=2, composite=Composite(backend="fuse")))
    result = check_run(run, opts)
    assert result["verdicts"]["DB-ATOMIC"]["fail"] > 0
    return run.check_dir(opts.tag())


def space_of(run: RunDir) -> EpochSpace:
    with LogReader(run.log) as reader:
        return EpochSpace(list(iter_epochs(reader, run.log_order)))


def bigger(space: EpochSpace, key: StateKey) -> list[StateKey]:
    """The states one step bigger than ``key`` the model allows: a dropped
    write kept, a torn one whole, the crash point one write earlier."""
    out = [replace(key, kept=key.kept | 1 << w) for w in iter_bits(dropped(key))]
    out += [replace(key, kept=key.kept | 1 << w, torn=()) for w, _ in key.torn]
    last = (key.kept | key.torn_mask).bit_length() - 1
    if last >= 0 and key.kept >> last & 1:
        out.append(replace(key, kept=key.kept & ~(1 << last)))
    return [k for k in out if space.valid(k)]


def test_a_multicrash_check_is_triaged_to_a_minimal_witness(checked: Path, tmp_path: Path) -> None:
    ident = json.loads((checked / "check.json").read_text())
    continued = set(ident["continued"])
    assert continued and ident["options"]["composite"]["kind"] == "multicrash"
    t = triage(checked, per_invariant=4, jobs=2)
    assert t.groups and all(g.invariant == "DB-ATOMIC" for g in t.groups)
    ids = {json.loads(x)["id"] for x in (checked / "states.jsonl").open()}
    run = t.check.run
    for g in t.groups:
        m = g.witness.minimised
        (first, second), kinds = split_id(m.minimal)
        assert kinds == ["multicrash"] and first in continued
        assert m.minimal in ids  # a state the check itself judged
        assert f"crashlab repro {run.path} {m.minimal}" == g.repro
        nested, plain = resolve(run, m.minimal)
        assert nested.path == run.path / "multicrash" / first and plain == second
        work = tmp_path / g.id
        work.mkdir()
        checker = state_checker(nested, work, ReproOptions(), faulted=False)
        space = space_of(nested)

        def fails(key: StateKey, space: EpochSpace = space, checker: Any = checker) -> bool:  # noqa: ANN401
            verdicts = checker.check(State(key, space.epoch(key)))
            return any(v.invariant == "DB-ATOMIC" and v.failed for v in verdicts)

        try:
            # judged afresh it fails; every state of its last crash one step
            # bigger passes
            key = parse_id(second)
            assert fails(key)
            for k in bigger(space, key):
                assert not fails(k), (m.minimal, format_id(k))
        finally:
            checker.close()
        # its first crash cannot move: no earlier crash was continued
        start = parse_id(first)
        assert all(
            (parse_id(c).epoch, parse_id(c).kept) >= (start.epoch, start.kept) for c in continued
        )


def test_triage_stays_among_the_continuations_the_check_continued(
    checked: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "check"
    shutil.copytree(checked, folder)
    # check.json lists the last continuation only (result.json names the
    # run): the failing states after it would move their first crash to an
    # earlier one, but that one is not the check's
    ident = json.loads((folder / "check.json").read_text())
    first = max(ident["continued"], key=lambda c: (parse_id(c).epoch, parse_id(c).kept))
    ident["continued"] = [first]
    (folder / "check.json").write_text(json.dumps(ident))
    t = triage(folder, per_invariant=40, jobs=1, write=False)
    assert t.groups
    assert {split_id(g.witness.minimised.minimal)[0][0] for g in t.groups} == {first}


@pytest.mark.parametrize(
    ("continued", "says"),
    [
        ("e1.p0", "is not a list of state IDs"),
        ([["e1.p0"]], "is not a list of state IDs"),
        (["e1.x9"], "is no state ID"),
        (["e1.p0/recovery/e2.p1"], "is not a multicrash ID"),
    ],
)
def test_a_hostile_continued_list_is_one_line(
    checked: Path,
    tmp_path: Path,
    continued: Any,
    says: str,  # noqa: ANN401
) -> None:
    folder = tmp_path / "check"
    shutil.copytree(checked, folder)
    ident = json.loads((folder / "check.json").read_text())
    ident["continued"] = continued
    (folder / "check.json").write_text(json.dumps(ident))
    p = crashlab("triage", str(folder))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().count("\n") == 0 and says in p.stderr, p.stderr


def test_a_multicrash_sweep_carries_the_groups(tmp_path: Path) -> None:
    cell = Cell(SUT, SMALL, "ext4", strategies=("multicrash",))
    opts = SweepOptions(backend="fuse", jobs=2, composite=Composite(backend="fuse"), triage=3)
    summary, _ = run_sweep("mc", [cell], tmp_path / "sweep", opts)
    (rec,) = summary["cells"]
    assert rec["strategy"] == "multicrash" and rec["groups"]
    gids = {g["id"] for g in rec["groups"]}
    for g in rec["groups"]:
        assert "/" in g["minimal"] and g["repro"].startswith(f"crashlab repro runs/{cell.name} ")
    rows = [json.loads(x) for x in (tmp_path / "sweep" / "violations.jsonl").open()]
    assert rows and {r["group"] for r in rows} - {None} <= gids
    assert {r["group"] for r in rows} & gids
    junit = (tmp_path / "sweep" / "junit.xml").read_text()
    assert all(gid in junit for gid in gids)
    # crashlab triage on the sweep folder: its multicrash check too
    p = crashlab("triage", str(tmp_path / "sweep"), "--per-invariant", "3", "--json")
    assert p.returncode == 1, p.stderr
    assert {g["id"] for g in json.loads(p.stdout)["groups"]} == gids
