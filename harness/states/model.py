"""A crash state: an epoch, the subset of its writes kept, torn writes.

The image of state (E, kept, torn) is: the base image, every write of the
epochs before E (the durable base), then in log order the kept writes of E
and the persisted 512-byte units of its torn writes.

**The cut.**  One image is left behind by a crash at any instant of an
interval of the log, and the state carries that whole interval
``[lo, hi]`` of entry indices (a crash "at x" means entries ``[0, x)`` had
completed).  ``lo`` is just after the last write the image contains (the
crash cannot precede a write that persisted); ``hi`` is where the epoch ends
(the FLUSH that would have made every write durable) or, earlier, the first
FUA write after ``lo`` that the image lacks (a FUA write is durable once it
completes).  For a torn FUA write the crash hit that write: ``lo = hi`` = its
entry.  Marks give the cut its meaning for the checkers:

* ``acked``: highest K of a ``txn-ack:K`` before ``hi``: at the latest
  instant, transactions up to K had been acknowledged, so the image must
  hold at least transaction K (DB-DURABLE).
* ``begun``: highest K of a ``txn-begin:K`` before ``lo``, raised to
  ``acked`` if lower: no transaction after it had issued a write that is in
  the image (DB-PREFIX).  ``acked <= begun`` always.

Transactions are numbered from 1; 0 means none.

**Validity (FUA) depends on what log order means** (the run's
``log_order``, set by the recording backend):

* ``completion`` (the fuse recorder logs each request when it completes):
  a FUA write before the state's last kept or torn write completed before
  the crash, so it is kept: it is never dropped or torn unless it is itself
  the last write of the state.  FUA says nothing of the writes before it
  (no flush): those stay volatile.
* ``dm-log-writes`` (the kernel's target): non-FUA writes are logged when
  the *next flush* completes, FUA writes when they complete, so a non-FUA
  write after a FUA write in the log may have completed before it (the
  kernel's own example: ``Wa,Wb,Wc,Cc,Ca,FLUSH,FUAd,Cb,CFLUSH`` is logged
  ``c,a,flush,fuad,b``).  Only FUA writes are ordered among themselves: a
  FUA write before the state's last kept or torn *FUA* write is kept; the
  non-FUA writes of the epoch persist in any subset (``{b, not fuad}`` is a
  state).  Such a state's crash lies before the lost FUA write completed:
  its interval is that write's position.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from harness.errors import CrashlabError
from harness.logformat import Entry, LogReader, Payloads
from harness.states.epochs import Epoch
from harness.states.stateid import UNIT, StateKey, format_id, iter_bits, mask_runs

COMPLETION, DM_LOG_WRITES = "completion", "dm-log-writes"
LOG_ORDERS = (COMPLETION, DM_LOG_WRITES)


def lost_fua(epoch: Epoch, kept: int, members: int) -> int:
    """The FUA writes a state with these kept writes and ``members`` (kept
    and torn) lacks although they completed before its last write: empty
    for a valid state (see the module comment)."""
    if epoch.log_order == DM_LOG_WRITES:
        members &= epoch.fua_mask
    last = members.bit_length() - 1
    if last <= 0:
        return 0
    return epoch.fua_mask & ((1 << last) - 1) & ~kept


@dataclass(frozen=True, slots=True)
class Cut:
    """Where in the log the crash may have happened (see the module comment)."""

    lo: int
    hi: int
    marks_lo: int  # marks in the log before lo
    marks_hi: int  # marks in the log before hi
    acked: int
    begun: int
    in_flight: int | None  # a txn begun but not acknowledged before hi
    last_mark: str | None  # the last mark before hi (None: none in the log)


def write_units(entry: Entry, sectorsize: int) -> int:
    """Number of 512-byte units in a write entry."""
    return entry.nr_sectors * sectorsize // UNIT


def compute_cut(epoch: Epoch, kept: int, torn_mask: int) -> Cut:
    """The crash interval of the image with these kept and torn writes."""
    members = kept | torn_mask
    last = members.bit_length() - 1
    if last < 0:
        lo = epoch.start
    else:
        lo = epoch.writes[last].index + 1
    lost = epoch.fua_mask & ((1 << last) - 1) & ~kept if last > 0 else 0
    if last >= 0 and torn_mask >> last & 1 and epoch.fua_mask >> last & 1:
        lo = hi = epoch.writes[last].index
    elif lost:  # dm-log-writes order only: the crash came before that FUA write completed
        lo = hi = epoch.writes[(lost & -lost).bit_length() - 1].index
    else:
        later = epoch.fua_mask >> (last + 1)
        if later:
            hi = epoch.writes[last + (later & -later).bit_length()].index
        else:
            hi = epoch.end
    acked = epoch.acked_at(hi)
    begun = max(epoch.begun_at(lo), acked)
    begun_hi = epoch.begun_at(hi)
    in_flight = begun_hi if begun_hi > acked else None
    return Cut(
        lo,
        hi,
        epoch.marks_before_entry(lo),
        epoch.marks_before_entry(hi),
        acked,
        begun,
        in_flight,
        epoch.last_mark_at(hi),
    )


def loses_to_flush(epoch: Epoch, kept: int, hi: int) -> bool:
    """Whether a state of the merged ``epoch`` keeping ``kept`` whose crash
    interval ends at entry ``hi`` lacks a write issued before a lost FLUSH
    it may crash after: a state only a lying device leaves (False for an
    epoch that is not merged)."""
    for flush, part in zip(epoch.lost_flushes, epoch.parts, strict=True):
        before = (1 << part) - 1
        if flush < hi and kept & before != before:
            return True
    return False


def check_valid(epoch: Epoch, key: StateKey) -> None:
    """Raise :class:`CrashlabError` (one line) unless ``key`` names a state
    this epoch can produce (``epoch`` is merged when the key names a range)."""
    sid = format_id(key)
    n = epoch.nr_writes
    torn_mask = key.torn_mask
    members = key.kept | torn_mask
    if members >> n:
        bad = members.bit_length() - 1
        raise CrashlabError(f"state {sid}: epoch {epoch.index} has {n} writes, no write {bad}")
    for write, units in key.torn:
        total = write_units(epoch.writes[write], epoch.sectorsize)
        if units >> total:
            raise CrashlabError(
                f"state {sid}: write {write} has {total} 512-byte units, no unit "
                f"{units.bit_length() - 1}"
            )
        if units == (1 << total) - 1:
            raise CrashlabError(f"state {sid}: write {write} torn with every unit kept (keep it)")
    lost = lost_fua(epoch, key.kept, members)
    if lost:
        w = (lost & -lost).bit_length() - 1
        raise CrashlabError(
            f"state {sid}: FUA write {w} completed before a persisted write later in the "
            f"log ({epoch.log_order} order), so it cannot be dropped or torn"
        )
    if key.last is not None and not loses_to_flush(
        epoch, key.kept, compute_cut(epoch, key.kept, torn_mask).hi
    ):
        raise CrashlabError(
            f"state {sid}: it keeps every write issued before the lost FLUSH "
            f"(entries {', '.join(f'#{f}' for f in epoch.lost_flushes)}) or its crash lies "
            "before it: an ordinary state, not a lost-flush one"
        )
    if key.misdirect is not None and key.misdirect[0] >= epoch.start:
        entry = key.misdirect[0]
        kept = {epoch.writes[w].index for w in iter_bits(key.kept)}
        if entry not in kept:
            raise CrashlabError(
                f"state {sid}: entry {entry} is no write the state keeps in "
                f"epoch {epoch.index}: only a persisted write can be misdirected"
            )


def check_victim(key: StateKey, victim: Entry, sectorsize: int) -> None:
    """Raise :class:`CrashlabError` (one line) unless the misdirected write
    ``victim`` (the entry ``key`` names) is a write with data that lands
    elsewhere than its own place."""
    sid = format_id(key)
    assert key.misdirect is not None
    if not victim.has_payload or victim.is_discard:
        raise CrashlabError(
            f"state {sid}: entry {victim.index} is no write with data: "
            "only a write can be misdirected"
        )
    if key.misdirect[1] * UNIT == victim.sector * sectorsize:
        raise CrashlabError(
            f"state {sid}: entry {victim.index} is at sector "
            f"{key.misdirect[1]} already: a misdirected write lands elsewhere"
        )


class State:
    """One crash state of an epoch.  Cheap to make; reads no payload until
    :meth:`extents` is iterated."""

    __slots__ = ("key", "epoch", "ordinal", "cut")

    def __init__(self, key: StateKey, epoch: Epoch, ordinal: int | None = None) -> None:
        self.key = key
        self.epoch = epoch
        # position among the states its enumeration generated inside the
        # window, folded ones included (None for a state looked up by ID)
        self.ordinal = ordinal
        self.cut = compute_cut(epoch, key.kept, key.torn_mask)

    def __repr__(self) -> str:
        return f"State({self.id})"

    @property
    def id(self) -> str:
        return format_id(self.key)

    @property
    def durable_upto(self) -> int:
        """Entries ``[0, durable_upto)`` make the durable base of this
        state (its epoch's start)."""
        return self.epoch.start

    @property
    def is_prefix(self) -> bool:
        return not self.key.torn and self.key.kept & (self.key.kept + 1) == 0

    @property
    def kept_writes(self) -> tuple[int, ...]:
        """Epoch-relative numbers of the kept writes."""
        return tuple(iter_bits(self.key.kept))

    @property
    def kept_entries(self) -> tuple[int, ...]:
        """Log entry indices of the kept writes."""
        ws = self.epoch.writes
        return tuple(ws[w].index for w in iter_bits(self.key.kept))

    @property
    def torn_entries(self) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
        """``(entry index, ((first byte, end byte), ...))`` per torn write:
        the byte ranges of its data that persisted."""
        ws = self.epoch.writes
        return tuple(
            (ws[w].index, tuple((a * UNIT, (b + 1) * UNIT) for a, b in mask_runs(u)))
            for w, u in self.key.torn
        )

    @property
    def dropped_entries(self) -> tuple[int, ...]:
        """Writes issued before the state's last write that the image lacks
        entirely: the ones the device reordered away."""
        members = self.key.kept | self.key.torn_mask
        last = members.bit_length()
        lost = ((1 << last) - 1) & ~members
        return tuple(self.epoch.writes[w].index for w in iter_bits(lost))

    @property
    def after_cut_entries(self) -> tuple[int, ...]:
        """Writes of the epoch after the state's last write (not yet issued
        at the earliest crash instant, or lost)."""
        members = self.key.kept | self.key.torn_mask
        ws = self.epoch.writes
        return tuple(ws[w].index for w in range(members.bit_length(), len(ws)))

    def program(self) -> list[tuple[int, int]]:
        """The overlay as ``(write, units)`` items in log order; ``units`` is
        -1 for a whole write, else the bitmask of persisted 512-byte units."""
        torn = dict(self.key.torn)
        members = self.key.kept | self.key.torn_mask
        return [(w, torn.get(w, -1)) for w in iter_bits(members)]

    def extents(self, reader: Payloads) -> Iterator[tuple[int, bytes]]:
        """``(byte offset on the device, data)`` to write, in order, on top of
        the durable base of the epoch to get this state's image, before the
        state faults (``harness/materialize/faults.py``)."""
        for w, units in self.program():
            yield from item_extents(reader, self.epoch.writes[w], units)

    def victim(self, reader: LogReader) -> Entry | None:
        """The misdirected write's log entry (None: no misdirect fault);
        CrashlabError when the log has no such entry."""
        if self.key.misdirect is None:
            return None
        index = self.key.misdirect[0]
        if index >= self.epoch.start:
            return next(e for e in self.epoch.writes if e.index == index)
        for e in reader.entries():
            if e.index == index:
                return e
        raise CrashlabError(f"state {self.id}: {reader.path} has no entry {index}")

    def fault_ranges(self, victim: Entry | None) -> tuple[tuple[int, int], ...]:
        """Device ``(offset, length)`` ranges the misdirect and corrupt
        faults changed: a misdirected write's landing place and its own
        place (which kept old content), a corrupt fault's sector
        (``victim``: :meth:`victim`)."""
        out = []
        if self.key.misdirect is not None and victim is not None:
            n = victim.nr_sectors * self.epoch.sectorsize
            out += [(self.key.misdirect[1] * UNIT, n), (victim.sector * self.epoch.sectorsize, n)]
        if self.key.corrupt is not None:
            out.append((self.key.corrupt[0] * UNIT, UNIT))
        return tuple(out)

    def fault_notes(self, victim: Entry | None = None) -> list[str]:
        """The state faults of this state in words, one sentence each
        (``victim``: :meth:`victim`)."""
        key, ep = self.key, self.epoch
        notes = []
        if key.last is not None:
            lost = [w for w in range(ep.parts[-1]) if not key.kept >> w & 1]
            flushes = ", ".join(f"#{f}" for f in ep.lost_flushes)
            notes.append(
                f"lost flush: the FLUSH at entry {flushes} was acknowledged but persisted "
                f"nothing, so epochs {ep.index}-{ep.last_index} are one epoch (writes numbered "
                f"across them); this state lacks {len(lost)} write(s) issued before it "
                f"(w{', w'.join(map(str, lost[:8]))}{' ...' if len(lost) > 8 else ''}) and its "
                f"crash may come after it: acknowledged up to txn {self.cut.acked}"
            )
        if key.misdirect is not None:
            index, sector = key.misdirect
            where = "kept in this epoch" if index >= ep.start else "durable before this epoch"
            meant = ""
            if victim is not None:
                meant = (
                    f", {victim.nr_sectors * ep.sectorsize} bytes for device byte "
                    f"{victim.sector * ep.sectorsize}"
                )
            notes.append(
                f"misdirect: the write of entry #{index} ({where}{meant}) landed at device "
                f"byte {sector * UNIT} (sector {sector}) instead; its own place keeps what it "
                "held before"
            )
        if key.corrupt is not None:
            sector, bits = key.corrupt
            shown = ", ".join(f"byte {b // 8} bit {b % 8}" for b in list(iter_bits(bits))[:6])
            notes.append(
                f"corrupt: {bits.bit_count()} bit(s) of device sector {sector} (bytes "
                f"{sector * UNIT}..{sector * UNIT + UNIT - 1}) flipped after every write: "
                f"{shown}{' ...' if bits.bit_count() > 6 else ''}"
            )
        return notes

    def flips(self) -> tuple[tuple[int, int], ...]:
        """``(byte offset on the device, XOR mask)`` to apply to the image
        after :meth:`extents`: the corrupt fault's flipped bits (bit b of
        the sector is bit b % 8 of its byte b // 8), one item per byte."""
        if self.key.corrupt is None:
            return ()
        sector, bits = self.key.corrupt
        masks: dict[int, int] = {}
        for b in iter_bits(bits):
            off = sector * UNIT + b // 8
            masks[off] = masks.get(off, 0) | 1 << (b % 8)
        return tuple(sorted(masks.items()))


def item_spans(entry: Entry, units: int, sectorsize: int) -> Iterator[tuple[int, int | None, int]]:
    """The extents :func:`item_extents` writes, as where their data is:
    ``(byte offset on the device, byte offset in the log file or None for
    zeros, length)``, so that a reader of the log in memory needs no copy
    of the payload first (``StateChecker.lines``)."""
    base = entry.sector * sectorsize
    length = entry.nr_sectors * sectorsize
    src: int | None = None
    if not entry.is_discard:
        src = entry.payload_offset(sectorsize)
        if not entry.has_payload:  # as reader.payload: nothing to write
            length = 0
    if units == -1:
        yield base, src, length
        return
    for a, b in mask_runs(units):
        lo, hi = a * UNIT, min((b + 1) * UNIT, length)
        yield base + lo, None if src is None else src + lo, max(0, hi - lo)


def item_extents(reader: Payloads, entry: Entry, units: int) -> Iterator[tuple[int, bytes]]:
    """The extents one overlay item writes (see :meth:`State.program`):
    discards write zeros, as :func:`harness.replay.apply_entry` does."""
    s = reader.sectorsize
    base = entry.sector * s
    length = entry.nr_sectors * s
    data = bytes(length) if entry.is_discard else reader.payload(entry)
    if units == -1:
        yield base, data
        return
    for a, b in mask_runs(units):
        yield base + a * UNIT, data[a * UNIT : (b + 1) * UNIT]
