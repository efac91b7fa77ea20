"""A user's own checker: any command, run once per crash state on the files
the file system recovered, judging an invariant of its own (``USER:NAME``).

The contract (docs/your-application.md, "The contract"):

* it runs with ``sh -c COMMAND`` in a private scratch folder holding a copy
  of the recovered files as recovered (hard links, extended attributes,
  symbolic links as links: :func:`harness.fs.confined.copy_tree`; it may
  change them: open a database, let it recover), with ``CRASHLAB_FILES``
  (that folder), ``CRASHLAB_STATE`` (the state ID), ``CRASHLAB_STATE_JSON``
  (a JSON file of the state's facts: :func:`state_facts`) and
  ``CRASHLAB_RUN`` (the run folder) in its environment;
* exit 0: the invariant holds; exit 1: it does not, and stdout explains
  why; anything else — another exit code, a signal, no exit within the
  timeout — is a *checker error*: no verdict on the SUT, reported as such
  (status ``error``), never a pass; so is a ``recover`` command that is
  not found or killed, and an exit 1 with only an error on stderr (an
  interpreter's traceback).
* its output goes to files (at most 1 MiB of each is read), and when it
  exits, or hangs and is killed, whatever is left of its process group (the
  session it was started in, by its PID) is killed too; a process that
  starts a session of its own (``setsid``) escapes that, and is the
  checker's to end.  Each state gets a fresh folder.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.invariants import USER_PREFIX
from checkers.verdict import Verdict, errored, failed, passed
from harness.check.persist import Servers, child_env, py_argv
from harness.errors import CrashlabError
from harness.fs.confined import copy_tree
from harness.marks import parse_label
from harness.record.command import INTERPRETER

DEFAULT_TIMEOUT = 60.0
EXPLANATION_MAX = 2000  # characters of a checker's output kept in a verdict
OUTPUT_MAX = 1 << 20  # bytes of a checker's stdout and stderr read back
# The version of state_facts' keys: the "$id" of checkers/state-contract.schema.json
# (tests/test_state_contract.py holds the two together).
STATE_CONTRACT_VERSION = 2
CHECKER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")
# A --checker's kind is a prefix of its command: it travels with the
# checker (one check can mix kinds) and the spec alone, as a repro line or
# check.json shows it, says how to run it again.
COMMAND, PERSIST, PY = "", "persist:", "py:"


class _Checker:
    """What both kinds of user checker share: the invariant they judge."""

    name: str

    @property
    def invariant(self) -> str:
        return USER_PREFIX + self.name


@dataclass(frozen=True)
class UserChecker(_Checker):
    name: str  # the invariant is USER:<name>
    command: str  # run with sh -c
    timeout: float = DEFAULT_TIMEOUT
    # the SUT's own recovery, run first in the same folder (sh -c); when it
    # fails, the invariant fails: the application cannot come back
    recover: str = ""
    # COMMAND: a command per state; PERSIST: a command serving many states
    # (harness/check/persist.py); PY: a Python function served so
    kind: str = COMMAND

    @property
    def spec(self) -> str:
        """How it is given on the command line (``NAME=[KIND:]COMMAND``)."""
        return f"{self.name}={self.kind}{self.command}"


@dataclass(frozen=True)
class PyChecker(_Checker):
    """A checker that is a module-level Python function (the pytest
    plugin's): ``fn(files, state)``, run in a process of its own loaded
    once per worker (harness/check/pyserve.py: the verdicts it gives),
    its timeout enforced."""

    name: str
    fn: Callable[[Path, dict[str, Any]], object]
    timeout: float = DEFAULT_TIMEOUT

    @property
    def kind(self) -> str:
        return PY

    @property
    def command(self) -> str:
        """``FILE.py:QUALNAME``: what its process loads."""
        module = inspect.getmodule(self.fn)
        file = getattr(module, "__file__", None)
        qual = getattr(self.fn, "__qualname__", "")
        if not file or "<locals>" in qual or "<lambda>" in qual:
            raise CrashlabError(
                f"checker {self.name!r}: a Python checker must be a module-level "
                "function of a module file (it is loaded again in a process of its own)"
            )
        return f"{Path(file).resolve()}:{qual}"

    @property
    def spec(self) -> str:
        return f"{self.name}={PY}{self.command}"

    @property
    def recover(self) -> str:
        return ""


def parse_checker(spec: str, timeout: float = DEFAULT_TIMEOUT) -> UserChecker:
    """``[NAME=][KIND:]COMMAND``: KIND ``persist:`` (a command serving many
    states) or ``py:`` (``MODULE:FUNCTION`` or ``FILE.py:FUNCTION``), none
    for a command per state; without NAME, named after its program's file
    name (without extension) or its function."""
    if timeout <= 0:
        raise CrashlabError(f"--checker-timeout {timeout:g}: must be positive")
    head, sep, rest = spec.partition("=")
    named = bool(sep) and CHECKER_NAME.fullmatch(head) is not None and bool(rest.strip())
    body = rest if named else spec
    kind = next((k for k in (PERSIST, PY) if body.startswith(k)), COMMAND)
    command = body[len(kind) :]
    if not command.strip():
        raise CrashlabError(f"--checker {spec!r}: empty command")
    if kind == PY:
        where, colon, qual = command.rpartition(":")
        if not colon or not where or not qual:
            raise CrashlabError(
                f"--checker {spec!r}: py: needs MODULE:FUNCTION or FILE.py:FUNCTION"
            )
        name = head if named else qual.rsplit(".", 1)[-1]
    else:
        name = head if named else _program_name(spec, command)
    if not CHECKER_NAME.fullmatch(name):
        raise CrashlabError(
            f"--checker {spec!r}: name it: NAME=COMMAND (NAME: letters, digits, _ . -)"
        )
    return UserChecker(name, command, timeout, kind=kind)


def _program_name(spec: str, command: str) -> str:
    """A checker named after its program: an interpreter's after its
    script (`python3 check.py` is "check", not "python3")."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise CrashlabError(f"--checker {spec!r}: {e}") from None
    if not words:
        raise CrashlabError("--checker: empty command")
    prog = words[1] if len(words) > 1 and INTERPRETER.fullmatch(Path(words[0]).name) else words[0]
    return Path(prog).stem


def unique(checkers: Sequence[UserChecker | PyChecker], where: str) -> None:
    """CrashlabError when two checkers would judge the same invariant (one's
    verdicts would hide the other's)."""
    seen: set[str] = set()
    for c in checkers:
        if c.invariant in seen:
            raise CrashlabError(
                f"{where}: two checkers are named {c.name!r}: name them apart (NAME=COMMAND)"
            )
        seen.add(c.invariant)


def repro_flags(checkers: Sequence[UserChecker | PyChecker], inv: str) -> str:
    """The ``crashlab repro`` options that run again the checker judging
    ``inv``, whatever its kind (its spec says it: a Python function as
    ``py:FILE.py:QUALNAME``); empty for a built-in invariant."""
    out = ""
    for uc in checkers:
        if uc.invariant == inv:
            out += f" --checker {shlex.quote(uc.spec)}"
            if uc.timeout != DEFAULT_TIMEOUT:
                out += f" --checker-timeout {uc.timeout:g}"
            if uc.recover:
                out += f" --checker-recover {shlex.quote(uc.recover)}"
    return out


def log_marks(reader: Any) -> list[tuple[int, str]]:  # noqa: ANN401
    """``(entry, label)`` of every mark of a log, in order."""
    return [(e.index, e.label) for e in reader.entries() if e.is_mark and e.label]


def state_facts(
    run: Path,
    state_id: str,
    lo: int,
    hi: int,
    acked: int,
    begun: int,
    marks: list[tuple[int, str]],
    meta: dict[str, Any],
    *,
    image: str | None = None,
) -> dict[str, Any]:
    """The JSON a checker reads: the state, the transactions acknowledged
    and begun at its cut, and the marks — ``before`` the cut (written before
    any write the image lacks: certainly before the crash) and ``maybe``
    (within the cut: before or after the crash) — each with its payload;
    ``meta`` is the run's meta.json (the workload's own keys included);
    ``image`` the recovered image a checker may read (None: the host holds
    none).  checkers/state-contract.schema.json describes every key: a key added
    here is a new STATE_CONTRACT_VERSION."""

    def mark(entry: int, label: str) -> dict[str, Any]:
        m = parse_label(label)
        return {"entry": entry, "label": label, "name": m.name, "payload": m.payload}

    return {
        "run": str(run),
        "state": state_id,
        "acked": acked,
        "begun": begun,
        "cut": [lo, hi],
        "marks": {
            "before": [mark(e, lb) for e, lb in marks if e < lo],
            "maybe": [mark(e, lb) for e, lb in marks if lo <= e < hi],
        },
        "meta": meta,
        "image": image,
    }


def run_checker(
    uc: UserChecker | PyChecker,
    files: Path,
    facts: dict[str, Any],
    work: Path,
    env: dict[str, str],
    servers: Servers | None = None,
) -> Verdict:
    """Run ``uc`` on a copy of ``files`` (in a fresh folder under ``work``,
    removed afterwards) for the state ``facts`` describes; its verdict.
    A persistent or Python checker is asked through ``servers`` (None:
    one started for this state alone)."""
    work.mkdir(parents=True, exist_ok=True)
    here = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    own = servers is None and uc.kind != COMMAND
    if servers is None:
        servers = Servers(Path.cwd(), here / "serve")
    try:
        return _judge(uc, files, facts, here, env, servers)
    finally:
        if own:
            servers.close()
        shutil.rmtree(here, ignore_errors=True)


def server_argv(uc: UserChecker | PyChecker) -> list[str]:
    """How a persistent or Python checker's process is started."""
    return py_argv(uc.command) if uc.kind == PY else ["sh", "-c", uc.command]


def server_env(uc: UserChecker | PyChecker, env: dict[str, str]) -> dict[str, str]:
    return child_env(env) if uc.kind == PY else env


def _judge(
    uc: UserChecker | PyChecker,
    files: Path,
    facts: dict[str, Any],
    here: Path,
    env: dict[str, str],
    servers: Servers,
) -> Verdict:
    mine = here / "files"
    if files.exists():  # as recovered: hard links, extended attributes, links as links
        copy_tree(files, mine)
    else:
        mine.mkdir(parents=True)
    state_json = here / "state.json"
    state_json.write_text(json.dumps(facts, sort_keys=True))
    child_env = {
        **env,
        "CRASHLAB_FILES": str(mine),
        "CRASHLAB_STATE": facts["state"],
        "CRASHLAB_STATE_JSON": str(state_json),
        "CRASHLAB_RUN": facts["run"],
    }
    if uc.recover:
        done = _run(uc.recover, mine, here, child_env, uc.timeout)
        if isinstance(done, str):
            return errored(uc.invariant, f"the recovery command {done}")
        rc, out, err = done
        if rc in (126, 127) or rc < 0:  # not found, not runnable, killed: not the SUT's fault
            return errored(
                uc.invariant,
                f"the recovery command {_how(rc)}: " + (_tail(err) or "no output on stderr"),
            )
        if rc != 0:
            return failed(
                uc.invariant,
                f"the recovery command `{uc.recover}` exited {rc}: "
                + (_text(err) or _text(out) or "no output"),
            )
    if uc.kind != COMMAND:
        senv = server_env(uc, {**env, "CRASHLAB_RUN": facts["run"]})
        return servers.judge(uc.invariant, server_argv(uc), senv, uc.timeout, mine, facts)
    done = _run(uc.command, mine, here, child_env, uc.timeout)
    if isinstance(done, str):
        return errored(uc.invariant, f"the checker {done}")
    returncode, out, err = done
    text = _text(out)
    if returncode == 0:
        return passed(uc.invariant, text.splitlines()[0] if text else "")
    if returncode == 1 and (text or not _tail(err)):
        return failed(uc.invariant, text or "the checker exited 1 and printed nothing")
    # exit 1 with nothing on stdout but an error on stderr (an interpreter's
    # traceback) is the checker failing, not a verdict
    return errored(
        uc.invariant,
        f"the checker {_how(returncode)} (0 = holds, 1 = violated, "
        f"with the reason on stdout): " + (_tail(err) or "no output on stderr"),
    )


def _how(returncode: int) -> str:
    return (
        f"was killed by {signal.Signals(-returncode).name}"
        if returncode < 0
        else f"exited {returncode}"
    )


def _tail(err: bytes) -> str:
    """The last line a command wrote on stderr."""
    lines = _text(err).splitlines()
    return lines[-1] if lines else ""


def _run(
    command: str, cwd: Path, here: Path, env: dict[str, str], timeout: float
) -> tuple[int, bytes, bytes] | str:
    """``sh -c command`` in its own session: ``(exit status, stdout,
    stderr)``, or what went wrong (it did not start, or it did not finish
    within ``timeout`` and was killed).  Its output goes to files in
    ``here`` (a background child holding a pipe open cannot stall it; at
    most OUTPUT_MAX bytes of each are read back), and whatever is left of
    its process group when it exits is killed."""
    with open(here / "stdout", "w+b") as out, open(here / "stderr", "w+b") as err:
        try:
            proc = subprocess.Popen(
                ["sh", "-c", command],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            return f"could not start: {e}"
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return f"did not finish within {timeout:g} s (killed)"
        finally:
            _kill_group(proc)  # its background children, by the group it started
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(OUTPUT_MAX), err.read(OUTPUT_MAX)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the checker's process group — the session it was started in, so
    its id is the checker's PID — and nothing else."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _text(data: bytes) -> str:
    """A checker's output as text: undecodable bytes shown as such, cut to
    EXPLANATION_MAX characters."""
    s = data.decode("utf-8", errors="replace").strip()
    return s if len(s) <= EXPLANATION_MAX else s[:EXPLANATION_MAX] + " …(cut)"
