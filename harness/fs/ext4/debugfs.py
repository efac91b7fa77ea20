"""Talking to ``debugfs``: one call with a batch of commands
(:func:`debugfs`), the extents of a ``stat`` (:func:`extents`), and one
long-lived process fed requests on stdin (:class:`DebugfsSession`).

Starting debugfs costs a fork and exec per call (~3 ms here); the requests
themselves (``open``, ``jr``, ``rdump`` of a small file system) take tenths
of a millisecond.  A worker therefore keeps one debugfs and talks to it
through pipes: each request is followed by an unknown command, a *sentinel*
whose error message (stderr, unbuffered) marks the end of that request's
output.  debugfs flushes stdout at every prompt, before it reads the next
line, so a request's stdout always arrives before its sentinel.

The process dies with its parent: the kernel sends it SIGKILL when the
process that started it exits (PR_SET_PDEATHSIG), and it exits by itself at
the end of its stdin.  :meth:`close` ends it by its PID, never by name.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from harness.errors import CrashlabError
from harness.sysops import tool

PR_SET_PDEATHSIG = 1
SENTINEL = "crashlab-sync-"
_PROMPT = "debugfs:  "
# The line debugfs prints for an unknown request, which we use as sentinel.
_SENTINEL_RE = re.compile(
    rb'debugfs: Unknown request "crashlab-sync-(\d+)"\.  '
    rb'Type "\?" for a request list\.\n'
)


def debugfs(image: Path, commands: Sequence[str]) -> str:
    """Run every command in one read-only debugfs process; its stdout (each
    command's output follows a ``debugfs: COMMAND`` line)."""
    return tool(
        ["debugfs", "-f", "-", str(image)], "debugfs", timeout=60, stdin="\n".join(commands) + "\n"
    ).stdout


def quote(path: Path | str) -> str:
    """A path as one debugfs argument."""
    s = str(path)
    if '"' in s or "\n" in s:
        raise DebugfsError(f"path not passable to debugfs: {s!r}")
    return f'"{s}"'


def extents(stat: str) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The data extents ``(lblk, pblk, count)`` and the extent-tree blocks
    listed by a debugfs ``stat``."""
    ext: list[tuple[int, int, int]] = []
    tree: list[int] = []
    body = stat.split("EXTENTS:", 1)[1] if "EXTENTS:" in stat else ""
    body = body.split("debugfs:", 1)[0]
    for m in re.finditer(r"\((ETB\d+|\d+(?:-\d+)?)\):(\d+)(?:-(\d+))?", body):
        if m.group(1).startswith("ETB"):
            tree.append(int(m.group(2)))
            continue
        lo = int(m.group(1).split("-")[0])
        p0 = int(m.group(2))
        p1 = int(m.group(3)) if m.group(3) else p0
        ext.append((lo, p0, p1 - p0 + 1))
    return ext, tree


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: no Python objects beyond this.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class DebugfsError(CrashlabError):
    """debugfs died, hung, or answered something unreadable."""


class DebugfsSession:
    """A debugfs process (started with ``options``, e.g. ``-n``);
    :meth:`request` runs commands, one output each."""

    def __init__(self, *options: str, timeout: float = 60.0) -> None:
        env = {
            **os.environ,
            "PAGER": "__none__",
            "DEBUGFS_PAGER": "__none__",
            "SS_READLINE_PATH": "",
            "LC_ALL": "C",
        }
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["debugfs", *options],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent,
            )
        except FileNotFoundError:
            raise CrashlabError("debugfs not found: run `make setup`") from None
        self.pid = self.proc.pid
        self.timeout = timeout
        self._n = 0
        self._buf = b""
        # Swallow the version banner debugfs prints at start (stderr), so
        # that every request's output is its own.
        self.request(["params"])

    def __enter__(self) -> DebugfsSession:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def request(self, commands: list[str]) -> list[str]:
        """Run ``commands`` in order; return each one's output (stdout and
        stderr merged, prompts and the banner removed).  A dead or silent
        debugfs raises :class:`DebugfsError` (and is killed)."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise DebugfsError("debugfs session is closed")
        for c in commands:
            if "\n" in c:
                raise DebugfsError(f"debugfs request with a newline: {c!r}")
        first = self._n + 1
        self._n += len(commands)
        script = "".join(f"{c}\n{SENTINEL}{first + i}\n" for i, c in enumerate(commands))
        try:
            proc.stdin.write(script.encode())
            proc.stdin.flush()
        except BrokenPipeError:
            self._kill()
            raise DebugfsError("debugfs exited unexpectedly") from None
        outputs: list[str] = []
        fd = proc.stdout.fileno()
        for i in range(len(commands)):
            want = first + i
            while (m := _SENTINEL_RE.search(self._buf)) is None:
                if not self._read(fd):
                    self._kill()
                    raise DebugfsError(f"debugfs exited while running {commands[i]!r}")
            if int(m.group(1)) != want:
                self._kill()
                raise DebugfsError(f"debugfs out of step: sentinel {m.group(1)!r}, expected {want}")
            head = self._buf[: m.start()].decode("utf-8", "replace")
            self._buf = self._buf[m.end() :]
            outputs.append(head.replace(_PROMPT, ""))
        return outputs

    def _read(self, fd: int) -> bool:
        r, _, _ = select.select([fd], [], [], self.timeout)
        if not r:
            self._kill()
            raise DebugfsError(f"debugfs gave no answer for {self.timeout:.0f} s")
        b = os.read(fd, 1 << 16)
        if not b:
            return False
        self._buf += b
        return True

    def close(self) -> None:
        """End the process: EOF on its stdin, then SIGKILL by PID if it
        lingers.  Idempotent."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._kill()
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            self.proc = None

    def _kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.proc = None
