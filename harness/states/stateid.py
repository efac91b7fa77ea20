"""Crash-state IDs: the one grammar, its printer and its parser.

A state is named by its epoch, the set of that epoch's writes it keeps and
the writes it keeps only partly (torn).  Write numbers are *epoch-relative*
(0 = the first write of the epoch); torn units are 512-byte units of the
write's data, counted from the write's first byte, whatever the log's
sector size or the tear unit the enumeration used (so one image has exactly
one ID)::

    id      = "e" num "." body { ".t" num ":" ranges }
    body    = "p" num            prefix: writes 0 .. num-1 kept ("p0": none)
            | "k" ranges         any other kept set (non-empty, not a prefix)
    ranges  = range { "," range }
    range   = num | num "-" num  (a-b with a < b)
    num     = "0" | [1-9][0-9]*

Canonical form (anything else is rejected, naming the canonical spelling
where there is one): ranges ascending, maximal (``0-2,4`` not ``0-1,2,4``),
a kept set that is a prefix is written ``p``; torn segments ascending by
write, a torn write is not also kept, its unit set is not empty.  Whether a
torn unit set is a *proper* subset of the write, and whether the numbers fit
the log, only the log can tell: :func:`harness.states.lookup.state_from_id`
checks that.

Examples: ``e0.p0`` (the base image), ``e17.p4`` (epoch 17, writes 0-3),
``e17.k0-3,5`` (write 4 lost), ``e17.p4.t4:0-2`` (writes 0-3, and the first
1536 bytes of write 4).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from harness.errors import CrashlabError

# Bounds a parsed ID can name; far beyond any real epoch, small enough that
# a hostile ID cannot make the parser build a gigantic bitmask.
MAX_INDEX = 10_000_000
UNIT = 512  # bytes per torn unit in IDs

_NUM = r"(?:0|[1-9][0-9]*)"
_RANGES = rf"{_NUM}(?:-{_NUM})?(?:,{_NUM}(?:-{_NUM})?)*"
_ID = re.compile(
    rf"e(?P<epoch>{_NUM})\.(?:p(?P<prefix>{_NUM})|k(?P<kept>{_RANGES}))"
    rf"(?P<torn>(?:\.t{_NUM}:{_RANGES})*)"
)
_TORN = re.compile(rf"\.t({_NUM}):({_RANGES})")


class StateIdError(CrashlabError):
    """A malformed or non-canonical state ID (one line)."""


def iter_bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def mask_runs(mask: int) -> Iterator[tuple[int, int]]:
    """Maximal runs of set bits as inclusive ``(first, last)`` pairs."""
    pos = 0
    while mask:
        zeros = (mask & -mask).bit_length() - 1
        mask >>= zeros
        pos += zeros
        ones = (mask ^ (mask + 1)).bit_length() - 1
        yield pos, pos + ones - 1
        mask >>= ones
        pos += ones


def run_mask(first: int, last: int) -> int:
    """Bitmask with bits ``first..last`` (inclusive) set."""
    return ((1 << (last + 1)) - 1) ^ ((1 << first) - 1)


def format_ranges(mask: int) -> str:
    """``0b10111`` → ``"0-2,4"``."""
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in mask_runs(mask))


def is_prefix_mask(mask: int) -> bool:
    """True when ``mask`` is bits ``0..m-1`` for some m >= 0."""
    return mask & (mask + 1) == 0


@dataclass(frozen=True, slots=True)
class StateKey:
    """What a state ID says, as bitmasks: ``kept`` over the epoch's writes,
    ``torn`` as ``(write, persisted 512-byte units)`` pairs ascending by
    write.  Construct through :func:`parse_id` or with canonical values."""

    epoch: int
    kept: int
    torn: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.kept < 0:
            raise ValueError(f"negative epoch or kept mask in {self!r}")
        prev = -1
        for write, units in self.torn:
            if write <= prev or units <= 0 or self.kept >> write & 1:
                raise ValueError(f"torn writes must ascend, be non-empty, not kept: {self!r}")
            prev = write

    @property
    def torn_mask(self) -> int:
        """Bitmask of the torn writes."""
        m = 0
        for write, _ in self.torn:
            m |= 1 << write
        return m

    def __str__(self) -> str:
        return format_id(self)


def format_id(key: StateKey) -> str:
    """The canonical printable ID of ``key`` (see the module comment)."""
    if is_prefix_mask(key.kept):
        body = f"p{key.kept.bit_length()}"
    else:
        body = "k" + format_ranges(key.kept)
    torn = "".join(f".t{w}:{format_ranges(u)}" for w, u in key.torn)
    return f"e{key.epoch}.{body}{torn}"


def _parse_ranges(text: str, whole: str) -> int:
    """Parse ``ranges`` into a bitmask, insisting on canonical form."""
    mask = 0
    prev_last = -2
    for part in text.split(","):
        a_s, _, b_s = part.partition("-")
        a = int(a_s)
        b = int(b_s) if b_s else a
        if b_s and b <= a:
            raise StateIdError(f"bad state ID {whole!r}: range {part!r} must have first < last")
        if b >= MAX_INDEX:
            raise StateIdError(f"bad state ID {whole!r}: index {b} is out of range")
        if a <= prev_last:
            raise StateIdError(f"bad state ID {whole!r}: ranges in {text!r} must ascend")
        if a == prev_last + 1:
            raise StateIdError(
                f"bad state ID {whole!r}: adjacent ranges in {text!r} must be merged"
            )
        mask |= run_mask(a, b)
        prev_last = b
    return mask


def parse_id(text: str) -> StateKey:
    """Parse a canonical state ID; :class:`StateIdError` (one line) on
    anything else.  ``format_id(parse_id(s)) == s`` for every accepted s."""
    m = _ID.fullmatch(text)
    if m is None:
        raise StateIdError(
            f"bad state ID {text!r}: expected e<epoch>.p<n> or e<epoch>.k<ranges>, "
            "then optional .t<write>:<ranges> (e.g. e17.k0-3,5.t4:0-2)"
        )
    epoch = int(m["epoch"])
    if m["prefix"] is not None:
        n = int(m["prefix"])
        if n > MAX_INDEX:
            raise StateIdError(f"bad state ID {text!r}: index {n} is out of range")
        kept = (1 << n) - 1
    else:
        kept = _parse_ranges(m["kept"], text)
        if is_prefix_mask(kept):
            canon = format_id(StateKey(epoch, kept))
            raise StateIdError(f"bad state ID {text!r}: a prefix is written {canon!r}")
    torn: list[tuple[int, int]] = []
    for tm in _TORN.finditer(m["torn"]):
        write = int(tm[1])
        if write >= MAX_INDEX:
            raise StateIdError(f"bad state ID {text!r}: index {write} is out of range")
        if torn and write <= torn[-1][0]:
            raise StateIdError(f"bad state ID {text!r}: torn writes must ascend")
        if kept >> write & 1:
            raise StateIdError(f"bad state ID {text!r}: write {write} is both kept and torn")
        torn.append((write, _parse_ranges(tm[2], text)))
    return StateKey(epoch, kept, tuple(torn))
