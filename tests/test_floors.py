"""Coverage floors (harness/sweep/floors.py): a cell that checks fewer
states than its floor, or visits a smaller share of its kept sets, breaks
with one sentence; the floors file is read as hostile input; the default
matrix has a floor for every strategy of every cell, and no stale ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import crashlab

from harness.check.multicrash import Composite
from harness.errors import CrashlabError
from harness.states import Options
from harness.sweep.expectations import BROKEN, HELD, Expectation, Floor, evaluate
from harness.sweep.floors import (
    MARGIN,
    dump_floors,
    floors_of,
    floors_path,
    load_floors,
)
from harness.sweep.matrix import matrix
from harness.sweep.matrixfile import MATRICES_DIR, load_matrix
from harness.sweep.sweep import SweepOptions, floors_apply

VERDICTS = {"DB-ATOMIC": {"pass": 100, "fail": 0}}


def test_a_cell_below_its_floor_breaks_with_one_sentence() -> None:
    exp = Expectation(("DB-ATOMIC",), floor=Floor(states=100, kept_fraction=0.5))
    assert evaluate(exp, VERDICTS, 100, kept_fraction=0.5).status == HELD
    few = evaluate(exp, {"DB-ATOMIC": {"pass": 99}}, 99, kept_fraction=0.5)
    assert few.status == BROKEN
    assert few.broken == ["coverage: 99 states checked, below the floor of 100"]
    thin = evaluate(exp, VERDICTS, 100, kept_fraction=0.25)
    assert thin.broken == ["coverage: 25% of the kept sets visited, below the floor of 50%"]
    # no floor, or no coverage to compare (a composite check): nothing more
    assert evaluate(Expectation(("DB-ATOMIC",)), VERDICTS, 1).status == HELD
    assert evaluate(exp, VERDICTS, 100).status == HELD


def test_floors_are_the_fewest_of_several_sweeps_with_a_margin(tmp_path: Path) -> None:
    def summary(prefix: int, fraction: float, multicrash: int) -> dict:
        return {
            "cells": [
                {
                    "run": "runs/a--ext4",
                    "strategy": "prefix",
                    "states": {"checked": prefix},
                    "coverage": {"fraction": fraction},
                },
                {
                    "run": "runs/a--ext4",
                    "strategy": "multicrash",
                    "states": {"checked": multicrash},
                    "coverage": {},
                },
            ]
        }

    floors = floors_of([summary(110, 0.125, 40), summary(150, 0.25, 30)])
    assert floors == {
        "a--ext4": {
            "prefix": Floor(int(110 * MARGIN), 0.1),
            "multicrash": Floor(int(30 * MARGIN), None),
        }
    }
    path = tmp_path / "m.floors.toml"
    path.write_text(dump_floors(floors, "a test"))
    assert load_floors(path) == floors


@pytest.mark.parametrize(
    "text, why",
    [
        ('["c"]\nprefix = { states = -1 }\n', "states must be an integer >= 0"),
        ('["c"]\nprefix = { states = "9" }\n', "states must be an integer >= 0"),
        ('["c"]\nprefix = { states = 9, kept_fraction = 2.0 }\n', "kept_fraction must be"),
        ('["c"]\nprefix = { states = 9, more = 1 }\n', "expected { states = N"),
        ('["c"]\nprefix = 3\n', "expected { states = N"),
        ("c = 3\n", "c: expected a table"),
        ("[c\n", "not a floors file"),
    ],
)
def test_a_bad_floors_file_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "m.floors.toml"
    path.write_text(text)
    with pytest.raises(CrashlabError) as e:
        load_floors(path)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_a_matrix_file_takes_the_floors_beside_it(tmp_path: Path) -> None:
    m = tmp_path / "mine.toml"
    m.write_text('[[cell]]\nsut = "sqlite-wal-full"\nworkload = "MULTI"\n')
    (cell,) = load_matrix(m)
    assert cell.expectation("prefix").floor is None
    floors_path(m).write_text(f'["{cell.name}"]\nreorder = {{ states = 7 }}\n')
    (cell,) = load_matrix(m)
    assert cell.expectation("reorder").floor == Floor(7)
    assert cell.expectation("prefix").floor is None


def test_every_default_cell_has_its_floors_and_none_is_stale() -> None:
    """Regenerate after changing the default cells or their states:
    ``make floors SWEEP="<default sweeps>"`` (harness/sweep/floors.py)."""
    floors = load_floors(floors_path(MATRICES_DIR / "default.toml"))
    cells = {c.name: c for c in matrix("default")}
    assert sorted(floors) == sorted(cells), "cells without floors, or floors of no cell"
    for name, cell in cells.items():
        assert sorted(floors[name]) == sorted(cell.strategies), name
        assert all(cell.expectation(s).floor is not None for s in cell.strategies)


def test_the_command_writes_floors_and_refuses_a_bad_summary(tmp_path: Path) -> None:
    sweep, mine = tmp_path / "sweep", str(tmp_path / "m.toml")
    sweep.mkdir()
    p = crashlab("floors", str(sweep), "--matrix", mine)
    assert p.returncode == 2 and p.stderr == f"crashlab: error: {mine}: no such matrix file\n"
    Path(mine).write_text('[[cell]]\nsut = "sqlite-wal-full"\nworkload = "MULTI"\n')
    p = crashlab("floors", str(sweep), "--matrix", mine)  # no summary.json
    assert p.returncode == 2 and "cannot read a summary" in p.stderr
    (sweep / "summary.json").write_text(json.dumps({"cells": [{"run": "runs/x"}]}))
    p = crashlab("floors", str(sweep), "--matrix", mine)
    assert p.returncode == 2
    assert p.stderr.startswith("crashlab: error: summary.json: a cell without its states")
    assert p.stderr.count("\n") == 1
    assert not (tmp_path / "m.floors.toml").exists()
    cell = {"run": "runs/x", "strategy": "prefix", "states": {"checked": 10}}
    (sweep / "summary.json").write_text(json.dumps({"cells": [cell]}))
    assert crashlab("floors", str(sweep), "--matrix", mine).returncode == 0
    assert load_floors(tmp_path / "m.floors.toml") == {"x": {"prefix": Floor(8)}}
    other = tmp_path / "other"
    other.mkdir()
    cell["states"] = {"checked": 5}
    (other / "summary.json").write_text(json.dumps({"cells": [cell]}))
    assert crashlab("floors", str(sweep), str(other), "--matrix", mine).returncode == 0
    assert load_floors(tmp_path / "m.floors.toml") == {"x": {"prefix": Floor(4)}}
    p = crashlab("floors", str(sweep), "--matrix", "nightly")  # no matrix file: no floors
    assert p.returncode == 2 and "has no matrix file" in p.stderr


def test_floors_hold_only_a_sweep_with_the_default_enumeration() -> None:
    # the floors were measured by a default sweep: a narrowed one is not held to them
    assert floors_apply(SweepOptions(jobs=2, backend="fuse", composite=Composite(backend="fuse")))
    for narrowed in (
        SweepOptions(max_states=10),
        SweepOptions(composite=Composite(max_first=1)),
        SweepOptions(composite=Composite(depth=3)),
        SweepOptions(composite=Composite(then="prefix")),
        SweepOptions(base_states=Options(max_exhaustive=4)),
    ):
        assert not floors_apply(narrowed), narrowed
