"""A Ctrl-C is never lost, never half-tears-down, never a traceback.

* SIGINT delivered at chosen points of a check (while the worker pool
  starts, while the work folder is removed, inside a ``__del__``) stops it
  with the interrupt, and leaves no worker and no folder behind;
* Ctrl-C at any moment of a command's start-up (before and after ``main``
  has installed its handlers) ends it with one line and 130, or, before
  the interpreter runs a line of crashlab, by the default action (status
  130 in a shell, no output); never a traceback, nothing left behind.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import CRASHLAB, Recordings, interrupt_group, tagged

from harness.check.check import CheckOptions, check_run
from harness.rundir import RESULT_NAME, RunDir
from harness.states import Options
from harness.sysops import Interrupted, signals_raise

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _ctrl_c_as_in_a_terminal() -> Iterator[None]:
    """SIGINT at Python's default handler, also when pytest runs in a
    background job (which starts it ignored; a check leaves an ignored
    signal ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _sigint_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)


class _SigintOnDel:
    """Sends SIGINT to this process from its ``__del__``: the handler's
    exception is raised there, and Python drops it ("Exception ignored
    in"), as it does in multiprocessing's Finalize callbacks."""

    def __del__(self) -> None:
        _sigint_self()


# What Python drops is reported as a warning, which these tests expect.
swallowed = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@swallowed
def test_a_swallowed_interrupt_is_raised_at_the_next_safe_point() -> None:
    with pytest.raises(Interrupted, match="SIGINT"), signals_raise() as stopped:
        _SigintOnDel()  # dropped at once: its __del__ runs, the exception is lost
        stopped()


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("sqlite-delete-extra", "insert:txns=4,ops=3,tables=2,warmup=50,seed=1")


def _check(run: RunDir, out: Path, on_progress: Callable[[int, int], None] | None = None) -> None:
    check_run(
        run, CheckOptions(states=Options(strategy="reorder"), jobs=2), out, on_progress=on_progress
    )


def _no_worker_left() -> None:
    """No child process of this one (the pool's workers) and no thread of
    a pool are left; left ones are ended so that the next test starts clean."""
    children = multiprocessing.active_children()
    for p in children:
        p.terminate()
        p.join()
    assert children == []


@pytest.mark.needs_fuse
@pytest.mark.parametrize("point", ["workers forked", "handler threads started"])
@pytest.mark.usefixtures("private_tmp")
def test_sigint_while_the_pool_starts(
    run: RunDir, tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interrupt escaped Pool() before the with-block: its workers were
    never terminated, and its thread went on forking new ones while the
    interpreter exited (the check hung, or left orphaned workers)."""
    pool_cls = multiprocessing.pool.Pool
    if point == "workers forked":
        forked = pool_cls._repopulate_pool

        def hook(self: Any) -> Any:  # noqa: ANN401
            done = forked(self)
            _sigint_self()
            return done

        monkeypatch.setattr(pool_cls, "_repopulate_pool", hook)
    else:  # the worker handler's thread, while __init__ starts the others
        handle = pool_cls._handle_workers

        def hook(*args: Any) -> None:  # noqa: ANN401
            _sigint_self()
            handle(*args)

        monkeypatch.setattr(pool_cls, "_handle_workers", staticmethod(hook))
    with pytest.raises(KeyboardInterrupt):
        _check(run, tmp_path / "out")
    _no_worker_left()
    assert not (tmp_path / "out" / RESULT_NAME).exists()


@pytest.mark.needs_fuse
@pytest.mark.usefixtures("private_tmp")
def test_a_worker_stopped_before_it_set_its_handlers(
    run: RunDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT right after the workers were forked; they are slow to set
    their own handlers.  Pool.terminate's SIGTERM reached a worker while
    it still had the parent's handler (the one deferring signals while
    the pool starts), which took it: the worker lived on and the check
    waited for it forever (seen under load).  A watchdog ends that after
    30 s, and the test fails."""
    import harness.check.pool as pool

    forked = multiprocessing.pool.Pool._repopulate_pool

    def hook(self: Any) -> Any:  # noqa: ANN401
        done = forked(self)
        _sigint_self()
        return done

    def slow_worker_signals() -> None:
        time.sleep(1)
        check_worker_signals()

    check_worker_signals = pool.worker_signals
    monkeypatch.setattr(multiprocessing.pool.Pool, "_repopulate_pool", hook)
    monkeypatch.setattr(pool, "worker_signals", slow_worker_signals)
    killed: list[int] = []
    watchdog = threading.Timer(30, lambda: killed.extend(_kill_children()))
    watchdog.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _check(run, tmp_path / "out")
    finally:
        watchdog.cancel()
    assert killed == [], "the check waited for a worker that lived on"
    _no_worker_left()


def _kill_children() -> list[int]:
    """SIGKILL this process's children; their PIDs."""
    me = str(os.getpid())
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:
                pids.append(int(stat.parent.name))
        except (OSError, IndexError):
            continue
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


@pytest.mark.needs_fuse
@pytest.mark.usefixtures("private_tmp")
def test_sigint_while_the_work_folder_is_removed(
    run: RunDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupting rmtree left half the work folder behind."""
    rmtree = shutil.rmtree

    def hook(path: Any, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401
        if Path(path).name.startswith("crashlab-check-"):
            _sigint_self()  # raised inside rmtree, at its first call
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", hook)
    with pytest.raises(KeyboardInterrupt):
        _check(run, tmp_path / "out")
    monkeypatch.undo()
    _no_worker_left()
    # private_tmp asserts that the work folder is gone


@pytest.mark.needs_fuse
@swallowed
@pytest.mark.usefixtures("private_tmp")
def test_an_interrupt_swallowed_in_a_del_still_stops_the_check(run: RunDir, tmp_path: Path) -> None:
    """An exception raised in a __del__ or weakref callback is dropped:
    the check ran on and wrote its result."""
    with pytest.raises(KeyboardInterrupt):
        _check(run, tmp_path / "out", on_progress=lambda g, c: _SigintOnDel() and None)
    _no_worker_left()
    assert not (tmp_path / "out" / RESULT_NAME).exists()


# --- Ctrl-C during a command's start-up --------------------------------------

DELAYS = [i * 0.025 for i in range(21)]  # 0 .. 0.5 s
INTERRUPTED = "crashlab: interrupted (SIGINT); `--resume` continues"


def _ctrl_c_at(args: list[str], delay: float, private_tmp: Path) -> tuple[int, str, str]:
    """Start ``crashlab ARGS`` as a terminal does (its own process group,
    SIGINT at its default action even when this test runs in a background
    job), send SIGINT to the group after ``delay`` s; return its status,
    stdout and stderr once it is gone, and check that nothing is left."""
    token = uuid.uuid4().hex
    env = {**os.environ, "CRASHLAB_TMPDIR": str(private_tmp), "CRASHLAB_TEST_TOKEN": token}
    p = subprocess.Popen(
        ["env", "--default-signal=INT", str(CRASHLAB), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(delay)
    out, err = interrupt_group(p, f"crashlab {' '.join(args)} (SIGINT after {delay} s)")
    deadline = time.monotonic() + 5
    while tagged(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tagged(token) == []
    assert list(private_tmp.iterdir()) == []
    return p.returncode, out, err


def _assert_quiet_stop(rc: int, err: str, finished: bool, what: str) -> str:
    """130 with the one line; killed by SIGINT's default action without a
    word (before Python ran crashlab's first line, or after main returned);
    or 0 when the command had finished.  Returns which."""
    assert "Traceback" not in err and "Error" not in err, (what, err)
    if rc == 128 + signal.SIGINT:
        assert err.strip().splitlines()[-1] == INTERRUPTED, (what, err)
        return "interrupted"
    if rc == -signal.SIGINT:
        return "default action"
    assert rc == 0 and finished, (what, rc, err)
    return "finished"


def _sweep(
    args: Callable[[int], list[str]], private_tmp: Path, finished: Callable[[int, str], bool]
) -> dict[str, int]:
    """Ctrl-C at each of DELAYS (``args(i)``, ``finished(i, stdout)`` for
    the i-th); how many runs ended which way."""
    seen: dict[str, int] = {}
    for i, delay in enumerate(DELAYS):
        rc, out, err = _ctrl_c_at(args(i), delay, private_tmp)
        how = _assert_quiet_stop(rc, err, finished(i, out), f"{args(i)} at {delay:.3f} s")
        seen[how] = seen.get(how, 0) + 1
    return seen


@pytest.mark.slow
def test_ctrl_c_during_start_up_of_version(private_tmp: Path) -> None:
    seen = _sweep(
        lambda i: ["--version"], private_tmp, lambda i, out: out.startswith("crashlab, version")
    )
    assert seen.get("interrupted", 0) > 0, seen  # the sweep did reach the imports


@pytest.mark.slow
@pytest.mark.needs_fuse
@pytest.mark.parametrize("command", ["check", "states"])
def test_ctrl_c_during_start_up_of_a_command(
    run: RunDir, private_tmp: Path, tmp_path: Path, command: str
) -> None:
    def args(i: int) -> list[str]:
        if command == "check":
            return [
                "check",
                str(run.path),
                "--strategy",
                "reorder",
                "--jobs",
                "2",
                "--no-progress",
                "--out",
                str(tmp_path / f"out{i}"),
            ]
        return ["states", str(run.path), "--strategy", "reorder"]

    def finished(i: int, out: str) -> bool:
        if command == "check":
            return (tmp_path / f"out{i}" / RESULT_NAME).exists()
        return out.endswith("\n")

    seen = _sweep(args, private_tmp, finished)
    assert seen.get("interrupted", 0) > 0, seen
