"""A promised invariant that no state judged is "unverified", not "held":
it fails the cell (exit 1), shows in the table, the reports and JUnit, with
the reasons it was skipped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.report.junit import write_junit
from harness.sweep.expectations import (
    BROKEN,
    HELD,
    UNVERIFIED,
    Expectation,
    evaluate,
    evaluate_result,
    exit_code,
)
from harness.sweep.expectations import Expectation as Exp
from harness.sweep.matrix import DHL_INSERT, Cell
from harness.sweep.sweep import SweepOptions, run_sweep

V = {
    "DB-ATOMIC": {"pass": 10, "fail": 0, "skip": 0},
    "DHL-T2": {"pass": 0, "fail": 0, "skip": 1},
    "DB-DURABLE": {"pass": 8, "fail": 2, "skip": 0},
}


def test_a_failing_user_checker_says_what_it_reported() -> None:
    """Not "USER:auto is guaranteed but failed": the checker's own first
    explanation (first line, cut), and its state; a built-in keeps its
    sentence."""
    result = {
        "verdicts": {"USER:auto": {"pass": 8, "fail": 2, "skip": 0}, **V},
        "states": {"checked": 10},
        "violations": [
            {"invariant": "DB-DURABLE", "state": "e1.p0", "explanation": "row lost"},
            {"invariant": "USER:auto", "state": "e3.p1", "explanation": "a/b lost\nmore"},
            {"invariant": "USER:auto", "state": "e4.p0", "explanation": "other"},
        ],
    }
    r = evaluate_result(Exp(("USER:auto", "DB-DURABLE")), result)  # type: ignore[arg-type]  # a partial result.json
    assert r.broken == [
        "USER:auto failed in 2 of 10 states: your checker 'auto' reported 'a/b lost' (state e3.p1)",
        "DB-DURABLE is guaranteed but failed in 2 of 10 states",
    ]
    bare = evaluate(Exp(("USER:auto",)), result["verdicts"], 10)  # type: ignore[arg-type]  # as above
    assert bare.broken == [
        "USER:auto failed in 2 of 10 states: your checker 'auto' reported a violation"
    ]


def test_all_skipped_is_unverified() -> None:
    r = evaluate(
        Expectation(("DB-ATOMIC", "DHL-T2")), V, 10, {"DHL-T2": {"no block-to-page map for xfs": 1}}
    )
    assert r.status == UNVERIFIED and not r.ok and r.broken == []
    assert "DHL-T2 is guaranteed but was judged in none of 10 states" in r.unverified[0]
    assert "no block-to-page map for xfs (1)" in r.unverified[0]
    assert exit_code([r]) == 1


def test_never_produced_is_unverified_and_broken_wins() -> None:
    assert "never produced" in evaluate(Expectation(("CC-COUNT",)), V, 10).unverified[0]
    both = evaluate(Expectation(("DB-DURABLE", "DHL-T2")), V, 10)
    assert both.status == BROKEN and both.unverified and both.broken
    held = evaluate(Expectation(("DB-ATOMIC",)), V, 10)
    assert held.status == HELD and held.ok and exit_code([held]) == 0


def test_junit_says_unverified(tmp_path: Path) -> None:
    cell = {
        "sut": "s",
        "workload": "w",
        "fs": "xfs",
        "strategy": "prefix",
        "states": {"checked": 10, "folded": 0},
        "verdicts": V,
        "expectation": {
            "ok": False,
            "status": UNVERIFIED,
            "broken": [],
            "unverified": ["DHL-T2 is guaranteed but was judged in none"],
        },
    }
    write_junit(tmp_path / "j.xml", "t", [cell])
    fail = ET.parse(tmp_path / "j.xml").getroot().find("testcase/failure")
    assert fail is not None and fail.get("type") == "ExpectationUnverified"


class _PromisesTrace(Cell):
    """A DHL cell on xfs that (wrongly) promises the trace invariants."""

    def expectation(self, strategy: str) -> Exp:
        e = super().expectation(strategy)
        return Exp((*e.guaranteed, "DHL-T2"), e.must_violate_any)


@pytest.mark.needs_fuse
def test_a_sweep_over_an_unverifiable_promise_exits_1(tmp_path: Path) -> None:
    cell = Cell("dhl-cc", DHL_INSERT, "xfs", ("prefix",))
    assert "DHL-T2" not in cell.expectation("prefix").guaranteed  # xfs: no block map
    summary, code = run_sweep("t", [cell], tmp_path / "ok", SweepOptions(backend="fuse", jobs=2))
    assert code == 0 and summary["cells"][0]["expectation"]["status"] == HELD
    wrong = _PromisesTrace(cell.sut, cell.workload, cell.fs, cell.strategies)
    summary, code = run_sweep(
        "t", [wrong], tmp_path / "ok", SweepOptions(backend="fuse", jobs=2), resume=True
    )
    exp = summary["cells"][0]["expectation"]
    assert code == 1 and exp["status"] == UNVERIFIED and not summary["ok"]
    assert summary["cells"][0]["skips"]["DHL-T2"]  # with its reason
    assert "UNVERIFIED" in (tmp_path / "ok" / "report.md").read_text()
