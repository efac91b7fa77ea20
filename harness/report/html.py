"""SWEEP/report.html: one static page (inline CSS, charts inlined as data:
URIs) that opens from disk with no server and survives being mailed or
attached to a CI job alone."""

from __future__ import annotations

import base64
from pathlib import Path

import jinja2

from harness.atomic import write_text_atomic
from harness.report import papers
from harness.report.load import page_in
from harness.report.model import OPTION_TEXT, Report, fmt
from harness.rundir import SweepDir

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # explanations and workload strings are data, never markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_html(report: Report) -> str:
    """The page's text (plots must already be drawn if they are to appear)."""
    images = [
        (name, _data_uri(report.path / rel))
        for name, rel in report.plots.items()
        if (report.path / rel).is_file()
    ]
    template = _environment().get_template("report.html.j2")
    return template.render(
        r=report,
        images=images,
        fmt=fmt,
        setting=papers.SETTING,
        option_text=OPTION_TEXT,
        paper_page=page_in(report.path),
    )


def write_html(report: Report) -> Path:
    path = SweepDir(report.path).report_html
    write_text_atomic(path, render_html(report))
    return path
