"""``crashlab report SWEEP``: regenerates from the folder; bad input is one
line on stderr and exit code 2, and leaves no report behind."""

from __future__ import annotations

import json
import subprocess

import pytest
from support import crashlab
from test_report_synth import make_sweep


def one_error(p: subprocess.CompletedProcess, fragment: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crashlab: error: "), p.stderr
    assert fragment in lines[0]
    assert "Traceback" not in p.stderr


def test_report_regenerates(tmp_path):
    make_sweep(tmp_path / "s")
    p = crashlab("report", str(tmp_path / "s"), "--per-group", "2")
    assert p.returncode == 0, p.stderr
    printed = p.stdout.split()
    assert printed == [
        str(tmp_path / "s" / n)
        for n in ("report.html", "report.md", "plots/violations.png", "plots/io_cost.png")
    ]
    assert "broke an expectation" in p.stderr
    md = (tmp_path / "s" / "report.md").read_text()
    assert "weak-sut: 7 violations (first 2 shown)" in md


def test_missing_folder(tmp_path):
    one_error(crashlab("report", str(tmp_path / "nope")), "no such sweep folder")


def test_not_a_sweep_folder(tmp_path):
    one_error(crashlab("report", str(tmp_path)), "not a sweep folder (no summary.json)")
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize(
    "summary, fragment",
    [
        ("{not json", "corrupt JSON"),
        ('{"sweep": "x"}', "no cells list"),
        ('{"cells": [{"sut": "a"}]}', "cell 0 lacks workload"),
    ],
)
def test_bad_summary(tmp_path, summary, fragment):
    (tmp_path / "summary.json").write_text(summary)
    one_error(crashlab("report", str(tmp_path)), fragment)
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "report.md").exists()


def test_corrupt_violations_line(tmp_path):
    make_sweep(tmp_path / "s")
    path = tmp_path / "s" / "violations.jsonl"
    path.write_text(path.read_text() + "{truncated\n")
    one_error(crashlab("report", str(tmp_path / "s")), "violations.jsonl: line 10: corrupt JSON")


def test_missing_violations_with_failures(tmp_path):
    make_sweep(tmp_path / "s")
    (tmp_path / "s" / "violations.jsonl").unlink()
    one_error(crashlab("report", str(tmp_path / "s")), "missing, but summary.json counts failures")


def test_bad_option(tmp_path):
    make_sweep(tmp_path / "s")
    p = crashlab("report", str(tmp_path / "s"), "--per-group", "0")
    assert p.returncode == 2 and "per-group" in p.stderr


def test_summary_is_not_modified(tmp_path):
    want = make_sweep(tmp_path / "s")
    assert crashlab("report", str(tmp_path / "s")).returncode == 0
    assert json.loads((tmp_path / "s" / "summary.json").read_text()) == want["summary"]
