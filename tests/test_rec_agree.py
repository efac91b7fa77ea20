"""REC-AGREE (checkers/agree.py): the database the checkers judge is the one
the SUT's own restart opens.  The runner's digest of what its open sees (C:
workloads/runner/contentdigest.h, libdhl's dhl_digest) equals the oracle's
(Python) for every engine and VFS; on a real recording the composite check
passes REC-AGREE for the built SUT and fails it, alone, for a mutant whose
restart reads another database than the checkers recover."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import CRASHLAB, ROOT, Recordings

from checkers.agree import judge_agree
from harness.env import RUNNER
from harness.mutants import TARGETS, build, catalogue
from harness.rundir import RunDir
from workloads.generate import write_opstream
from workloads.oracle import Oracle
from workloads.run import runner_command, runner_path
from workloads.spec import parse_spec
from workloads.suts import get_sut

W = "insert:txns=4,ops=3,tables=3,warmup=100,seed=1"
MUTANT = "dash-open-last-unit-fresh"


def test_judge_compares_the_restart_with_the_checkers_content() -> None:
    oracle = ["a" * 32, "b" * 32, "c" * 32]
    ok = judge_agree({"opened": {"digest": "b" * 32}}, oracle, 1)
    assert (ok.status, ok.actual) == ("pass", 1)
    older = judge_agree({"opened": {"digest": "a" * 32}}, oracle, 1)
    assert older.status == "fail" and "transaction 0" in older.explanation
    mixed = judge_agree({"opened": {"digest": "d" * 32}}, oracle, 2)
    assert mixed.status == "fail" and "no oracle state" in mixed.explanation
    unread = judge_agree({"opened": {"error": "malformed"}}, oracle, 2)
    assert unread.status == "fail" and "malformed" in unread.explanation
    assert judge_agree({}, oracle, 0).status == "skip"
    assert judge_agree({}, oracle, 0, 1).status == "fail"  # the restart died before reporting
    assert judge_agree({"opened": {"digest": "a" * 32}}, oracle, 0, 1).status == "pass"
    assert judge_agree(None, oracle, 0).status == "skip"


@pytest.mark.parametrize(
    "sut",
    [
        "sqlite-delete-extra",
        "sqlite-wal-full",
        "dash",
        "waldio",
        "selective",
        "xlog",
        "dhl-cc",
        "dhl-cc-opt",
    ],
)
def test_runner_digest_of_its_open_equals_the_oracles(sut: str, tmp_path: Path) -> None:
    """Cross-test of the C and the Python digest: the runner (its ASan+UBSan
    build) restarted past the end (--from-txn) reports, through the SUT's
    own open, the oracle's digest of the last state (random bytes in every
    value)."""
    s, spec = get_sut(sut), parse_spec(W)
    ops = write_opstream(spec, tmp_path / "w.ops")
    db, stats, asan = tmp_path / "db", tmp_path / "stats.json", runner_path(asan=True)
    subprocess.run(runner_command(s, ops, db, marks=tmp_path / "m", runner=asan), check=True)
    again = runner_command(s, ops, db, marks=tmp_path / "m", stats=stats, runner=asan) + [
        "--from-txn",
        "99",
    ]
    subprocess.run(again, check=True)
    assert json.loads(stats.read_text())["opened"] == {"digest": Oracle(spec).final}


def test_a_first_run_reports_no_restart(tmp_path: Path) -> None:
    s, spec = get_sut("sqlite-wal-full"), parse_spec(W)
    ops = write_opstream(spec, tmp_path / "w.ops")
    stats = tmp_path / "stats.json"
    subprocess.run(
        runner_command(s, ops, tmp_path / "db", marks=tmp_path / "m", stats=stats), check=True
    )
    assert "opened" not in json.loads(stats.read_text())


def test_a_restart_that_fails_later_still_reports_what_it_opened(tmp_path: Path) -> None:
    """Transaction 1 again on the finished database fails (its keys exist):
    the report of the open was written before, and stays."""
    s, spec = get_sut("sqlite-delete-extra"), parse_spec(W)
    ops = write_opstream(spec, tmp_path / "w.ops")
    db, stats = tmp_path / "db", tmp_path / "stats.json"
    subprocess.run(runner_command(s, ops, db, marks=tmp_path / "m"), check=True)
    again = runner_command(s, ops, db, marks=tmp_path / "m", stats=stats) + ["--from-txn", "1"]
    assert subprocess.run(again, capture_output=True).returncode == 1
    assert json.loads(stats.read_text()) == {"opened": {"digest": Oracle(spec).final}}


def _agree(run: RunDir, out: Path, env: dict[str, str]) -> dict:
    """``crashlab check --strategy recovery-crash`` of ``run`` under
    ``env``: its result.json and its REC-AGREE records."""
    p = subprocess.run(
        [
            str(CRASHLAB),
            "check",
            str(run.path),
            "--strategy",
            "recovery-crash",
            "--then",
            "prefix",
            "--max-first",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    result = json.loads((out / "result.json").read_text())
    lines = [json.loads(x) for x in (out / "run.jsonl").read_text().splitlines()]
    result["agree"] = [r for r in lines if "REC-AGREE" in r["v"]]
    return result


@pytest.mark.needs_fuse
def test_rec_agree_fails_alone_when_the_restart_opens_another_database(
    recorded: Recordings, tmp_path: Path
) -> None:
    """DASH's recovery is its open, which the checkers do not run: with the
    mutant's runner the restart reads a unit from the shadow, while every
    crash state of the continuation still passes (recovery-crash runs no
    transaction), so only REC-AGREE sees it.  The built runner agrees."""
    run = recorded.copy(tmp_path / "run", "dash", W)  # recovery-crash writes into the run
    built = _agree(run, tmp_path / "built", dict(os.environ))
    assert len(built["agree"]) == 2
    assert all(r["v"] == {"REC-AGREE": "pass"} for r in built["agree"])
    assert built["violations"] == []

    mutant = build(next(m for m in catalogue() if m.name == MUTANT))
    copy = RunDir(tmp_path / "mutant-run")
    shutil.copytree(run.path, copy.path)
    shutil.rmtree(copy.path / "recovery-crash")
    bad = _agree(copy, tmp_path / "mutant", {**os.environ, RUNNER: str(mutant / TARGETS[1])})
    fails = {v["invariant"] for v in bad["violations"]}
    assert fails == {"REC-AGREE"}, bad["violations"]
    assert any(r["v"] == {"REC-AGREE": "fail"} for r in bad["agree"])
    assert all(
        r["id"] in {c["state"] for c in bad["multicrash"]["continuations"]} for r in bad["agree"]
    )
    # repro of that first crash shows the disagreement beside its own verdicts
    first = next(r["id"] for r in bad["agree"] if r["v"] == {"REC-AGREE": "fail"})
    p = subprocess.run(
        [str(CRASHLAB), "repro", str(copy.path), first],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert p.returncode == 1 and "REC-AGREE" in p.stdout, p.stdout + p.stderr
