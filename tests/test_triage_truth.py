"""Triage's ground truth (issue 25, item 4; docs/findings.md, "Triage:
ground truth"): known-unsafe SUTs come out as a few groups whose
explanation names their documented weakness, generically, from the roles
and marks around the minimal witness."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from harness.check.check import CheckOptions, check_run
from harness.faults import parse_fault
from harness.rundir import RunDir
from harness.states import Options
from harness.sweep.cell import Cell
from harness.sweep.matrixfile import load_matrix
from harness.sweep.sweep import record_cell
from harness.triage.groups import Triage, triage

MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"
pytestmark = pytest.mark.needs_fuse

SINGLE = "insert:txns=10,ops=1,tables=1,seed=1"
DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"


def triaged(run: RunDir, out: Path) -> Triage:
    """``run``'s prefix states checked into ``out``, then triaged."""
    check_run(run, CheckOptions(states=Options(strategy="prefix"), jobs=2), out)
    return triage(out, per_invariant=4)


def only(t: Triage, invariant: str, most: int) -> str:
    """The explanation of ``invariant``'s first group, after checking it
    has between 1 and ``most`` groups."""
    groups = [g for g in t.groups if g.invariant == invariant]
    assert 1 <= len(groups) <= most, [g.to_json() for g in groups]
    return groups[0].explanation


def test_delete_full_names_the_unflushed_directory_change(recorded: Any, tmp_path: Path) -> None:
    # journal=delete, sync=full: the commit is the journal's unlink, a
    # directory change that no fsync makes durable before the acknowledgement
    t = triaged(recorded.copy(tmp_path / "r", "sqlite-delete-full", SINGLE), tmp_path / "c")
    text = only(t, "DB-DURABLE", 2)
    assert "Transaction 1 was acknowledged" in text, text
    assert "a journalled directory block" in text, text
    assert "only came after the next transaction began" in text, text


def test_off_names_the_half_written_transaction(recorded: Any, tmp_path: Path) -> None:
    # journal=off: a transaction's pages are written in place, unprotected
    t = triaged(recorded.copy(tmp_path / "r", "sqlite-off", MULTI), tmp_path / "c")
    text = only(t, "DB-ATOMIC", 2)
    assert "in flight" in text and "not acknowledged" in text, text
    assert "persisted: " in text and "database pages" in text.split("persisted: ")[-1], text


def test_syncretry_names_the_swallowed_eio(tmp_path: Path) -> None:
    # fsyncgate: a failed write retried and reported as success
    cell = Cell(
        "sqlite:journal=wal,sync=full,syncretry=1",
        MULTI,
        faults=(parse_fault("eio:write,after=txn-begin:5"),),
    )
    run = record_cell(cell, tmp_path / "r", "fuse", False)
    t = triaged(run, tmp_path / "c")
    for inv in ("ERR-DURABLE", "DB-DURABLE"):
        text = only(t, inv, 2)
        assert "the device failed a write with EIO" in text, text
        assert "no transaction failed" in text, text
        assert "Transaction 5 was acknowledged" in text, text


def test_tc_opt_names_the_torn_commit_record(recorded: Any, tmp_path: Path) -> None:
    # DHL TC_OPT under sector-torn writes (TC itself holds): a torn commit
    # record, nothing written after it
    run = recorded.copy(tmp_path / "r", "dhl-tc-opt-raw", DHL_INSERT, "raw")
    check_run(run, CheckOptions(states=Options(strategy="torn"), jobs=2), tmp_path / "c")
    t = triage(tmp_path / "c", per_invariant=4)
    for inv in ("DB-ATOMIC", "DHL-READ"):
        text = only(t, inv, 2)
        assert "a DHL commit record" in text and "512-byte units missing" in text, text
        assert "the power failed while it was being written" in text, text


def test_no_dir_fsync_with_its_checker_given_again(tmp_path: Path) -> None:
    # a user checker's invariant: minimised with the checker given again
    # (never one read from the folder), the repro command runs it too
    (cell,) = [
        dataclasses.replace(c, strategies=("prefix",))
        for c in load_matrix(ROOT / "workloads/examples/atomic-update/crashlab.toml")
        if c.sut == "no-dir-fsync"
    ]
    run = record_cell(cell, tmp_path / "r", "fuse", False)
    out = tmp_path / "c"
    opts = CheckOptions(states=Options(strategy="prefix"), jobs=2, checkers=cell.all_checkers)
    check_run(run, opts, out)
    assert triage(out, per_invariant=2).groups == []  # without it: not minimised
    t = triage(out, per_invariant=2, checkers=cell.all_checkers)
    text = only(t, "USER:no-dir-fsync", 2)
    assert "was acknowledged" in text and "a journalled directory block" in text, text
    assert f"--checker {shlex.quote(cell.all_checkers[0].spec)}" in t.groups[0].repro


def test_a_large_check_written_with_out(recorded: Any, tmp_path: Path) -> None:
    # about 2,000 failing states (crashlab bench --only triage): the
    # check's result.json lists them, more than a MiB
    run = recorded("dhl-nolog-raw", DHL_INSERT, fs="raw")
    out = tmp_path / "c"
    check_run(run, CheckOptions(states=Options(strategy="reorder"), jobs=2), out)
    assert (out / "result.json").stat().st_size > 1 << 20
    t = triage(out, per_invariant=2)
    assert 1 <= len({g.invariant for g in t.groups}) <= len(t.counts)
    assert sum(c["failing"] for c in t.counts.values()) > 2000
