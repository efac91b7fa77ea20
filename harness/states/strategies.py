"""Enumeration strategies: which (kept, torn) sets of an epoch to visit.

Each strategy is a deterministic generator over one epoch; it yields
``(kept mask, torn tuple)`` pairs (see :class:`StateKey`), each at most once
per epoch, in a fixed order.  Counts per epoch of n writes (no FUA writes):

* ``prefix``: the n+1 prefixes ``p0 .. pn`` (p0: right after the flush).
* ``persistence-points``: one state per epoch that starts with a FLUSH: the
  state right after that flush completed (``p0``; ``p1`` when the FLUSH
  carried FUA data, which is then durable too).  CrashMonkey/B3's choice.
* ``reorder``: the n+1 prefixes first, then other kept sets by number of
  dropped writes (1, 2, ...), each size in ``itertools.combinations`` order
  of the dropped writes.  n <= ``max_exhaustive``: every subset (2^n states).
  Larger epochs: every subset dropping at most ``max_drop`` writes
  (sum_{i<=k} C(n,i) + n - k states), or with ``sample`` = M, a budget of M
  distinct seeded random subsets besides the prefixes, stratified by size:
  the budget is shared evenly among the sizes 1..n-1 of the kept set, so
  small and large drops are drawn alike (a uniform draw of all 2^n subsets
  would almost only give sizes near n/2).  Fewer than M when a size has
  fewer subsets than its share.  A set that would drop a FUA write before
  its last kept write is not a state (see :mod:`harness.states.model`):
  skipped, or in samples repaired by keeping that FUA write.
* ``torn``: for each m, ``pm`` then write m torn on top of ``pm``: the
  write's data is cut into tear blocks (``tear_unit`` bytes, aligned on the
  device, 512 by default: one 4 KiB page = 8 blocks), and the persisted
  blocks are, by ``torn_pattern``: ``prefix`` (blocks [0, j), j = 1..B-1),
  ``ends`` (those and the suffixes [j, B)), ``subset`` (every non-empty
  proper subset, for writes of at most ``max_subset_blocks`` blocks; larger
  ones fall back to ``ends``).  With more than ``max_tears`` split points,
  ``max_tears`` evenly spaced ones are used.  A write of one block cannot
  tear.  prefix pattern, every write B blocks: (n+1) + n(B-1) states.
* ``torn-reorder``: every kept set of ``reorder`` (same options), and for
  each one that is not the whole epoch, one more state with one dropped
  write torn on top of it: the write and its persisted blocks (one of the
  ``torn_pattern`` patterns) drawn with the seed, so the IDs are stable.
  Reordering and tearing together: a device that persisted later writes
  while an earlier one was only partly written.  2x reorder's count at
  most.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, fields
from itertools import combinations, islice

from harness.errors import CrashlabError
from harness.faults import Fault, fault_specs
from harness.logformat import Entry
from harness.states.coverage import possible_kept_sets
from harness.states.epochs import Epoch
from harness.states.inject import StateFaults
from harness.states.model import DM_LOG_WRITES, LOG_ORDERS, lost_fua
from harness.states.stateid import UNIT, is_prefix_mask, run_mask

STRATEGIES = ("prefix", "reorder", "torn", "torn-reorder", "persistence-points")
TEARING = ("torn", "torn-reorder")  # the strategies whose states tear writes
BUDGETED = ("reorder", "torn", "torn-reorder")  # the strategies a budget plans
AUTO_BUDGET = 0  # Options.budget: the run's tier's (harness.check.window.budget_for)
DEFAULT_BUDGET = 10**6  # states: an AUTO_BUDGET not resolved for a tier (a log alone)
TORN_PATTERNS = ("prefix", "ends", "subset")

Torn = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Options:
    """Enumeration options; the defaults are the documented ones."""

    strategy: str = "prefix"
    max_exhaustive: int = 10  # reorder: every subset of epochs with at most this many writes
    max_drop: int = 2  # reorder, larger epochs: subsets dropping at most this many writes
    sample: int | None = None  # reorder, larger epochs: a budget of M seeded subsets instead
    seed: int = 0
    # reorder, torn, torn-reorder: the kept sets of the whole window chosen
    # by its size (enumerate.py, plan_quotas): every valid kept set of every
    # epoch when they number at most this many, else a stratified seeded
    # sample of this many; AUTO_BUDGET: the run's tier's (harness/check/
    # window.py), or DEFAULT_BUDGET for a log alone; None: the per-epoch
    # rule above (max_exhaustive, max_drop, sample), as before the budget
    budget: int | None = 0
    tear_unit: int = 512  # torn: bytes that persist all or nothing (power of two >= 512)
    torn_pattern: str = "prefix"
    max_tears: int = 32  # torn prefix/ends: split points per write at most
    max_subset_blocks: int = 8  # torn subset: writes of at most this many tear blocks
    window_start: str | None = None  # first mark of the window (see enumerate.py)
    window_end: str | None = None  # last mark of the window
    dedup: bool = True  # fold states with identical overlays and mark context
    log_order: str = "completion"  # the run's (harness/states/model.py): which states are valid
    # state faults injected on top of the strategy's states (parsed,
    # harness/faults.py; harness/states/inject.py): only faulted states are
    # enumerated then
    faults: tuple[Fault, ...] = ()

    def to_json(self) -> dict[str, object]:
        """Every option as a JSON object (a check's check.json), the faults
        in their canonical spellings."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["faults"] = fault_specs(self.faults)
        if self.budget is None:  # the per-epoch rule: as written before the budget
            del d["budget"]
        return d

    def record(self) -> dict[str, object]:
        """The options as a JSON object (a check's tag and result.json):
        ``faults`` only when there are any, so that a check without state
        faults names its folder and writes its result as before them."""
        d = self.to_json()
        if not self.faults:
            del d["faults"]
        return d

    def validate(self) -> None:
        """Raise :class:`CrashlabError` (one line) on a bad option."""
        if self.strategy not in STRATEGIES:
            raise CrashlabError(
                f"unknown strategy {self.strategy!r} (choose from {', '.join(STRATEGIES)})"
            )
        if self.torn_pattern not in TORN_PATTERNS:
            raise CrashlabError(
                f"unknown torn pattern {self.torn_pattern!r} "
                f"(choose from {', '.join(TORN_PATTERNS)})"
            )
        u = self.tear_unit
        if u < UNIT or u & (u - 1):
            raise CrashlabError(f"tear unit must be a power of two >= {UNIT} bytes, not {u}")
        for name in ("max_exhaustive", "max_drop", "max_tears", "max_subset_blocks"):
            if getattr(self, name) < 0:
                raise CrashlabError(f"{name} must be >= 0")
        if self.max_exhaustive > 24:
            raise CrashlabError("max_exhaustive above 24 means > 16M states per epoch")
        if self.max_subset_blocks > 16:
            raise CrashlabError("max_subset_blocks above 16 means > 65k states per write")
        if self.log_order not in LOG_ORDERS:
            raise CrashlabError(
                f"unknown log order {self.log_order!r} (choose from {', '.join(LOG_ORDERS)})"
            )
        if self.sample is not None and self.sample < 1:
            raise CrashlabError(f"sample must be >= 1, not {self.sample}")
        if self.budget is not None and self.budget < 0:
            raise CrashlabError(f"budget must be >= 1 (0: auto), not {self.budget}")
        StateFaults.of(self.faults)


def _fua_ok(epoch: Epoch, kept: int, torn: int = 0) -> bool:
    """No FUA write that completed before the state's last write is missing."""
    return not lost_fua(epoch, kept, kept | torn)


def prefix_states(epoch: Epoch) -> Iterator[tuple[int, Torn]]:
    for m in range(epoch.nr_writes + 1):
        yield (1 << m) - 1, ()


def persistence_point_states(epoch: Epoch) -> Iterator[tuple[int, Torn]]:
    if epoch.index == 0 and not epoch.lost_flushes:
        return
    ws = epoch.writes
    # The FLUSH entry itself carried data: that write is complete when the
    # flush request is, if it was FUA.
    if ws and ws[0].index == epoch.start and epoch.fua_mask & 1:
        yield 1, ()
    else:
        yield 0, ()


def reorder_states(
    epoch: Epoch, opts: Options, quota: int | None = None
) -> Iterator[tuple[int, Torn]]:
    """The prefixes, then other kept sets: with a ``quota`` (the budget's
    share of this epoch, :func:`harness.states.enumerate.plan_quotas`) every
    valid one when they number at most ``quota``, else ``quota`` of them
    sampled; without one, by the per-epoch rule."""
    yield from prefix_states(epoch)
    if quota is not None:
        if quota >= possible_kept_sets(epoch) - (epoch.nr_writes + 1):
            yield from _every_kept_set(epoch)
        elif quota > 0:
            yield from _sampled(epoch, quota, f"{opts.seed}:{epoch.index}")
        return
    n = epoch.nr_writes
    full = epoch.full_mask
    if n > opts.max_exhaustive and opts.sample is not None:
        yield from _sampled(epoch, opts.sample, f"{opts.seed}:{epoch.index}")
        return
    most = n if n <= opts.max_exhaustive else min(opts.max_drop, n)
    for d in range(1, most + 1):
        for dropped in combinations(range(n), d):
            kept = full
            for w in dropped:
                kept ^= 1 << w
            if not is_prefix_mask(kept) and _fua_ok(epoch, kept):
                yield kept, ()


def _every_kept_set(epoch: Epoch) -> Iterator[tuple[int, Torn]]:
    """Every valid kept set that is not a prefix, in the per-epoch rule's
    order (by number of dropped writes, each in ``combinations`` order), the
    invalid ones never built: dropping a FUA write forces dropping what
    must then be lost with it (every later write in completion order,
    every later FUA write in dm-log-writes order), so the work is in
    proportion to the valid sets, not to 2^n."""
    n, fua, full = epoch.nr_writes, epoch.fua_mask, epoch.full_mask
    later = fua if epoch.log_order == DM_LOG_WRITES else full
    forced = [later & ~((2 << w) - 1) if fua >> w & 1 else 0 for w in range(n)]
    for d in range(1, n + 1):
        for dropped in _drops(n, d, 0, 0, forced):
            kept = full & ~dropped
            if not is_prefix_mask(kept):
                yield kept, ()


def _drops(n: int, d: int, start: int, must: int, forced: list[int]) -> Iterator[int]:
    """Bitmasks of ``d`` dropped writes from ``start`` on, in combinations
    order, containing every write of ``must`` at or after ``start``; a
    write in ``forced[w]`` must be dropped when w is."""
    if d == 0:
        if not must >> start:
            yield 0
        return
    for w in range(start, n - d + 1):
        for rest in _drops(n, d - 1, w + 1, must | forced[w], forced):
            yield rest | 1 << w
        if must >> w & 1:
            return  # w must be dropped: no combination skips it


def _sampled(epoch: Epoch, m: int, seed: str) -> Iterator[tuple[int, Torn]]:
    """Up to ``m`` distinct non-prefix kept sets, stratified by size: size k
    (1 <= k < n) gets ``m // (n-1)`` draws, the first ``m % (n-1)`` sizes
    one more; each draw is a uniform k-subset from ``random.Random`` seeded
    with ``seed:k`` (a str seed is hashed with SHA-512: the same on every
    machine).  A draw that drops a FUA write before its last kept write is
    repaired by keeping that write (its size then grows)."""
    n = epoch.nr_writes
    if n < 2:
        return
    sizes = list(range(1, n))
    share, extra = divmod(m, len(sizes))
    seen: set[int] = set()
    for i, k in enumerate(sizes):
        want = share + (i < extra)
        if not want:
            continue
        rng = random.Random(f"{seed}:{k}")
        got = 0
        for _ in range(20 * want):
            if got >= want:
                break
            kept = 0
            for w in rng.sample(range(n), k):
                kept |= 1 << w
            kept |= lost_fua(epoch, kept, kept)
            if is_prefix_mask(kept) or kept in seen:
                continue
            seen.add(kept)
            got += 1
            yield kept, ()


def tear_blocks(entry: Entry, sectorsize: int, tear_unit: int) -> list[int]:
    """The write's 512-byte units grouped into device-aligned tear blocks,
    each as a unit bitmask, in order."""
    start = entry.sector * sectorsize
    units = entry.nr_sectors * sectorsize // UNIT
    blocks: list[int] = []
    i = 0
    while i < units:
        block_end = (start + i * UNIT) // tear_unit * tear_unit + tear_unit
        j = min(units, (block_end - start) // UNIT)
        blocks.append(run_mask(i, j - 1))
        i = j
    return blocks


def split_points(nblocks: int, most: int) -> list[int]:
    """Split points 1..B-1, or ``most`` evenly spaced ones when there are more."""
    if nblocks - 1 <= most:
        return list(range(1, nblocks))
    return [(i * nblocks) // (most + 1) for i in range(1, most + 1)]


def tear_patterns(blocks: list[int], opts: Options) -> Iterator[int]:
    """Unit bitmasks of the persisted part of a write torn per ``opts``."""
    b = len(blocks)
    if b < 2:
        return
    if opts.torn_pattern == "subset" and b <= opts.max_subset_blocks:
        for sub in range(1, (1 << b) - 1):
            units = 0
            for k in range(b):
                if sub >> k & 1:
                    units |= blocks[k]
            yield units
        return
    full = 0
    for blk in blocks:
        full |= blk
    points = split_points(b, opts.max_tears)
    for j in points:
        yield full & ((blocks[j] & -blocks[j]) - 1)  # blocks [0, j)
    if opts.torn_pattern != "prefix":
        for j in points:
            yield full & ~((blocks[j] & -blocks[j]) - 1)  # blocks [j, B)


def torn_states(
    epoch: Epoch, opts: Options, quota: int | None = None
) -> Iterator[tuple[int, Torn]]:
    """Each prefix and the next write torn on it; with a ``quota``, then the
    other kept sets :func:`reorder_states` gives (so that a torn check
    covers the reorderings too where the budget allows)."""
    n = epoch.nr_writes
    for m in range(n + 1):
        kept = (1 << m) - 1
        yield kept, ()
        if m < n:
            blocks = tear_blocks(epoch.writes[m], epoch.sectorsize, opts.tear_unit)
            for units in tear_patterns(blocks, opts):
                yield kept, ((m, units),)
    if quota is not None:
        yield from islice(reorder_states(epoch, opts, quota), n + 1, None)


def torn_reorder_states(
    epoch: Epoch, opts: Options, quota: int | None = None
) -> Iterator[tuple[int, Torn]]:
    full = epoch.full_mask
    for kept, _ in reorder_states(epoch, opts, quota):
        yield kept, ()
        if kept == full:
            continue
        rng = random.Random(f"{opts.seed}:{epoch.index}:{kept}")
        # A torn write is one that may be incomplete: the state with it torn
        # must lose no FUA write that completed before its last write.
        dropped = [
            w for w in range(epoch.nr_writes) if not kept >> w & 1 and _fua_ok(epoch, kept, 1 << w)
        ]
        rng.shuffle(dropped)
        for w in dropped:
            blocks = tear_blocks(epoch.writes[w], epoch.sectorsize, opts.tear_unit)
            patterns = list(tear_patterns(blocks, opts))
            if patterns:
                yield kept, ((w, rng.choice(patterns)),)
                break


def epoch_states(
    epoch: Epoch, opts: Options, quota: int | None = None
) -> Iterator[tuple[int, Torn]]:
    """The strategy's (kept, torn) pairs for one epoch; ``quota``: its
    share of the budget (:data:`BUDGETED` strategies; None: the per-epoch
    rule)."""
    if opts.strategy == "prefix":
        return prefix_states(epoch)
    if opts.strategy == "persistence-points":
        return persistence_point_states(epoch)
    if opts.strategy == "reorder":
        return reorder_states(epoch, opts, quota)
    if opts.strategy == "torn-reorder":
        return torn_reorder_states(epoch, opts, quota)
    return torn_states(epoch, opts, quota)
