"""Cells with state faults: the matrix file's ``faults`` key (checked, one
line per mistake), what a cell promises under each fault (derived from
workloads/fault_guarantees.py), and the nightly matrix's fault cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.faults import fault_specs, parse_faults
from harness.sweep.matrix import (
    FAULT_SUTS,
    MULTI,
    STATE_FAULTS,
    WAL_FAULT_SUT,
    WAL_FAULTS,
    Cell,
    matrix,
)
from harness.sweep.matrixfile import load_matrix
from workloads.fault_guarantees import INVARIANTS, fault_guarantees
from workloads.suts import get_sut

CKSUM = "sqlite:journal=delete,sync=extra,cksum=1"


def write(tmp_path: Path, cell: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(f'[[cell]]\nsut = "sqlite-delete-extra"\nworkload = "MULTI"\n{cell}\n')
    return p


def test_faults_key_is_parsed_canonically(tmp_path: Path) -> None:
    (cell,) = load_matrix(write(tmp_path, 'faults = ["corrupt,bits=1,seed=2+misdirect"]'))
    assert fault_specs(cell.faults) == ["corrupt,seed=2", "misdirect"]
    assert cell.state_faults == cell.faults
    assert cell.name.endswith("--corrupt-seed2-misdirect")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('faults = "corrupt"', "must be a list of strings"),
        ('faults = ["rot"]', "unknown kind 'rot'"),
        ('faults = ["corrupt", "corrupt,seed=1"]', "two corrupt faults"),
        ('faults = ["corrupt"]\nstrategies = ["multicrash"]', "not to multicrash"),
    ],
)
def test_bad_faults_are_one_line_errors(tmp_path: Path, line: str, why: str) -> None:
    with pytest.raises(CrashlabError, match=why) as e:
        load_matrix(write(tmp_path, line))
    assert "\n" not in str(e.value) and "cell 1" in str(e.value)


def promised(sut: str, faults: tuple[str, ...], fs: str = "ext4") -> tuple[str, ...]:
    return (
        Cell(sut, MULTI, fs, ("prefix",), faults=parse_faults(faults))
        .expectation("prefix")
        .guaranteed
    )


def test_promises_under_each_fault() -> None:
    assert "CORRUPT-DETECT" not in promised("sqlite-delete-extra", ("corrupt",))
    assert "CORRUPT-DETECT" in promised(CKSUM, ("corrupt",))
    # a SUT that loses acknowledged data by itself is not held to detection
    assert "CORRUPT-DETECT" not in promised("sqlite:journal=delete,sync=full,cksum=1", ("corrupt",))
    assert "CORRUPT-DETECT" not in promised(CKSUM, ("misdirect",))
    assert "CORRUPT-DETECT" not in promised(CKSUM, ("corrupt", "lost-flush"))
    assert promised("sqlite-wal-full", ("lost-flush",)) == ("DB-PREFIX",)
    assert promised(CKSUM, ("corrupt",)) == ("FS-RECOVER", "DB-PREFIX", "CORRUPT-DETECT")
    assert "FS-RECOVER" not in promised(CKSUM, ("corrupt",), "xfs")  # no block map to aim by
    dhl = Cell("dhl-cc-raw", MULTI, "raw", ("prefix",), faults=parse_faults("corrupt"))
    assert dhl.expectation("prefix").guaranteed == ("DB-PREFIX", "DHL-T2", "CC-NEXT")
    assert (
        promised("sqlite-delete-extra", ())
        == Cell("sqlite-delete-extra", MULTI).expectation("prefix").guaranteed
    )


def test_every_fault_guarantee_is_cited() -> None:
    for sut, _ in FAULT_SUTS:
        for kind in STATE_FAULTS:
            gs = fault_guarantees(get_sut(sut), kind)
            assert [g.invariant for g in gs] == list(INVARIANTS)
            assert all(g.rule and g.source for g in gs)


def test_the_nightly_matrix_has_every_state_fault_on_every_family() -> None:
    cells = [c for c in matrix("nightly") if c.state_faults]
    assert {(c.sut, tuple(fault_specs(c.faults))) for c in cells} == {
        (sut, (fault,)) for fault in STATE_FAULTS for sut, _ in FAULT_SUTS
    } | {(WAL_FAULT_SUT, (str(f),)) for f in WAL_FAULTS}
    assert all(c.strategies == ("prefix", "reorder") for c in cells)
    default = [c for c in matrix("default") if c.state_faults]
    assert [(c.sut, fault_specs(c.faults)) for c in default] == [
        ("sqlite-delete-extra", ["corrupt"]),
        (CKSUM, ["corrupt"]),
    ]


def test_faults_aimed_at_the_wal_keep_atomicity_not_durability() -> None:
    """misdirect/corrupt with file=wal: WAL recovery drops a damaged
    transaction whole (DB-ATOMIC, DB-INTEGRITY kept), loses what follows
    it (DB-DURABLE, DB-OPEN during a checkpoint: not promised); the same
    faults on the database file promise none of them; a SUT with no WAL
    promises nothing under them; two faults must aim at one file."""
    for kind in ("misdirect", "corrupt"):
        wal = Cell("sqlite-wal-full", MULTI, faults=parse_faults(f"{kind},file=wal"))
        assert wal.expectation("reorder").guaranteed == (
            "FS-RECOVER",
            "DB-INTEGRITY",
            "DB-ATOMIC",
            "DB-PREFIX",
        )
        assert wal.expectation("reorder").must_violate_any == ()
        db = Cell("sqlite-wal-full", MULTI, faults=parse_faults(kind))
        assert "DB-ATOMIC" not in db.expectation("reorder").guaranteed
        gs = fault_guarantees(get_sut("sqlite-delete-extra"), kind, "wal")
        assert [g.invariant for g in gs if g.promised] == ["DB-PREFIX"]
    with pytest.raises(CrashlabError, match="aim at different files"):
        Cell(CKSUM, MULTI, faults=parse_faults("misdirect,file=wal+corrupt")).expectation("prefix")
