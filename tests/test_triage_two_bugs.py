"""Two different injected bugs in one recorded run come out as two groups
(issue 25, "Must show"): workloads/examples/two-bugs/app.sh, recorded
with ``crashlab record -- CMD``, has a rename without the directory's
fsync (config) and an index made durable before the data it counts
(ledger); a checker per file.  Triage gives one group per bug, each
naming its own file (its checker's words on the minimal state) and the
writes that mattered."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import ROOT, crashlab

from harness.sweep.matrixfile import load_matrix

APP = ROOT / "workloads" / "examples" / "two-bugs"


def _checker(name: str) -> str:
    return f"{name}={sys.executable} {APP}/check_{name}.py"


@pytest.mark.needs_fuse
def test_two_bugs_in_one_run_are_two_groups(tmp_path: Path) -> None:
    run = tmp_path / "run"
    rec = crashlab("record", "--backend", "fuse", "--out", str(run), "--", "sh", f"{APP}/app.sh")
    assert rec.returncode == 0, rec.stderr
    checkers = ["--checker", _checker("config"), "--checker", _checker("ledger")]
    p = crashlab(
        "check", str(run), "--strategy", "prefix", "--jobs", "2", "--triage-sample", "4", *checkers
    )
    assert p.returncode == 1, p.stderr  # both checkers' promises broken
    (folder,) = (run / "check").iterdir()
    doc = json.loads((folder / "triage.json").read_text())
    by_inv: dict[str, list[dict]] = {}
    for g in doc["groups"]:
        by_inv.setdefault(g["invariant"], []).append(g)
    assert set(by_inv) == {"USER:config", "USER:ledger"}
    (config,), (ledger,) = by_inv["USER:config"], by_inv["USER:ledger"]
    assert config["id"] != ledger["id"] and config["signature"] != ledger["signature"]
    # each names its own file: what its checker said of the minimal state
    assert config["verdict"].startswith("config holds version"), config["verdict"]
    assert ledger["verdict"].startswith("ledger.idx counts"), ledger["verdict"]
    assert "ledger" not in config["verdict"] and "config" not in ledger["verdict"]
    # bug 1: right after an acknowledgement, the rename's directory block
    # still only in the file system's pending journal transaction
    assert config["kind"] == "prefix" and config["lost"] == []
    assert "acknowledged" in config["explanation"]
    assert "journalled directory block" in config["explanation"]
    # bug 2: the index's journal commit persisted, the transaction in flight
    assert ledger["kind"] == "prefix" and ledger["after"]["roles"] == ["jbd2-commit"]
    assert "in flight" in ledger["explanation"]
    # the repro command of each runs its own checker again
    assert "--checker 'config=" in config["repro"] and "ledger" not in config["repro"]
    assert "--checker 'ledger=" in ledger["repro"]
    for inv, c in doc["invariants"].items():  # every failing state counted once
        grouped = sum(g["count"] for g in by_inv[inv])
        assert grouped + c["not_minimised"] == c["failing"], inv
    # the check printed both groups; crashlab triage says the checkers' words
    assert config["id"] in p.stdout and ledger["id"] in p.stdout
    t = crashlab("triage", str(folder), "--per-invariant", "4", *checkers)
    assert t.returncode == 1, t.stderr
    assert f"USER:config says: {config['verdict']}" in t.stdout
    assert json.loads((folder / "triage.json").read_text()) == doc


def test_the_matrix_file_of_the_two_bugs_loads() -> None:
    (cell,) = load_matrix(APP / "crashlab.toml")
    assert {c.invariant for c in cell.all_checkers} == {"USER:config", "USER:ledger"}
    assert cell.must_violate_any == ("USER:config", "USER:ledger")
