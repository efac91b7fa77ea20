"""Mutation testing: a checker is as good as the bugs it kills.

``tests/mutants/`` keeps realistic bugs of the DHL engine and the workload
runner, and of crashlab's own Python (the crash states, the checkers), as
patches (``NAME.patch``, a unified diff applied with ``patch -p1`` to a copy
of the sources), and ``catalogue.toml`` says for each one what the
bug is and which cells should kill it: the smallest cells of the default
matrix that exercise the mutated code (or the tests, where no cell fits).
``crashlab mutants`` (``make mutants``) builds every C mutant into
``build/mutants/<name>-<digest>/`` (libdhl.so and crashlab-runner; cached by
the digest of the patch and the sources), runs its cells as a sweep in a
child process whose environment points the recorder at the mutant runner
(``CRASHLAB_RUNNER``) and the checkers at the mutant libdhl (``DHL_LIB``:
the SUT's own recovery runs inside the checkers), the mutant WALDIO VFS
(``CRASHLAB_WALDIO_LIB``: a WALDIO database is recovered through it) and the
mutant selective-journaling VFS (``CRASHLAB_SELVFS_LIB``: a hot journal is
opened through it), and prints a kill table: which invariants failed in how
many states. A mutant is *killed* when a cell breaks its expectation,
*survives* otherwise; a survivor either carries a ``harmless`` reason in the
catalogue or fails the command (exit 1).

A *Python mutant* (a patch of ``.py`` files only: ``harness/states``,
``checkers``...) is not built: the Python packages and tests are copied
into a temporary folder (``PY_SOURCES``; the C build outputs and the base
images are linked, not copied), the patch is applied there, and its tests
or cells run with that copy first on ``PYTHONPATH`` and as the working
directory.  The working tree is never patched.  A weakened enumerator or
judge passes every sweep (fewer states, fewer failures); the golden counts
of the corpus (tests/test_golden_counts.py) are what kill those.

What this does not check: that the judges (the checkers' own reading of the
images) are independent of libdhl.  A mutant of the read rule also changes
what the in-process judges read; they catch it through the oracle, not by
disagreement.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.env import DHL_LIB, RUNNER, SELVFS_LIB, WALDIO_LIB, temporary_folder
from harness.errors import CrashlabError
from harness.faults import parse_faults
from harness.rundir import SweepDir
from harness.sweep.builtin_workloads import BUILTIN_WORKLOADS
from harness.sweep.cell import Cell
from harness.sweep.matrix import matrix
from workloads.suts import get_sut

ROOT = Path(__file__).resolve().parent.parent
MUTANTS_DIR = ROOT / "tests" / "mutants"
CATALOGUE = MUTANTS_DIR / "catalogue.toml"
BUILD_ROOT = ROOT / "build" / "mutants"
# What a mutant build copies: the C sources it may patch and their rules.
SOURCES = (
    "Makefile",
    "dhl/build.mk",
    "dhl/include",
    "dhl/src",
    "workloads/build.mk",
    "workloads/runner",
)
TARGETS = (
    "dhl/build/libdhl.so",
    "workloads/build/crashlab-runner",
    "workloads/build/crashlab-xlog-recover",  # xLog's recovery: the checkers'
    "workloads/build/libcrashlab-waldiovfs.so",  # the VFS the checkers recover WALDIO with
    "workloads/build/libcrashlab-selvfs.so",
)  # and open a selective SUT's database with
# What a Python mutant's copy holds: the packages and the tests (their C
# build outputs and the base images are linked from this tree: LINKED)
PY_SOURCES = ("harness", "checkers", "workloads", "dhl", "tests", "pyproject.toml")
LINKED = ("harness/build", "checkers/build", "workloads/build", "dhl/build", "images")


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str  # the bug, in one line
    cells: tuple[Cell, ...]  # the smallest cells that should kill it
    harmless: str | None = None  # why surviving is fine, if it is
    tests: tuple[str, ...] = ()  # pytest node IDs that should fail on it (no cell can)
    killed_by: tuple[str, ...] = ()  # the invariants of which one must kill it, if given

    @property
    def patch(self) -> Path:
        return MUTANTS_DIR / f"{self.name}.patch"

    @property
    def python(self) -> bool:
        """A Python mutant: its patch changes ``.py`` files only."""
        return is_python_patch(self.patch)


def patched_files(patch: Path) -> list[str]:
    """The files a unified diff (``patch -p1``) changes."""
    return [
        line[4:].split("\t")[0].removeprefix("b/")
        for line in patch.read_text().splitlines()
        if line.startswith("+++ ")
    ]


def is_python_patch(patch: Path) -> bool:
    """Whether ``patch`` changes Python files only (and some)."""
    files = patched_files(patch)
    return bool(files) and all(f.endswith(".py") for f in files)


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived", "harmless", "error"
    killers: dict[str, int] = field(default_factory=dict)  # invariant -> failing states
    cells: list[str] = field(default_factory=list)  # the cells that killed it
    detail: str = ""


def _workload(text: str) -> str:
    """A workload as the catalogue names it: a built-in name (MULTI,
    DHL_UPDATE...) or a spec."""
    return BUILTIN_WORKLOADS[text] if text.isupper() else text


def _cell(d: dict[str, Any]) -> Cell:
    """A catalogue cell, with the enumeration options (``states``: a
    budget) of the default matrix's cell it names, so that it checks the
    states the default sweep checks."""
    sut, workload, fs = d["sut"], _workload(d["workload"]), d.get("fs", "ext4")
    faults = parse_faults(d.get("faults", ()))
    same = (
        c
        for c in matrix("default")
        if (c.sut, c.workload, c.fs, c.faults) == (sut, workload, fs, faults)
    )
    return Cell(
        sut,
        workload,
        fs,
        tuple(d.get("strategies", ("prefix", "reorder"))),
        get_sut(sut).weaknesses,
        faults=faults,
        states=next((c.states for c in same), ()),
    )


def catalogue() -> list[Mutant]:
    """Every mutant of the catalogue, each with its patch file."""
    data = tomllib.loads(CATALOGUE.read_text())
    out = []
    for name, d in data.items():
        m = Mutant(
            name,
            d["what"],
            tuple(_cell(c) for c in d.get("cells", ())),
            d.get("harmless"),
            tuple(d.get("tests", ())),
            tuple(d.get("killed_by", ())),
        )
        if not m.patch.exists():
            raise CrashlabError(f"{CATALOGUE}: mutant {name} has no {m.patch.name}")
        out.append(m)
    return out


def _digest(m: Mutant) -> str:
    h = hashlib.sha256(m.patch.read_bytes())
    for rel in SOURCES:
        p = ROOT / rel
        for f in sorted([p] if p.is_file() else p.rglob("*")):
            if f.is_file() and "build" not in f.relative_to(ROOT).parts:
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def copy_sources(dst: Path) -> None:
    """Copy what a mutant build patches and compiles (``SOURCES``, without
    build outputs) into ``dst``."""
    for rel in SOURCES:
        src, to = ROOT / rel, dst / rel
        to.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, to, ignore=shutil.ignore_patterns("build"))
        else:
            shutil.copy2(src, to)


def copy_python(dst: Path) -> None:
    """Copy the Python packages and tests (``PY_SOURCES``) into ``dst``,
    without build outputs or caches, and link their build outputs and the
    base images (``LINKED``) from this tree."""
    skip = shutil.ignore_patterns("build", "__pycache__", "*.pyc")
    for rel in PY_SOURCES:
        src, to = ROOT / rel, dst / rel
        if src.is_dir():
            shutil.copytree(src, to, ignore=skip)
        else:
            shutil.copy2(src, to)
    for rel in LINKED:
        if (ROOT / rel).exists():
            (dst / rel).symlink_to(ROOT / rel)


def copy_for(patch: Path, dst: Path) -> None:
    """Copy what ``patch`` applies to into ``dst``: the Python sources for a
    Python patch, the C sources otherwise."""
    if is_python_patch(patch):
        copy_python(dst)
    else:
        copy_sources(dst)


def apply(m: Mutant, folder: Path) -> None:
    """Apply ``m``'s patch in ``folder`` (a copy); CrashlabError if it does
    not apply."""
    p = subprocess.run(
        ["patch", "-p1", "--forward", "--batch", "-i", str(m.patch)],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise CrashlabError(
            f"mutant {m.name}: {m.patch.name} does not apply: "
            f"{(p.stdout + p.stderr).strip().splitlines()[-1]}"
        )


def build(m: Mutant) -> Path:
    """Build ``m`` (or reuse its cached build); return its folder, which
    holds ``TARGETS``: libdhl.so, the runner, its xLog recovery, the WALDIO and
    selective-journaling VFSes."""
    d = BUILD_ROOT / f"{m.name}-{_digest(m)}"
    if all((d / t).exists() for t in TARGETS):
        return d
    tmp = d.with_name(d.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    copy_sources(tmp)
    apply(m, tmp)
    mk = subprocess.run(["make", "-s", *TARGETS], cwd=tmp, capture_output=True, text=True)
    if mk.returncode != 0:
        raise CrashlabError(f"mutant {m.name} does not build: {mk.stderr.strip().splitlines()[-1]}")
    shutil.rmtree(d, ignore_errors=True)
    os.replace(tmp, d)
    return d


def _judge(m: Mutant, summary: dict[str, Any]) -> Outcome:
    """Killed when a cell broke its expectation; the killers are the
    promised invariants that failed (or the unsafe SUT's weakness missing)."""
    out = Outcome(m, "survived")
    for c in summary["cells"]:
        exp = c["expectation"]
        if exp["ok"]:
            continue
        out.status = "killed"
        out.cells.append(f"{c['sut']} {c['strategy']}")
        for inv in exp["guaranteed"]:
            n = c["verdicts"].get(inv, {}).get("fail", 0)
            if n:
                out.killers[inv] = out.killers.get(inv, 0) + n
        if not any(c["verdicts"].get(i, {}).get("fail", 0) for i in exp["guaranteed"]):
            out.killers["expectation"] = out.killers.get("expectation", 0) + 1
            out.detail = "; ".join(exp["broken"])
    if out.status == "killed" and m.killed_by and not set(m.killed_by) & set(out.killers):
        # killed, but not for the reason the catalogue gives: its cell no
        # longer reaches the bug the way it should
        out.status = "survived"
        out.detail = (
            f"killed only by {', '.join(sorted(out.killers))}, "
            f"not by {' or '.join(m.killed_by)} as the catalogue says"
        )
    if out.status == "survived" and m.harmless:
        out.status, out.detail = "harmless", m.harmless
    return out


def run_mutant(m: Mutant, out: Path, jobs: int) -> Outcome:
    """Build ``m`` (a C mutant) or copy and patch the Python sources (a
    Python mutant), then run its tests or sweep its cells in a child process
    (a fresh libdhl, or the patched modules, load only in a fresh process)."""
    if m.python:
        with temporary_folder(f"crashlab-mutant-{m.name}-") as copy:
            try:
                copy_python(copy)
                apply(m, copy)
            except CrashlabError as e:
                return Outcome(m, "error", detail=str(e))
            return _run(m, {**os.environ, "PYTHONPATH": str(copy)}, copy, out, jobs)
    try:
        d = build(m)
    except CrashlabError as e:
        return Outcome(m, "error", detail=str(e))
    env = {
        **os.environ,
        DHL_LIB: str(d / TARGETS[0]),
        RUNNER: str(d / TARGETS[1]),
        WALDIO_LIB: str(d / TARGETS[3]),
        SELVFS_LIB: str(d / TARGETS[4]),
    }
    return _run(m, env, ROOT, out, jobs)


def _run(m: Mutant, env: dict[str, str], cwd: Path, out: Path, jobs: int) -> Outcome:
    """Run ``m``'s tests, or sweep its cells, in ``cwd`` with ``env``."""
    if m.tests:
        return _run_tests(m, env, cwd)
    folder = out / m.name
    p = subprocess.run(
        [sys.executable, "-m", "harness.mutants", m.name, str(folder), str(jobs)],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    summary = SweepDir(folder).summary
    if p.returncode not in (0, 1) or not summary.exists():
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(m, "error", detail=f"the sweep exited {p.returncode}: {tail}")
    return _judge(m, json.loads(summary.read_text()))


def _run_tests(m: Mutant, env: dict[str, str], cwd: Path) -> Outcome:
    """Killed when one of the mutant's tests fails (pytest stops at the
    first); the killer is that test, the detail its message."""
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
        env={**env, "COLUMNS": "400"},  # the short summary's messages, not cut at 80
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    if p.returncode == 1:
        failed = [
            line.split(" ", 1)[1].split(" - ", 1)
            for line in p.stdout.splitlines()
            if line.startswith("FAILED ")
        ]
        return Outcome(
            m,
            "killed",
            {f"test {f[0].split('::')[-1]}": 1 for f in failed},
            detail="; ".join(f[-1] for f in failed),
        )
    if p.returncode == 0:
        return _judge(m, {"cells": []})
    tail = (p.stdout.strip().splitlines() or ["no output"])[-1]
    return Outcome(m, "error", detail=f"pytest exited {p.returncode}: {tail}")


def _sweep_cells(name: str, out: Path, jobs: int) -> int:
    """In the child: record and check the mutant's cells (the environment
    already points at its binaries); the sweep's exit code."""
    from harness.sweep.sweep import SweepOptions, run_sweep

    m = next(x for x in catalogue() if x.name == name)
    _, code = run_sweep(
        f"mutant-{name}", list(m.cells), out, SweepOptions(backend="fuse", jobs=jobs)
    )
    return code


if __name__ == "__main__":
    sys.exit(_sweep_cells(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
