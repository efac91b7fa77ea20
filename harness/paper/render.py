"""Write a paper folder from paper.json's content: ``paper.json``,
``plots/fig10.png`` (throughput normalised to WAL), ``plots/fig8.png`` (KB
per insert by region), ``plots/syncs.png`` (syncs per transaction),
``plots/fig9.png`` (the block trace of ten two-insert transactions),
``paper.md`` and ``paper.html`` (one self-contained page: inline CSS, the
charts as data: URIs).  Every file is written atomically."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

matplotlib.use("Agg")  # before pyplot: never try to open a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic  # noqa: E402
from harness.paper.volume import CATEGORIES  # noqa: E402

TEMPLATES = Path(__file__).resolve().parent / "templates"
CAT_COLOURS = ["#4c72b0", "#dd8452", "#c44e52", "#8172b3", "#bbbbbb"]
JSON, MD, HTML = "paper.json", "paper.md", "paper.html"
PLOTS = {
    "fig10": "plots/fig10.png",
    "fig8": "plots/fig8.png",
    "syncs": "plots/syncs.png",
    "fig9": "plots/fig9.png",
}
REGION_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3"]


@dataclass(frozen=True)
class Written:
    json: Path
    md: Path
    html: Path
    plots: tuple[Path, ...]


def _save(fig: Figure, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, buf.getvalue())


def _measured(paper: dict[str, Any]) -> list[dict[str, Any]]:
    """The systems rows with a volume measurement."""
    return [s for s in paper["systems"] if s["volume"]]


def fig10(paper: dict[str, Any], path: Path) -> None:
    """One panel per kind: best run over WAL's best run against operations
    per transaction, the bars the range of the per-repeat ratios."""
    f10 = paper["fig10"]
    kinds = list(f10["kinds"])
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.0 * len(kinds), 4.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        by_ops = f10["kinds"][kind]
        xs = [int(o) for o in by_ops]
        for key in f10["systems"]:
            pts = [by_ops[o].get(key) for o in by_ops]
            if any(p is None for p in pts):
                continue
            med = [p["best"] for p in pts]
            err = [
                [m - p["min"] for m, p in zip(med, pts, strict=True)],
                [p["max"] - m for m, p in zip(med, pts, strict=True)],
            ]
            style = "--" if key == paper["baseline"] else "-"
            ax.errorbar(
                xs,
                med,
                yerr=err,
                label=key,
                marker="o",
                ms=3,
                capsize=2,
                linestyle=style,
                linewidth=1,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_title(f"{kind} ({f10['device']}, {f10['repeats']} repeats)")
        ax.set_xlabel("operations per transaction")
        ax.set_ylabel(f"throughput / {paper['baseline']} (best runs)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    _save(fig, path)


def fig8(paper: dict[str, Any], path: Path) -> None:
    """KB per insert, one stacked bar per system, by region."""
    rows = _measured(paper)
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * max(len(rows), 1) + 1.4))
    names = [r["key"] for r in rows]
    left = [0.0] * len(rows)
    for cat, colour in zip(CATEGORIES, CAT_COLOURS, strict=True):
        vals = [r["volume"]["kb"].get(cat, 0.0) for r in rows]
        ax.barh(names, vals, left=left, color=colour, label=cat)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("KB written per insert (one 100-byte insert per transaction)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    _save(fig, path)


def syncs(paper: dict[str, Any], path: Path) -> None:
    """Runner sync calls, device flushes and jbd2 commits per transaction."""
    rows = _measured(paper)
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * max(len(rows), 1) + 1.4))
    series = (
        ("runner_syncs", "runner fsync/fdatasync calls"),
        ("flushes", "device flushes"),
        ("jbd2_commits", "jbd2 commits"),
    )
    h = 0.27
    for i, (field, label) in enumerate(series):
        ys = [k + (i - 1) * h for k in range(len(rows))]
        ax.barh(ys, [r["volume"][field] or 0 for r in rows], height=h, label=label)
    ax.set_yticks(range(len(rows)), [r["key"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("per transaction")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    _save(fig, path)


def fig9(paper: dict[str, Any], path: Path) -> None:
    """One panel per traced system: each write at (log entry number, first
    block), coloured by region, labelled with its KB; the last commit a
    vertical line, the flushes ticks on the x-axis."""
    rows = [r for r in paper["fig9"]["systems"] if r["trace"]]
    cols = 2
    n = max(len(rows), 1)
    fig, axes = plt.subplots(
        (n + cols - 1) // cols, cols, figsize=(11, 3.0 * ((n + 1) // cols)), squeeze=False
    )
    for ax in axes.flat[len(rows) :]:
        ax.axis("off")
    names = sorted({n for r in rows for n in r["trace"]["regions"]})
    colours = {n: REGION_COLOURS[i % len(REGION_COLOURS)] for i, n in enumerate(names)}
    for ax, row in zip(axes.flat, rows, strict=False):
        _trace_panel(ax, row["key"], row["trace"], colours)
    if not rows:
        axes[0][0].text(0.5, 0.5, "no system traced", ha="center")
    fig.tight_layout()
    _save(fig, path)


def _trace_panel(ax: Any, key: str, t: dict[str, Any], colours: dict[str, str]) -> None:
    """One system's Fig. 9 panel; ``colours``: one per region, the same in
    every panel."""
    for region in t["regions"]:
        ws = [w for w in t["writes"] if w["region"] == region]
        ax.scatter(
            [w["n"] for w in ws], [w["block"] for w in ws], s=8, color=colours[region], label=region
        )
        for w in ws:
            ax.annotate(
                f"{w['kb']:g}",
                (w["n"], w["block"]),
                fontsize=5,
                xytext=(0, -7),
                textcoords="offset points",
                ha="center",
            )
    ax.axvline(t["commit"], color="#444444", linewidth=0.8, linestyle="--")
    ax.plot(
        t["flushes"],
        [0] * len(t["flushes"]),
        "|",
        color="#999999",
        transform=ax.get_xaxis_transform(),
    )
    ax.set_title(f"{key}: {t['kb']:g} KB, {len(t['writes'])} writes", fontsize=9)
    ax.set_xlabel("log entry (order, not time)", fontsize=7)
    ax.set_ylabel("file-system block", fontsize=7)
    ax.tick_params(labelsize=6)
    ax.legend(fontsize=5, loc="best")


def _environment(*, html: bool = True) -> jinja2.Environment:
    """HTML escapes every value (SUT errors are data, never markup);
    Markdown does not."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _num(x: float | None, nd: int = 1) -> str:
    """A figure for a table cell; "n/a" when unknown."""
    return "n/a" if x is None else f"{x:.{nd}f}"


def _context(paper: dict[str, Any]) -> dict[str, Any]:
    """What both templates are given beside the page's content."""
    return {
        "p": paper,
        "cats": CATEGORIES,
        "num": _num,
        "ops": [str(o) for o in paper["fig10"]["ops"]],
    }


def render_html(paper: dict[str, Any], out: Path) -> str:
    """The page, with the charts already drawn under ``out`` inlined."""
    images = {
        name: "data:image/png;base64," + base64.b64encode((out / rel).read_bytes()).decode("ascii")
        for name, rel in PLOTS.items()
        if (out / rel).is_file()
    }
    return _environment().get_template("paper.html.j2").render(images=images, **_context(paper))


def render_md(paper: dict[str, Any]) -> str:
    return (
        _environment(html=False).get_template("paper.md.j2").render(plots=PLOTS, **_context(paper))
    )


def write(paper: dict[str, Any], out: Path) -> Written:
    """Every file of the paper folder ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / JSON, paper)
    fig10(paper, out / PLOTS["fig10"])
    fig8(paper, out / PLOTS["fig8"])
    syncs(paper, out / PLOTS["syncs"])
    fig9(paper, out / PLOTS["fig9"])
    write_text_atomic(out / MD, render_md(paper))
    write_text_atomic(out / HTML, render_html(paper, out))
    return Written(out / JSON, out / MD, out / HTML, tuple(out / p for p in PLOTS.values()))
