"""OFF_OPT and DASH (DHL thesis §IV) on real recordings: DASH holds every
promise, its broken commit order is caught, OFF_OPT writes no header page
where journal OFF does and keeps journal OFF's atomicity weakness, and the
checker opens a DASH crash state as the SUT's own open does
(workloads/README.md, "OFF_OPT and DASH").  DASH's mutants (tests/mutants/:
no directory fsync, an open that trusts the shadow) are killed by `make
mutants`, by the invariant each catalogue entry names (`killed_by`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import Recordings, crashlab

from checkers import sqlite as sqlite_checker
from harness.bench.shadow import pages_per_txn
from harness.check.check import default_window
from harness.check.worker import StateChecker
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import Enumeration, Options
from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import runner_command, spec_from_meta
from workloads.spec import parse_spec
from workloads.suts import get_sut

pytestmark = pytest.mark.needs_fuse

# MULTI, shortened: 100 warm-up rows per table so that a transaction's pages
# are written as separate bios (docs/findings.md: the sqlite-off finding)
W = "insert:txns=4,ops=3,tables=3,warmup=100,seed=1"
SUTS = ("dash", "dash-rename-first", "off-opt", "sqlite-off")
DB = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    return recorded.many(dict.fromkeys(SUTS, W))


def _check(run: RunDir, strategy: str, out: Path) -> dict:
    p = crashlab("check", str(run.path), "--strategy", strategy, "--out", str(out))
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    return json.loads((out / "result.json").read_text())


def _fails(result: dict) -> dict[str, int]:
    return {k: v["fail"] for k, v in result["verdicts"].items() if v["fail"]}


@pytest.mark.parametrize("strategy", ["prefix", "reorder"])
def test_dash_holds_every_promise(runs: dict[str, RunDir], tmp_path: Path, strategy: str) -> None:
    result = _check(runs["dash"], strategy, tmp_path / "c")
    assert _fails(result) == {}
    for inv in DB:  # every promise judged, none skipped throughout
        assert result["verdicts"][inv]["pass"] > 0, inv


def test_dash_rename_first_is_caught(runs: dict[str, RunDir], tmp_path: Path) -> None:
    fails = _fails(_check(runs["dash-rename-first"], "prefix", tmp_path / "c"))
    # the name swap is durable before the shadow's pages: an acknowledged
    # transaction lost, or a file of two transactions ago half overwritten
    assert fails.get("DB-DURABLE", 0) > 0, fails
    assert fails.get("DB-ATOMIC", 0) + fails.get("DB-OPEN", 0) > 0, fails
    assert "DB-PREFIX" not in fails


def test_off_opt_writes_no_header_page(runs: dict[str, RunDir], tmp_path: Path) -> None:
    off = pages_per_txn(runs["sqlite-off"], tmp_path / "off")
    opt = pages_per_txn(runs["off-opt"], tmp_path / "opt")
    assert sorted(off) == sorted(opt) == [1, 2, 3, 4]
    assert all(0 in pages for pages in off.values())  # the change counter, every commit
    # the same data pages; page 0 only when its content changes (a new page)
    assert all(off[k] - {0} == opt[k] - {0} for k in off)
    assert sum(0 in pages for pages in opt.values()) < len(opt)


def test_off_opt_keeps_journal_off_weakness(runs: dict[str, RunDir], tmp_path: Path) -> None:
    fails = _fails(_check(runs["off-opt"], "prefix", tmp_path / "c"))
    assert fails.get("DB-ATOMIC", 0) > 0, fails
    assert "DB-DURABLE" not in fails and "DB-PREFIX" not in fails


def test_checker_opens_what_dash_opens(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """A crash state in the middle of transaction 3: the checker's stock open
    of crashlab.db sees transactions 1-2; the SUT's own open (the DASH VFS,
    which rebuilds the shadow) continues from there to the oracle's end even
    when the shadow a crash left is garbage: it never serves the shadow."""
    run, checked = runs["dash"], tmp_path / "c"
    assert _fails(_check(run, "prefix", checked)) == {}
    states = [json.loads(x) for x in (checked / "states.jsonl").read_text().splitlines()]
    mid = [s for s in states if s["acked"] == 2 and s["begun"] == 3]
    assert mid
    state = mid[len(mid) // 2]["id"]
    out = tmp_path / "repro"
    p = crashlab("repro", str(run.path), state, "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    db, shadow = out / "files" / "crashlab.db", out / "files" / "crashlab.db-shadow"
    assert shadow.exists()
    spec = parse_spec(W)
    oracle = Oracle(spec)
    facts = sqlite_checker.examine(db)
    assert facts.digest == oracle.digests[2]
    shadow.write_bytes(b"\xa5" * shadow.stat().st_size)
    ops = tmp_path / "w.ops"
    write_opstream(spec, ops)
    cmd = runner_command(get_sut("dash"), ops, db) + ["--from-txn", "3"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert sqlite_digest(db) == oracle.digests[-1]


def test_every_prefix_state_continues_from_what_the_checker_judged(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    """In every prefix state of the dash run, the SUT restarted on the same
    files (the runner through the DASH VFS: its open is DASH's recovery)
    continues from the transaction j the checker judged the database to
    hold (stock SQLite on crashlab.db) to the oracle's end: what its open
    serves is what the checker saw, whatever the crash left in the shadow.
    (Restarting without a transaction would prove nothing: the open alone
    writes nothing the checker reads.)  Not vacuous: in some states the
    shadow a crash left differs from the database."""
    run = runs["dash"]
    meta = run.meta()
    sut, spec = spec_from_meta(meta)
    oracle = Oracle(spec)
    ops = tmp_path / "w.ops"
    write_opstream(spec, ops)
    checker = StateChecker(run, tmp_path / "c", fsck=False)
    compared = shadow_differs = 0
    try:
        with LogReader(run.log) as r:
            for state in Enumeration(r, default_window(run, Options(strategy="prefix"))):
                keep = tmp_path / "keep"
                shutil.rmtree(keep, ignore_errors=True)
                keep.mkdir()
                checker.keep = keep
                checker.check(state)
                files = keep / "files"
                db = files / str(meta.db)
                facts = sqlite_checker.examine(db) if db.exists() else None
                if facts is None or not oracle.indices(facts.digest or ""):
                    continue  # nothing acknowledged yet: the set-up is not in the file
                j = max(oracle.indices(facts.digest or ""))
                shadow = files / (str(meta.db) + "-shadow")
                shadow_differs += shadow.exists() and shadow.read_bytes() != db.read_bytes()
                cmd = runner_command(sut, ops, db) + ["--from-txn", str(j + 1)]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                assert proc.returncode == 0, (state.id, proc.stderr)
                assert sqlite_digest(db) == oracle.digests[-1], (state.id, j)
                compared += 1
    finally:
        checker.close()
    assert compared >= 20 and shadow_differs > 0, (compared, shadow_differs)
