"""junit.xml: one test case per SUT × workload × strategy (× fs) cell; a
cell fails when its expectation is broken (type ExpectationBroken) or
unverified (type ExpectationUnverified: a promised invariant judged in no
state); a user checker that crashed or hung is a test error (type
CheckerError), not a failure of the SUT.  Each case's output gives pass/fail/skip per invariant,
and, as a failure's text does, the cell's groups of failing states (issue 25)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.atomic import write_bytes_atomic
from harness.report.load import strategy_label


def group_lines(cell: dict[str, Any]) -> list[str]:
    """The distinct violations of a cell: per group its ID, invariant,
    states, minimal state and repro command (run from the sweep folder)."""
    return [
        f"group {g['id']} {g['invariant']}: {g['count']} states, minimal state {g['minimal']}; "
        f"repro (in the sweep folder): {g['repro']}"
        for g in cell.get("groups", [])
    ]


def write_junit(path: Path, sweep: str, cells: list[dict[str, Any]]) -> None:
    """``cells`` are summary.json cell records (see harness.sweep)."""
    errors = sum(1 for c in cells if c["expectation"].get("status") == "error")
    failures = sum(1 for c in cells if not c["expectation"]["ok"]) - errors
    suite = ET.Element(
        "testsuite",
        name=f"crashlab.{sweep}",
        tests=str(len(cells)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
    )
    for c in cells:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"crashlab.{c['sut']}",
            name=f"{c['workload']} [{c['fs']}, {strategy_label(c)}]",
        )
        exp = c["expectation"]
        if not exp["ok"]:
            status = exp.get("status", "broken")
            msg = "; ".join(exp["broken"] + exp.get("errors", []) + exp.get("unverified", []))
            # a checker that failed is a test error, not a failure of the SUT
            tag, kind = {
                "broken": ("failure", "ExpectationBroken"),
                "error": ("error", "CheckerError"),
            }.get(status, ("failure", "ExpectationUnverified"))
            fail = ET.SubElement(case, tag, message=msg, type=kind)
            fail.text = "\n".join([msg, *group_lines(c)])
        counts = ", ".join(
            f"{k}: {v.get('pass', 0)} passed, {v.get('fail', 0)} failed, {v.get('skip', 0)} skipped"
            for k, v in c["verdicts"].items()
        )
        ET.SubElement(case, "system-out").text = "\n".join(
            [
                f"{c['states']['checked']} states checked ({c['states']['folded']} folded). "
                + counts,
                *group_lines(c),
            ]
        )
    ET.indent(suite)
    write_bytes_atomic(path, ET.tostring(suite, encoding="utf-8", xml_declaration=True) + b"\n")
