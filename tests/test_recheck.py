"""tests/tools/recheck.py: a sweep's recordings re-checked with this code.

* the first difference of two files is the first differing line, shown
  around its first differing character; options it does not know are refused;
* on a real sweep (a log strategy and multicrash), this code against its
  own sweep is identical file for file, the sweep is left as it was and
  nothing is left mounted or in the working folder;
* a changed verdict, also one of a continuation's check (so the tool
  checks continuations afresh, not resumed), is a difference naming the
  file and line, exit 1; a moved sweep is refused in one line, exit 2;
* a sweep of the old window (from setup-done, no budget) is re-checked
  with it, identical, and the creation window's states this code judges
  are reported apart.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.faults import Fault
from harness.states import Options
from harness.sweep.matrix import SINGLE, Cell
from harness.sweep.sweep import SweepOptions, run_sweep

TOOL = Path(__file__).parent / "tools" / "recheck.py"
_spec = importlib.util.spec_from_file_location("recheck", TOOL)
assert _spec is not None and _spec.loader is not None
recheck = importlib.util.module_from_spec(_spec)
sys.modules["recheck"] = recheck  # its dataclasses look their module up
_spec.loader.exec_module(recheck)


def test_first_difference_names_the_line_and_where_it_differs() -> None:
    assert recheck.first_difference(b"a\nb\n", b"a\nb\n") is None
    assert recheck.first_difference(b"a\nb\nc\n", b"a\nB\nc\n") == "line 2: -b +B"
    # one file ends earlier
    assert recheck.first_difference(b"a\n", b"a\nb\n") == "line 2: - +b"
    assert recheck.first_difference(b"a\nb", b"a\n") == "line 2: -b +"
    assert recheck.first_difference(b"a\n", b"a\n\n") == "line 3: -(no such line) +"
    # a long line is shown around its first differing character
    old, new = b"x" * 500 + b"pass" + b"y" * 500, b"x" * 500 + b"fail" + b"y" * 500
    got = recheck.first_difference(old, new)
    assert got == (f"line 1: -...{'x' * 50}pass{'y' * 46}... +...{'x' * 50}fail{'y' * 46}...")


def test_a_check_json_only_newer_code_writes_is_new_not_different(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        (root / "runs" / "c" / "check" / "multicrash-1").mkdir(parents=True)
        (root / "runs" / "c" / "check" / "multicrash-1" / "result.json").write_text("{}")
    (new / "runs" / "c" / "check" / "multicrash-1" / "check.json").write_text("{}")
    cmp = recheck.compare(old, new)
    assert cmp.differences == [] and cmp.new == ["runs/c/check/multicrash-1/check.json"]
    # any other file on one side only is a difference
    (new / "runs" / "c" / "check" / "multicrash-1" / "states.jsonl").write_text("")
    cmp = recheck.compare(old, new)
    assert cmp.differences == [("runs/c/check/multicrash-1/states.jsonl", "only in the re-check")]


def test_unknown_options_are_refused() -> None:
    opts = recheck.rebuild_options(
        {"strategy": "torn", "faults": ["corrupt"], "fsck": False}, jobs=1
    )
    assert (opts.states.strategy, opts.states.faults, opts.fsck) == (
        "torn",
        (Fault("corrupt"),),
        False,
    )
    with pytest.raises(CrashlabError, match="new_knob: unknown to this code"):
        recheck.rebuild_options({"strategy": "prefix", "new_knob": 1}, jobs=1)


def _tree(root: Path) -> dict[str, tuple[int, float, bytes]]:
    """Every file under ``root``: size, mtime and (but for images and logs)
    content."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            big = p.suffix in (".img", ".log")
            out[str(p.relative_to(root))] = (
                st.st_size,
                st.st_mtime,
                b"" if big else p.read_bytes(),
            )
    return out


def _run_tool(sweep: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), str(sweep), "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.needs_fuse
@pytest.mark.skipif(
    shutil.which("unshare") is None, reason="needs unshare (a private mount namespace)"
)
def test_recheck_a_real_sweep(tmp_path: Path, private_tmp: Path) -> None:
    sweep = tmp_path / "sweep"
    cell = Cell("sqlite-wal-full", SINGLE, "ext4", ("prefix", "multicrash"))
    run_sweep("one", [cell], sweep, SweepOptions(backend="fuse", jobs=2))
    before = _tree(sweep)

    p = _run_tool(sweep)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert "runs, 2 check folders re-checked" in lines[1]
    # prefix and multicrash, and each continuation's check (3 at most)
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    n = int(rows["states.jsonl"][0])
    assert 3 <= n <= 5 and rows["states.jsonl"] == [str(n), str(n), "0"]
    # multicrash's too: the crashes it continued (triage reads them)
    assert rows["check.json"] == [str(n), str(n), "0"]
    assert rows["total"][2] == "0" and not any(x.startswith("DIFFERENT") for x in lines)
    assert _tree(sweep) == before  # not a byte, not an mtime changed

    # a changed verdict of a continuation's check: checked afresh, not resumed
    run = sweep / "runs" / cell.name
    nested = sorted((run / "multicrash").glob("*/check-then/states.jsonl"))[0]
    text = nested.read_text()
    nested.write_text(text.replace('"pass"', '"fail"', 1))
    plain = (
        run
        / "check"
        / next(d.name for d in (run / "check").iterdir() if d.name.startswith("prefix-"))
        / "result.json"
    )
    plain.write_text(plain.read_text().replace('"checked": ', '"checked": 1', 1))
    p = _run_tool(sweep)
    assert p.returncode == 1, p.stdout + p.stderr
    diffs = dict(
        x.removeprefix("DIFFERENT ").split(": ", 1)
        for x in p.stdout.splitlines()
        if x.startswith("DIFFERENT")
    )
    assert sorted(diffs) == sorted(str(f.relative_to(sweep)) for f in (nested, plain))
    got = diffs[str(nested.relative_to(sweep))]
    assert got.startswith("line 1: -") and '"fail"' in got and '"pass"' in got.split(" +")[1]
    assert diffs[str(plain.relative_to(sweep))].startswith("line ")

    # a moved sweep names runs that are not its own: refused
    moved = tmp_path / "moved"
    sweep.rename(moved)
    p = _run_tool(moved)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith("recheck: error: ") and "moved since it was checked" in p.stderr
    assert len(p.stderr.splitlines()) == 1


@pytest.mark.needs_fuse
@pytest.mark.skipif(
    shutil.which("unshare") is None, reason="needs unshare (a private mount namespace)"
)
def test_recheck_a_sweep_of_the_old_window(tmp_path: Path, private_tmp: Path) -> None:
    # what a sweep wrote before the creation window was judged and before
    # the budget: window_start setup-done, no budget in its options
    sweep = tmp_path / "sweep"
    cell = Cell("sqlite-wal-full", SINGLE, "ext4", ("prefix",))
    old = Options(window_start="setup-done", budget=None)
    run_sweep("one", [cell], sweep, SweepOptions(backend="fuse", jobs=2, base_states=old))
    (folder,) = (sweep / "runs" / cell.name / "check").iterdir()
    options = json.loads((folder / "check.json").read_text())["options"]
    assert options["window_start"] == "setup-done" and "budget" not in options
    p = _run_tool(sweep)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert not any(x.startswith("DIFFERENT") for x in lines)  # the states both judge
    # the creation window's states, judged by this code only: apart
    at = lines.index(next(x for x in lines if x.startswith("creation window")))
    n = int(lines[at].rsplit(": ", 1)[1].split()[0])
    assert n > 0 and lines[at + 1].strip().startswith(f"runs/{cell.name}/check/{folder.name}:")
    assert "none failing" in lines[at + 1]
