"""The mutant catalogue is consistent: every patch has an entry and every
entry a patch, every patch applies to today's sources, and every mutant's
cells are cells of the default matrix (so what `make mutants` kills, the
default sweep kills too).  `make mutants` itself (part of `make test`)
builds and runs them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.mutants import MUTANTS_DIR, catalogue, copy_for, is_python_patch, patched_files
from harness.sweep.matrix import matrix


def test_every_patch_has_an_entry_and_every_entry_a_patch() -> None:
    names = {m.name for m in catalogue()}
    patches = {p.stem for p in MUTANTS_DIR.glob("*.patch")}
    assert names == patches
    assert len(names) >= 12


@pytest.mark.parametrize("name", sorted(p.stem for p in MUTANTS_DIR.glob("*.patch")))
def test_patch_applies_to_todays_sources(name: str, tmp_path: Path) -> None:
    copy_for(MUTANTS_DIR / f"{name}.patch", tmp_path)
    p = subprocess.run(
        [
            "patch",
            "-p1",
            "--dry-run",
            "--forward",
            "--batch",
            "-i",
            str(MUTANTS_DIR / f"{name}.patch"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "offset" not in p.stdout and "fuzz" not in p.stdout, p.stdout  # refresh the patch


def test_mutant_cells_are_default_cells() -> None:
    default: dict[tuple[object, ...], set[str]] = {}
    for c in matrix("default"):  # a torn cell may sit beside its SUT's main cell
        default.setdefault((c.sut, c.workload, c.fs, c.faults), set()).update(c.strategies)
    for m in catalogue():
        for c in m.cells:
            key = (c.sut, c.workload, c.fs, c.faults)
            assert key in default, f"{m.name}: {key} is not a default cell"
            assert set(c.strategies) <= default[key], f"{m.name}: {c.strategies}"


def test_a_python_mutant_is_told_by_its_files(tmp_path: Path) -> None:
    """A patch of .py files only is a Python mutant (patched in a copy of the
    Python sources, not built); one that touches C is built."""
    py = MUTANTS_DIR / "judge-durable-forgets-last-ack.patch"
    assert patched_files(py) == ["checkers/content.py"]
    assert is_python_patch(py)
    assert not is_python_patch(MUTANTS_DIR / "dhl-sync-noop.patch")
    mixed = tmp_path / "mixed.patch"
    mixed.write_text(py.read_text() + "--- a/dhl/src/x.c\n+++ b/dhl/src/x.c\n")
    assert not is_python_patch(mixed)
    python = {m.name for m in catalogue() if m.python}
    assert python >= {"enum-reorder-drops-half-at-most", "judge-durable-forgets-last-ack"}
    assert all(m.tests or m.cells for m in catalogue() if m.python)


def test_a_mutant_killed_by_another_invariant_than_its_catalogues_survives() -> None:
    """``killed_by``: killed only by invariants the catalogue does not name,
    the mutant survives (its cell no longer reaches the bug as chosen)."""
    from harness.mutants import Mutant, _judge

    def cell(fails: dict[str, int]) -> dict[str, object]:
        verdicts = {inv: {"fail": n} for inv, n in fails.items()}
        broken = [f"{inv} failed" for inv in fails]
        exp = {"ok": not fails, "guaranteed": ["DB-OPEN", "DB-DURABLE"], "broken": broken}
        return {"sut": "xlog", "strategy": "torn", "expectation": exp, "verdicts": verdicts}

    m = Mutant("m", "a bug", (), killed_by=("DB-OPEN",))
    assert _judge(m, {"cells": [cell({"DB-OPEN": 3})]}).status == "killed"
    wrong = _judge(m, {"cells": [cell({"DB-DURABLE": 5})]})
    assert wrong.status == "survived" and "not by DB-OPEN" in wrong.detail
    assert _judge(m, {"cells": [cell({})]}).status == "survived"
    named = {m.name: m.killed_by for m in catalogue()}
    assert named["xlog-scan-skips-crc"] == ("DB-OPEN", "DB-ATOMIC")
