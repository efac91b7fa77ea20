"""A persistent user checker: one process per worker that judges many
crash states over a line protocol (docs/your-application.md, "A
persistent checker").

For each state crashlab writes one JSON request line on the checker's
stdin — ``{"protocol": 1, "files": FOLDER, "state": FACTS}``, FACTS being
what ``CRASHLAB_STATE_JSON`` holds — and reads one JSON reply line from
its stdout: ``{"verdict": "pass" | "fail" | "skip" | "error",
"explanation": TEXT}``.  A reply not within the timeout, a crash, an early
exit or a line that is not such a reply is a *checker error* for that state
(never a pass): the process group (the session it was started in, by its
PID) is killed and the checker started again for the next state.  Its
stderr goes to a file, truncated at each request; its tail explains an
error.  At the end its stdin is closed and its group killed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from checkers.verdict import Verdict, errored, failed, passed, skipped

PROTOCOL = 1
REPLY_MAX = 1 << 20  # bytes of one reply line
STDERR_MAX = 1 << 16  # bytes of stderr read back for an error
EXPLANATION_MAX = 2000
GRACE = 0.5  # seconds a checker has to exit once its stdin is closed
VERDICTS = {"pass": passed, "fail": failed, "skip": skipped, "error": errored}
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: no Python objects beyond this.
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class CheckerDied(Exception):
    """The checker gave no usable reply (the message says why)."""


class Server:
    """One persistent checker process, started on first use and again
    after each failure; ``argv`` runs in ``cwd`` with ``env``, its stderr
    into ``stderr`` (a file path)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], stderr: Path) -> None:
        self.argv, self.cwd, self.env, self.stderr = argv, cwd, env, stderr
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0  # how many times it was started (a test reads it)

    def _start(self) -> subprocess.Popen[bytes]:
        with open(self.stderr, "ab") as err:  # O_APPEND: truncating it from here is safe
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            except OSError as e:
                raise CheckerDied(f"could not start: {e}") from None
        self.starts += 1
        return self.proc

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The checker's reply to ``request``; CheckerDied (after ending
        the checker) when there is none within ``timeout`` seconds."""
        try:
            return self._ask(request, timeout)
        except CheckerDied as e:
            self.close(grace=0)
            raise CheckerDied(f"{e}{self._stderr_tail()}") from None

    def _ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        proc = self.proc if self.proc is not None and self.proc.poll() is None else None
        if self.stderr.exists():  # before a start: what a new process says at once is kept
            os.truncate(self.stderr, 0)
        if proc is None:
            self.close(grace=0)
            proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request, sort_keys=True).encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise CheckerDied(self._exited(proc, "before reading the request")) from None
        line = self._read_line(proc, time.monotonic() + timeout, timeout)
        return _reply(line)

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float, timeout: float) -> bytes:
        """One line of the checker's stdout, by ``deadline``; a second line
        already there is a protocol error."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise CheckerDied(f"gave no reply within {timeout:g} s (killed)")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise CheckerDied(self._exited(proc, "without a reply"))
            buf += chunk
            if len(buf) > REPLY_MAX:
                raise CheckerDied(f"wrote a reply line longer than {REPLY_MAX} bytes")
        line, _, rest = buf.partition(b"\n")
        if rest:
            raise CheckerDied(f"wrote more than one line for one request: {_show(rest)}")
        return line

    @staticmethod
    def _exited(proc: subprocess.Popen[bytes], when: str) -> str:
        try:
            rc = proc.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            return f"closed its stdout {when}"
        how = f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited {rc}"
        return f"{how} {when}"

    def _stderr_tail(self) -> str:
        try:
            with open(self.stderr, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - STDERR_MAX))
                err = f.read(STDERR_MAX).decode("utf-8", errors="replace").strip()
        except OSError:
            return ""
        if not err:
            return "; no output on stderr"
        return "; stderr: " + (err if len(err) <= 600 else "…" + err[-600:])

    def close(self, grace: float = GRACE) -> None:
        """End the checker: close its stdin, let it exit for ``grace``
        seconds, then kill its process group (by the PID it was started
        with, its group's ID) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        if grace > 0:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _show(data: bytes) -> str:
    s = data.decode("utf-8", errors="replace").strip()
    return repr(s if len(s) <= 200 else s[:200] + "…")


def _reply(line: bytes) -> dict[str, Any]:
    """A reply line as a dict with a known ``verdict`` and a string
    ``explanation``; CheckerDied when it is not one."""
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        raise CheckerDied(f"replied with a line that is not JSON: {_show(line)}") from None
    if not isinstance(reply, dict) or reply.get("verdict") not in VERDICTS:
        raise CheckerDied(
            'replied without "verdict": "pass", "fail", "skip" or "error": ' + _show(line)
        )
    why = reply.get("explanation", "")
    if not isinstance(why, str):
        raise CheckerDied(f'replied with an "explanation" that is not a string: {_show(line)}')
    return reply


def verdict_of(invariant: str, reply: dict[str, Any]) -> Verdict:
    """The verdict a (checked) reply gives ``invariant``."""
    why = reply.get("explanation", "")
    why = why if len(why) <= EXPLANATION_MAX else why[:EXPLANATION_MAX] + " …(cut)"
    kind = reply["verdict"]
    if kind == "pass":
        return passed(invariant, why.splitlines()[0] if why else "")
    if kind == "fail":
        return failed(invariant, why or "the checker replied fail")
    if kind == "error":
        return errored(invariant, "the checker replied error: " + (why or "no explanation"))
    return skipped(invariant, why or "the checker skipped the state")


def request(files: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """The request of one state (its recovered files' folder, its facts)."""
    return {"protocol": PROTOCOL, "files": str(files), "state": facts}


def py_argv(target: str) -> list[str]:
    """How a ``py:`` checker's process is started (harness/check/pyserve.py)."""
    return [sys.executable, "-m", "harness.check.pyserve", target]


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this crashlab's own package first on PYTHONPATH (a
    ``py:`` checker's process imports ``harness.check.pyserve``)."""
    root = str(Path(__file__).resolve().parents[2])
    path = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": root + (os.pathsep + path if path else "")}


class Servers:
    """The persistent checkers of one worker, by invariant, started in
    ``cwd`` (where crashlab runs) on first use; their stderr files under
    ``work``."""

    def __init__(self, cwd: Path, work: Path) -> None:
        self.cwd, self.work = cwd, work
        self.running: dict[str, Server] = {}

    def judge(
        self,
        invariant: str,
        argv: list[str],
        env: dict[str, str],
        timeout: float,
        files: Path,
        facts: dict[str, Any],
    ) -> Verdict:
        """``invariant``'s verdict on one state by its checker ``argv``
        (started with ``env``)."""
        server = self.running.get(invariant)
        if server is None:
            self.work.mkdir(parents=True, exist_ok=True)
            stderr = self.work / f"stderr-{len(self.running)}"
            server = self.running[invariant] = Server(argv, self.cwd, env, stderr)
        try:
            return verdict_of(invariant, server.ask(request(files, facts), timeout))
        except CheckerDied as e:
            return errored(invariant, f"the persistent checker {e}")

    def close(self) -> None:
        """End every checker (their process groups)."""
        for server in self.running.values():
            server.close()
        self.running.clear()
