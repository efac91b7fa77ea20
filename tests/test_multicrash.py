"""Crashing twice and crashing during recovery, on real recordings
(harness/check/multicrash.py).

* a continuation starts on the first crash's image, at the transaction after
  the recovered one, and inherits the first crash's acknowledged set;
* composed IDs name the continuation's states, and ``crashlab repro`` finds
  them;
* a SUT that loses data shows it at the second crash; safe SUTs hold;
* recovery-crash records SQLite's hot-journal rollback and DHL's recovery
  writes, and their crash states are checked;
* checking again gives the same IDs and verdicts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import Recordings, crashlab

from harness.check.check import CheckOptions, check_run, options_for
from harness.check.multicrash import Composite, compose, resolve
from harness.check.repro import locate, reproduce
from harness.rundir import RunDir
from harness.states import Options
from harness.sweep.matrix import DHL_INSERT, MULTI, Cell
from harness.sweep.sweep import record_cell

pytestmark = pytest.mark.needs_fuse
SMALL = "insert:txns=5,ops=3,tables=2,warmup=50,seed=1"
RUNS = {
    "sqlite-delete-extra": (MULTI, "ext4"),
    "sqlite-off": (SMALL, "ext4"),
    "dhl-cc-raw": (DHL_INSERT, "raw"),
}


@pytest.fixture(scope="module")
def runs(recorded: Recordings, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    """The module's own copies of shared runs: a multicrash or recovery-crash
    check records its continuations into the run folder (and this module's
    tests reuse them, as a resumed check does)."""
    root = tmp_path_factory.mktemp("mc")
    return {sut: recorded.copy(root / sut, sut, wl, fs) for sut, (wl, fs) in RUNS.items()}


def _check(run: RunDir, kind: str, out: Path, **comp: Any) -> dict[str, Any]:  # noqa: ANN401
    base = CheckOptions(states=Options(), jobs=2, composite=Composite(backend="fuse", **comp))
    return check_run(run, options_for(kind, base), out)


def _states(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "states.jsonl").read_text().splitlines()]


def test_continuation_starts_after_the_recovered_transaction(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = runs["dhl-cc-raw"]
    result = _check(run, "multicrash", tmp_path / "mc")
    mc = result["multicrash"]
    assert mc["first"]["continued"] == 3 and mc["first"]["distinct"] >= 3
    for c in mc["continuations"]:
        nested = RunDir(run.path / "multicrash" / c["state"])
        meta = nested.meta().to_json()
        assert meta["continues"]["state"] == c["state"]
        assert meta["continues_at"] == c["recovered_txn"] + 1 == c["from_txn"]
        assert meta["image"]["path"] == str(nested.path / "base.img")
        begins = [int(m.split(":")[1]) for m in meta["marks"] if m.startswith("txn-begin:")]
        assert begins == list(range(c["from_txn"], 11))  # no transaction ran twice
    states = _states(tmp_path / "mc")
    assert len(states) == result["states"]["checked"] > 0
    firsts = {c["state"]: c for c in mc["continuations"]}
    for s in states:
        first = s["id"].split("/")[0]
        assert (
            s["acked"]
            >= json.loads((run.path / "multicrash" / first / "meta.json").read_text())["continues"][
                "acked"
            ]
        )
        assert first in firsts
    assert result["violations"] == []


def test_composed_ids_resolve_and_repro(runs: dict[str, RunDir], tmp_path: Path) -> None:
    run = runs["dhl-cc-raw"]
    _check(run, "multicrash", tmp_path / "mc")
    sid = _states(tmp_path / "mc")[-1]["id"]
    nested, plain = resolve(run, sid)
    assert nested.path.parent.name == "multicrash" and "/" not in plain
    assert compose("multicrash", nested.path.name, plain) == sid
    p = crashlab("repro", str(run.path), sid)
    assert p.returncode == 0, p.stdout + p.stderr
    # the library: the continuation's state with the verdicts the check gave it
    target = locate(run.path, sid)
    assert target.run.path == nested.path and target.state_id == plain
    (tmp_path / "r").mkdir()
    r = reproduce(target, tmp_path / "r")
    assert {v.invariant: v.status for v in r.verdicts} == _states(tmp_path / "mc")[-1]["v"]
    # the first crash: with the SUT's own restart after it, as run.jsonl judged it
    first = sid.split("/")[0]
    (tmp_path / "f").mkdir()
    r = reproduce(locate(run.path, first), tmp_path / "f")
    agree = [
        json.loads(x)["v"]
        for x in (tmp_path / "mc" / "run.jsonl").read_text().splitlines()
        if json.loads(x)["id"] == first
    ]
    assert [{v.invariant: v.status} for v in r.verdicts if v.invariant == "REC-AGREE"] == agree
    bad = crashlab("repro", str(run.path), "e99.p0/e1.p0")
    assert bad.returncode == 2 and "no multicrash continuation" in bad.stderr


def test_a_lossy_sut_shows_it_at_the_second_crash(runs: dict[str, RunDir], tmp_path: Path) -> None:
    result = _check(runs["sqlite-off"], "multicrash", tmp_path / "off")
    fails = {k: v["fail"] for k, v in result["verdicts"].items() if v["fail"]}
    assert fails.get("DB-ATOMIC", 0) > 0
    assert all("/" in v["state"] for v in result["violations"])


def test_safe_suts_hold_after_two_crashes(runs: dict[str, RunDir], tmp_path: Path) -> None:
    for sut in ("sqlite-delete-extra", "dhl-cc-raw"):
        result = _check(runs[sut], "multicrash", tmp_path / sut)
        assert result["states"]["checked"] > 100
        assert result["violations"] == [], (sut, result["violations"][:2])


def test_recovery_crash_records_the_recovery_writes(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = runs["sqlite-delete-extra"]
    result = _check(run, "recovery-crash", tmp_path / "rc")
    assert result["violations"] == []
    conts = result["multicrash"]["continuations"]
    assert conts and all(c["from_txn"] == 11 for c in conts)  # no transaction: recovery only
    hot = 0
    for c in conts:
        nested = RunDir(run.path / "recovery-crash" / c["state"])
        meta = nested.meta().to_json()
        assert not any(m.startswith("txn-begin:") for m in meta["marks"])
        # an in-flight first crash leaves a hot journal: its rollback writes
        # the database file and deletes the journal, on the recorded device
        hot += meta["continues"]["begun"] > meta["continues"]["acked"]
        assert meta["log"]["writes"] > 0
    assert hot > 0
    assert all("/recovery/" in s["id"] for s in _states(tmp_path / "rc"))
    dhl = _check(runs["dhl-cc-raw"], "recovery-crash", tmp_path / "dhl-rc")
    assert dhl["states"]["checked"] > 0 and dhl["violations"] == []


def test_checking_again_gives_the_same_states(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """The first crashes chosen are a function of the run; a check resumed
    on the recorded continuations gives the same states and verdicts (a new
    recording of a continuation is not bit-identical: the kernel stamps
    times)."""
    run = runs["dhl-cc-raw"]
    a = _check(run, "multicrash", tmp_path / "a")
    b = check_run(
        run,
        options_for(
            "multicrash",
            CheckOptions(states=Options(), jobs=1, composite=Composite(backend="fuse")),
        ),
        tmp_path / "b",
        resume=True,
    )
    assert [s["id"] for s in _states(tmp_path / "a")] == [s["id"] for s in _states(tmp_path / "b")]
    assert a["verdicts"] == b["verdicts"]
    shutil.rmtree(run.path / "multicrash")
    c = _check(run, "multicrash", tmp_path / "c")
    pick = [(x["state"], x["from_txn"]) for x in a["multicrash"]["continuations"]]
    assert pick == [(x["state"], x["from_txn"]) for x in c["multicrash"]["continuations"]]


def test_a_continuation_of_an_ext4_dhl_run_reads_its_base_through_its_own_map(
    tmp_path: Path,
) -> None:
    """A continuation's base is a crash image whose database file is shorter
    than the run's final file: a block of the final map can hold data the
    base's file does not own yet (written, its extent not committed).  Read
    through the final map, it looked like a committed TID and the trace
    checks failed a correct engine (DHL-T2, CC-NEXT); read through the
    base's own map, every continuation holds."""
    wl = "update:txns=4,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
    run = record_cell(Cell("dhl-cc", wl, "ext4"), tmp_path / "run", "fuse", False)
    opts = options_for(
        "multicrash",
        CheckOptions(
            states=Options(),
            jobs=1,
            crashsafe_sample=1,
            composite=Composite(then="prefix", max_first=3),
        ),
    )
    result = check_run(run, opts, tmp_path / "out")
    assert result["states"]["checked"] > 50
    assert result["violations"] == [], result["violations"][:2]
    assert result["verdicts"]["DHL-T2"]["pass"] >= 3  # every continuation's trace judged
