"""State faults on real recorded runs (fuse backend; SQLite on ext4, DHL on
the raw device), checked through `crashlab check --fault`:

* corrupt: plain SQLite returns flipped bits as data (CORRUPT-DETECT fails),
  SQLite through the checksum VFS reports every one it reads (it holds);
* misdirect: neither detects a valid page at the wrong place;
* lost-flush: acknowledged transactions are lost (DB-DURABLE) on SQLite WAL
  and rollback journal and on DHL, and nothing unissued appears;
* the checksum VFS keeps every promise under plain crashes, WAL included;
* `crashlab repro` explains the fault; a device fault is refused; the state
  faults a run's meta.json lists are applied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import Recordings, crashlab

from harness.faults import parse_faults
from harness.rundir import RunDir
from harness.sweep.expectations import evaluate
from harness.sweep.matrix import MULTI, Cell

pytestmark = [pytest.mark.needs_fuse, pytest.mark.timeout(900)]
DHL_WL = "insert:txns=6,ops=6,tables=3,size=400,warmup=20,seed=1"
PLAIN, CKSUM = "sqlite-delete-extra", "sqlite:journal=delete,sync=extra,cksum=1"
WAL, WAL_CKSUM = "sqlite-wal-full", "sqlite:journal=wal,sync=full,cksum=1"


@pytest.fixture(scope="module")
def runs(recorded: Recordings, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    """The module's own copies of shared runs: checks and repros write into
    the run folder (RUN/check/..., RUN/repro/...)."""
    root = tmp_path_factory.mktemp("statefaults")
    out = {s: recorded.copy(root / s, s, MULTI) for s in (PLAIN, CKSUM, WAL, WAL_CKSUM)}
    return out | {"dhl-cc-raw": recorded.copy(root / "dhl-cc-raw", "dhl-cc-raw", DHL_WL, "raw")}


_CHECKED: dict[Path, dict] = {}  # type: ignore[type-arg]  # result.json as untyped JSON


def check(run: RunDir, *args: str, strategy: str = "prefix") -> dict:  # type: ignore[type-arg]  # result.json as untyped JSON
    """``crashlab check`` of ``run`` into RUN/check/<strategy>-<args>; its
    result.json, read back (not checked again) when a test of this process
    has made that very check (the runs are the module's copies)."""
    out = run.path / "check" / f"{strategy}-{'-'.join(args).replace('/', '_')}"
    if out in _CHECKED:
        return _CHECKED[out]
    # --force: a second check into one folder stays legal (the cache above
    # makes it rare)
    p = crashlab(
        "check",
        str(run.path),
        "--strategy",
        strategy,
        "-j",
        "2",
        "--no-progress",
        "--out",
        str(out),
        "--force",
        *args,
    )
    assert p.returncode in (0, 1), p.stderr
    _CHECKED[out] = json.loads((out / "result.json").read_text())
    return _CHECKED[out]


def fails(result: dict, inv: str) -> int:  # type: ignore[type-arg]  # result.json as untyped JSON
    return result["verdicts"].get(inv, {}).get("fail", 0)


def exercised_passes(result: dict, inv: str) -> int:  # type: ignore[type-arg]  # result.json as untyped JSON
    c = result["verdicts"].get(inv, {})
    return c.get("pass", 0) - c.get("not_exercised", 0)


def held(
    run: RunDir,
    sut: str,
    result: dict,
    faults: tuple[str, ...],  # type: ignore[type-arg]  # result.json as untyped JSON
    must: tuple[str, ...] = (),
) -> bool:
    cell = Cell(sut, MULTI, "ext4", ("prefix",), must, faults=parse_faults(faults))
    return evaluate(
        cell.expectation("prefix"),
        result["verdicts"],
        result["states"]["checked"],
        result.get("skips"),
    ).ok


def test_corrupt_plain_sqlite_fails_detection_the_checksum_vfs_holds(runs) -> None:
    plain = check(runs[PLAIN], "--fault", "corrupt")
    cks = check(runs[CKSUM], "--fault", "corrupt")
    assert plain["faults"] == cks["faults"] == ["corrupt"]
    assert plain["states"]["checked"] == cks["states"]["checked"] > 100
    assert fails(plain, "CORRUPT-DETECT") > 10
    assert all(v["state"].count(".c") == 1 for v in plain["violations"])
    silent = [v for v in plain["violations"] if v["invariant"] == "CORRUPT-DETECT"]
    assert any("DB-ATOMIC failed" in v["explanation"] for v in silent)
    assert fails(cks, "CORRUPT-DETECT") == 0
    assert exercised_passes(cks, "CORRUPT-DETECT") > 10  # detected: opening failed
    assert fails(cks, "DB-OPEN") == exercised_passes(cks, "CORRUPT-DETECT")
    assert held(runs[PLAIN], PLAIN, plain, ("corrupt",), ("CORRUPT-DETECT",))
    assert held(runs[CKSUM], CKSUM, cks, ("corrupt",))
    # the expectation would catch a checksum VFS that stopped detecting
    assert not held(runs[CKSUM], CKSUM, plain, ("corrupt",))


def test_misdirect_is_detected_by_neither(runs) -> None:
    for sut in (PLAIN, CKSUM):
        r = check(runs[sut], "--fault", "misdirect")
        assert fails(r, "CORRUPT-DETECT") > 0, sut
        assert all(".m" in v["state"] for v in r["violations"])


def test_lost_flush_loses_acknowledged_transactions(runs) -> None:
    for sut in (WAL, PLAIN, "dhl-cc-raw"):
        r = check(runs[sut], "--fault", "lost-flush")
        assert fails(r, "DB-DURABLE") > 0, sut
        assert fails(r, "DB-PREFIX") == 0, sut
        ids = {v["state"] for v in r["violations"]}
        assert ids and all(i.split(".")[0].count("-") == 1 for i in ids), sut  # eA-B
    lost = next(v for v in r["violations"] if v["invariant"] == "DB-DURABLE")
    p = crashlab("repro", str(runs["dhl-cc-raw"].path), lost["state"])
    assert p.returncode == 1, p.stderr
    assert "lost flush: the FLUSH at entry" in p.stdout and "FAIL DB-DURABLE" in p.stdout


def test_the_checksum_vfs_keeps_every_promise_under_crashes(runs) -> None:
    for sut in (CKSUM, WAL_CKSUM):
        r = check(runs[sut])
        assert r["states"]["checked"] > 50
        assert not any(c["fail"] for c in r["verdicts"].values()), (sut, r["verdicts"])
        assert held(runs[sut], sut, r, ())


def test_repro_explains_a_corrupted_state(runs) -> None:
    plain = check(runs[PLAIN], "--fault", "corrupt")
    v = next(v for v in plain["violations"] if v["invariant"] == "CORRUPT-DETECT")
    p = crashlab("repro", str(runs[PLAIN].path), v["state"])
    assert p.returncode == 1, p.stderr
    assert "corrupt: 1 bit(s) of device sector" in p.stdout
    assert "the sector belongs to:" in p.stdout and "crashlab.db" in p.stdout
    assert "FAIL CORRUPT-DETECT" in p.stdout


def test_check_refuses_a_device_fault(runs) -> None:
    p = crashlab("check", str(runs[PLAIN].path), "--fault", "eio:write", "--no-progress")
    assert p.returncode == 2
    line = p.stderr.strip().splitlines()
    assert len(line) == 1 and "crashlab record --fault" in line[0]


def test_faults_in_meta_json_are_applied(runs, tmp_path: Path) -> None:
    """A run recorded with faults (meta.json ``faults``: what `crashlab
    record --fault` writes) is checked with its state faults on every
    state; the device fault among them was the recording's business."""
    copy = tmp_path / "run"
    shutil.copytree(runs[PLAIN].path, copy, ignore=shutil.ignore_patterns("check"))
    meta = json.loads((copy / "meta.json").read_text())
    meta["faults"] = ["eio:write,nth=3", "corrupt,seed=7"]
    (copy / "meta.json").write_text(json.dumps(meta))
    r = check(RunDir(copy), "--max-states", "20")
    assert r["faults"] == ["corrupt,seed=7"]
    with open(copy / "check" / "prefix---max-states-20" / "states.jsonl") as f:
        assert all(".c" in json.loads(line)["id"] for line in f)


@pytest.mark.parametrize("kind", ["corrupt", "misdirect"])
def test_a_fault_aimed_at_the_wal_loses_durability_never_atomicity(runs, kind: str) -> None:
    """file=wal puts the damage in WAL frames: recovery stops at the damaged
    frame, so acknowledged transactions after it are lost (DB-DURABLE, in
    more than twice the states the same fault aimed at the database file
    costs: there only the checkpoints' writes can be hit) and none is kept
    in part (the cell's promises hold)."""
    # a budget's sample of the reorder states (~230 of ~1,300; file=wal
    # corrupt: 76 DB-DURABLE failures there, aimed at the database 0)
    budget = ("--budget", "300")
    res = check(runs[WAL], "--fault", f"{kind},file=wal", *budget, strategy="reorder")
    assert fails(res, "DB-DURABLE") > 0
    assert fails(res, "DB-ATOMIC") == fails(res, "DB-INTEGRITY") == 0
    cell = Cell(
        WAL, MULTI, "ext4", ("reorder",), ("DB-DURABLE",), faults=parse_faults(kind + ",file=wal")
    )
    assert evaluate(
        cell.expectation("reorder"), res["verdicts"], res["states"]["checked"], res.get("skips")
    ).ok
    on_db = check(runs[WAL], "--fault", kind, *budget, strategy="reorder")
    assert fails(res, "DB-DURABLE") > 2 * fails(on_db, "DB-DURABLE")


def test_a_fault_aimed_at_a_missing_wal_is_refused(runs) -> None:
    p = crashlab("check", str(runs[PLAIN].path), "--fault", "corrupt,file=wal", "--no-progress")
    assert p.returncode == 2 and "no WAL to aim at" in p.stderr
    assert p.stderr.count("\n") == 1
