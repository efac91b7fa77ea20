"""The sweep's triage per cell (harness/sweep/sweep.py, triaged.py): a
triage that fails in one cell is reported in that cell (one line) and the
sweep goes on; a resumed sweep does not triage again a check it triaged
with the same options; its record is read as hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import harness.sweep.sweep as sweep_mod
from harness.cli.verdicts import print_groups
from harness.errors import CrashlabError
from harness.sweep.matrix import Cell
from harness.sweep.sweep import SweepOptions, run_sweep
from harness.sweep.triaged import TRIAGED_NAME

pytestmark = pytest.mark.needs_fuse
DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
TRIAGE_GROUPS = sweep_mod.triage_groups
CELL = Cell("dhl-nolog-raw", DHL_INSERT, "raw", strategies=("prefix", "reorder"))


def _sweep(out: Path, resume: bool = False, triage: int = 2) -> dict[str, Any]:
    opts = SweepOptions(backend="fuse", jobs=2, triage=triage)
    return run_sweep("t", [CELL], out, opts, resume=resume)[0]


def _counting(monkeypatch: pytest.MonkeyPatch, fail: str | None = None) -> list[str]:
    """Each triage's check folder name, in order; a check of strategy
    ``fail`` raises in its triage."""
    calls: list[str] = []

    def triage_groups(check_dir: Path, *args: Any, **kw: Any) -> Any:  # noqa: ANN401
        calls.append(check_dir.name.split("-")[0])
        if fail is not None and check_dir.name.startswith(fail + "-"):
            raise RuntimeError("the triage broke\nwith a second line")
        return TRIAGE_GROUPS(check_dir, *args, **kw)

    monkeypatch.setattr(sweep_mod, "triage_groups", triage_groups)
    return calls


def test_a_failing_triage_stays_in_its_cell_and_resume_does_not_redo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    calls = _counting(monkeypatch, fail="prefix")
    summary = _sweep(out)
    assert calls == ["prefix", "reorder"]
    prefix, reorder = summary["cells"]
    assert prefix["triage_error"] == "RuntimeError: the triage broke" and "groups" not in prefix
    assert reorder["groups"] and "triage_error" not in reorder
    rows = [json.loads(x) for x in (out / "violations.jsonl").open()]
    assert {r["group"] for r in rows if r["strategy"] == "prefix"} == {None}
    assert {r["group"] for r in rows if r["strategy"] == "reorder"} - {None}
    print_groups(summary["cells"])
    said = capsys.readouterr().out
    assert "prefix: triage failed: RuntimeError: the triage broke\n" in said

    # resumed: the check triaged before is read back, the failed one triaged
    calls = _counting(monkeypatch)
    again = _sweep(out, resume=True)
    assert calls == ["prefix"]
    assert again["cells"][1]["groups"] == reorder["groups"]
    assert again["cells"][0]["groups"] and "triage_error" not in again["cells"][0]
    assert (out / "violations.jsonl").read_text().count('"group": null') < len(rows)
    # nothing to redo, then another sample: triaged again
    calls = _counting(monkeypatch)
    assert _sweep(out, resume=True) == again and calls == []
    _sweep(out, resume=True, triage=3)
    assert calls == ["prefix", "reorder"]


def test_a_hostile_triage_record_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    _sweep(out)
    (record,) = [p for p in (out / "runs").rglob(TRIAGED_NAME) if "reorder-" in str(p)]
    doc = json.loads(record.read_text())
    doc["group_of"][0][2] = "0123456789"  # a group ID not among its groups
    record.write_text(json.dumps(doc))
    with pytest.raises(CrashlabError, match="not one of its groups") as e:
        _sweep(out, resume=True)
    assert "\n" not in str(e.value) and str(record) in str(e.value)
