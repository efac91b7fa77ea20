"""A run folder, shard or matrix file someone sends you never touches the
host (ARCHITECTURE.md, Principles: untrusted input): every reported case of
issue 24 through the real ``crashlab`` command, then a seeded sample of
damaged inputs of four kinds (tests/damage.py; ``make fuzz`` runs 500 of
each kind: CRASHLAB_FUZZ=500).

A folder inconsistent with its meta.json is refused with one error line and
exit code 2, never given a verdict; nothing gives a traceback or hangs."""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import subprocess
import time
from pathlib import Path

import pytest
from damage import KINDS, MATRIX, MEMORY_CAP, damages, run_all, table
from support import CRASHLAB, ROOT, Recordings, resummarize

from harness.logformat import DISCARD, MARK, LogReader
from harness.rundir import RunDir

pytestmark = pytest.mark.needs_fuse
SMALL = "insert:txns=5,ops=1,tables=1,seed=1"
SAMPLE = 12  # damaged inputs of each kind in `make test` (`make fuzz`: CRASHLAB_FUZZ=500)
SQL, RAW = "sqlite-delete-full", "dhl-tc-raw"


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    """Two small real recordings, SQLite on ext4 and DHL on the raw device
    (shared: each test damages its own copy)."""
    return {SQL: recorded(SQL, SMALL), RAW: recorded(RAW, SMALL, "raw")}


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real shard folder: ``sweep --shard 1/1`` of a one-cell matrix."""
    root = tmp_path_factory.mktemp("shard")
    (root / "m.toml").write_text(MATRIX)
    p = crashlab(
        "sweep",
        "--matrix",
        str(root / "m.toml"),
        "--shard",
        "1/1",
        "--jobs",
        "2",
        "--no-progress",
        "--out",
        str(root / "shard"),
    )
    assert p.returncode == 0, p.stderr
    return root / "shard"


def crashlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real command under a 2 GiB address-space cap."""
    return subprocess.run(
        ["prlimit", f"--as={MEMORY_CAP}", "--", str(CRASHLAB), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def refused(p: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2 with one ``crashlab: error:`` line holding ``words``."""
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert p.stderr.startswith("crashlab: error: ") and p.stderr.count("\n") == 1, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def copy(run: RunDir, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(run.path), str(dst)], check=True)
    return dst


def check(run: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return crashlab(
        "check", str(run), "--strategy", "prefix", "--jobs", "1", "--no-progress", "--out", str(out)
    )


def entries(log: Path) -> list[tuple[int, int, int, int]]:
    """(offset, sector, nr_sectors, flags) of every entry."""
    with LogReader(log) as r:
        return [(e.offset, e.sector, e.nr_sectors, e.flags) for e in r.entries()]


def poke(log: Path, offset: int, *values: int) -> None:
    """Overwrite consecutive u64 fields of the log from ``offset``."""
    fd = os.open(log, os.O_RDWR)
    try:
        os.pwrite(fd, struct.pack(f"<{len(values)}Q", *values), offset)
    finally:
        os.close(fd)


def edit_meta(run: Path, **changes: object) -> None:
    meta = json.loads((run / "meta.json").read_text())
    for k, v in changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    (run / "meta.json").write_text(json.dumps(meta))


# --- the reported cases ------------------------------------------------------


def test_db_outside_the_files_folder_is_refused_and_the_host_db_untouched(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    host = tmp_path / "host.db"
    with sqlite3.connect(host) as db:
        db.execute("create table precious(x)")
    before = (host.read_bytes(), host.stat().st_mtime_ns)
    for db_name in (str(host), "../../../../../../.." + str(host), "a/../../host.db"):
        run = copy(runs[SQL], tmp_path / "run")
        edit_meta(run, db=db_name)
        refused(check(run, tmp_path / "out"), "db", "leaves its folder")
        assert not (tmp_path / "out" / "result.json").exists()
        subprocess.run(["rm", "-rf", str(run), str(tmp_path / "out")], check=True)
    assert (host.read_bytes(), host.stat().st_mtime_ns) == before
    assert not any(tmp_path.glob("host.db-*"))  # no journal either


def test_merge_refuses_a_shard_whose_run_leaves_it(tmp_path: Path) -> None:
    """A shard's summary.json naming a run outside the shard: merge would
    have linked it to the same place outside --out."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "meta.json").write_text("{}")
    out = tmp_path / "a" / "merged"
    cell = {
        "sut": "x",
        "workload": "",
        "fs": "ext4",
        "strategy": "prefix",
        "run": "../src",
        "states": {"checked": 0, "folded": 0},
        "verdicts": {},
        "expectation": {"ok": True},
    }
    for i in (1, 2):
        shard = tmp_path / f"shard-{i}"
        shard.mkdir()
        (shard / "summary.json").write_text(
            json.dumps(
                {
                    "sweep": "m",
                    "ok": True,
                    "shard": {"matrix": "m", "index": i, "of": 2},
                    "cells": [cell] if i == 1 else [],
                }
            )
        )
    p = crashlab("merge", "--out", str(out), str(tmp_path / "shard-1"), str(tmp_path / "shard-2"))
    refused(p, "run", "'../src'")
    assert not (tmp_path / "a").exists()  # nothing written: not out, nor ../src beside it


def test_a_huge_discard_is_refused_before_any_work(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """A flush turned into a DISCARD of 2^40 sectors, meta.json rewritten to
    agree: the entry ends past the device, so every command refuses it
    quickly instead of growing without bound."""
    run = copy(runs[SQL], tmp_path / "run")
    flush = next(e for e in entries(run / "writes.log") if e[2] == 0 and not e[3] & MARK)
    poke(run / "writes.log", flush[0], 0, 1 << 40, DISCARD)
    resummarize(run)
    for args in (
        ["states", str(run), "--count"],
        ["replay", str(run), "--out", str(tmp_path / "img")],
        [
            "check",
            str(run),
            "--strategy",
            "prefix",
            "--no-progress",
            "--out",
            str(tmp_path / "out"),
        ],
    ):
        t0 = time.monotonic()
        refused(crashlab(*args, timeout=60), "end past the device")
        assert time.monotonic() - t0 < 30
    assert not (tmp_path / "img").exists()


def test_a_log_cut_short_with_its_count_rewritten_is_refused(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = copy(runs[SQL], tmp_path / "run")
    ents = entries(run / "writes.log")
    keep = ents[len(ents) // 3][0]  # cut at an entry: a well-formed shorter log
    os.truncate(run / "writes.log", keep)
    poke(run / "writes.log", 16, len(ents) // 3)
    refused(check(run, tmp_path / "out"), "does not agree", "nr_entries_super")
    assert not (tmp_path / "out" / "result.json").exists()


def test_a_log_without_its_marks_is_refused(runs: dict[str, RunDir], tmp_path: Path) -> None:
    run = copy(runs[SQL], tmp_path / "run")
    log = run / "writes.log"
    with LogReader(log) as r:
        s = r.sectorsize
        kept = [(e.offset, e.end_offset(s)) for e in r.entries() if not e.is_mark]
    raw = log.read_bytes()
    head = bytearray(raw[:s])
    struct.pack_into("<Q", head, 16, len(kept))
    log.write_bytes(bytes(head) + b"".join(raw[a:b] for a, b in kept))
    refused(check(run, tmp_path / "out"), "does not agree")


def test_a_write_past_the_end_of_the_device_is_refused(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = copy(runs[RAW], tmp_path / "run")  # the raw device: 1 MiB
    write = next(e for e in entries(run / "writes.log") if e[2] and not e[3] & (MARK | DISCARD))
    poke(run / "writes.log", write[0], (1 << 20) // 512)  # the first sector past the end
    refused(check(run, tmp_path / "out"), "end past the device (1048576 bytes)")


def test_marks_missing_from_meta_json_are_an_error_not_failures(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = copy(runs[SQL], tmp_path / "run")
    edit_meta(run, marks=None)
    refused(check(run, tmp_path / "out"), "marks")
    assert not (tmp_path / "out" / "result.json").exists()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_writes_log_a_directory_or_fifo_is_refused_at_once(
    runs: dict[str, RunDir], tmp_path: Path, kind: str
) -> None:
    run = copy(runs[SQL], tmp_path / "run")
    (run / "writes.log").unlink()
    if kind == "fifo":
        os.mkfifo(run / "writes.log")
    else:
        (run / "writes.log").mkdir()
    for args in (
        ["check", str(run), "--no-progress", "--out", str(tmp_path / "out")],
        ["log", "stat", str(run)],
        ["states", str(run), "--count"],
        ["repro", str(run), "e1.p0"],
    ):
        refused(crashlab(*args, timeout=30), f"is a {kind if kind != 'fifo' else 'FIFO'}")


def test_meta_json_of_the_wrong_shape_is_one_line_naming_the_key(
    runs: dict[str, RunDir], tmp_path: Path
) -> None:
    run = copy(runs[SQL], tmp_path / "run")
    meta = (run / "meta.json").read_bytes()
    for data, words in (
        (b"[1, 2]", ["is not an object"]),
        (b"\xff" + meta, ["not UTF-8"]),
        (
            meta.replace(b'"exit_status": 0', b'"exit_status": "0"'),
            ["exit_status", "is not an integer"],
        ),
        (meta.replace(b'"fs": "ext4",', b'"fs": ["ext4"],', 1), ["fs"]),
    ):
        (run / "meta.json").write_bytes(data)
        refused(check(run, tmp_path / "out"), *words)


def test_a_cell_with_no_strategies_is_refused(tmp_path: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[[cell]]\nsut = "dhl-tc-raw"\nworkload = "insert:txns=2"\nfs = "raw"\nstrategies = []\n'
    )
    p = crashlab("sweep", "--matrix", str(matrix), "--out", str(tmp_path / "out"), "--no-progress")
    refused(p, "strategies", "empty")
    assert not (tmp_path / "out").exists()


def test_numbers_out_of_range_are_usage_errors(runs: dict[str, RunDir], tmp_path: Path) -> None:
    run = str(runs[RAW].path)
    for args in (
        ["check", run, "--jobs", "-3"],
        ["check", run, "--max-states", "0"],
        ["check", run, "--checker-timeout", "nan"],
        ["check", run, "--depth", "1"],
        ["states", run, "--max-drop", "-1"],
        ["replay", run, "--limit", "-1", "--out", str(tmp_path / "i")],
    ):
        p = crashlab(*args, *(["--no-progress"] if args[0] == "check" else []))
        assert p.returncode == 2 and "Invalid value" in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "i").exists()


# --- damaged inputs, seeded --------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_inputs(runs: dict[str, RunDir], shard: Path, tmp_path: Path, kind: str) -> None:
    """SAMPLE (or CRASHLAB_FUZZ) damaged inputs of ``kind``, each through
    the real command: no traceback, no hang, every inconsistent input
    refused (exit 2, one line, no result)."""
    n = int(os.environ.get("CRASHLAB_FUZZ", SAMPLE))
    seed = int(os.environ.get("CRASHLAB_FUZZ_SEED", 1))
    folders = [runs[SQL].path, runs[RAW].path]
    devices = {runs[SQL].path: 64 << 20, runs[RAW].path: 1 << 20}
    items = list(damages(kind, n, seed, folders, devices, shard))
    t0 = time.monotonic()
    outcomes = run_all(items, tmp_path, threads=2)
    report = table(outcomes) + f"\n{kind}: {n} inputs in {time.monotonic() - t0:.1f} s"
    print("\n" + report)
    if os.environ.get("CRASHLAB_FUZZ_REPORT"):
        with open(os.environ["CRASHLAB_FUZZ_REPORT"], "a") as f:
            f.write(report + "\n")
    bad = [f"{o.damage}: {'; '.join(o.problems)}" for o in outcomes if o.problems]
    assert not bad, "\n".join(bad[:20])
