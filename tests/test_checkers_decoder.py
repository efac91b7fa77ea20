"""The independent decoder (checkers/dhl_format.py, written from FORMAT.md)
reads what libdhl reads on real images, and a disagreement between the two
readers fails DHL-READ / DHL-T1: a bug in libdhl's read rule can no longer
change the judge's view unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import CRASHLAB, ROOT, record_runs

from checkers import dhl as ck
from checkers.dhl_format import read_committed, valid
from dhl import Database
from harness.mutants import build, catalogue
from harness.record.fuse import FuseBackend
from harness.sweep.matrix import DHL_INSERT
from workloads.oracle import digest_rows


def test_read_rule() -> None:
    assert valid(3, 5, 5) == 1 and valid(3, 5, 4) == 0 and valid(0, 0, 9) == -1
    assert valid(6, 0, 5) == -1  # above the FCC: uncommitted


@pytest.mark.parametrize("mode", ["tc", "cc", "tc_opt", "cc_opt", "nolog"])
def test_both_readers_agree_on_a_database(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "db"
    with Database(path, mode, create=True, ntrees=2) as db:
        for k in range(120):
            db.begin()
            db.insert(k % 2, k, bytes([k % 251]) * 300)
            db.commit()
        want = db.digest()
    got = read_committed(path.read_bytes())
    assert got.error is None and digest_rows(got.rows or []) == want
    assert got.no_committed == []


def test_a_disagreement_fails_dhl_read() -> None:
    b = ck.Before(fcc=7, digest="a" * 32, indep_fcc=7, indep_digest="b" * 32)
    v = ck.judge_read(b, ["a" * 32], 0, 0)
    assert v.failed and "two readers disagree" in v.explanation


OK, WHY = FuseBackend.available()


@pytest.mark.root
@pytest.mark.skipif(not OK, reason=f"fuse backend: {WHY}")
def test_a_libdhl_read_rule_bug_is_caught_as_a_disagreement(tmp_path: Path) -> None:
    run = record_runs(tmp_path, {"dhl-cc-raw": DHL_INSERT}, fs="raw")["dhl-cc-raw"]
    lib = build(next(m for m in catalogue() if m.name == "dhl-read-ignores-fcc"))
    p = subprocess.run([str(CRASHLAB), "check", str(run.path), "--strategy", "prefix",
                        "--out", str(tmp_path / "out"), "--no-progress",
                        "--crashsafe-sample", "0"],
                       env={**os.environ, "DHL_LIB": str(lib / "dhl/build/libdhl.so")},
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 1, p.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    reads = [v for v in result["violations"] if v["invariant"] == "DHL-READ"]
    assert reads and any("two readers disagree" in v["explanation"] for v in reads)
