"""A SUT's knowledge has one home, the SUT registry (issue 28, item 5).

Every built-in cell expects what it expected before the SUTs' weaknesses
moved into the SUT registry (issue 28, item 5): for each cell of every
built-in matrix, of every matrix file under harness/sweep/matrices/ and
workloads/examples/, and of the mutant catalogue, the invariants it
guarantees and the ones of which it must violate one, per strategy, in
order (the order is written into result.json), equal to
tests/data/matrix_expectations.json.

That file was written on main before the move.  A change meant to change
what a cell expects (its floors too: harness/sweep/floors.py) regenerates
it and shows the difference in review:

    .venv/bin/python tests/test_matrix_golden.py > tests/data/matrix_expectations.json

And no module of harness/sweep/ keys anything by a SUT's name (a dict
key, a subscript or a comparison with a registry or grammar name): what a
SUT promises or lacks is asked of the SUT.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.errors import CrashlabError  # noqa: E402
from harness.mutants import catalogue  # noqa: E402
from harness.sweep.floors import SUFFIX as FLOORS  # noqa: E402
from harness.sweep.matrix import MATRICES, matrix  # noqa: E402
from harness.sweep.matrixfile import MATRICES_DIR, load_matrix  # noqa: E402
from workloads.suts import SUTS, get_sut  # noqa: E402

GOLDEN = Path(__file__).parent / "data" / "matrix_expectations.json"


def sources() -> dict[str, list]:
    """Name -> cells: the built-in matrices, the other matrix files, the
    examples' and the mutants' cells."""
    out: dict[str, list] = {name: matrix(name) for name in MATRICES}
    for path in sorted(MATRICES_DIR.glob("*.toml")):
        if path.stem not in MATRICES and not path.name.endswith(FLOORS):
            out[f"matrices/{path.name}"] = load_matrix(path)
    for path in sorted((ROOT / "workloads" / "examples").glob("*/crashlab.toml")):
        out[f"examples/{path.parent.name}"] = load_matrix(path)
    out["mutants"] = [c for m in catalogue() for c in m.cells]
    return out


def expectations() -> dict[str, list[dict]]:
    """Per source, per cell (in order): its name and, per strategy, the
    guaranteed and the must-violate-any invariants, and its coverage floor
    where it has one."""
    out = {}
    for name, cells in sources().items():
        rows = []
        for cell in cells:
            per = {}
            for strategy in cell.strategies:
                e = cell.expectation(strategy)
                per[strategy] = {
                    "guaranteed": list(e.guaranteed),
                    "must_violate_any": list(e.must_violate_any),
                }
                if e.floor is not None:  # harness/sweep/floors.py
                    per[strategy]["floor"] = dataclasses.asdict(e.floor)
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


# "xlog" names a SUT and its engine: a table per engine may use it
ENGINES = {s.engine for s in SUTS.values()}


def _is_sut(node: ast.AST | None) -> bool:
    """``node`` is a string constant that names a SUT (not an engine)."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return False
    if node.value in ENGINES:
        return False
    try:
        get_sut(node.value)
    except CrashlabError:
        return False
    return True


def sut_keys(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each SUT name used as a key in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys: list[ast.AST | None] = list(node.keys)
        elif isinstance(node, ast.Subscript):
            keys = [node.slice]
        elif isinstance(node, ast.Compare):
            keys = [node.left, *node.comparators]
        else:
            continue
        found += [(k.lineno, k.value) for k in keys if isinstance(k, ast.Constant) and _is_sut(k)]
    return found


def test_no_sut_name_is_a_key_in_the_sweep():
    found = {
        f"{p.name}:{line}: {name}"
        for p in sorted((ROOT / "harness" / "sweep").glob("*.py"))
        for line, name in sut_keys(ast.parse(p.read_text()))
    }
    assert found == set()


def test_the_key_finder_finds_them():
    tree = ast.parse(
        'UNSAFE = {"sqlite-off": ()}\nx = d["dhl-cc"]\n'
        'y = s == "sqlite:journal=wal,sync=full"\nz = {"MULTI": 1}'
    )
    assert sut_keys(tree) == [(1, "sqlite-off"), (2, "dhl-cc"), (3, "sqlite:journal=wal,sync=full")]


if __name__ == "__main__":
    sys.stdout.write(dump(expectations()))
