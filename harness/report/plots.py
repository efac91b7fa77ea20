"""The report's charts (matplotlib, Agg: no display needed), written as PNGs
under SWEEP/plots/ and referenced by report.html (inline) and report.md.

* ``violations.png``: one panel per SUT, failing states per invariant,
  stacked by strategy; an invariant the SUT guarantees is labelled in red
  (a bar there is a broken expectation).
* ``io_cost.png``: per run, KB written per transaction (ext4 data region vs
  journal region, or the total when the split is unknown) and syncs per
  transaction (device flushes in the log; the runner's fsync calls).
* ``timeline-<run>.png``: per run recorded with ``--blktrace`` (qemu), the
  I/O timeline of the recorded device: LBA against time, writes, FUA
  writes, flushes and discards in their own colours (blkparse's queue
  events, harness/record/blktrace.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: never try to open a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.atomic import write_bytes_atomic  # noqa: E402
from harness.record.blktrace import TRACE_NAME, events  # noqa: E402
from harness.report.model import Report  # noqa: E402
from harness.rundir import SweepDir  # noqa: E402

STRATEGY_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3"]
BROKEN = "#c0392b"


def _save(fig: Figure, path: Path) -> None:
    buf = io.BytesIO()
    # No timestamp or version in the file: equal sweeps give equal PNGs.
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())


def _short(run_label: str, width: int = 22) -> str:
    return run_label if len(run_label) <= width else run_label[: width - 1] + "…"


def violations_chart(report: Report, path: Path) -> None:
    suts = list(dict.fromkeys(c.sut for c in report.cells))
    invs = report.invariants
    n = max(1, len(suts))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows + 0.6), squeeze=False)
    for k, sut in enumerate(suts):
        ax = axes[k // cols][k % cols]
        cells = [c for c in report.cells if c.sut == sut]
        guaranteed = {i for c in cells for i in c.expectation["guaranteed"]}
        bottom = [0] * len(invs)
        for s, strategy in enumerate(report.strategies):
            counts = [
                sum(c.verdicts.get(i, {}).get("fail", 0) for c in cells if c.strategy == strategy)
                for i in invs
            ]
            if not any(counts) and not any(c.strategy == strategy for c in cells):
                continue
            bars = ax.bar(
                range(len(invs)),
                counts,
                bottom=bottom,
                label=strategy,
                color=STRATEGY_COLOURS[s % len(STRATEGY_COLOURS)],
            )
            for bar, inv, count in zip(bars, invs, counts, strict=True):
                if count and inv in guaranteed:  # a broken expectation: make it stand out
                    bar.set_hatch("///")
                    bar.set_edgecolor(BROKEN)
                    bar.set_linewidth(1.5)
            bottom = [a + b for a, b in zip(bottom, counts, strict=True)]
        ax.set_title(sut, fontsize=10)
        ax.set_xticks(range(len(invs)))
        ax.set_xticklabels(invs, rotation=45, ha="right", fontsize=7)
        for tick, inv in zip(ax.get_xticklabels(), invs, strict=True):
            if inv in guaranteed:
                tick.set_color(BROKEN)
        ax.set_ylabel("failing states", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        for x, total in enumerate(bottom):
            if total:
                ax.annotate(str(total), (x, total), ha="center", va="bottom", fontsize=7)
        if not any(bottom):
            ax.text(
                0.5,
                0.5,
                "no violations",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="#2e7d32",
                fontsize=10,
            )
            ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="upper right")
    for k in range(len(suts), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    fig.suptitle(
        f"Violations per invariant ({report.name}); red label = guaranteed by the SUT, "
        "hatched red bar = a broken expectation",
        fontsize=10,
    )
    fig.tight_layout()
    _save(fig, path)


def io_chart(report: Report, path: Path) -> None:
    rows = [r for r in report.io if r.kb_total is not None]
    labels = [_short(f"{r.sut}\n{r.workload.split(',seed')[0]}", 60) for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.6 * max(len(rows), 2) + 1.6))
    y = list(range(len(rows)))
    data = [r.kb_data if r.kb_journal is not None else r.kb_total for r in rows]
    journal = [r.kb_journal or 0.0 for r in rows]
    left.barh(y, data, color="#4c72b0", label="ext4 data region (or total if unsplit)")
    left.barh(y, journal, left=data, color="#dd8452", label="ext4 journal region")
    left.set_yticks(y)
    left.set_yticklabels(labels, fontsize=7)
    left.invert_yaxis()
    left.set_xlabel("KB written per transaction (workload window)", fontsize=8)
    left.legend(fontsize=7, loc="lower right")
    h = 0.38
    flushes = [r.flushes or 0.0 for r in rows]
    fsyncs = [r.fsyncs or 0.0 for r in rows]
    right.barh(
        [v - h / 2 for v in y], flushes, height=h, color="#55a868", label="device flushes (log)"
    )
    right.barh(
        [v + h / 2 for v in y],
        fsyncs,
        height=h,
        color="#8172b3",
        label="fsync/fdatasync calls (runner)",
    )
    for v, r in zip(y, rows, strict=True):
        if r.fsyncs is None:
            right.text(0.02, v + h / 2, "runner: n/a", va="center", fontsize=6, color="#555")
    right.set_yticks(y)
    right.set_yticklabels([])
    right.invert_yaxis()
    right.set_xlabel("syncs per transaction", fontsize=8)
    right.legend(fontsize=7, loc="lower right")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"I/O cost per transaction ({report.name})", fontsize=10)
    fig.tight_layout()
    _save(fig, path)


TIMELINE_KINDS = {  # label -> (colour, marker)
    "write": ("#4c72b0", "."),
    "FUA write": ("#c0392b", "o"),
    "discard": ("#937860", "s"),
    "read": ("#bbbbbb", "."),
}


def timeline_chart(trace: Path, path: Path, title: str) -> None:
    """LBA against time of one run's blktrace; flushes as vertical lines."""
    evs = events(trace)
    fig, ax = plt.subplots(figsize=(10, 4))
    t0 = evs[0].time_s if evs else 0.0
    groups: dict[str, tuple[list[float], list[int]]] = {k: ([], []) for k in TIMELINE_KINDS}
    flushes = []
    for e in evs:
        if e.preflush:
            flushes.append(e.time_s - t0)
        if e.sector is None or e.op == "N":
            continue
        kind = {"W": "FUA write" if e.fua else "write", "D": "discard", "R": "read"}.get(e.op)
        if kind:
            groups[kind][0].append(e.time_s - t0)
            groups[kind][1].append(e.sector)
    for i, x in enumerate(flushes):
        ax.axvline(
            x,
            color="#55a868",
            linewidth=0.6,
            alpha=0.7,
            label=f"flush ({len(flushes)})" if i == 0 else None,
        )
    for label, (colour, marker) in TIMELINE_KINDS.items():
        xs, ys = groups[label]
        if xs:
            ax.scatter(
                xs,
                ys,
                s=10 if marker == "." else 16,
                c=colour,
                marker=marker,
                label=f"{label} ({len(xs)})",
                zorder=3,
            )
    ax.set_xlabel("seconds since the first request (guest clock)", fontsize=8)
    ax.set_ylabel("LBA (512-byte sectors)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def write_plots(report: Report) -> dict[str, str]:
    """Draw every chart; return ``{name: path relative to the sweep}`` and
    record it in ``report.plots``."""
    out = SweepDir(report.path).plots
    out.mkdir(exist_ok=True)
    made = {}
    violations_chart(report, out / "violations.png")
    made["violations"] = f"{out.name}/violations.png"
    if any(r.kb_total is not None for r in report.io):
        io_chart(report, out / "io_cost.png")
        made["io_cost"] = f"{out.name}/io_cost.png"
    for trace in sorted(SweepDir(report.path).path.glob(f"runs/*/{TRACE_NAME}")):
        run = trace.parent.name
        timeline_chart(trace, out / f"timeline-{run}.png", f"I/O timeline: {run}")
        made[f"timeline {run}"] = f"{out.name}/timeline-{run}.png"
    report.plots = made
    return made
