"""Triage's groups (harness/triage/groups.py, issue 25 item 2): the role
vocabulary on the explainers' phrases; the same signatures for two
recordings of one workload; two different weaknesses of one run as two
groups; ``crashlab triage`` on a real run (table, --json, triage.json);
bad input as one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.check.check import CheckOptions, check_run
from harness.rundir import RunDir
from harness.states import Options
from harness.sweep.matrix import Cell
from harness.sweep.sweep import record_cell
from harness.triage.groups import triage
from harness.triage.roles import roles_of
from tests.support import crashlab

DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"


def checked(run: RunDir, strategy: str, out: Path) -> Path:
    """The check folder of ``strategy`` on ``run`` (written at ``out``,
    inside a private copy's check/ when ``out`` is None)."""
    check_run(run, CheckOptions(states=Options(strategy=strategy), jobs=2), out)
    return out


def private(recorded: Any, tmp_path: Path, sut: str, workload: str, fs: str = "ext4") -> RunDir:
    """A private copy of a shared recording, checked into its own check/."""
    return recorded.copy(tmp_path / sut, sut, workload, fs)


def test_roles_of_explainer_phrases() -> None:
    cases = {
        "blocks 2084-2088: crashlab.db-journal (inode 13) journal header without magic "
        "(not hot; db was 13 pages); records 1 (page 7), 2 (page 10)": (
            "sqlite-journal-header-cleared",
            "sqlite-journal-record",
        ),
        "block 1068: journal block 27: jbd2 descriptor of txn 6 (6 blocks follow)": (
            "jbd2-descriptor",
        ),
        "block 1069: journal block 28: jbd2 txn 6 copy of block 10 (directory / block 0)": (
            "jbd2-copy-directory",
        ),
        "block 1075: journal block 34: jbd2 commit block of txn 6": ("jbd2-commit",),
        "blocks 30-32: crashlab.db (inode 12) pages 1-3 (table leaf); db header: change "
        "counter 2, 13 pages": ("sqlite-db-header", "sqlite-db-page"),
        "block 77: crashlab.db-wal (inode 14) WAL frames 3 (page 2), 4 (page 5, commit: db "
        "6 pages)": ("sqlite-wal-commit-frame",),
        "DHL page 3: crash image slot TIDs 1/2 (nrec 1/1; valid slot 0); with this write "
        "slot TIDs 1/3 (nrec 1/2, commit 5 in slot 1; valid slot 1)": ("dhl-commit",),
        "block 9: unowned block (free in every view)": ("free-block",),
        "ext4 bytes 0..4096 (4 KiB block 0)": ("other",),
    }
    for phrase, want in cases.items():
        assert roles_of([phrase]) == want, phrase


def signatures(run: RunDir, folder: Path) -> dict[str, dict[str, Any]]:
    return {g.id: g.signature for g in triage(folder, per_invariant=3).groups}


def test_same_signatures_for_two_recordings(recorded: Any, tmp_path: Path) -> None:
    first = recorded("dhl-nolog-raw", DHL_INSERT, fs="raw")
    second = record_cell(
        Cell("dhl-nolog-raw", DHL_INSERT, "raw"), tmp_path / "again", "fuse", False
    )
    assert first.meta_path.read_bytes() != second.meta_path.read_bytes()  # two recordings
    sigs = []
    for i, run in enumerate((first, second)):
        folder = tmp_path / f"check{i}"
        checked(run, "prefix", folder)
        sigs.append(signatures(run, folder))
    assert len(sigs[0]) >= 2 and sigs[0] == sigs[1]
    # no number in a signature: no sector, entry, page or transaction
    # (the invariants' and jbd2's names aside)
    text = json.dumps([{k: v for k, v in s.items() if k != "invariant"} for s in sigs[0].values()])
    assert not re.search(r"\d", text.replace("jbd2", ""))
    # the same recording triaged again: the same groups, the same triage.json
    before = (tmp_path / "check0" / "triage.json").read_bytes()
    assert signatures(first, tmp_path / "check0") == sigs[0]
    assert (tmp_path / "check0" / "triage.json").read_bytes() == before


def test_two_weaknesses_of_one_run_are_two_groups(recorded: Any, tmp_path: Path) -> None:
    # sqlite-off under torn writes: no journal, so a transaction's page
    # writes cut short leave a mix of transactions (DB-ATOMIC, no write
    # lost), and a torn page write corrupts the b-tree (DB-INTEGRITY, a
    # torn database page)
    run = recorded("sqlite-off", MULTI)
    folder = checked(run, "torn", tmp_path / "torn")
    t = triage(folder, per_invariant=4)
    by_inv = {g.invariant: g for g in t.groups if g.invariant in ("DB-ATOMIC", "DB-INTEGRITY")}
    atomic, integrity = by_inv["DB-ATOMIC"], by_inv["DB-INTEGRITY"]
    assert atomic.id != integrity.id
    assert atomic.signature["lost"] == [] and atomic.witness.minimised.kind == "prefix"
    assert [w.status for w in integrity.witness.lost] == ["torn"]
    assert "sqlite-db-page" in integrity.witness.lost[0].roles
    assert "torn" in integrity.explanation and "database pages" in integrity.explanation
    for inv, c in t.counts.items():  # every failing state counted once
        grouped = sum(g.count for g in t.groups if g.invariant == inv)
        assert grouped + c["not_minimised"] == c["failing"], inv


def test_cli_table_json_and_triage_json(recorded: Any, tmp_path: Path) -> None:
    run = private(recorded, tmp_path, "dhl-nolog-raw", DHL_INSERT, "raw")
    check_run(run, CheckOptions(states=Options(strategy="prefix"), jobs=2))
    p = crashlab("triage", str(run.path), "--per-invariant", "2")
    assert p.returncode == 1, p.stderr
    (folder,) = (run.path / "check").iterdir()
    doc = json.loads((folder / "triage.json").read_text())
    assert doc["groups"] and doc["check"] == folder.name
    for g in doc["groups"]:
        assert g["id"] in p.stdout and g["repro"] in p.stdout
        assert g["repro"] == f"crashlab repro {run.path} {g['minimal']}"
    j = crashlab("triage", str(folder), "--json", "--per-invariant", "2")
    assert j.returncode == 1 and json.loads(j.stdout) == doc
    # the minimal states stay inside the check's window: each was checked
    ids = {json.loads(line)["id"] for line in (folder / "states.jsonl").open()}
    assert {g["minimal"] for g in doc["groups"]} <= ids


def bad(*args: str) -> str:
    p = crashlab("triage", *args)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("crashlab: error: ")
    return p.stderr


def test_bad_input(recorded: Any, tmp_path: Path) -> None:
    assert "no such run or check folder" in bad(str(tmp_path / "nope"))
    run = private(recorded, tmp_path, "dhl-nolog-raw", DHL_INSERT, "raw")
    assert "not checked" in bad(str(run.path))
    assert "not a run folder" in bad(str(tmp_path))
    for strategy in ("prefix", "torn"):
        check_run(run, CheckOptions(states=Options(strategy=strategy), jobs=2))
    assert "several checks" in bad(str(run.path))
    assert "no check 'x'" in bad(str(run.path), "--check", "x")
    folder = next(p for p in (run.path / "check").iterdir() if p.name.startswith("prefix"))
    tag = folder.name
    assert ">= 1" in bad(str(run.path), "--check", tag, "--per-invariant", "0")
    states = folder / "states.jsonl"
    lines = states.read_bytes().splitlines(keepends=True)
    states.write_bytes(lines[0] + b"{not json\n")
    assert "states.jsonl:2: corrupt JSON" in bad(str(run.path), "--check", tag)
    states.write_bytes(b'{"id": "e3.p1", "v": {"DB-OPEN": "fail"}, "dropped": ["x"]}\n')
    assert "dropped is not a list of log entries" in bad(str(folder))
    states.write_bytes(b'{"id": "e9999.p1", "v": {"DB-OPEN": "fail"}}\n')
    assert "no epoch 9999" in bad(str(folder))
    ident = folder / "check.json"
    recording = json.loads(ident.read_text())["recording"]
    ident.write_text(json.dumps({"options": {"window_start": 7}}))
    assert "a check of another recording" in bad(str(folder))
    ident.write_text(json.dumps({"options": {"window_start": 7}, "recording": recording}))
    assert "window mark that is not a string" in bad(str(folder))
    ident.write_text("[1, 2")
    assert "check.json: corrupt JSON" in bad(str(folder))
