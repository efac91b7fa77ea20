"""Paths read from untrusted files, kept inside their folder; files read
from them, opened only when they are what they claim to be.

A run folder, shard or matrix file may come from another machine or person
(ARCHITECTURE.md, Principles): every path taken from one of them goes
through :func:`confined`, and every file of one is read with
:func:`read_regular` (a FIFO in place of a file would block its reader
forever; a device or ``/proc`` file has no end).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import CrashlabError

NAME_MAX = 255  # bytes of one path component (Linux)


def confined(root: Path, rel: object, what: str) -> Path:
    """``root / rel`` for a path ``rel`` read from a file: a non-empty
    relative string without ``..`` components or NUL that, with every
    symbolic link under ``root`` followed, stays inside ``root``.
    CrashlabError (naming ``what``) otherwise."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise CrashlabError(f"{what}: {rel!r} is not a path")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts:
        raise CrashlabError(f"{what}: {rel!r} leaves its folder (absolute or ..)")
    if any(len(p.encode()) > NAME_MAX for p in pure.parts):
        raise CrashlabError(f"{what}: {rel[:40]!r}...: a name longer than {NAME_MAX} bytes")
    top = root.resolve()
    path = top / pure
    if not resolved(path).is_relative_to(top):
        raise CrashlabError(f"{what}: {rel!r} leads outside {root} (through a symbolic link)")
    return path


def resolved(path: Path) -> Path:
    """``path.resolve()``; a loop of symbolic links is a CrashlabError."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as e:  # RuntimeError: a loop (Python < 3.13)
        raise CrashlabError(f"{path}: cannot follow its symbolic links ({e})") from None


def read_regular(path: Path, limit: int, what: str = "") -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); a
    missing file raises FileNotFoundError, anything else that is not a
    regular file of at most ``limit`` bytes a CrashlabError.  Opened
    non-blocking: a FIFO is refused, not waited on."""
    fd = open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise CrashlabError(
                f"{what or path}: {size} bytes, more than the {limit} a file of its kind may have"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            if sum(map(len, chunks)) > limit:
                raise CrashlabError(f"{what or path}: more than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: Path, limit: int, what: str = "") -> Any:  # noqa: ANN401
    """The parsed JSON of the regular file ``path`` (hostile: at most
    ``limit`` bytes, see :func:`read_regular`); CrashlabError in one line
    when it is not JSON, FileNotFoundError when it is missing."""
    try:
        return json.loads(read_regular(path, limit, what))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise CrashlabError(f"{what or path}: corrupt JSON ({str(e)[:80]})") from None


def read_json_object(path: Path, limit: int, what: str = "") -> dict[str, Any]:
    """:func:`read_json` of a file that must hold a JSON object."""
    doc = read_json(path, limit, what)
    if not isinstance(doc, dict):
        raise CrashlabError(f"{what or path}: not a JSON object")
    return doc


def open_regular(path: Path | str, what: str = "") -> int:
    """A read-only descriptor of the regular file ``path`` (non-blocking
    open, then ``fstat``): FileNotFoundError when it is missing,
    CrashlabError when it is a directory, FIFO, device or socket."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:
        raise CrashlabError(f"{what or path}: is a directory, not a file") from None
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CrashlabError(f"{what or path}: cannot open ({e.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISBLK(mode) or stat.S_ISCHR(mode)
            else "a socket"
        )
        raise CrashlabError(f"{what or path}: is {kind}, not a regular file")
    os.set_blocking(fd, True)
    return fd
