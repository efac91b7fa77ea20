"""Re-check a sweep's recordings with other code; compare the verdicts.

    PYTHON tests/tools/recheck.py SWEEP [--jobs N] [--keep]
    make recheck SWEEP=results/<sweep>        (this tree's .venv/bin/python)

A reshaping of the code must leave every verdict byte-identical.  This
re-checks every check folder of SWEEP (``runs/<cell>/check/<tag>/``) on the
SAME recordings with the code that PYTHON imports (the tree whose
``.venv/bin/python`` runs this file: ``/other/tree/.venv/bin/python
tests/tools/recheck.py SWEEP`` tests that tree), with the options the folder
names (``check.json``; a composite check has none: its ``result.json``
options, which must give back the folder's tag), then compares
``states.jsonl``, ``result.json``, ``run.jsonl`` and ``check.json`` byte for
byte, prints a table and exits 1 on any difference (2: bad input).

Nothing is normalised.  The re-check runs in a private mount namespace
(``unshare --mount``): SWEEP is bound read-only at WORK/orig and an overlay
(lower WORK/orig, upper WORK/upper) is mounted on SWEEP itself, where each
check folder is removed and checked again at its own path.  So every path
the code writes (result.json ``run``, the violations' ``repro``) is the one
the sweep wrote, and no wall time is in these files (result.json's
``timing`` is added after it is written).  The sweep is never written;
WORK (a working folder) is removed afterwards unless ``--keep``.  A sweep
moved since it was checked is refused: its files name the old paths.

Composite checks (multicrash, recovery-crash) are re-checked with
``resume``: the continuations the sweep recorded (``RUN/<kind>/<state>/``:
meta.json, writes.log, base.img) are checked again, not recorded again (a
new recording is not the same recording); their ``check-then`` folders
are removed first, so they are checked afresh.  The first crashes are
chosen again by the code under test: a different choice records a new
continuation (in the overlay) and shows as a difference.

A sweep checked before the creation window was judged (its folders'
``window_start`` is ``setup-done``, then every check's default) is
re-checked with that window, so the states both judge are compared as
always; the states before the mark that this code judges and the sweep
did not are then checked apart (each such folder's window up to
``setup-done``, in WORK) and reported under the table, with their
failures: new states, not differences (they do not change the exit code).
A check folder written before the budget (no ``budget`` in its options)
is re-checked by the per-epoch rule it used.

Not compared: the sweep's summary.json, violations.jsonl, junit.xml and
report (made from the result.json files by the sweep), timing.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness.check.check import CheckOptions, check_run
from harness.check.multicrash import Composite
from harness.check.usercheck import parse_checker
from harness.check.window import SETUP_MARK
from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.faults import parse_faults
from harness.rundir import RunDir
from harness.states import Options
from harness.sysops import run as run_tool

COMPARED = ("states.jsonl", "result.json", "run.jsonl", "check.json")
NESTED_OUT = "check-then"  # a continuation's check folder (harness/check/multicrash.py)
CLIP = 100  # characters of a differing line shown on each side of the first difference


@dataclass(frozen=True)
class Folder:
    """A check folder to re-check: its path below SWEEP (runs/<cell>/check/<tag>),
    the run path its result.json names and its options (as written)."""

    rel: Path
    run: str
    options: dict[str, Any]


@dataclass
class Comparison:
    """Per file name: how many compared and identical; every difference as
    (path below SWEEP, what differs)."""

    counts: dict[str, list[int]] = field(default_factory=lambda: {n: [0, 0] for n in COMPARED})
    differences: list[tuple[str, str]] = field(default_factory=list)
    # composite checks' check.json, written since (issue 25's triage reads
    # it) by code newer than the sweep's: new, not a different verdict
    new: list[str] = field(default_factory=list)


def _read_json(path: Path) -> Any:  # noqa: ANN401
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CrashlabError(f"{path}: unreadable ({e})") from None


def find_folders(sweep: Path) -> list[Folder]:
    """Every check folder of ``sweep``, in name order, with the run path and
    options it records.  A folder without result.json (an interrupted
    check) or whose result.json names a run other than its own (a moved
    sweep) is a one-line error."""
    runs = sweep / "runs"
    if not runs.is_dir():
        raise CrashlabError(f"{sweep}: no runs/ folder (not a sweep)")
    out = []
    for run in sorted(p for p in runs.iterdir() if p.is_dir()):
        checks = run / "check"
        for folder in sorted(p for p in checks.iterdir() if p.is_dir()) if checks.is_dir() else ():
            result = (
                _read_json(folder / "result.json") if (folder / "result.json").exists() else None
            )
            if not isinstance(result, dict) or not isinstance(result.get("run"), str):
                raise CrashlabError(f"{folder}: no complete result.json (an interrupted check?)")
            if not Path(result["run"]).is_dir() or not os.path.samefile(result["run"], run):
                raise CrashlabError(
                    f"{folder}: its result.json names run {result['run']}, not "
                    "this folder (moved since it was checked?): re-check the "
                    "sweep where it was made"
                )
            ident = folder / "check.json"
            options = (_read_json(ident) if ident.exists() else result).get("options")
            if not isinstance(options, dict):
                raise CrashlabError(f"{folder}: no options in check.json or result.json")
            out.append(Folder(folder.relative_to(sweep), result["run"], options))
    if not out:
        raise CrashlabError(f"{sweep}: no check folder under runs/*/check/")
    return out


def rebuild_options(options: dict[str, Any], jobs: int) -> CheckOptions:
    """The CheckOptions a check.json or result.json ``options`` object was
    written from; an option this code does not know is a one-line error
    (never silently dropped)."""
    states = {f.name for f in dataclasses.fields(Options)}
    extra = {"max_states", "fsck", "crashsafe_sample", "composite", "checkers"}
    unknown = sorted(set(options) - states - extra)
    if unknown:
        raise CrashlabError(f"options {', '.join(unknown)}: unknown to this code")
    kw = {k: options[k] for k in ("max_states", "fsck", "crashsafe_sample") if k in options}
    comp = options.get("composite")
    checkers = tuple(
        dataclasses.replace(parse_checker(c["spec"], c["timeout"]), recover=c["recover"])
        for c in options.get("checkers") or ()
    )
    state_kw = {
        k: parse_faults(v) if k == "faults" else v for k, v in options.items() if k in states
    }
    state_kw.setdefault("budget", None)  # written before the budget: the per-epoch rule
    return CheckOptions(
        states=Options(**state_kw),
        jobs=jobs,
        composite=Composite(**comp) if comp else None,
        checkers=checkers,
        **kw,
    )


def first_difference(old: bytes, new: bytes) -> str | None:
    """None when equal; else the first differing line, shown around its
    first differing character: ``line N: -OLD +NEW``."""
    if old == new:
        return None
    a, b = old.split(b"\n"), new.split(b"\n")
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    x = a[i] if i < len(a) else None
    y = b[i] if i < len(b) else None
    col = 0
    if x is not None and y is not None:
        col = next(
            (c for c, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y))
        )
    start = max(0, col - CLIP // 2)

    def show(line: bytes | None) -> str:
        if line is None:
            return "(no such line)"
        text = line[start : start + CLIP].decode("utf-8", "replace")
        return (
            ("..." if start else "")
            + repr(text)[1:-1]
            + ("..." if len(line) > start + CLIP else "")
        )

    return f"line {i + 1}: -{show(x)} +{show(y)}"


def compare(orig: Path, new: Path) -> Comparison:
    """Every COMPARED file under ``orig/runs`` or ``new/runs``, byte for byte
    (a file on one side only is a difference)."""
    found: set[Path] = set()
    for root in (orig, new):
        for name in COMPARED:
            found |= {p.relative_to(root) for p in (root / "runs").rglob(name) if p.is_file()}
    cmp = Comparison()
    for rel in sorted(found):
        a, b = orig / rel, new / rel
        counts = cmp.counts[rel.name]
        if not a.is_file() and rel.name == "check.json" and (a.parent / "result.json").is_file():
            cmp.new.append(str(rel))
            continue
        counts[0] += 1
        if not b.is_file():
            cmp.differences.append((str(rel), "missing in the re-check"))
        elif not a.is_file():
            cmp.differences.append((str(rel), "only in the re-check"))
        else:
            diff = first_difference(a.read_bytes(), b.read_bytes())
            if diff is None:
                counts[1] += 1
            else:
                cmp.differences.append((str(rel), diff))
    return cmp


def table(cmp: Comparison) -> str:
    """The per-name table and one line per difference."""
    rows = [("file", "compared", "identical", "different")]
    rows += [(n, str(c), str(i), str(c - i)) for n, (c, i) in cmp.counts.items()]
    total = [sum(c[k] for c in cmp.counts.values()) for k in (0, 1)]
    rows.append(("total", str(total[0]), str(total[1]), str(total[0] - total[1])))
    lines = [f"{r[0]:<14}" + "".join(f"{x:>11}" for x in r[1:]) for r in rows]
    lines += [f"DIFFERENT {path}: {what}" for path, what in cmp.differences]
    lines += [f"new {path}: only this code writes it (not compared)" for path in cmp.new]
    return "\n".join(lines)


def _tree() -> str:
    """The code under test: the tree the harness is imported from, and its
    commit (``+`` when its work tree has changes)."""
    root = Path(harness.__file__).resolve().parents[1]
    git = ["git", "-C", str(root)]
    head = (
        subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or "?"
    )
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return f"{root} ({head}{'+' if dirty else ''})"


def _mount(sweep: Path, work: Path) -> None:
    """In this (private) mount namespace: SWEEP read-only at WORK/orig, and
    an overlay writing into WORK/upper on SWEEP; the working folder is then
    entered again through the overlay (a cwd inside SWEEP would otherwise
    still be the original folder)."""
    for name in ("orig", "upper", "ovl"):
        (work / name).mkdir()
    orig = work / "orig"
    run_tool(["mount", "--bind", str(sweep), str(orig)], "recheck: bind the sweep")
    run_tool(["mount", "-o", "remount,bind,ro", str(orig)], "recheck: make the bind read-only")
    run_tool(
        [
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={orig},upperdir={work / 'upper'},workdir={work / 'ovl'}",
            str(sweep),
        ],
        "recheck: mount the overlay",
    )
    os.chdir(os.getcwd())


def recheck(sweep: Path, folders: list[Folder], jobs: int) -> list[tuple[str, str]]:
    """Check each folder again in place (SWEEP is the overlay); the folders
    whose check failed, with the error."""
    errors = []
    for f in folders:
        t0 = time.monotonic()
        try:
            opts = rebuild_options(f.options, jobs)
            composite = opts.composite is not None
            if composite and opts.tag() != f.rel.name:
                raise CrashlabError(f"the options rebuilt name folder {opts.tag()}")
            out = sweep / f.rel
            shutil.rmtree(out)
            if composite:  # the continuations' checks too (also deeper ones)
                for nested in sorted((out.parents[1] / opts.composite.kind).rglob(NESTED_OUT)):
                    shutil.rmtree(nested)
            check_run(RunDir(Path(f.run)), opts, out, resume=composite)
        except CrashlabError as e:
            errors.append((str(f.rel), str(e)))
            print(f"recheck: {f.rel}: not re-checked: {e}", file=sys.stderr)
            continue
        print(f"recheck: {f.rel} {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return errors


@dataclass
class Creation:
    """The creation window of a check folder whose sweep did not judge it
    (its window started at setup-done, the old default): the states this
    code judges there that the sweep's check did not, and their failures."""

    rel: str
    states: int = 0
    fails: dict[str, int] = field(default_factory=dict)


def _ids(path: Path) -> set[str]:
    with open(path) as f:
        return {json.loads(line)["id"] for line in f}


def creation_windows(sweep: Path, folders: list[Folder], work: Path, jobs: int) -> list[Creation]:
    """For each log-strategy folder whose window started at ``setup-done``
    (what every check did before the creation window was judged), check
    the window up to that mark with this code, into ``work``, and keep
    the states the folder does not hold: judged now, not then.  A run
    without the mark has nothing to add."""
    out = []
    for f in folders:
        if f.options.get("window_start") != SETUP_MARK or "composite" in f.options:
            continue
        opts = rebuild_options(f.options, jobs)
        opts.states = dataclasses.replace(opts.states, window_start=None, window_end=SETUP_MARK)
        folder = work / "creation" / f.rel
        try:
            check_run(RunDir(Path(f.run)), opts, folder)
        except CrashlabError as e:
            print(f"recheck: {f.rel}: creation window not checked: {e}", file=sys.stderr)
            continue
        old = _ids(sweep / f.rel / "states.jsonl")
        c = Creation(str(f.rel))
        with open(folder / "states.jsonl") as lines:
            for line in lines:
                rec = json.loads(line)
                if rec["id"] in old:
                    continue
                c.states += 1
                for v in rec.get("fail", []):
                    c.fails[v["invariant"]] = c.fails.get(v["invariant"], 0) + 1
        out.append(c)
    return out


def creation_table(found: list[Creation]) -> str:
    """One line per folder: the creation-window states judged only now."""
    lines = [f"creation window, judged by this code only: {sum(c.states for c in found)} states"]
    for c in found:
        fails = ", ".join(f"{k} {n}" for k, n in sorted(c.fails.items())) or "none failing"
        lines.append(f"  {c.rel}: {c.states} states, {fails}")
    return "\n".join(lines)


def inside(sweep: Path, work: Path, jobs: int) -> int:
    """The namespace's part: re-check, compare, print; the exit code."""
    t0 = time.monotonic()
    folders = find_folders(sweep)
    runs = len({f.rel.parts[1] for f in folders})
    _mount(sweep, work)
    errors = recheck(sweep, folders, jobs)
    seconds = time.monotonic() - t0
    cmp = compare(work / "orig", sweep)
    found = creation_windows(sweep, folders, work, jobs)
    print(
        f"recheck: code {_tree()}\nrecheck: sweep {sweep}: {runs} runs, {len(folders)} check "
        f"folders re-checked in {seconds:.0f} s"
    )
    print(table(cmp))
    if found:
        print(creation_table(found))
    for rel, e in errors:
        print(f"NOT RE-CHECKED {rel}: {e}")
    return 1 if cmp.differences or errors else 0


def outside(sweep: Path, jobs: int, keep: bool) -> int:
    """Run :func:`inside` in a private mount namespace, in a new working
    folder; remove the folder afterwards (from here, where nothing is
    mounted in it) unless ``keep``."""
    if not (sweep / "runs").is_dir():
        raise CrashlabError(f"{sweep}: no runs/ folder (not a sweep)")
    if shutil.which("unshare") is None:
        raise CrashlabError("unshare not found (util-linux)")
    with temporary_folder("crashlab-recheck-", keep=keep) as work:
        try:
            proc = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "--",
                    sys.executable,
                    __file__,
                    str(sweep),
                    "--jobs",
                    str(jobs),
                    "--inside",
                    str(work),
                ]
            )
            while True:
                try:
                    return proc.wait()
                except KeyboardInterrupt:  # the namespace got it too: let it tear down
                    continue
        finally:
            if keep:
                print(f"recheck: kept {work} (upper/: the re-checked files)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sweep", type=Path, help="a sweep folder (crashlab sweep --out)")
    p.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (0: every core)")
    p.add_argument("--keep", action="store_true", help="keep the working folder")
    p.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sweep = args.sweep.resolve()
    try:
        if args.inside is not None:
            return inside(sweep, args.inside, args.jobs)
        return outside(sweep, args.jobs, args.keep)
    except CrashlabError as e:
        print(f"recheck: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
