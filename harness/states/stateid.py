"""Crash-state IDs: the one grammar, its printer and its parser.

A state is named by its epoch, the set of that epoch's writes it keeps and
the writes it keeps only partly (torn), then the state faults injected on
top of it (``harness/faults.py``; README.md, State faults).  Write numbers
are *epoch-relative* (0 = the first write of the epoch); torn units are
512-byte units of the write's data, counted from the write's first byte,
whatever the log's sector size or the tear unit the enumeration used (so
one image has exactly one ID)::

    id      = "e" num [ "-" num ] "." body { ".t" num ":" ranges }
              [ ".m" num "@" num ] [ ".c" num ":" ranges ]
    body    = "p" num            prefix: writes 0 .. num-1 kept ("p0": none)
            | "k" ranges         any other kept set (non-empty, not a prefix)
    ranges  = range { "," range }
    range   = num | num "-" num  (a-b with a < b)
    num     = "0" | [1-9][0-9]*

The state faults:

* ``eA-B`` (lost-flush): epochs A..B as one epoch, the FLUSHes between them
  acknowledged but not performed; write numbers count from the first write
  of epoch A across the merged epochs.
* ``.mN@S`` (misdirect): the write of log entry N, one the state persisted
  (kept in its epoch, or durable before it), landed at device sector S
  (512-byte units) instead of its own place, which keeps its old content.
* ``.cS:BITS`` (corrupt): the bits BITS (0..4095, bit b is bit b % 8 of
  byte b // 8) of device sector S flipped after everything else.

Canonical form (anything else is rejected, naming the canonical spelling
where there is one): ranges ascending, maximal (``0-2,4`` not ``0-1,2,4``),
a kept set that is a prefix is written ``p``; torn segments ascending by
write, a torn write is not also kept, its unit set is not empty; an epoch
range has A < B.  That a misdirected write is one the state persisted (a
kept write of its epoch, or a write entry before it) and lands elsewhere
than its own place, the log tells.  Whether a torn unit set
is a *proper* subset of the write, whether the numbers fit the log, and
whether a merged state really loses a write to the lost flush, only the
log can tell: :func:`harness.states.lookup.state_from_id` checks that.

Examples: ``e0.p0`` (the base image), ``e17.p4`` (epoch 17, writes 0-3),
``e17.k0-3,5`` (write 4 lost), ``e17.p4.t4:0-2`` (writes 0-3, and the first
1536 bytes of write 4), ``e16-17.k5-9`` (the FLUSH ending epoch 16 lost:
epoch 16's writes 0-4 lost, its 5 and epoch 17's first writes kept),
``e17.p4.m1234@8200`` (entry 1234's write landed at sector 8200), ``e17.p4.c8211:5,4000``
(bits 5 and 4000 of sector 8211 flipped).
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
SECTOR_BITS = UNIT * 8  # bits of a sector a corrupt fault may flip
MAX_SECTOR = 1 << 40  # device sectors an ID may name (512 TiB)

_NUM = r"(?:0|[1-9][0-9]*)"
_RANGES = rf"{_NUM}(?:-{_NUM})?(?:,{_NUM}(?:-{_NUM})?)*"
_ID = re.compile(
    rf"e(?P<epoch>{_NUM})(?:-(?P<last>{_NUM}))?\.(?:p(?P<prefix>{_NUM})|k(?P<kept>{_RANGES}))"
    rf"(?P<torn>(?:\.t{_NUM}:{_RANGES})*)"
    rf"(?:\.m(?P<mis_write>{_NUM})@(?P<mis_sector>{_NUM}))?"
    rf"(?:\.c(?P<cor_sector>{_NUM}):(?P<cor_bits>{_RANGES}))?"
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
    write; the state faults: ``last`` the last epoch merged into ``epoch``
    by lost flushes (None: none), ``misdirect`` ``(log entry of the write,
    device sector it landed at)``, ``corrupt`` ``(device sector, bitmask of
    flipped bits)``.
    Construct through :func:`parse_id` or with canonical values."""

    epoch: int
    kept: int
    torn: tuple[tuple[int, int], ...] = ()
    last: int | None = None
    misdirect: tuple[int, int] | None = None
    corrupt: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.kept < 0:
            raise ValueError(f"negative epoch or kept mask in {self!r}")
        prev = -1
        for write, units in self.torn:
            if write <= prev or units <= 0 or self.kept >> write & 1:
                raise ValueError(f"torn writes must ascend, be non-empty, not kept: {self!r}")
            prev = write
        if self.last is not None and self.last <= self.epoch:
            raise ValueError(f"a merged epoch range must ascend: {self!r}")
        if self.misdirect is not None and min(self.misdirect) < 0:
            raise ValueError(f"negative entry or sector in {self!r}")
        if self.corrupt is not None and not (
            self.corrupt[0] >= 0 and 0 < self.corrupt[1] < 1 << SECTOR_BITS
        ):
            raise ValueError(f"a corrupt fault flips 1..{SECTOR_BITS} bits: {self!r}")

    @property
    def torn_mask(self) -> int:
        """Bitmask of the torn writes."""
        m = 0
        for write, _ in self.torn:
            m |= 1 << write
        return m

    @property
    def last_epoch(self) -> int:
        """The last epoch the state spans (``epoch`` unless flushes were lost)."""
        return self.epoch if self.last is None else self.last

    @property
    def faulted(self) -> bool:
        """Whether the ID names a state fault."""
        return self.last is not None or self.misdirect is not None or self.corrupt is not None

    @property
    def base(self) -> StateKey:
        """The key without its misdirect and corrupt faults (a lost flush
        stays: it decides which writes the state has)."""
        return StateKey(self.epoch, self.kept, self.torn, self.last)

    def __str__(self) -> str:
        return format_id(self)


def format_id(key: StateKey) -> str:
    """The canonical printable ID of ``key`` (see the module comment)."""
    if is_prefix_mask(key.kept):
        body = f"p{key.kept.bit_length()}"
    else:
        body = "k" + format_ranges(key.kept)
    torn = "".join(f".t{w}:{format_ranges(u)}" for w, u in key.torn)
    epochs = f"{key.epoch}" if key.last is None else f"{key.epoch}-{key.last}"
    faults = ""
    if key.misdirect is not None:
        faults += f".m{key.misdirect[0]}@{key.misdirect[1]}"
    if key.corrupt is not None:
        faults += f".c{key.corrupt[0]}:{format_ranges(key.corrupt[1])}"
    return f"e{epochs}.{body}{torn}{faults}"


def _parse_ranges(text: str, whole: str, limit: int = MAX_INDEX) -> int:
    """Parse ``ranges`` into a bitmask, insisting on canonical form; every
    index must be below ``limit``."""
    mask = 0
    prev_last = -2
    for part in text.split(","):
        a_s, _, b_s = part.partition("-")
        a = int(a_s)
        b = int(b_s) if b_s else a
        if b_s and b <= a:
            raise StateIdError(f"bad state ID {whole!r}: range {part!r} must have first < last")
        if b >= limit:
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


def _number(text: str, whole: str, limit: int = MAX_INDEX) -> int:
    n = int(text)
    if n >= limit:
        raise StateIdError(f"bad state ID {whole!r}: index {n} is out of range")
    return n


def parse_id(text: str) -> StateKey:
    """Parse a canonical state ID; :class:`StateIdError` (one line) on
    anything else.  ``format_id(parse_id(s)) == s`` for every accepted s."""
    m = _ID.fullmatch(text)
    if m is None:
        raise StateIdError(
            f"bad state ID {text!r}: expected e<epoch>.p<n> or e<epoch>.k<ranges>, "
            "then optional .t<write>:<ranges>, .m<entry>@<sector>, .c<sector>:<bits> "
            "(e.g. e17.k0-3,5.t4:0-2; e16-17.p3 for a lost flush)"
        )
    epoch = int(m["epoch"])
    last = int(m["last"]) if m["last"] is not None else None
    if last is not None and last <= epoch:
        raise StateIdError(f"bad state ID {text!r}: epoch range {epoch}-{last} must ascend")
    if m["prefix"] is not None:
        kept = (1 << _number(m["prefix"], text, MAX_INDEX + 1)) - 1
    else:
        kept = _parse_ranges(m["kept"], text)
        if is_prefix_mask(kept):
            canon = format_id(StateKey(epoch, kept, last=last))
            raise StateIdError(f"bad state ID {text!r}: a prefix is written {canon!r}")
    torn: list[tuple[int, int]] = []
    for tm in _TORN.finditer(m["torn"]):
        write = _number(tm[1], text)
        if torn and write <= torn[-1][0]:
            raise StateIdError(f"bad state ID {text!r}: torn writes must ascend")
        if kept >> write & 1:
            raise StateIdError(f"bad state ID {text!r}: write {write} is both kept and torn")
        torn.append((write, _parse_ranges(tm[2], text)))
    misdirect = corrupt = None
    if m["mis_write"] is not None:
        misdirect = (
            _number(m["mis_write"], text, MAX_SECTOR),
            _number(m["mis_sector"], text, MAX_SECTOR),
        )
    if m["cor_sector"] is not None:
        corrupt = (
            _number(m["cor_sector"], text, MAX_SECTOR),
            _parse_ranges(m["cor_bits"], text, SECTOR_BITS),
        )
    return StateKey(epoch, kept, tuple(torn), last, misdirect, corrupt)
