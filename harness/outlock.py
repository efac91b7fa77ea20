"""Output folders: one writer at a time, and no silent overwrite.

A command that writes a results folder (a check's, a sweep's, a merged
sweep's, a recording's, a repro's) holds an exclusive ``flock`` on
``FOLDER/.crashlab.lock`` for its whole life (:func:`locked_output`).  A
second writer is refused at once, with the holder's PID (written into the
lock file once the lock is taken).  The kernel drops the lock when its
holder dies, SIGKILL included, so a lock is never stale; the file stays
(removing it would let two writers lock two different files of one name).

The lock is re-entrant within a process (a sweep holds its folder and,
inside, each check holds its own; a CLI command takes the lock before it
looks for earlier results, then calls the library, which takes it again),
and a forked child (a check's worker) closes its copy of the descriptor, so
the lock ends with its holder, not with the last worker.

:func:`refuse_results` is the rule for ``--out`` onto a folder that already
holds results: refused unless the command resumes or is forced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import CrashlabError, environment_error

LOCK_NAME = ".crashlab.lock"
_PID_WAIT_S = 1.0  # how long a refused writer waits for the holder to write its PID


@dataclass
class _Held:
    """A folder this process holds: the lock file's descriptor, how many
    :func:`locked_output` calls hold it now, and the names that they say
    are no result (``disposable``)."""

    fd: int
    depth: int = 0
    disposable: set[str] = field(default_factory=set)


_held: dict[tuple[int, int], _Held] = {}  # by the folder's (st_dev, st_ino)


def _forget_in_child() -> None:
    """A forked child does not hold its parent's locks: close its copies (a
    close, unlike LOCK_UN, leaves the parent's lock alone)."""
    for held in _held.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def _make_folder(folder: Path) -> tuple[int, int]:
    """Create ``folder`` (and its parents) if needed; its (device, inode)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        st = folder.stat()
    except (FileExistsError, NotADirectoryError):
        raise CrashlabError(f"{folder}: exists and is not a folder") from None
    except OSError as e:
        raise (environment_error(e, folder) or e) from None
    if not stat.S_ISDIR(st.st_mode):
        raise CrashlabError(f"{folder}: exists and is not a folder")
    return st.st_dev, st.st_ino


def _open_lock(folder: Path) -> int:
    """The lock file's descriptor.  Never through a symlink and only a
    regular file: a received folder's ``.crashlab.lock`` may point anywhere."""
    path = folder / LOCK_NAME
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CrashlabError(
                f"{path}: is a symbolic link, not crashlab's lock file (remove it)"
            ) from None
        raise (environment_error(e, folder) or e) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CrashlabError(f"{path}: not a regular file, not crashlab's lock file (remove it)")
    return fd


def _holder(fd: int) -> str:
    """The PID the lock's holder wrote (it writes it just after locking)."""
    deadline = time.monotonic() + _PID_WAIT_S
    while True:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if text or time.monotonic() >= deadline:
            return text if text.isdigit() else "unknown"
        time.sleep(0.02)


def _lock(folder: Path) -> int:
    """Take ``folder``'s lock (refused at once when another process holds
    it); the lock file's descriptor, holding our PID."""
    fd = _open_lock(folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder(fd)
        os.close(fd)
        raise CrashlabError(
            f"{folder}: in use by another crashlab command (PID {pid}) "
            "writing there; wait for it to end, or choose another --out"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as e:
        os.close(fd)
        raise (environment_error(e, folder) or e) from None
    return fd


@contextlib.contextmanager
def locked_output(folder: Path, disposable: tuple[str, ...] = ()) -> Iterator[Path]:
    """Within: ``folder`` exists (created with its parents if needed) and
    this process alone writes there (module docstring).  One-line errors:
    another process holds it (naming its PID), it is a file, or it cannot
    be written (read-only, full, forbidden).  A folder made here (with the
    parents made for it) for a command that then fails is removed if it
    holds no result yet: nothing but the lock, empty files and folders, and
    names that this or a nested call of the same folder calls
    ``disposable``."""
    created = _first_missing(folder)  # what to remove again if the command fails
    key = _make_folder(folder)
    held = _held.get(key) or _held.setdefault(key, _Held(_lock(folder)))
    held.depth += 1
    held.disposable.update(disposable)
    try:
        yield folder
    except BaseException:
        if created is not None:
            _discard_if_unused(created, held.disposable)
        raise
    finally:
        held.depth -= 1
        if held.depth == 0 and _held.get(key) is held:
            del _held[key]
            os.close(held.fd)


def _first_missing(folder: Path) -> Path | None:
    """The outermost of ``folder`` and its parents that does not exist yet
    (None: ``folder`` exists): what making ``folder`` creates."""
    if os.path.lexists(folder):
        return None
    top = folder
    while not os.path.lexists(top.parent) and top.parent != top:
        top = top.parent
    return top


def _discard_if_unused(folder: Path, disposable: set[str]) -> None:
    """Remove ``folder`` (made by this command, still locked) if nothing in
    it is a result (:func:`locked_output`)."""

    def unused(p: Path) -> bool:
        if p.name == LOCK_NAME or p.name in disposable:
            return True
        if p.is_symlink():
            return False
        if p.is_dir():
            return all(unused(q) for q in p.iterdir())
        return p.is_file() and p.stat().st_size == 0

    with contextlib.suppress(OSError):
        if all(unused(p) for p in folder.iterdir()):
            shutil.rmtree(folder)


def refuse_results(
    folder: Path, names: tuple[str, ...], what: str, *, resume: bool | None, force: bool
) -> None:
    """Refuse to write into ``folder`` when it already holds results (any of
    ``names``), unless ``force``, or ``resume`` (None: the command cannot
    resume)."""
    if force or resume:
        return
    found = next((n for n in names if os.path.lexists(folder / n)), None)
    if found is None:
        return
    how = "--force replaces it" if resume is None else "--resume continues it, --force replaces it"
    raise CrashlabError(f"{folder}: already holds {what} ({found}); {how}")
