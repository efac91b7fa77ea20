"""The crash-state sweep end to end on the fuse backend with ext4: real
recordings, every prefix and reorder state recovered with e2fsprogs and
checked with real SQLite.

* known-safe SUTs give zero violations;
* sqlite-off breaks atomicity, sqlite-delete-full loses an acknowledged
  transaction (harness/record/NOTES.md), and the expectations say so;
* checking is deterministic (any number of workers) and resumable;
* the sweep's exit code follows the expectations; bad options exit 2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import Recordings

from harness.check.check import CheckOptions, check_run
from harness.rundir import STATES_NAME, RunDir
from harness.states import Options
from harness.sweep.matrix import MULTI, SINGLE, Cell
from harness.sweep.sweep import SweepOptions, record_cell, run_sweep

pytestmark = pytest.mark.needs_fuse
CRASHLAB = Path(sys.executable).with_name("crashlab")


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    """One shared recording per SUT (read-only: checks go into tmp_path)."""
    return recorded.many(
        {
            "sqlite-wal-full": MULTI,
            "sqlite-delete-extra": MULTI,
            "sqlite-off": MULTI,
            "sqlite-delete-full": SINGLE,
        }
    )


def check(run: RunDir, strategy: str, out: Path, **kw: Any) -> dict[str, Any]:  # noqa: ANN401
    opts = CheckOptions(states=Options(strategy=strategy), jobs=kw.pop("jobs", 2))
    return check_run(run, opts, out, **kw)


def fails(result: dict[str, Any]) -> dict[str, int]:
    return {k: v["fail"] for k, v in result["verdicts"].items() if v["fail"]}


@pytest.mark.parametrize("sut", ["sqlite-wal-full", "sqlite-delete-extra"])
@pytest.mark.parametrize("strategy", ["prefix", "reorder"])
def test_safe_suts_have_no_violations(
    runs: dict[str, RunDir], sut: str, strategy: str, tmp_path: Path
) -> None:
    result = check(runs[sut], strategy, tmp_path)
    assert result["states"]["checked"] >= 30
    assert fails(result) == {}
    # every invariant was judged (not skipped) on every state
    for inv in ("FS-RECOVER", "DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"):
        assert result["verdicts"][inv]["pass"] == result["states"]["checked"], inv
    # coverage counts what the strategy visited (prefix: n+1 kept sets per epoch)
    cov = result["coverage"]
    epochs = cov["epochs"]
    assert cov["kept_sets_checked"] == sum(e["kept_checked"] for e in epochs) > 0
    if strategy == "prefix":
        assert all(e["kept_checked"] == e["writes"] + 1 for e in epochs)
    elif all(e["writes"] <= 10 for e in epochs):
        assert cov["fraction"] == 1.0


def test_sqlite_off_breaks_atomicity(runs: dict[str, RunDir], tmp_path: Path) -> None:
    result = check(runs["sqlite-off"], "reorder", tmp_path)
    assert fails(result).get("DB-ATOMIC", 0) > 0
    v = next(v for v in result["violations"] if v["invariant"] == "DB-ATOMIC")
    assert "matches no oracle state" in v["explanation"]
    assert v["repro"] == f"crashlab repro {runs['sqlite-off'].path} {v['state']}"
    assert v["category"] == "atomicity"


def test_delete_full_loses_an_acknowledged_commit(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """harness/record/NOTES.md: at txn-ack the -journal may still exist on disk
    (the unlink is not directory-synced); recovery rolls the acknowledged
    transaction back."""
    result = check(runs["sqlite-delete-full"], "prefix", tmp_path)
    assert set(fails(result)) == {"DB-DURABLE"}
    v = result["violations"][0]
    assert v["actual"] == v["acked"] - 1
    assert "acknowledged commit was lost" in v["explanation"]


def test_check_is_deterministic_for_any_worker_count(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    a = check(runs["sqlite-off"], "reorder", tmp_path / "a", jobs=1)
    b = check(runs["sqlite-off"], "reorder", tmp_path / "b", jobs=2)
    states_a, states_b = (tmp_path / d / STATES_NAME for d in "ab")
    assert states_a.read_bytes() == states_b.read_bytes()
    a.pop("timing"), b.pop("timing")
    assert a == b


def test_interrupted_check_resumes_to_the_same_result(
    runs: dict[str, RunDir], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work_parent = tmp_path / "work"
    work_parent.mkdir()
    monkeypatch.setenv("CRASHLAB_TMPDIR", str(work_parent))
    ref = check(runs["sqlite-off"], "reorder", tmp_path / "ref")
    out = tmp_path / "int"
    calls = 0

    def interrupt(generated: int, checked: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check(runs["sqlite-off"], "reorder", out, on_progress=interrupt)
    assert not (out / "result.json").exists()
    partial = (out / STATES_NAME).read_bytes()
    assert 0 < partial.count(b"\n") < ref["states"]["checked"]
    with open(out / STATES_NAME, "ab") as f:  # a torn last line, as a crash leaves
        f.write(b'{"id": "e9.p')
    resumed = check(runs["sqlite-off"], "reorder", out, resume=True)
    assert resumed["timing"]["resumed_from"] == partial.count(b"\n")
    ref.pop("timing"), resumed.pop("timing")
    assert resumed == ref | {"run": resumed["run"]}
    assert (out / "result.json").read_text() == (tmp_path / "ref" / "result.json").read_text()
    assert list(work_parent.iterdir()) == []  # the interrupted check left no work folder


def test_sweep_expectations_decide_the_exit_code(runs: dict[str, RunDir], tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    # Reuse the module's recordings: a sweep with --resume keeps complete runs.
    for sut in ("sqlite-wal-full", "sqlite-delete-full"):
        cell_dir = out / "runs" / Cell(sut, MULTI if sut == "sqlite-wal-full" else SINGLE).name
        shutil.copytree(runs[sut].path, cell_dir)
    held = [
        Cell("sqlite-wal-full", MULTI, strategies=("prefix",)),
        Cell(
            "sqlite-delete-full", SINGLE, strategies=("prefix",), must_violate_any=("DB-DURABLE",)
        ),
    ]
    summary, code = run_sweep("t", held, out, SweepOptions(backend="fuse", jobs=2), resume=True)
    assert code == 0 and summary["ok"]
    junit = (out / "junit.xml").read_text()
    assert 'tests="2" failures="0"' in junit
    lines = (out / "violations.jsonl").read_text().splitlines()
    assert lines and all(json.loads(x)["invariant"] == "DB-DURABLE" for x in lines)

    # An unsafe SUT that shows nothing breaks its expectation: exit code 1.
    broken = [
        Cell("sqlite-wal-full", MULTI, strategies=("prefix",), must_violate_any=("DB-ATOMIC",))
    ]
    summary, code = run_sweep("t", broken, out, SweepOptions(backend="fuse", jobs=2), resume=True)
    assert code == 1 and not summary["ok"]
    assert "found none" in summary["cells"][0]["expectation"]["broken"][0]
    assert 'failures="1"' in (out / "junit.xml").read_text()


def test_resumed_sweep_gives_the_same_summary(runs: dict[str, RunDir], tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    cell = Cell(
        "sqlite-off", MULTI, strategies=("prefix", "reorder"), must_violate_any=("DB-ATOMIC",)
    )
    shutil.copytree(runs["sqlite-off"].path, out / "runs" / cell.name)
    first, _ = run_sweep("t", [cell], out, SweepOptions(backend="fuse", jobs=2), resume=True)
    text = (out / "summary.json").read_text()
    # Interrupt-like damage: one check lost its result and half its states.
    check_dirs = sorted((out / "runs" / cell.name / "check").iterdir())
    (check_dirs[-1] / "result.json").unlink()
    states = check_dirs[-1] / STATES_NAME
    lines = states.read_bytes().splitlines(keepends=True)
    states.write_bytes(b"".join(lines[: len(lines) // 2]))
    (out / "summary.json").unlink()
    second, _ = run_sweep("t", [cell], out, SweepOptions(backend="fuse", jobs=2), resume=True)
    assert second == first
    assert (out / "summary.json").read_text() == text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "--matrix", "nope"], "unknown matrix 'nope'"),
        (["sweep", "--shard", "3/2"], "need 1 <= i <= N"),
        (["sweep", "--shard", "x"], "expected i/N"),
        (["check", "/nonexistent-run"], "does not exist"),
        (["check", "/tmp", "--strategy", "prefix"], "not a run directory"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    p = subprocess.run([str(CRASHLAB), *args], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr


@pytest.mark.parametrize("fs", ["xfs", "btrfs"])
def test_xfs_and_btrfs_states_recover_by_mount(fs: str, tmp_path: Path, private_tmp: Path) -> None:
    """xfs/btrfs replay their logs only in the kernel: each state is
    recovered by a loop mount (root), which leaves nothing behind (the
    private_tmp fixture holds that no loop device, mount or process refers
    to this test's working folders afterwards)."""
    run = record_cell(
        Cell("sqlite-wal-full", "insert:txns=4,ops=3,tables=3,warmup=100", fs),
        tmp_path / "run",
        "fuse",
        False,
    )
    result = check(run, "prefix", tmp_path / "check")
    assert result["states"]["checked"] >= 20
    assert fails(result) == {}
    assert result["verdicts"]["FS-RECOVER"]["pass"] == result["states"]["checked"]


def test_dhl_run_level_checks_are_wired(tmp_path: Path) -> None:
    """A DHL check also judges the run as a whole: the trace invariants once,
    REC-CRASHSAFE on a sample of states; NOLOG's trace fails DHL-T2 and the
    violation points at the log."""
    wl = "insert:txns=6,ops=3,tables=3,warmup=100"
    cc = record_cell(Cell("dhl-cc-raw", wl, "raw"), tmp_path / "cc", "fuse", False)
    opts = CheckOptions(states=Options(strategy="prefix"), jobs=2, crashsafe_sample=3)
    result = check_run(cc, opts, tmp_path / "cc-check")
    for inv in ("DHL-T2", "CC-NEXT"):
        assert result["verdicts"][inv] == {"pass": 1, "fail": 0, "skip": 0}, inv
    # CC-MONO: once over the trace, and on every state's recovered image
    mono = result["verdicts"]["CC-MONO"]
    assert mono["pass"] == result["states"]["checked"] + 1 and mono["fail"] == mono["skip"] == 0
    assert 0 < mono["not_exercised"] < mono["pass"]  # before the first acknowledgement
    assert result["verdicts"]["REC-CRASHSAFE"]["pass"] == 3
    run_lines = (tmp_path / "cc-check" / "run.jsonl").read_text().splitlines()
    assert json.loads(run_lines[0])["id"] == "trace" and len(run_lines) == 4
    assert result["states"]["checked"] == len(
        (tmp_path / "cc-check" / STATES_NAME).read_text().splitlines()
    )

    nolog = record_cell(Cell("dhl-nolog-raw", wl, "raw"), tmp_path / "nolog", "fuse", False)
    result = check_run(nolog, opts, tmp_path / "nolog-check")
    t2 = [v for v in result["violations"] if v["invariant"] == "DHL-T2"]
    assert t2 and t2[0]["state"] == "trace"
    assert t2[0]["repro"] == f"crashlab log show {nolog.path}"
