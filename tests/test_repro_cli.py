"""``crashlab repro`` end to end on the fuse backend with ext4: real
recordings checked by the sweep's own code, then each violation's one-line
repro command run as written; bad input; kept artifacts; nothing leaks.
The library behind it (harness/check/repro.py) gives a state of each kind
the very verdicts the check wrote for it, and the CLI's --json is its
result."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import Recordings

from harness.check.check import CheckOptions, check_run
from harness.check.repro import locate, reproduce
from harness.faults import Fault
from harness.rundir import RunDir
from harness.states import Options
from harness.sweep.matrix import Cell
from harness.sweep.sweep import record_cell

pytestmark = pytest.mark.needs_fuse
CRASHLAB = Path(sys.executable).with_name("crashlab")
ATOMIC_WL = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"
DURABLE_WL = "insert:txns=5,ops=1,tables=1,seed=1"


@pytest.fixture(scope="module")
def checked(
    recorded: Recordings, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[RunDir, dict[str, Any]]]:
    """sqlite-delete-full and sqlite-off, recorded and checked (prefix): the
    module's own copies (a repro without --out writes into the run)."""
    root = tmp_path_factory.mktemp("repro")
    out = {}
    for sut, wl in (("sqlite-delete-full", DURABLE_WL), ("sqlite-off", ATOMIC_WL)):
        run = recorded.copy(root / sut, sut, wl)
        result = check_run(
            run, CheckOptions(states=Options(strategy="prefix"), jobs=2), root / f"{sut}-check"
        )
        out[sut] = (run, result)
    return out


def repro(cmd: str | list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    """Run a repro command line as a violation record spells it."""
    argv = shlex.split(cmd) if isinstance(cmd, str) else cmd
    assert argv[0] == "crashlab"
    return subprocess.run(
        [str(CRASHLAB), *argv[1:], *extra], capture_output=True, text=True, timeout=120
    )


def _violation(result: dict[str, Any], invariant: str) -> dict[str, Any]:
    found = [v for v in result["violations"] if v["invariant"] == invariant]
    assert found, f"no {invariant} violation: {result['verdicts']}"
    return found[0]


def test_durable_violation_reproduces(
    checked: dict[str, Any], tmp_path: Path, private_tmp: Path
) -> None:
    """(private_tmp: repro's work folder; afterwards no loop device, mount or
    process may refer to it.)"""
    _, result = checked["sqlite-delete-full"]
    v = _violation(result, "DB-DURABLE")
    p = repro(v["repro"], "--out", str(tmp_path / "out"))
    assert p.returncode == 1, p.stderr
    assert f"state {v['state']}" in p.stdout
    assert "FAIL DB-DURABLE" in p.stdout and "acknowledged commit was lost" in p.stdout
    # the leftover rollback journal that undoes the acknowledged transaction
    assert "crashlab.db-journal" in p.stdout and "HOT" in p.stdout
    rep = json.loads((tmp_path / "out" / "repro.json").read_text())
    fails = {x["invariant"] for x in rep["verdicts"] if x["status"] == "fail"}
    assert fails == {"DB-DURABLE"}
    for name in ("crash.img", "recovered.img", "files/crashlab.db"):
        assert (tmp_path / "out" / name).is_file(), name
    # the kept crash image is the state before recovery: it differs from the recovered one
    assert (tmp_path / "out" / "crash.img").read_bytes() != (
        tmp_path / "out" / "recovered.img"
    ).read_bytes()


def test_explanation_names_journal_blocks_and_journal_records(checked: dict[str, Any]) -> None:
    """Over the DB-DURABLE violations (one per epoch): the epochs' writes are
    explained as jbd2 blocks and as the rollback journal's header and
    records (database pages are named in test_atomic_violation_reproduces)."""
    _, result = checked["sqlite-delete-full"]
    text = ""
    seen: set[str] = set()
    for v in result["violations"]:
        epoch = v["state"].split(".")[0]
        if v["invariant"] != "DB-DURABLE" or epoch in seen:
            continue
        seen.add(epoch)
        p = repro(v["repro"], "--all-writes")
        assert p.returncode == 1, p.stderr
        text += p.stdout
    assert "jbd2 descriptor of txn" in text
    assert "jbd2 commit block of txn" in text or "copy of block" in text
    # the rollback journal's blocks: its header and records with their pages
    assert "crashlab.db-journal (inode" in text
    assert "journal header" in text and "(page 1)" in text


def test_atomic_violation_reproduces(checked: dict[str, Any], tmp_path: Path) -> None:
    _, result = checked["sqlite-off"]
    v = _violation(result, "DB-ATOMIC")
    p = repro(v["repro"], "--out", str(tmp_path / "o"))
    assert p.returncode == 1, p.stderr
    assert "FAIL DB-ATOMIC" in p.stdout and "matches no oracle state" in p.stdout
    # sqlite-off writes database pages in place: the kept and unwritten ones are named
    kept = [ln for ln in p.stdout.splitlines() if ln.lstrip().startswith("KEPT")]
    assert any("crashlab.db (inode" in ln and " page " in ln for ln in kept), p.stdout
    # the files are as the file system recovered them, and SQLite opens them
    con = sqlite3.connect(tmp_path / "o" / "files" / "crashlab.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


def test_passing_state_exits_zero(checked: dict[str, Any], tmp_path: Path) -> None:
    run, result = checked["sqlite-off"]
    lines = (run.path.parent / "sqlite-off-check" / "states.jsonl").read_text().splitlines()
    ok = next(json.loads(ln)["id"] for ln in lines if '"fail"' not in ln)
    p = repro(["crashlab", "repro", str(run.path), ok])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FAIL" not in p.stdout and "PASS DB-ATOMIC" in p.stdout


@pytest.mark.parametrize(
    "state_id, message",
    [
        ("e1.x", "state"),
        ("e9999.p0", "no epoch 9999"),
        ("e3.p99", "no write"),
        ("e3.k0,0", "state"),
    ],
)
def test_bad_state_ids(
    checked: dict[str, Any], state_id: str, message: str, tmp_path: Path
) -> None:
    run, _ = checked["sqlite-off"]
    p = repro(["crashlab", "repro", str(run.path), state_id, "--out", str(tmp_path / "o")])
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: error:") and message in lines[0]
    assert not (tmp_path / "o").exists()  # refused before any output folder


# state kinds, each checked over a few transactions' window
WINDOW = {"window_start": "txn-begin:4", "window_end": "txn-ack:5"}
KINDS = {
    "prefix": Options(strategy="prefix", **WINDOW),
    "reorder": Options(strategy="reorder", **WINDOW),
    "torn": Options(strategy="torn", **WINDOW),
    "corrupt": Options(strategy="prefix", faults=(Fault("corrupt"),), **WINDOW),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_reproduce_gives_the_checks_verdicts(
    checked: dict[str, Any], kind: str, tmp_path: Path
) -> None:
    """A state of each kind (a failing one where the check found one): the
    library's Repro has the verdicts the check wrote for it in
    states.jsonl, explanations and all; the CLI's --json is the Repro's
    JSON and the bytes of the repro.json it keeps."""
    run, _ = checked["sqlite-off"]
    check_run(run, CheckOptions(states=KINDS[kind], jobs=2), tmp_path / "check")
    lines = [json.loads(x) for x in (tmp_path / "check" / "states.jsonl").read_text().splitlines()]
    # a torn check also visits the reorder kept sets the budget affords: the
    # state is picked by its kind's mark in the ID, not by position
    mark = {"prefix": ".p", "reorder": ".k", "torn": ".t", "corrupt": ".c"}[kind]
    ours = [s for s in lines if mark in s["id"]]
    assert ours, kind
    line = next((s for s in reversed(ours) if "fail" in s), ours[-1])
    target = locate(run.path, line["id"])
    assert target.run.path == run.path and target.state_id == line["id"]
    (tmp_path / "lib").mkdir()
    r = reproduce(target, tmp_path / "lib")
    assert {v.invariant: v.status for v in r.verdicts} == line["v"]
    assert [v.to_json() for v in r.verdicts if v.failed] == line.get("fail", [])
    assert r.explanation.state_id == line["id"]
    p = repro(
        ["crashlab", "repro", str(run.path), line["id"], "--json", "--out", str(tmp_path / "cli")]
    )
    assert p.returncode == (1 if r.failed else 0), p.stderr
    assert json.loads(p.stdout) == json.loads(json.dumps(r.to_json()))
    assert (
        p.stdout.encode()
        == (tmp_path / "cli" / "repro.json").read_bytes()
        == (tmp_path / "lib" / "repro.json").read_bytes()
    )


def test_json_goes_without_shell(checked: dict[str, Any], tmp_path: Path) -> None:
    run, _ = checked["sqlite-off"]
    p = repro(["crashlab", "repro", str(run.path), "e3.p0", "--json", "--shell"])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("crashlab: error: --json") and len(p.stderr.splitlines()) == 1


def test_bad_runs(tmp_path: Path) -> None:
    p = repro(["crashlab", "repro", str(tmp_path / "nope"), "e1.p0"])
    assert p.returncode == 2 and "no such run directory" in p.stderr
    p = repro(["crashlab", "repro", str(tmp_path), "e1.p0"])
    assert p.returncode == 2 and "not a run directory" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_shell_without_terminal_prints_the_command(checked: dict[str, Any], tmp_path: Path) -> None:
    run, result = checked["sqlite-off"]
    v = _violation(result, "DB-ATOMIC")
    p = repro(v["repro"], "--out", str(tmp_path / "s"), "--shell")
    assert p.returncode == 1
    assert f"shell: sqlite3 {tmp_path / 's' / 'files' / 'crashlab.db'}" in p.stdout


def test_xfs_writes_are_mapped_by_xfs_db(tmp_path: Path, private_tmp: Path) -> None:
    """xfs: the recovered image is asked through xfs_db (no root for the
    explanation itself); a database write is named down to its page."""
    run = record_cell(
        Cell("sqlite-off", "insert:txns=3,ops=1,tables=1,seed=1", "xfs"),
        tmp_path / "xfs",
        "fuse",
        False,
    )
    ids = subprocess.run(
        [str(CRASHLAB), "states", str(run.path), "--strategy", "prefix"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    text = ""
    for sid in [i for i in ids if i.endswith(".p0")][-6:]:
        p = repro(["crashlab", "repro", str(run.path), sid, "--all-writes"])
        assert p.returncode in (0, 1), p.stderr
        text += p.stdout
        if "crashlab.db (inode" in text:
            break
    assert "xfs: blocks as xfs_db sees them" in text
    assert "crashlab.db (inode" in text and "page 1 (" in text
