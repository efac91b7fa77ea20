"""CORRUPT-DETECT: built to fail and to hold.  On verdicts built for each
case, and on real databases the runner wrote (SQLite, plain and through the
checksum VFS) with one bit of a table page flipped: plain SQLite reads the
flipped bit as data (CORRUPT-DETECT fails), the checksum VFS reports it
(DB-OPEN fails, CORRUPT-DETECT holds)."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import pytest

from checkers import sqlite as sqlite_checker
from checkers.detect import judge_detect
from checkers.verdict import failed, passed, skipped
from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import run_workload
from workloads.spec import parse_spec
from workloads.suts import get_sut
from workloads.vfs import CKSUM_VFS

SPEC = parse_spec("insert:txns=4,ops=3,tables=3,warmup=40,seed=1")


def test_reported_damage_holds() -> None:
    for bad in (
        [failed("DB-OPEN", "disk I/O error")],
        [passed("DB-OPEN"), failed("DB-INTEGRITY", "malformed")],
    ):
        v = judge_detect(bad, "corrupt: ...", touched=True)
        assert v.status == "pass" and v.exercised and "reported" in v.explanation


def test_damage_read_as_data_fails() -> None:
    for inv in ("DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"):
        vs = [passed("DB-OPEN"), passed("DB-INTEGRITY"), failed(inv, "wrong content")]
        v = judge_detect(vs, "corrupt: ...", touched=True)
        assert v.status == "fail" and inv in v.explanation


def test_untouched_or_unchanged_is_not_exercised() -> None:
    clean = [
        passed("DB-OPEN"),
        passed("DB-INTEGRITY"),
        passed("DB-ATOMIC"),
        passed("DB-DURABLE"),
        passed("DB-PREFIX"),
    ]
    assert not judge_detect(clean, "x", touched=False).exercised
    v = judge_detect(clean, "x", touched=True)
    assert v.status == "pass" and not v.exercised
    assert judge_detect([skipped("DB-ATOMIC", "?")], "x", True).status == "skip"


def _page_checksums_valid(db: Path) -> bool:
    """Every page's last 8 bytes hold the checksum of the rest, computed
    from the page format's definition (workloads/runner/cksumvfs.h), not
    from crashlab's C."""
    data = db.read_bytes()
    size = struct.unpack(">H", data[16:18])[0]
    for off in range(0, len(data), size):
        page = data[off : off + size]
        s1 = s2 = 0
        for i in range(0, size - 8, 8):
            w0, w1 = struct.unpack("<II", page[i : i + 8])
            s1 = (s1 + w0 + s2) & 0xFFFFFFFF
            s2 = (s2 + w1 + s1) & 0xFFFFFFFF
        if page[-8:] != struct.pack("<II", s1, s2):
            return False
    return True


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("detect")
    ops = write_opstream(SPEC, d / "w.ops")
    out = {}
    for name in ("sqlite:journal=delete,sync=full", "sqlite:journal=delete,sync=full,cksum=1"):
        db = d / f"{len(out)}.db"
        p = run_workload(get_sut(name), ops, db)
        assert p.returncode == 0, p.stderr
        out[name] = db
    return out


def test_the_runner_writes_the_checksum_format(dbs: dict[str, Path]) -> None:
    plain, cks = dbs.values()
    assert plain.read_bytes()[20] == 0 and cks.read_bytes()[20] == 8
    assert _page_checksums_valid(cks) and not _page_checksums_valid(plain)


def _flip_a_value_bit(db: Path, out: Path, reserve: int) -> None:
    """One bit inside the last row's value of the database's last table
    leaf page (its cell content ends just before the reserved bytes)."""
    data = bytearray(db.read_bytes())
    size = struct.unpack(">H", data[16:18])[0]
    leaf = max(off for off in range(size, len(data), size) if data[off] == 0x0D)
    data[leaf + size - reserve - 20] ^= 0x04
    out.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "name,detected",
    [("sqlite:journal=delete,sync=full", False), ("sqlite:journal=delete,sync=full,cksum=1", True)],
)
def test_a_flipped_bit_read_as_data_or_reported(
    dbs: dict[str, Path], tmp_path: Path, name: str, detected: bool
) -> None:
    sut = get_sut(name)
    oracle = Oracle(SPEC)
    db = tmp_path / "flipped.db"
    _flip_a_value_bit(dbs[name], db, 8 if sut.vfs else 0)
    facts = sqlite_checker.examine(db, vfs=sut.vfs)
    verdicts = sqlite_checker.judge(facts, oracle, SPEC.txns, SPEC.txns)
    v = judge_detect(verdicts, "corrupt: one bit", touched=True)
    status = {x.invariant: x.status for x in verdicts}
    if detected:
        assert status["DB-OPEN"] == "fail" and "disk I/O error" in str(facts.open_error)
        assert v.status == "pass" and v.exercised
        # the same file opened without the checksum VFS reads without error
        assert sqlite_checker.examine(db).open_error is None
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            sqlite_digest(db, CKSUM_VFS)
    else:
        assert status["DB-OPEN"] == "pass" and status["DB-ATOMIC"] == "fail"
        assert v.status == "fail"
