"""Every built-in cell expects what it expected before the SUTs' weaknesses
moved into the SUT registry (issue 28, item 5): for each cell of every
built-in matrix, of every matrix file under harness/sweep/matrices/ and
workloads/examples/, and of the mutant catalogue, the invariants it
guarantees and the ones of which it must violate one, per strategy, in
order (the order is written into result.json), equal to
tests/data/matrix_expectations.json.

That file was written on main before the move.  A change meant to change
what a cell expects regenerates it and shows the difference in review:

    .venv/bin/python tests/test_matrix_golden.py > tests/data/matrix_expectations.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.mutants import catalogue  # noqa: E402
from harness.sweep.matrix import MATRICES, matrix  # noqa: E402
from harness.sweep.matrixfile import MATRICES_DIR, load_matrix  # noqa: E402

GOLDEN = Path(__file__).parent / "data" / "matrix_expectations.json"


def sources() -> dict[str, list]:
    """Name -> cells: the built-in matrices, the other matrix files, the
    examples' and the mutants' cells."""
    out: dict[str, list] = {name: matrix(name) for name in MATRICES}
    for path in sorted(MATRICES_DIR.glob("*.toml")):
        if path.stem not in MATRICES:
            out[f"matrices/{path.name}"] = load_matrix(path)
    for path in sorted((ROOT / "workloads" / "examples").glob("*/crashlab.toml")):
        out[f"examples/{path.parent.name}"] = load_matrix(path)
    out["mutants"] = [c for m in catalogue() for c in m.cells]
    return out


def expectations() -> dict[str, list[dict]]:
    """Per source, per cell (in order): its name and, per strategy, the
    guaranteed and the must-violate-any invariants."""
    out = {}
    for name, cells in sources().items():
        rows = []
        for cell in cells:
            per = {}
            for strategy in cell.strategies:
                e = cell.expectation(strategy)
                per[strategy] = {"guaranteed": list(e.guaranteed),
                                 "must_violate_any": list(e.must_violate_any)}
            rows.append({"cell": cell.name, "expect": per})
        out[name] = rows
    return out


def dump(data: dict[str, list[dict]]) -> str:
    """One line per cell, so that a review shows which cells changed."""
    parts = []
    for name, rows in data.items():
        lines = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in rows)
        parts.append(f"{json.dumps(name)}: [\n{lines}\n]")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def test_every_builtin_cell_expects_what_it_did():
    want = json.loads(GOLDEN.read_text())
    got = expectations()
    assert list(got) == list(want)
    for name in want:
        assert [r["cell"] for r in got[name]] == [r["cell"] for r in want[name]], name
        for g, w in zip(got[name], want[name], strict=True):
            assert g == w, f"{name}: {w['cell']}"


if __name__ == "__main__":
    sys.stdout.write(dump(expectations()))
