"""DHL checkers on real recorded runs (fuse backend, raw device and ext4):
the logging SUTs hold every invariant on every prefix and reorder state of
a workload with splits; dhl-nolog fails DB-ATOMIC, DHL-T1 and DHL-T2 and
the trace names the writes; torn page writes: TC holds, the others do not
(checkers/README.md states the finding)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import crashlab

from harness.check.runlevel import trace_verdicts
from harness.logformat import LogReader
from harness.rundir import RunDir

pytestmark = [pytest.mark.needs_fuse, pytest.mark.timeout(600)]
WORKLOAD = "insert:txns=4,ops=20,tables=2,warmup=100"


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    parent = Path("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    d = parent / f"crashlab-dhlruns-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def record(scratch: Path, sut: str, fs: str = "raw") -> Path:
    out = scratch / f"{sut}-{fs}"
    if not out.exists():
        args = ["record", "--sut", sut, "--workload", WORKLOAD, "--out", str(out)]
        if fs == "raw":
            args += ["--fs", "raw"]
        p = crashlab(*args)
        assert p.returncode == 0, p.stderr
    return out


def check(run: Path, strategy: str, *extra: str) -> dict:  # type: ignore[type-arg]  # result.json as untyped JSON
    out = run / f"check-{strategy}-{'-'.join(extra)}"
    p = crashlab(
        "check", str(run), "--strategy", strategy, "--no-progress", "--out", str(out), *extra
    )
    assert (out / "result.json").exists(), p.stderr
    return json.loads((out / "result.json").read_text())


def failing(result: dict) -> dict[str, int]:  # type: ignore[type-arg]  # result.json as untyped JSON
    return {k: v["fail"] for k, v in result["verdicts"].items() if v.get("fail")}


def pages_per_txn(run: Path) -> int:
    """Most distinct pages one transaction wrote (raw device: 4 KiB pages)."""
    most, cur = 0, set()
    with LogReader(RunDir(run).log) as r:
        for e in r.entries():
            if e.is_mark and e.label and e.label.startswith("txn-begin:"):
                cur = set()
            elif e.has_payload:
                cur |= set(
                    range(
                        e.sector * r.sectorsize // 4096,
                        (e.sector + e.nr_sectors) * r.sectorsize // 4096,
                    )
                )
            elif e.is_mark and e.label and e.label.startswith("txn-ack:"):
                most = max(most, len(cur))
    return most


@pytest.mark.parametrize("sut", ["dhl-tc-raw", "dhl-cc-raw", "dhl-tc-opt-raw", "dhl-cc-opt-raw"])
def test_logging_modes_hold_everything(scratch: Path, sut: str) -> None:
    run = record(scratch, sut)
    assert pages_per_txn(run) >= 3  # splits: a transaction touched at least three pages
    for strategy in ("prefix", "reorder"):
        res = check(run, strategy)
        assert res["states"]["checked"] > 10
        assert not failing(res), (strategy, res["violations"][:3])
        for inv in (
            "DHL-T1",
            "DHL-READ",
            "DHL-INV",
            "CC-COUNT",
            "REC-IDEMPOTENT",
            "DB-ATOMIC",
            "DB-DURABLE",
        ):
            assert res["verdicts"][inv]["pass"] > 0, inv
        rb = res["verdicts"]["CC-ROLLBACK"]
        exercised = rb["pass"] - rb.get("not_exercised", 0)
        if "cc" in sut and strategy == "reorder":
            assert exercised > 0  # short commit records really were rolled back
        elif "tc" in sut:
            assert exercised == 0  # the commit record follows a sync: never short
    vs = trace_verdicts(RunDir(run))
    assert [v.status for v in vs] == ["pass"] * 3, [v.explanation for v in vs]


def test_cc_on_ext4_holds_everything(scratch: Path) -> None:
    run = record(scratch, "dhl-cc", "ext4")
    res = check(run, "prefix")
    assert not failing(res), res["violations"][:3]
    vs = trace_verdicts(RunDir(run))  # pages mapped through the file's ext4 extents
    assert [v.status for v in vs] == ["pass"] * 3 and vs[0].actual > 10


def test_nolog_fails_atomicity_and_theorems(scratch: Path) -> None:
    run = record(scratch, "dhl-nolog-raw")
    res = check(run, "prefix")
    f = failing(res)
    assert f.get("DB-ATOMIC") and f.get("DHL-T1"), f
    t2 = next(v for v in trace_verdicts(RunDir(run)) if v.invariant == "DHL-T2")
    assert t2.failed and "the only committed one" in t2.explanation
    assert t2.implicated and all(x.startswith("entry ") for x in t2.implicated)


def test_torn_page_writes(scratch: Path) -> None:
    """Sector-granular tearing (512 B): TC holds; counting commit accepts a
    page whose first sector (slot headers) persisted but not the rest."""
    tc = check(record(scratch, "dhl-tc-raw"), "torn")
    assert not failing(tc), tc["violations"][:3]
    cc = check(record(scratch, "dhl-cc-raw"), "torn")
    f = failing(cc)
    assert f.get("DB-OPEN") or f.get("DB-ATOMIC"), f
    assert not {"DHL-T1", "DHL-INV", "CC-COUNT", "CC-ROLLBACK"} & set(f), f
