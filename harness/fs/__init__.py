"""One object per file system (``base.py`` says what a file system object
is).  :func:`get_fs` is the one factory; ``FILESYSTEMS`` names every file
system, in the order the CLI offers them.  Every module of this folder is
imported here, and each one's :class:`~harness.fs.base.FileSystem` subclass
registers itself: a new file system is one new module."""

from __future__ import annotations

import importlib
import pkgutil

from harness.errors import CrashlabError
from harness.fs.base import REGISTRY, BlockMap, FileSystem, FsRecovery

for _m in pkgutil.iter_modules(__path__):
    if _m.name != "base":
        importlib.import_module(f"{__name__}.{_m.name}")

DEFAULT_FS = "ext4"  # where a file-based SUT runs unless told otherwise
NO_FS = "raw"  # the recorded block device itself, no file system
# the default first, no file system last
FILESYSTEMS: tuple[str, ...] = tuple(
    sorted(REGISTRY, key=lambda n: (n != DEFAULT_FS, not REGISTRY[n].has_files, n))
)
_INSTANCES: dict[str, FileSystem] = {}


def get_fs(name: str) -> FileSystem:
    """The file system called ``name``; CrashlabError lists the known ones."""
    fs = _INSTANCES.get(name)
    if fs is None:
        try:
            fs = _INSTANCES[name] = REGISTRY[name]()
        except KeyError:
            raise CrashlabError(
                f"unknown file system {name!r} (choose from {', '.join(FILESYSTEMS)})"
            ) from None
    return fs


__all__ = ["DEFAULT_FS", "FILESYSTEMS", "NO_FS", "BlockMap", "FileSystem", "FsRecovery", "get_fs"]
