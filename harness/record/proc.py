"""Running the recorded command: in its own process group, so that an
interrupted recording (and the end of the command) ends every process the
command started, and none keeps the recorded file system busy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.env import own_process
from harness.errors import CrashlabError
from harness.sysops import Interrupted

GRACE_S = 3.0  # how long an interrupted command gets before SIGKILL


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def run_command(command: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                owner: Path | None = None) -> int:
    """Run ``command`` in ``cwd`` with exactly ``env``; return its exit status
    (negative: killed by that signal, as in :mod:`subprocess`).

    The command leads a new process group.  When it exits, whatever is left
    of its group is SIGKILLed before the leader is reaped (while the leader is
    a zombie its group ID cannot be reused, so the kill reaches only processes
    the command started).  If this call is interrupted (SIGINT/SIGTERM turned
    into an exception), the group gets the same signal, then SIGKILL after
    GRACE_S, and the exception propagates.  ``owner``: the working folder
    in which the group is noted (harness.env.own_process), so that a reaper
    can end it if this process is killed outright."""
    try:
        proc = subprocess.Popen(list(command), cwd=cwd, env=dict(env), start_new_session=True)
    except OSError as e:
        raise CrashlabError(f"cannot run {command[0]!r}: {e.strerror}") from None
    pgid = proc.pid
    if owner is not None:
        own_process(owner, "group", pgid)
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except BaseException as e:
        term = isinstance(e, Interrupted) and e.args == ("SIGTERM",)
        sig = signal.SIGTERM if term else signal.SIGINT
        _killpg(pgid, sig)
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        _killpg(pgid, signal.SIGKILL)
        proc.wait()
        raise
    _killpg(pgid, signal.SIGKILL)
    return proc.wait()
