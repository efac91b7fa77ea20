"""Synthetic logs for the enumeration tests and benchmark (written with the
one log writer, :class:`harness.logformat.LogWriter`)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from harness.logformat import FUA, LogWriter


def page_bytes(tag: int, size: int = 4096) -> bytes:
    """``size`` bytes of content unique to ``tag`` (no two tags alike)."""
    head = tag.to_bytes(8, "little")
    return (head * (size // 8 + 1))[:size]


def write_epochs_log(
    path: Path | str,
    sizes: Sequence[int],
    *,
    page: int = 4096,
    pages: int = 64,
    fua_every: int = 0,
    marks: bool = True,
    seed: int = 0,
) -> None:
    """A log of ``len(sizes)`` flush-separated epochs; epoch i has
    ``sizes[i]`` page writes (to seeded random pages among ``pages``, each
    with unique content) and ends with a FLUSH, except the last, which is
    left open.  With ``fua_every`` = f > 0 every f-th write (1-based) is FUA.
    With ``marks``, epoch i is transaction i+1: ``txn-begin:i+1`` before its
    writes, ``txn-ack:i+1`` after its flush (so at the start of the next
    epoch), like a SUT that syncs before acknowledging."""
    rng = random.Random(seed)
    sectors = page // 512
    tag = 0
    with LogWriter(path) as w:
        for i, n in enumerate(sizes):
            if marks and i:
                w.mark(f"txn-ack:{i}")
            if marks:
                w.mark(f"txn-begin:{i + 1}")
            for j in range(n):
                tag += 1
                flags = FUA if fua_every and (j + 1) % fua_every == 0 else 0
                w.write(rng.randrange(pages) * sectors, page_bytes(tag, page), flags)
            if i < len(sizes) - 1:
                w.flush()
