"""A broken SUT is what crashlab exists for: a run whose final image cannot
be opened still gets a finished check and sweep, every output file, and
failing verdicts with their reasons — never a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support import Recordings, crashlab, resummarize

from harness.logformat import LogReader, LogWriter
from harness.rundir import RunDir
from harness.sweep.matrix import DHL_INSERT, SINGLE, Cell
from harness.sweep.sweep import SweepOptions, run_sweep

pytestmark = pytest.mark.needs_fuse


def _break_header(run: RunDir) -> None:
    """The SUT's last write of the header page (page 0) wrote garbage: every
    state after it, and the final image, has no DHL header."""
    with LogReader(run.log) as r:
        last = [e for e in r.entries() if e.nr_sectors and not e.is_discard and e.sector == 0][-1]
        size = r.sectorsize
    fd = os.open(run.log, os.O_RDWR)
    try:
        os.pwrite(fd, b"\xa5" * (last.nr_sectors * size), last.offset + size)
    finally:
        os.close(fd)


def test_check_and_sweep_finish_on_a_broken_sut(recorded: Recordings, tmp_path: Path) -> None:
    run = recorded.copy(tmp_path / "rec", "dhl-cc-raw", DHL_INSERT, "raw")
    _break_header(run)
    p = crashlab("check", str(run.path), "--strategy", "prefix", "--out", str(tmp_path / "c"))
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    result = json.loads((tmp_path / "c" / "result.json").read_text())
    assert result["verdicts"]["DHL-T2"]["fail"] == 1
    trace = [json.loads(x) for x in (tmp_path / "c" / "run.jsonl").read_text().splitlines()][0]
    assert "cannot be opened" in trace["fail"][0]["explanation"]
    assert result["verdicts"]["DB-OPEN"]["fail"] > 0

    cell = Cell("dhl-cc-raw", DHL_INSERT, "raw", ("prefix",))
    out = tmp_path / "sweep"
    shutil.copytree(run.path, out / "runs" / cell.name, ignore=shutil.ignore_patterns("check"))
    summary, code = run_sweep("t", [cell], out, SweepOptions(backend="fuse", jobs=2), resume=True)
    assert code == 1 and not summary["ok"]
    for name in ("summary.json", "violations.jsonl", "junit.xml", "report.html", "report.md"):
        assert (out / name).stat().st_size > 0, name
    assert "DB-OPEN is guaranteed but failed" in " ".join(
        summary["cells"][0]["expectation"]["broken"]
    )


def _zero_superblock_after(run: RunDir, label: str) -> None:
    """Rewrite the run's log with a write of zeros over the ext4 superblock
    (bytes 1024-2047; a 64 MiB image has one block group, so no backup)
    right after the mark ``label``: every later state's file system is gone."""
    src = run.log.with_suffix(".orig")
    run.log.rename(src)
    with LogReader(src) as r, LogWriter(run.log, r.sectorsize) as w:
        for e in r.entries():
            if e.is_mark:
                w.mark(e.label)
                if e.label == label:
                    w.write(1024 // r.sectorsize, bytes(1024))
            elif e.is_discard:
                w.discard(e.sector, e.nr_sectors)
            elif e.has_payload:
                w.write(e.sector, r.payload(e), e.flags)
            else:
                w.flush()
    src.unlink()
    resummarize(run.path)  # a log made on purpose: its summary in meta.json


def test_a_file_system_that_does_not_recover_skips_the_database_verdicts_saying_why(
    recorded: Recordings, tmp_path: Path
) -> None:
    run = recorded.copy(tmp_path / "rec", "sqlite-wal-full", SINGLE)
    _zero_superblock_after(run, "txn-ack:5")
    p = crashlab("check", str(run.path), "--strategy", "prefix", "--out", str(tmp_path / "c"))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    states = [json.loads(x) for x in (tmp_path / "c" / "states.jsonl").read_text().splitlines()]
    gone = [s for s in states if s["v"].get("FS-RECOVER") == "fail"]
    assert gone, "no state lost its file system"
    for s in gone:  # every database verdict is there, skipped with the reason
        assert set(s["v"]) == {
            "FS-RECOVER",
            "DB-OPEN",
            "DB-INTEGRITY",
            "DB-ATOMIC",
            "DB-DURABLE",
            "DB-PREFIX",
        }, s["v"]
        assert all(
            s["v"][i] == "skip" and "file system did not recover" in s["skip"][i]
            for i in s["v"]
            if i != "FS-RECOVER"
        )
    result = json.loads((tmp_path / "c" / "result.json").read_text())
    assert any("file system did not recover" in why for why in result["skips"]["DB-DURABLE"])
