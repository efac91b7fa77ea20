"""SWEEP/report.md: the same content as report.html in GitHub-flavoured
Markdown (tables; charts referenced as files under plots/).  Colour becomes
a mark beside each count, explained by the legend."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.atomic import write_text_atomic
from harness.report import papers
from harness.report.load import page_in
from harness.report.model import OPTION_TEXT, MatrixCell, Report, fmt
from harness.rundir import SweepDir

MARKS = {
    "broken": "✗",  # guaranteed, failed: breaks the expectation
    "found": "!",  # the known weakness the cell must show, found
    "allowed": "~",  # not promised, failed
    "missed": "∅",  # a required violation was not found: breaks the expectation
    "clean": "✓",
    "skipped": "skip",
    "absent": "–",
}
LEGEND = (
    "✗ guaranteed, failed (breaks the expectation) · ! known weakness, found · "
    "~ not promised, failed · ∅ weakness required but not found (breaks) · "
    "✓ no failure · skip: every state skipped · – not checked"
)


def cell(text: object) -> str:
    """One table cell: pipes escaped, no line breaks."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def table(
    header: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = ()
) -> list[str]:
    """A GFM table; columns whose index is in ``numeric`` are right-aligned."""
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"table row has {len(row)} cells, header {len(header)}")
        out.append("| " + " | ".join(cell(v) for v in row) + " |")
    return out + [""]


def _mark(c: MatrixCell) -> str:
    if c.cls in ("absent", "skipped"):
        return MARKS[c.cls]
    if c.cls == "clean":
        return f"0 {MARKS['clean']}"
    return f"{c.fail} {MARKS[c.cls]}"


def _headline(r: Report) -> list[str]:
    out = [f"# crashlab sweep `{r.name}`", ""]
    if r.ok:
        out.append(
            f"**Every expectation held** ({r.held} of {len(r.cells)} cells) — exit status **0**."
        )
    else:
        out.append(
            f"**✗ EXPECTATIONS BROKEN OR UNVERIFIED** in {len(r.broken_cells)} of "
            f"{len(r.cells)} cells — exit status **1**:"
        )
        out.append("")
        for c in r.broken_cells:
            out.append(
                f"- **{c.sut}** `{c.workload}` [{c.fs}, {c.strategy}] "
                f"**{c.status}**: " + "; ".join(c.problems)
            )
    out += [
        "",
        f"{r.states_checked} crash states checked ({r.states_generated} generated, "
        f"{r.states_folded} folded as duplicates); {r.violations_total} failing "
        "(state, invariant) pairs in `violations.jsonl`.",
        "",
    ]
    return out


def _matrix(r: Report) -> list[str]:
    out = [
        "## Verdict matrix",
        "",
        "Failing states per SUT × invariant, one table per strategy.",
        "",
        LEGEND,
        "",
    ]
    for strategy in r.strategies:
        out += [f"### strategy `{strategy}`", ""]
        header = ["SUT", "workload", "fs", "states", *r.invariants, "expectation"]
        rows = [
            [
                row.sut,
                f"`{row.workload}`",
                row.fs,
                row.checked,
                *(_mark(c) for c in row.cells),
                "held" if row.ok else f"**{row.status.upper()}**",
            ]
            for row in r.matrix[strategy]
        ]
        out += table(header, rows, numeric=[3])
    return out


def _plots(r: Report) -> list[str]:
    if not r.plots:
        return []
    out = ["## Charts", ""]
    for name, rel in r.plots.items():
        out += [f"![{name}]({rel})", ""]
    return out


def _violations(r: Report) -> list[str]:
    out = ["## Violations", ""]
    if not r.groups:
        return out + ["No violations.", ""]
    for g in r.groups:
        out += [f"### {g.inv} ({g.category}; {g.total} failing states)", ""]
        if g.holds_when:
            out += [f"Holds when {g.holds_when}.", ""]
        for s in g.suts.values():
            head = f"#### {s.sut}: {s.total} violation{'' if s.total == 1 else 's'}"
            if s.breaking:
                head += f" — **{s.breaking} break an expectation**"
            if s.total > len(s.shown):
                head += f" (first {len(s.shown)} shown)"
            out += [head, ""]
            rows = [
                [
                    f"`{v['state']}`" + (" ✗" if v["breaks"] else ""),
                    v["strategy"],
                    f"`{v['workload']}` {v['fs']}",
                    v["explanation"],
                    v["expected"],
                    v["actual"],
                    f"{len(v['dropped'])} / {len(v['torn'])}",
                    f"`{v['repro']}`",
                ]
                for v in s.shown
            ]
            out += table(
                [
                    "state",
                    "strategy",
                    "workload",
                    "explanation",
                    "expected",
                    "actual",
                    "dropped / torn",
                    "repro",
                ],
                rows,
            )
    return out


def _io(r: Report) -> list[str]:
    out = [
        "## I/O cost per transaction",
        "",
        "Measured from each run's `writes.log` between the `setup-done` and `workload-end` "
        "marks, divided by the acknowledged transactions. *data* = ext4 data region, "
        "*journal* = ext4 journal (jbd2) region, as in WALDIO Table 1 and MAW Table I; "
        "*flushes* = device cache flushes in the log; *fsyncs* and *DB KB* = the runner's "
        "own counts (when meta.json has them); *tail* = KB logged after `workload-end` "
        "(unmount), not per transaction.",
        "",
    ]
    rows = [
        [
            x.sut,
            x.mode,
            f"`{x.workload}`",
            x.fs,
            x.txns,
            fmt(x.kb_total),
            fmt(x.kb_data),
            fmt(x.kb_journal),
            fmt(x.flushes, 2),
            fmt(x.fsyncs, 2),
            fmt(x.db_kb),
            fmt(x.tail_kb),
            x.note,
        ]
        for x in r.io
    ]
    out += table(
        [
            "SUT",
            "mode",
            "workload",
            "fs",
            "txns",
            "KB total",
            "KB data",
            "KB journal",
            "flushes",
            "fsyncs",
            "DB KB",
            "tail KB",
            "note",
        ],
        rows,
        numeric=list(range(4, 12)),
    )
    return out + _beside_papers(r)


def _beside_papers(r: Report) -> list[str]:
    """The papers' published I/O cost beside this sweep's runs in their
    setting (none for a sweep of user SUTs only)."""
    if not r.papers:
        return []
    out = [
        f"### Beside the papers ({papers.SETTING})",
        "",
        "Rows marked *paper* are **the papers' published numbers**, not ours; rows marked "
        "*ours* are runs of this sweep in the same setting and journal mode. Other "
        "differences remain: kernel, device, SQLite version, our loop device without FUA.",
        "",
    ]
    rows2: list[list[object]] = []
    for p in r.papers:
        for src in (p["waldio"], p["maw"]):
            if src:
                rows2.append(
                    [
                        p["mode"],
                        f"*paper: {src.source}*",
                        fmt(src.data_kb, 0),
                        fmt(src.journal_kb, 0),
                        fmt(src.total_kb, 0),
                        src.note,
                    ]
                )
        for x in p["ours"]:
            rows2.append(
                [
                    p["mode"],
                    f"**ours: {x.sut}** ({x.mode})",
                    fmt(x.kb_data),
                    fmt(x.kb_journal),
                    fmt(x.kb_total),
                    f"{fmt(x.flushes, 2)} flushes, {fmt(x.fsyncs, 2)} fsyncs per txn",
                ]
            )
        if not p["ours"]:
            rows2.append([p["mode"], "ours: no run in this setting", "", "", "", ""])
    out += table(
        ["journal mode", "source", "KB data", "KB journal", "KB total", "note"],
        rows2,
        numeric=[2, 3, 4],
    )
    return out


def _enumeration(r: Report) -> list[str]:
    out = [
        "## How states were enumerated",
        "",
        "Each distinct set of enumeration options (from the checks' `result.json`) and the "
        "cells that used it.",
        "",
    ]
    for opts, members in r.option_sets():
        used = ", ".join(f"{c.sut} [{c.strategy}]" for c in members)
        rows = [
            [f"`{k}`", f"`{json.dumps(v)}`", OPTION_TEXT.get(k, "")] for k, v in opts.items()
        ] or [["(unknown)", "no result.json", ""]]
        rows.append(["cells", used, ""])
        out += table(["option", "value", "meaning"], rows)
    return out


def _cells(r: Report) -> list[str]:
    out = ["## Cells", ""]
    rows = []
    for c in r.cells:
        log = (
            (
                f"{c.log['entries']}, {c.log['writes']}, {fmt(c.log['bytes_written'] / 1024)}, "
                f"{c.log['flushes']}"
            )
            if c.log
            else "n/a"
        )
        exp = "held" if c.expectation["ok"] else f"**{c.status.upper()}**: " + "; ".join(c.problems)
        rows.append(
            [
                c.sut,
                f"`{c.workload}`",
                c.fs,
                c.strategy,
                c.states["generated"],
                c.states["folded"],
                c.states["checked"],
                c.coverage,
                fmt(c.seconds, 2),
                fmt(c.rate),
                log,
                ", ".join(c.expectation["guaranteed"]) or "—",
                ", ".join(c.expectation["must_violate_any"]) or "—",
                exp,
                f"`{c.run}`",
            ]
        )
    out += table(
        [
            "SUT",
            "workload",
            "fs",
            "strategy",
            "generated",
            "folded",
            "checked",
            "kept sets (of possible)",
            "check s",
            "states/s",
            "log (entries, writes, KB, flushes)",
            "guaranteed",
            "must violate one of",
            "expectation",
            "run",
        ],
        rows,
        numeric=[4, 5, 6, 8, 9],
    )
    return out


def render_md(report: Report) -> str:
    lines = [
        *_headline(report),
        *_matrix(report),
        *_plots(report),
        *_violations(report),
        *_io(report),
        *_enumeration(report),
        *_cells(report),
    ]
    if (page := page_in(report.path)) is not None:
        lines.append(
            f"The papers' evaluation measured on this machine: [{page}]({page}) "
            "(`crashlab paper`).\n"
        )
    lines.append(
        "Generated by `crashlab report` from summary.json, violations.jsonl, "
        "timing.json and the runs' meta.json, result.json and writes.log."
    )
    return "\n".join(lines) + "\n"


def write_md(report: Report) -> Path:
    path = SweepDir(report.path).report_md
    write_text_atomic(path, render_md(report))
    return path
