"""The creation window (states whose crash lies before ``setup-done``) is
judged by default, on real recordings:

* its states are checked and counted (result.json ``states.creation``),
  judged with nothing acknowledged (acked -1): an absent or never-written
  database passes every invariant, not exercised; a database that exists
  is judged (a formatted DHL store without its set-up passes, exercised);
* a corrupt one is not legal: DHL CC (which promises nothing under torn
  writes) whose header page tears before setup-done fails DB-OPEN there;
* an absent SQLite database file on ext4 passes, not exercised;
* ``--window-start setup-done`` keeps the old window: no creation state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.check.check import CheckOptions, check_run
from harness.rundir import RunDir
from harness.states import Options

pytestmark = pytest.mark.needs_fuse

DHL_SMALL = "insert:txns=2,ops=6,tables=3,size=400,warmup=20,seed=1"
SQL_SMALL = "insert:txns=2,ops=1,tables=1,seed=1"


def _check(run: RunDir, out: Path, **opts: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:  # noqa: ANN401
    result = check_run(run, CheckOptions(states=Options(**opts), jobs=2), out)
    lines = (out / "states.jsonl").read_text().splitlines()
    return dict(result), [json.loads(line) for line in lines]


def test_the_creation_window_is_judged(recorded: Any, tmp_path: Path) -> None:  # noqa: ANN401
    run = recorded("dhl-cc-raw", DHL_SMALL, fs="raw")
    result, recs = _check(run, tmp_path / "c", strategy="prefix")
    creation = [r for r in recs if r["acked"] == -1]
    assert creation and result["states"]["creation"] == len(creation)
    assert all(r["begun"] == 0 for r in creation) and "fail" not in json.dumps(creation)
    # the zeroed device before the format: every invariant passes, not exercised
    first = creation[0]
    assert first["id"] == "e0.p0" and set(first["ne"]) == set(first["v"])
    # the formatted store without its set-up: judged, DB-OPEN exercised
    assert any("DB-OPEN" not in r.get("ne", []) for r in creation)
    # the states after setup-done: judged as before (set-up acknowledged)
    assert min(r["acked"] for r in recs if r not in creation) == 0


def test_a_corrupt_database_in_the_creation_window_fails(recorded: Any, tmp_path: Path) -> None:  # noqa: ANN401
    run = recorded("dhl-cc-raw", DHL_SMALL, fs="raw")
    result, recs = _check(run, tmp_path / "c", strategy="torn")
    failing = [r for r in recs if r["acked"] == -1 and r["v"].get("DB-OPEN") == "fail"]
    assert failing  # a torn header page (format or set-up commit): the store does not open
    assert all(".t" in r["id"] for r in failing), failing[0]["id"]


def test_an_absent_sqlite_database_passes(recorded: Any, tmp_path: Path) -> None:  # noqa: ANN401
    run = recorded("sqlite-wal-full", SQL_SMALL)
    result, recs = _check(run, tmp_path / "c", strategy="prefix")
    assert result["states"]["creation"] > 0
    absent = [r for r in recs if r["acked"] == -1 and "DB-OPEN" in r.get("ne", [])]
    assert absent and all(r["v"]["FS-RECOVER"] == "pass" for r in absent)
    assert not result["violations"]


def test_window_start_keeps_the_old_window(recorded: Any, tmp_path: Path) -> None:  # noqa: ANN401
    run = recorded("dhl-cc-raw", DHL_SMALL, fs="raw")
    result, recs = _check(run, tmp_path / "c", strategy="prefix", window_start="setup-done")
    assert "creation" not in result["states"] and min(r["acked"] for r in recs) == 0
    assert result["options"]["window_start"] == "setup-done"
