"""What an explainer is, and what it is given: the seam between the
explanation of a crash state (``harness/explain/state.py``) and the
per-file-system explainers each :class:`harness.fs.base.FileSystem` builds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.logformat import Entry, LogReader
from harness.states import State
from harness.states.model import item_extents

DB_PAGE_SIZE = 4096


class Explainer(Protocol):
    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        """One list of phrases per ``(device offset, data)`` write."""
        ...


@dataclass(frozen=True)
class ExplainContext:
    """One crash state, as an explainer may need it: the log, the base
    image, the state's image before recovery (``crash_image``) and after
    file-system recovery (``recovered``, None when it did not recover), the
    database file's name, a scratch folder, the log's FLUSH entries, and
    the SUT's engine mode (a DHL SUT's commit protocol, with which the raw
    device's pages are read)."""

    reader: LogReader
    state: State
    base: Path
    crash_image: Path
    recovered: Path | None
    db_name: str
    workdir: Path
    flushes: list[int]
    mode: str = "tc"


class ExplainsWrites(Protocol):
    """What the explanation of a state is handed: a file system
    (:class:`harness.fs.base.FileSystem`), which builds its explainer.  The
    caller passes the object, so this package imports no ``harness.fs``
    (the file systems import it)."""

    @property
    def name(self) -> str:
        """The file system's name (a class attribute of each file system)."""
        ...

    def explainer(self, ctx: ExplainContext) -> tuple[Explainer, list[str]]:
        """The explainer of a state's writes, and notes on its limits."""
        ...


class RangeExplainer:
    """A file system crashlab cannot look inside: byte ranges only."""

    def __init__(self, fs: str) -> None:
        self.fs = fs

    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        return [[f"{self.fs} bytes {o}..{o + len(d)} (4 KiB block {o // 4096})"] for o, d in writes]


def write_data(reader: LogReader, e: Entry) -> bytes:
    """The bytes a write entry of the log carries."""
    return next(item_extents(reader, e, -1))[1]
