"""Damaged inputs (tests/damage.py): what a damage is, and the runner that
feeds each to the real ``crashlab`` command under a memory and a time cap
and judges what it did."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CRASHLAB = Path(sys.executable).with_name("crashlab")
ROOT = Path(__file__).resolve().parent.parent
REFUSE, ANY = "refuse", "any"
MEMORY_CAP = 2 << 30  # bytes of address space per command (prlimit --as)
TIME_CAP = 120.0  # seconds per command: more is a hang
KINDS = ("log", "meta", "matrix", "cli", "shard")


@dataclass
class Damage:
    """One damaged input: what was done, whether it must be refused, and
    how to build and run it in a fresh folder."""

    kind: str
    what: str
    expect: str  # REFUSE or ANY
    make: Callable[[Path], list[str]]  # builds the input under a folder; the argv

    def __str__(self) -> str:
        return f"{self.kind}: {self.what} ({self.expect})"


@dataclass
class Outcome:
    damage: Damage
    rc: int | None  # None: killed at the time cap
    stderr: str
    seconds: float
    problems: list[str] = field(default_factory=list)


# --- running ----------------------------------------------------------------


def _copy_run(run: Path, folder: Path) -> Path:
    dst = folder / "run"
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns("check"), symlinks=True)
    return dst


def _run_command(seed: int, run: Path, folder: Path, check_only: bool = False) -> list[str]:
    """A command that reads a run folder: check most often (it gives
    verdicts), else states, log show/stat, replay, repro (seeded); only
    check with ``check_only``."""
    rng = random.Random(seed)
    check = ["check", str(run), "--strategy", "prefix", "--jobs", "1", "--no-progress"]
    check += ["--max-states", "40", "--out", str(folder / "check")]
    if check_only:
        return rng.choice([check])
    return rng.choice(
        [
            check,
            check,  # twice: the most frequent command
            ["states", str(run), "--count"],
            ["log", "stat", str(run)],
            ["log", "show", str(run), "--marks-only"],
            ["replay", str(run), "--out", str(folder / "replayed.img")],
            ["repro", str(run), "e1.p0"],
        ]
    )


def run_damage(d: Damage, folder: Path) -> Outcome:
    """Build ``d`` in ``folder``, run the real command under the caps and
    judge it: no traceback, exit code 0/1/2 (2 when it must be refused, with
    one ``crashlab: error:`` or usage line and no check result), no hang."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = d.make(folder)
    before = set(folder.glob("**/result.json"))  # a shard's own checks have some
    env = {**os.environ, "CRASHLAB_TMPDIR": str(folder / "tmp")}
    (folder / "tmp").mkdir(exist_ok=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            ["prlimit", f"--as={MEMORY_CAP}", "--", str(CRASHLAB), *argv],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIME_CAP,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = None
        err = (
            (e.stderr or b"").decode(errors="replace")
            if isinstance(e.stderr, bytes)
            else (e.stderr or "")
        )
    out = Outcome(d, rc, err, time.monotonic() - t0)
    if rc is None:
        out.problems.append(f"hang (killed after {TIME_CAP:.0f} s)")
    if "Traceback" in err:
        out.problems.append("traceback: " + err.strip().splitlines()[-1][:200])
    if rc is not None and rc not in (0, 1, 2):
        out.problems.append(f"exit code {rc}")
    if d.expect == REFUSE and rc is not None and rc != 2:
        out.problems.append(f"not refused (exit {rc})")
    if d.expect == REFUSE and set(folder.glob("**/result.json")) - before:
        out.problems.append("a verdict on an inconsistent input (result.json written)")
    if rc == 2 and d.expect == REFUSE:
        lines = [x for x in err.splitlines() if x.strip()]
        ok = lines and (lines[-1].startswith(("crashlab: error: ", "Error: ")))
        if not ok:
            out.problems.append(f"refusal is not one error line: {err.strip()[:200]!r}")
    return out


def run_all(items: list[Damage], root: Path, threads: int = 2) -> list[Outcome]:
    """Every damage in its own folder under ``root``, ``threads`` at a time;
    each folder is removed once judged."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> Outcome:
        folder = root / f"d{i:05d}"
        try:
            return run_damage(items[i], folder)
        finally:
            _remove(folder)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(len(items))))


def _remove(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_fifo():
            p.unlink()
    shutil.rmtree(folder, ignore_errors=True)


def table(outcomes: list[Outcome]) -> str:
    """Per kind: inputs, refused (exit 2), verdicts (exit 0/1), tracebacks,
    hangs, other problems, and the slowest input."""
    lines = [
        f"{'kind':8} {'inputs':>6} {'refused':>7} {'verdict':>7} {'traceback':>9} "
        f"{'hang':>4} {'problem':>7} {'max s':>6}"
    ]
    for kind in KINDS:
        rows = [o for o in outcomes if o.damage.kind == kind]
        if not rows:
            continue
        lines.append(
            f"{kind:8} {len(rows):6d} {sum(o.rc == 2 for o in rows):7d} "
            f"{sum(o.rc in (0, 1) for o in rows):7d} "
            f"{sum(any(p.startswith('traceback') for p in o.problems) for o in rows):9d} "
            f"{sum(o.rc is None for o in rows):4d} {sum(bool(o.problems) for o in rows):7d} "
            f"{max(o.seconds for o in rows):6.1f}"
        )
    return "\n".join(lines)
