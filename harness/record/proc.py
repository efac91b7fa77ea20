"""Running the recorded command: in its own process group, so that an
interrupted recording (and the end of the command) ends every process the
command started, and none keeps the recorded file system busy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.env import own_process
from harness.errors import CrashlabError
from harness.sysops import Interrupted, signals_deferred

GRACE_S = 3.0  # how long an interrupted command gets before SIGKILL


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def run_command(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str], owner: Path | None = None
) -> int:
    """Run ``command`` in ``cwd`` with exactly ``env``; return its exit status
    (negative: killed by that signal, as in :mod:`subprocess`).

    The command leads a new process group.  When it exits, whatever is left
    of its group is SIGKILLed before the leader is reaped (while the leader is
    a zombie its group ID cannot be reused, so the kill reaches only processes
    the command started).  If this call is interrupted (SIGINT/SIGTERM turned
    into an exception), the group gets the same signal, then SIGKILL after
    GRACE_S, and the exception propagates; an interrupt that arrives while
    the command is being started lands once it has started, so that the
    group is ended then too.  ``owner``: the working folder in which the
    group is noted (harness.env.own_process), so that a reaper can end it if
    this process is killed outright."""
    proc: subprocess.Popen[bytes] | None = None
    try:
        # Deferred: Popen returns only after the command's exec, which may
        # already be running it; an interrupt raised inside Popen (or before
        # the group is noted) would lose the one handle on a live group, which
        # then keeps the mount busy and the teardown stuck.
        with signals_deferred():
            proc = _start(command, cwd, env)
            if owner is not None:
                own_process(owner, "group", proc.pid)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        with signals_deferred():
            _killpg(proc.pid, signal.SIGKILL)
            return proc.wait()
    except BaseException as e:
        if proc is not None and proc.returncode is None:
            sig = e.signum if isinstance(e, Interrupted) else signal.SIGINT
            with signals_deferred():
                _end_group(proc, sig)
        raise


def _start(command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``command`` started as the leader of a new session (and group)."""
    try:
        return subprocess.Popen(list(command), cwd=cwd, env=dict(env), start_new_session=True)
    except OSError as e:
        raise CrashlabError(f"cannot run {command[0]!r}: {e.strerror}") from None


def _end_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the group ``proc`` leads, give its leader GRACE_S to
    exit, then SIGKILL what is left of the group and reap the leader.  The
    leader is reaped only after the last kill (its group ID stays ours until
    then)."""
    _killpg(proc.pid, sig)
    deadline = time.monotonic() + GRACE_S
    while not _exited(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    _killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _exited(pid: int) -> bool:
    """Whether our child ``pid`` has exited (it is not reaped)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
