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
from support import CRASHLAB, ROOT, Recordings

from checkers.dhl_facts import Before
from checkers.dhl_format import read_committed, valid
from checkers.dhl_judge import judge_read
from dhl import Database
from harness.mutants import build, catalogue
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
    b = Before(fcc=7, digest="a" * 32, indep_fcc=7, indep_digest="b" * 32)
    v = judge_read(b, ["a" * 32], 0, 0)
    assert v.failed and "two readers disagree" in v.explanation


@pytest.mark.needs_fuse
def test_a_libdhl_read_rule_bug_is_caught_as_a_disagreement(
    recorded: Recordings, tmp_path: Path
) -> None:
    run = recorded("dhl-cc-raw", DHL_INSERT, "raw")
    lib = build(next(m for m in catalogue() if m.name == "dhl-read-ignores-fcc"))
    p = subprocess.run(
        [
            str(CRASHLAB),
            "check",
            str(run.path),
            "--strategy",
            "prefix",
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
            "--crashsafe-sample",
            "0",
        ],
        env={**os.environ, "DHL_LIB": str(lib / "dhl/build/libdhl.so")},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 1, p.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    reads = [v for v in result["violations"] if v["invariant"] == "DHL-READ"]
    assert reads and any("two readers disagree" in v["explanation"] for v in reads)


def test_damaged_bytes_give_an_error_never_an_exception(tmp_path: Path) -> None:
    """Torn and random pages behind a valid header: the decoder reports."""
    import random

    path = tmp_path / "db"
    with Database(path, "cc", create=True) as db:
        for k in range(200):
            db.begin()
            db.insert(0, k, b"v" * 300)
            db.commit()
    good = bytearray(path.read_bytes())
    rng = random.Random(5)
    for _ in range(300):
        img = bytearray(good)
        for _ in range(rng.randrange(1, 40)):
            at = rng.randrange(4096, len(img))  # keep page 0's magic
            img[at : at + rng.randrange(1, 600)] = rng.randbytes(rng.randrange(1, 600))
        got = read_committed(bytes(img[: len(good)]))
        assert got.error is not None or got.rows is not None


def test_a_torn_interior_record_is_an_error(tmp_path: Path) -> None:
    """The torn state the nightly sweep met: an interior record whose value
    is not 4 bytes (here: its length field zeroed)."""
    import struct

    from checkers.dhl_format import ARRAY, META0, slot, valid

    path = tmp_path / "db"
    with Database(path, "cc", create=True) as db:
        for k in range(200):
            db.begin()
            db.insert(0, k, b"v" * 300)
            db.commit()
        fcc = db.fcc
    img = bytearray(path.read_bytes())
    tids = [struct.unpack_from("<I", img, META0 + s * 20)[0] for s in range(2)]
    m = valid(*tids, fcc)
    root = struct.unpack_from("<I", img, META0 + m * 20 + 16)[0]
    page = img[root * 4096 : (root + 1) * 4096]
    s = valid(slot(page, 0).tid, slot(page, 1).tid, fcc)
    assert slot(page, s).type == 2  # interior
    (off,) = struct.unpack_from("<H", page, ARRAY + 2 * s)
    struct.pack_into("<H", img, root * 4096 + off + 8, 0)
    got = read_committed(bytes(img))
    assert got.rows is None and "interior record 0 has a 0-byte value" in (got.error or "")
