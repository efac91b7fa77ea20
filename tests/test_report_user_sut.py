"""The report of a sweep of user SUTs (a matrix file's ``[sut.NAME] run =
COMMAND``, issue 26): its cells show their command as the workload (not
an empty one beside ``ext4``), their promises and verdicts, the expected
/ actual of each violation, and none of SQLite's tables (no papers'
comparison, no "no runner stats" notes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ROOT, crashlab
from test_report_render import md_tables, parse_html

pytestmark = pytest.mark.needs_fuse

EXAMPLE = ROOT / "workloads" / "examples" / "atomic-update"
MATRIX = f"""
[sut.atomic-update]
run = "sh {EXAMPLE}/update.sh correct"
checker = "{{python}} {EXAMPLE}/check.py"

[sut.no-dir-fsync]
run = "sh {EXAMPLE}/update.sh no-dir-fsync"
checker = "{{python}} {EXAMPLE}/check.py"
promises = ["FS-RECOVER"]
must_violate_any = ["USER:no-dir-fsync"]

[[cell]]
sut = "atomic-update"
strategies = ["prefix"]

[[cell]]
sut = "no-dir-fsync"
strategies = ["prefix"]
"""
COMMAND = {
    sut: f"sh {EXAMPLE}/update.sh {mode}"
    for sut, mode in (("atomic-update", "correct"), ("no-dir-fsync", "no-dir-fsync"))
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The sweep's folder and what it printed on stdout."""
    tmp = tmp_path_factory.mktemp("usersut")
    (tmp / "m.toml").write_text(MATRIX)
    p = crashlab(
        "sweep", "--matrix", str(tmp / "m.toml"), "--backend", "fuse", "--out", str(tmp / "o")
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "o", p.stdout


@pytest.fixture(scope="module")
def report(swept: tuple[Path, str]) -> tuple[str, str]:
    out, _ = swept
    parse_html(out / "report.html")  # well-formed
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def test_summary_names_the_command_as_workload(swept: tuple[Path, str]) -> None:
    # the rows the terminal table prints (harness/cli/verdicts.py) and JUnit's
    out, _ = swept
    cells = json.loads((out / "summary.json").read_text())["cells"]
    assert {c["sut"]: c["workload"] for c in cells} == COMMAND
    junit = (out / "junit.xml").read_text()
    assert all(f'name="{c} [ext4, prefix]"' in junit for c in COMMAND.values()), junit


def _table(md: str, first: str, *more: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header has these columns."""
    for t in md_tables(md):
        if t[0][0] == first and all(h in t[0] for h in more):
            return [dict(zip(t[0], row, strict=True)) for row in t[2:]]
    raise AssertionError(f"no table {first} {more} in the report")


def test_cells_show_their_command_promises_and_verdicts(report: tuple[str, str]) -> None:
    md, html = report
    matrix = _table(md, "SUT", "USER:no-dir-fsync", "expectation")
    assert {r["SUT"]: r["workload"] for r in matrix} == {s: f"`{c}`" for s, c in COMMAND.items()}
    assert matrix[1]["USER:no-dir-fsync"].endswith("!") and matrix[0]["USER:atomic-update"] == "0 ✓"
    cells = {r["SUT"]: r for r in _table(md, "SUT", "guaranteed", "must violate one of")}
    assert cells["atomic-update"]["guaranteed"] == "FS-RECOVER, USER:atomic-update"
    assert cells["no-dir-fsync"]["must violate one of"] == "USER:no-dir-fsync"
    assert all(f"`{c['workload'].strip('`')}`" == f"`{COMMAND[s]}`" for s, c in cells.items())
    for c in COMMAND.values():
        assert f"<code>{c}</code>" in html


def test_violations_have_their_workload_and_expected_actual(report: tuple[str, str]) -> None:
    md, html = report
    rows = _table(md, "state", "expected", "actual")
    assert rows
    for r in rows:
        assert r["workload"] == f"`{COMMAND['no-dir-fsync']}` ext4"
        assert r["expected"].startswith("USER:no-dir-fsync holds (acknowledged up to txn")
        assert r["actual"] == "USER:no-dir-fsync violated"
        assert "--checker" in r["repro"]
    assert "USER:no-dir-fsync violated" in html


def test_no_sqlite_tables(report: tuple[str, str]) -> None:
    md, html = report
    for text in (md, html):
        assert "Beside the papers" not in text and "no runner stats" not in text
        assert "``" not in text.replace("```", "")
    io = _table(md, "SUT", "mode", "KB journal")
    assert {r["mode"] for r in io} == {"own command"}
