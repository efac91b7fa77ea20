"""report.html, report.md and plots/ from a synthetic sweep folder: content
matches summary.json and violations.jsonl, HTML is well-formed, Markdown
tables are consistent, plots are PNGs, output is deterministic."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_report_synth import make_sweep

from harness.report.write import write_reports
from harness.sweep.sweep import SweepOptions, run_sweep

PNG = b"\x89PNG\r\n\x1a\n"
VOID = {"meta", "img", "br", "hr", "input", "link", "col", "wbr", "source", "area", "base"}


class Balanced(HTMLParser):
    """Checks that every element is closed in order; collects text and the
    class and text of every <td>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.tds: list[tuple[str, str]] = []
        self._td: list[str] | None = None
        self._td_class = ""

    def handle_starttag(self, tag, attrs):
        if tag == "td":
            self._td, self._td_class = [], dict(attrs).get("class") or ""
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self.tds.append((self._td_class, "".join(self._td).strip()))
            self._td = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'} at {self.getpos()}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._td is not None:
            self._td.append(data)


def parse_html(path: Path) -> Balanced:
    p = Balanced()
    p.feed(path.read_text())
    p.close()
    assert not p.errors, p.errors[:5]
    assert p.stack == [], f"unclosed: {p.stack}"
    return p


def md_tables(text: str) -> list[list[list[str]]]:
    """Every GFM table as rows of cells (split on unescaped pipes)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if current is None:
                current = []
                tables.append(current)
            current.append(cells)
        else:
            current = None
    return tables


@pytest.fixture
def sweep(tmp_path):
    root = tmp_path / "sweep"
    want = make_sweep(root)
    return root, want, write_reports(root)


def test_outputs_exist_and_plots_are_png(sweep):
    root, _want, out = sweep
    assert out.html == root / "report.html" and out.md == root / "report.md"
    assert {p.name for p in out.plots} == {"violations.png", "io_cost.png"}
    for p in out.plots:
        assert p.read_bytes().startswith(PNG) and p.stat().st_size > 5000
    assert not out.ok
    assert not list(root.glob("**/*.tmp*")) and not list(root.glob("**/.*tmp*"))


def test_html_well_formed_with_headline_matrix_and_plots(sweep):
    root, want, _ = sweep
    page = parse_html(root / "report.html")
    text = " ".join(" ".join(page.text).split())
    assert "EXPECTATIONS BROKEN OR UNVERIFIED in 1 of 3 cells — exit status 1" in text
    assert "DB-ATOMIC is guaranteed but failed in 2 of 30 states" in text
    checked = sum(c["states"]["checked"] for c in want["summary"]["cells"])
    assert f"{checked} crash states checked" in text
    html = (root / "report.html").read_text()
    assert 'class="banner failed"' in html
    # the broken cell stands out: red class, count equal to summary.json's
    assert ("v broken", "2") in page.tds
    assert ("v found", "7") in page.tds  # the required weakness, found
    assert ("broken", "BROKEN") in page.tds
    assert html.count("data:image/png;base64,") == 2  # opens with no file beside it
    assert "<link" not in html and "<script" not in html


def test_violations_grouped_with_repro_and_counts(sweep):
    root, want, _ = sweep
    html = (root / "report.html").read_text()
    md = (root / "report.md").read_text()
    weak = [v for v in want["violations"] if v["sut"] == "weak-sut"]
    safe = [v for v in want["violations"] if v["sut"] == "safe-sut"]
    for v in safe + weak[:5]:
        assert v["repro"] in html and f"`{v['repro']}`" in md
    for v in weak[5:]:  # beyond the first 5 per group: counted, not listed
        assert v["repro"] not in html and v["repro"] not in md
    assert "weak-sut: 7 violations (first 5 shown)" in md
    assert "safe-sut: 2 violations — **2 break an expectation**" in md
    # grouped by invariant in the registry's order (DB-ATOMIC before DB-DURABLE)
    assert md.index("### DB-ATOMIC (") < md.index("### DB-DURABLE (")


def test_markdown_tables_consistent_and_numbers_match(sweep):
    root, want, _ = sweep
    md = (root / "report.md").read_text()
    tables = md_tables(md)
    assert len(tables) >= 6
    for t in tables:
        assert all(len(row) == len(t[0]) for row in t), t
        assert all(re.fullmatch(r"-{3}:?|-{3}:", c) or c == "---:" for c in t[1]), t[1]
    matrix = [r for t in tables if t[0][0] == "SUT" and "DB-ATOMIC" in t[0] for r in t[2:]]
    assert len(matrix) == len(want["summary"]["cells"])
    assert any(r[0] == "safe-sut" and "2 ✗" in r and r[-1] == "**BROKEN**" for r in matrix)
    assert any(r[0] == "weak-sut" and "7 !" in r and r[-1] == "held" for r in matrix)
    io = next(t for t in tables if "KB journal" in t[0] and "flushes" in t[0])
    rows = {r[0]: dict(zip(io[0], r, strict=True)) for r in io[2:]}
    # 6 blocks per transaction, 3 of them in the journal, 1 flush (test_report_synth)
    assert rows["safe-sut"]["KB total"] == "24.0"
    assert rows["safe-sut"]["KB journal"] == "12.0" and rows["safe-sut"]["KB data"] == "12.0"
    assert rows["safe-sut"]["flushes"] == "1.00" and rows["safe-sut"]["fsyncs"] == "n/a"
    assert rows["weak-sut"]["fsyncs"] == "4.00" and rows["weak-sut"]["DB KB"] == "5.0"
    assert rows["safe-sut"]["tail KB"] == "4.0"


def test_papers_beside_ours_only_where_the_setting_matches(sweep):
    root, _want, _ = sweep
    md = (root / "report.md").read_text()
    papers = next(t for t in md_tables(md) if t[0][:2] == ["journal mode", "source"])
    delete = [r for r in papers if r[0] == "DELETE"]
    assert any(r[1] == "*paper: WALDIO (ATC'15) Table 1*" and r[4] == "80" for r in delete)
    assert any(r[1] == "*paper: MAW Table I*" and r[4] == "64" for r in delete)
    assert any(r[1].startswith("**ours: weak-sut**") and r[4] == "24.0" for r in delete)
    # safe-sut (WAL) runs 3 ops per transaction: not the papers' setting
    wal = [r for r in papers if r[0] == "WAL"]
    assert not any("safe-sut" in r[1] for r in wal)
    assert any(r[1] == "ours: no run in this setting" for r in wal)
    html = (root / "report.html").read_text()
    assert "paper: WALDIO (ATC&#39;15) Table 1" in html and "ours: weak-sut" in html


def test_enumeration_and_cells_sections(sweep):
    root, _want, _ = sweep
    md = (root / "report.md").read_text()
    tables = md_tables(md)
    opts = [t for t in tables if t[0] == ["option", "value", "meaning"]]
    assert {r[1] for t in opts for r in t if r[0] == "`strategy`"} == {'`"prefix"`', '`"reorder"`'}
    # only the options that shape a strategy's states are listed for it
    prefix = next(t for t in opts if ["`strategy`", '`"prefix"`'] == t[2][:2])
    assert not any(r[0] in ("`max_drop`", "`tear_unit`") for r in prefix)
    reorder = next(t for t in opts if ["`strategy`", '`"reorder"`'] == t[2][:2])
    assert any(r[0] == "`max_drop`" and r[1] == "`2`" for r in reorder)
    assert any(
        r[0] == "cells" and "safe-sut [prefix]" in r[1] and "weak-sut [prefix]" in r[1]
        for t in opts
        for r in t
    )
    cells = next(t for t in tables if "generated" in t[0])
    row = dict(zip(cells[0], next(r for r in cells[2:] if r[3] == "reorder"), strict=True))
    assert (row["generated"], row["folded"], row["checked"]) == ("125", "5", "120")
    assert row["states/s"] == "20.0"  # 120 states in 6.0 s (timing.json)


def test_all_held_sweep_says_so(tmp_path):
    make_sweep(tmp_path / "s", broken=False)
    out = write_reports(tmp_path / "s")
    assert out.ok
    text = " ".join(" ".join(parse_html(out.html).text).split())
    assert "Every expectation held (3 of 3 cells) — exit status 0" in text
    md = out.md.read_text()
    assert "BROKEN" not in md and "exit status **0**" in md


def test_untrusted_text_is_escaped(tmp_path):
    make_sweep(tmp_path / "s", explanation="<script>alert(1)</script> a|b")
    out = write_reports(tmp_path / "s")
    html = out.html.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; a|b" in html
    parse_html(out.html)
    md = out.md.read_text()
    assert "a\\|b" in md
    for t in md_tables(md):
        assert all(len(row) == len(t[0]) for row in t)


def test_missing_run_folder_is_reported_not_invented(tmp_path):
    want = make_sweep(tmp_path / "s")
    shutil.rmtree(tmp_path / "s" / want["runs"]["weak-sut"])
    out = write_reports(tmp_path / "s")
    md = out.md.read_text()
    io = next(t for t in md_tables(md) if "KB journal" in t[0] and "flushes" in t[0])
    weak = next(r for r in io if r[0] == "weak-sut")
    assert weak[5] == "n/a" and "run folder incomplete" in weak[-1]


def test_regenerating_gives_identical_files(sweep):
    root, _want, out = sweep
    before = {p: p.read_bytes() for p in (out.html, out.md, *out.plots)}
    write_reports(root)
    assert {p: p.read_bytes() for p in before} == before


def test_run_sweep_writes_the_reports_last(tmp_path):
    summary, code = run_sweep("empty", [], tmp_path / "sw", SweepOptions())
    assert code == 0 and summary["cells"] == []
    root = tmp_path / "sw"
    assert (root / "report.html").exists() and (root / "report.md").exists()
    assert (root / "plots" / "violations.png").read_bytes().startswith(PNG)
    assert "**Every expectation held** (0 of 0 cells)" in (root / "report.md").read_text()
    parse_html(root / "report.html")
