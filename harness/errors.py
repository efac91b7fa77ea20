"""The one exception type that every crashlab layer raises for bad input,
and the one rule for what of an ``OSError`` is the environment's fault.

The CLI turns a CrashlabError into a one-line ``crashlab: error: ...``
message and exit code 2; anything else escaping is a bug: the CLI saves its
traceback to a file and exits 70 (harness/cli/__init__.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path


class CrashlabError(Exception):
    """Bad input or an unusable environment, explained in one line."""


# The OSErrors a full, read-only or forbidden place causes: the machine's
# state, not crashlab's bug.
ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def cause(e: OSError) -> str:
    """What went wrong, in words: :data:`ENVIRONMENT_ERRNOS`' or the system's."""
    return ENVIRONMENT_ERRNOS.get(e.errno or 0) or e.strerror or str(e)


def environment_error(e: OSError, path: Path | str | None = None) -> CrashlabError | None:
    """``e`` as one line naming where (``path``, else the file the error
    names: a copy's or rename's destination before its source) and the
    cause, when the environment caused it (:data:`ENVIRONMENT_ERRNOS`);
    None for any other error."""
    if (e.errno or 0) not in ENVIRONMENT_ERRNOS:
        return None
    where = path if path is not None else (e.filename2 or e.filename)
    if where is None:
        return CrashlabError(f"{cause(e)} ({errno.errorcode[e.errno or 0]})")
    return CrashlabError(f"{os.fsdecode(where)}: {cause(e)}")


@contextlib.contextmanager
def located(path: Path | str) -> Iterator[None]:
    """Within: an environment's OSError that names no file (a write to an
    open file) is given ``path``, where it happened, and raised on (it
    pickles with it: a worker's reaches the parent so)."""
    try:
        yield
    except OSError as e:
        if e.filename is None and (e.errno or 0) in ENVIRONMENT_ERRNOS:
            e.filename = os.fspath(path)
        raise


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[None]:
    """Within: an environment's OSError (:func:`environment_error`) becomes
    a CrashlabError naming ``path``."""
    try:
        yield
    except OSError as e:
        err = environment_error(e, path)
        if err is None:
            raise
        raise err from None
