"""Concurrent use of one output folder (harness/outlock.py): a second
writer of a check, sweep, merge or repro folder is refused at once with the
holder's PID, a lock dies with its holder, and ``--out`` onto earlier
results is refused unless ``--resume`` or ``--force``; two real commands
racing into one folder never double a state."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import CRASHLAB, Recordings

from harness.errors import CrashlabError
from harness.outlock import LOCK_NAME, locked_output
from harness.rundir import RunDir

TINY = "insert:txns=3,ops=1,tables=1,seed=1"
MATRIX = f'[[cell]]\nsut = "sqlite-wal-full"\nworkload = "{TINY}"\nstrategies = ["prefix"]\n'

HOLD = """
import sys
from pathlib import Path
from harness.outlock import locked_output
with locked_output(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A child process that holds the lock of ``tmp_path/held`` until its
    stdin closes."""
    folder = tmp_path / "held"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    try:
        yield folder, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("sqlite-wal-full", TINY)


@pytest.fixture(scope="module")
def state(run: RunDir, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A state ID of ``run`` (its check's first)."""
    out = tmp_path_factory.mktemp("check") / "c"
    assert crashlab("check", run.path, "--out", out, "--jobs", "1").returncode == 0
    return ids(out / "states.jsonl")[0]


def crashlab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CRASHLAB), *map(str, args)], capture_output=True, text=True, timeout=300
    )


def one_line(p: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The only stderr line of a command that failed with ``code``."""
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    return p.stderr.strip()


def ids(states: Path) -> list[str]:
    return [json.loads(line)["id"] for line in states.read_text().splitlines()]


def test_a_held_folder_is_refused_with_the_holders_pid(holder) -> None:
    folder, proc = holder
    with pytest.raises(
        CrashlabError,
        match=f"in use by another crashlab command "
        rf"\(PID {proc.pid}\)",
    ):
        with locked_output(folder):
            pass
    assert (folder / LOCK_NAME).read_text() == f"{proc.pid}\n"
    proc.stdin.close()  # the holder ends: the folder is free again
    proc.wait()
    with locked_output(folder):
        assert (folder / LOCK_NAME).read_text() == f"{os.getpid()}\n"


def test_a_killed_holder_leaves_no_stale_lock(holder) -> None:
    folder, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with locked_output(folder):
        pass


def _sleep_forever(ready: multiprocessing.synchronize.Event) -> None:
    ready.set()
    signal.pause()


def test_the_lock_is_reentrant_and_forked_children_do_not_keep_it(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    with locked_output(folder), locked_output(folder):  # a sweep and its own check
        child = ctx.Process(target=_sleep_forever, args=(ready,))  # as a check's worker
        child.start()
        assert ready.wait(10)
    try:
        # the holder let go; its forked child, still alive, must not hold the lock
        p = subprocess.run(
            [sys.executable, "-c", HOLD, str(folder)],
            input="",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 0 and p.stdout == "locked\n", p.stderr
    finally:
        child.kill()
        child.join()


def test_a_symlinked_lock_file_is_refused_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / LOCK_NAME).symlink_to(target)
    with pytest.raises(CrashlabError, match="symbolic link"):
        with locked_output(folder):
            pass
    assert target.read_text() == "keep me\n"


@pytest.mark.needs_fuse
def test_every_writer_of_a_held_folder_is_refused_at_once(run: RunDir, state: str, holder) -> None:
    folder, proc = holder
    runs = run.path.parent
    for args in (
        ["check", run.path, "--out", folder, "--resume", "--jobs", "1"],
        ["sweep", "--matrix", "default", "--out", folder, "--resume"],
        ["merge", "--out", folder, runs],
        ["repro", run.path, state, "--out", folder],
        ["record", "--backend", "fuse", "--out", folder, "--", "true"],
    ):
        p = crashlab(*args)
        # (record says first which backend it records with)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        line = p.stderr.strip().splitlines()[-1]
        assert line.startswith(
            f"crashlab: error: {folder}: in use by another crashlab command (PID {proc.pid})"
        ), args
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]


@pytest.mark.needs_fuse
def test_out_onto_a_checks_results_needs_resume_or_force(run: RunDir, tmp_path: Path) -> None:
    out = tmp_path / "c"
    assert crashlab("check", run.path, "--out", out, "--jobs", "1").returncode == 0
    first = ids(out / "states.jsonl")
    before = (out / "states.jsonl").stat().st_mtime_ns
    line = one_line(crashlab("check", run.path, "--out", out, "--jobs", "1"))
    assert line == (
        f"crashlab: error: {out}: already holds a check (result.json); "
        "--resume continues it, --force replaces it"
    )
    assert (out / "states.jsonl").stat().st_mtime_ns == before
    for flag in ("--resume", "--force"):
        p = crashlab("check", run.path, "--out", out, "--jobs", "1", flag)
        assert p.returncode == 0, p.stderr
        assert ids(out / "states.jsonl") == first
        assert json.loads((out / "result.json").read_text())["states"]["checked"] == len(first)


@pytest.mark.needs_fuse
def test_out_onto_a_sweep_merge_or_repro_needs_force(
    run: RunDir, state: str, tmp_path: Path
) -> None:
    swept = tmp_path / "s"
    (swept / "runs").mkdir(parents=True)
    line = one_line(crashlab("sweep", "--matrix", "default", "--out", swept))
    assert line.endswith("already holds a sweep (runs); --resume continues it, --force replaces it")
    merged = tmp_path / "m"
    merged.mkdir()
    (merged / "summary.json").write_text("{}")
    line = one_line(crashlab("merge", "--out", merged, run.path.parent))
    assert line.endswith("already holds a sweep (summary.json); --force replaces it")
    kept = tmp_path / "r"
    assert crashlab("repro", run.path, state, "--out", kept).returncode == 0
    line = one_line(crashlab("repro", run.path, state, "--out", kept))
    assert line.endswith("already holds a repro (repro.json); --force replaces it")
    assert crashlab("repro", run.path, state, "--out", kept, "--force").returncode == 0


def _race(*commands: list[str | Path]) -> list[subprocess.CompletedProcess[str]]:
    """Start ``commands`` at once; their outcomes."""
    procs = [
        subprocess.Popen(
            [str(CRASHLAB), *map(str, c)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for c in commands
    ]
    out = []
    for c, p in zip(commands, procs, strict=True):
        stdout, stderr = p.communicate(timeout=300)
        out.append(subprocess.CompletedProcess(c, p.returncode, stdout, stderr))
    return out


@pytest.mark.needs_fuse
def test_two_resumed_checks_into_one_folder_never_double(run: RunDir, tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    assert crashlab("check", run.path, "--out", ref, "--jobs", "1").returncode == 0
    want = ids(ref / "states.jsonl")
    for i in range(3):
        out = tmp_path / f"c{i}"
        cmd: list[str | Path] = ["check", run.path, "--out", out, "--resume", "--jobs", "1"]
        results = _race(cmd, cmd)
        assert 0 in [p.returncode for p in results]
        for p in results:
            if p.returncode != 0:  # refused while the other ran (else it resumed after it)
                assert "in use by another crashlab command (PID " in one_line(p)
        assert ids(out / "states.jsonl") == want
        assert json.loads((out / "result.json").read_text())["states"]["checked"] == len(want)


@pytest.mark.needs_fuse
def test_two_sweeps_into_one_out_at_once(tmp_path: Path, private_tmp: Path) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    for i in range(2):
        out = tmp_path / f"s{i}"
        cmd: list[str | Path] = [
            "sweep",
            "--matrix",
            matrix,
            "--out",
            out,
            "--jobs",
            "1",
            "--no-progress",
        ]
        results = _race(cmd, cmd)
        # one sweeps; the other is refused, while the first runs or after it
        assert sorted(p.returncode for p in results) == [0, 2], [p.stderr for p in results]
        line = one_line(max(results, key=lambda p: p.returncode))
        assert (
            "in use by another crashlab command (PID " in line or "already holds a sweep" in line
        ), line
        summary = json.loads((out / "summary.json").read_text())
        (cell,) = summary["cells"]
        (states,) = (out / cell["run"] / "check").glob("*/states.jsonl")
        got = ids(states)
        assert len(got) == len(set(got)) == cell["states"]["checked"] > 0
