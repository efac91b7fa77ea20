"""The recorded command and the caller's folder (harness/record/README.md,
"Relative paths").

The command runs with cwd = the recorded file system, a fresh copy of the
base image that holds none of the caller's files, so a relative path in it
resolves there.  :func:`resolve_command` (``crashlab record``) makes
absolute what can only mean the caller's file: the program given as a
relative path with a ``/`` (``./w.sh``, ``tools/w``) and the script an
interpreter runs (``sh w.sh``, ``python3 w.py``), when it exists in the
caller's folder.  Every other relative argument is left as it is (it may
name a file the workload makes in the recorded file system), with a note
when it also names an existing path of the caller's folder.

:func:`python_in_guest` says why a command cannot run in the qemu guest: it
has busybox and the programs a command names, not a Python installation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

# a program that runs a script named as its first argument
INTERPRETER = re.compile(r"(python|sh|bash|dash|perl|ruby|node)[0-9.]*")
PYTHON = re.compile(r"python[0-9.]*")
SHEBANG_MAX = 256  # bytes of a program's first line read for its interpreter


def resolve_command(command: Sequence[str], here: Path) -> tuple[list[str], list[str]]:
    """``command`` with its program and interpreted script made absolute
    against ``here`` where they exist there; and a note for each other
    relative argument that names an existing path of ``here``."""
    out = list(command)
    if not out:
        return out, []
    named = [0]
    if len(out) > 1 and INTERPRETER.fullmatch(Path(out[0]).name) and not out[1].startswith("-"):
        named.append(1)
    for i in named:
        arg = out[i]
        if arg and not os.path.isabs(arg) and (i > 0 or "/" in arg) and (here / arg).exists():
            out[i] = os.path.abspath(here / arg)
    notes = [
        f"argument {arg!r} is relative: it names {arg!r} in the recorded file system "
        f"(the command's working folder), not {os.path.abspath(here / arg)}; "
        "give an absolute path to mean yours"
        for i, arg in enumerate(out)
        if i not in named
        and arg
        and not os.path.isabs(arg)
        and not arg.startswith("-")
        and arg not in (".", "..")
        and (here / arg).exists()
    ]
    return out, notes


def python_in_guest(command: Sequence[str]) -> str | None:
    """Why ``command`` is a Python workload the qemu guest cannot run (None:
    it is not one): its program is Python (by name, through ``env``, or a
    script whose ``#!`` line names Python)."""
    if not command:
        return None
    prog = command[0]
    names = [Path(prog).name]
    if Path(prog).name == "env":
        names += [Path(a).name for a in command[1:2]]
    if any(PYTHON.fullmatch(n) for n in names) or PYTHON.search(_shebang(prog)):
        return (
            f"{prog!r} is a Python workload, and the qemu guest has busybox and the "
            "programs a command names, not a Python installation: record it with "
            "--backend fuse or dm, or (F2FS, recorded only in the guest) write it as a "
            "busybox shell script or a static program"
        )
    return None


def _shebang(prog: str) -> str:
    """The ``#!`` line of the file ``prog`` ('' where none)."""
    try:
        with open(prog, "rb") as f:
            head = f.read(SHEBANG_MAX)
    except OSError:
        return ""
    return head.split(b"\n")[0].decode("utf-8", "replace") if head.startswith(b"#!") else ""
