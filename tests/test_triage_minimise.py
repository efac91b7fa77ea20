"""Minimising a failing crash state (harness/triage/, issue 25 item 1).

The generic search against synthetic predicates whose minimal answer is
known, on epochs made by hand and judged by the crash model's own
``check_valid``; then a real recording of a known-unsafe SUT: a failing
reorder state shrunk, and the result verified minimal by checking its
neighbours with the check's own path."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.check.check import CheckOptions, check_run
from harness.check.repro import ReproOptions, state_checker
from harness.errors import CrashlabError
from harness.logformat import FUA, Entry, LogReader
from harness.rundir import RunDir
from harness.states import Options, State, iter_epochs, resolve_window
from harness.states.epochs import Epoch
from harness.states.model import DM_LOG_WRITES
from harness.states.stateid import StateKey, format_id, iter_bits, parse_id
from harness.triage.minimise import join_id, minimise, split_id
from harness.triage.search import (
    EpochSpace,
    Space,
    ddmin,
    dropped,
    kind_of,
    shrink,
    shrink_composite,
)

UNITS = 8  # 512-byte units of every synthetic write (a 4 KiB page)


def make_epochs(
    sizes: Sequence[int], fua: dict[int, set[int]] | None = None, log_order: str = "completion"
) -> list[Epoch]:
    """Epochs of ``sizes`` writes each, write w of epoch e at sector
    1000*e + 8*w; ``fua``: epoch -> its FUA writes."""
    out, index = [], 0
    for e, n in enumerate(sizes):
        ep = Epoch(e, index, flush=None if e == 0 else index - 1, log_order=log_order)
        for w in range(n):
            flags = FUA if w in (fua or {}).get(e, set()) else 0
            ep._add_write(Entry(index, 0, 1000 * e + UNITS * w, UNITS, flags, None))
            index += 1
        ep.end, ep.closed = index, True
        index += 1  # the FLUSH
        out.append(ep)
    return out


class Recorder:
    """A predicate that remembers what it was asked, and fails the test on
    a key the model forbids."""

    def __init__(self, space: Space, rule: Callable[[StateKey], bool]) -> None:
        self.space, self.rule = space, rule
        self.asked: list[StateKey] = []

    def __call__(self, key: StateKey) -> bool:
        assert self.space.valid(key), f"asked about {key}, which the model forbids"
        assert key not in self.asked, f"asked twice about {key}"
        self.asked.append(key)
        return self.rule(key)


def run(ids: str, rule: Callable[[StateKey], bool], epochs: list[Epoch]) -> str:
    space = EpochSpace(epochs)
    pred = Recorder(space, rule)
    got = shrink(parse_id(ids), pred, space)
    assert got.judged == len(pred.asked)
    return format_id(got.minimal)


def test_ddmin_finds_a_pair_and_a_single() -> None:
    assert ddmin(list(range(16)), lambda xs: {3, 11} <= set(xs)) == [3, 11]
    assert ddmin(list(range(9)), lambda xs: 7 in xs) == [7]
    assert ddmin([5], lambda xs: True) == [5]


def test_prefix_earliest_crash_point() -> None:
    # fails in a window: epoch 1 from write 3 to 5 considered, and all of epoch 2
    def rule(k: StateKey) -> bool:
        return (k.epoch == 1 and 3 <= k.kept.bit_length() <= 5) or k.epoch == 2

    assert run("e2.p4", rule, make_epochs([4, 7, 6])) == "e1.p3"
    assert run("e1.p5", rule, make_epochs([4, 7, 6])) == "e1.p3"


def test_reorder_fewest_drops_keeps_a_pair() -> None:
    # the bug: write 9 persisted while writes 2 and 6 (both) did not
    def rule(k: StateKey) -> bool:
        return k.epoch == 1 and k.kept >> 9 & 1 == 1 and not k.kept & (1 << 2 | 1 << 6)

    assert run("e1.k0-1,9-11", rule, make_epochs([3, 12])) == "e1.k0-1,3-5,7-9"


def test_reorder_earliest_point_then_drops() -> None:
    # write 4 persisted without write 1: from a state far later in the epoch
    def rule(k: StateKey) -> bool:
        return k.epoch == 0 and k.kept >> 4 & 1 == 1 and not k.kept >> 1 & 1

    assert run("e0.k0,4-5,8", rule, make_epochs([10])) == "e0.k0,2-4"


def test_reorder_steps_back_with_its_drops() -> None:
    # write 1 lost while write 0 persisted, from write 3 on: the lossiest
    # states (write 0 lost too) pass, so only stepping back finds it
    def rule(k: StateKey) -> bool:
        return k.kept & 0b11 == 1 and k.kept.bit_length() >= 4

    assert run("e0.k0,2-6", rule, make_epochs([8])) == "e0.k0,2-3"


def test_model_forbids_dropping_a_fua_write() -> None:
    # write 2 is FUA: no state whose last write comes after it lacks it
    def rule(k: StateKey) -> bool:
        return k.kept >> 6 & 1 == 1 and not k.kept & 1

    epochs = make_epochs([8], {0: {2}})
    assert run("e0.k2-3,6", rule, epochs) == "e0.k1-6"
    # dm-log-writes order: a FUA write kept after another FUA write forbids
    # dropping the earlier one; the bug needs both FUA writes 1 and 3 lost
    # while write 5 persisted, so no candidate restores 3 alone
    dm = make_epochs([7], {0: {1, 3}}, log_order=DM_LOG_WRITES)

    def both(k: StateKey) -> bool:
        return k.kept >> 5 & 1 == 1 and not k.kept & (1 << 1 | 1 << 3)

    assert run("e0.k0,5", both, dm) == "e0.k0,2,4-5"


def test_reorder_that_needs_no_drop_becomes_a_prefix() -> None:
    # every state of epoch 1 that has write 2 fails: no reordering needed,
    # and the earliest such crash point is p3
    def rule(k: StateKey) -> bool:
        return k.epoch == 1 and k.kept >> 2 & 1 == 1

    assert run("e1.k2,4-5", rule, make_epochs([3, 7])) == "e1.p3"


def test_crash_point_within_the_epoch() -> None:
    # the invariant fails in epoch 0 too, for another reason
    def rule(k: StateKey) -> bool:
        return k.epoch == 0 or (k.kept >> 4 & 1 == 1 and not k.kept >> 1 & 1)

    space = EpochSpace(make_epochs([3, 7]))
    key = parse_id("e1.k0,4-6")
    assert format_id(shrink(key, Recorder(space, rule), space).minimal) == "e0.p0"
    got = shrink(key, Recorder(space, rule), space, whole_log=False)
    assert format_id(got.minimal) == "e1.k0,2-4"


def test_torn_smallest_tear() -> None:
    # fails while write 3's unit 5 did not persist
    def rule(k: StateKey) -> bool:
        return k.epoch == 0 and any(w == 3 and not u >> 5 & 1 for w, u in k.torn)

    assert run("e0.p3.t3:0-1", rule, make_epochs([6])) == "e0.p3.t3:0-4,6-7"


def test_torn_earliest_point() -> None:
    # a tear of write 2 or later that loses the write's end fails
    def rule(k: StateKey) -> bool:
        return any(w >= 2 and not u >> 7 & 1 for w, u in k.torn)

    assert run("e1.p4.t4:0-3", rule, make_epochs([3, 6])) == "e0.p2.t2:0-6"


def test_torn_reorder_keeps_its_kind() -> None:
    # write 4 persisted, write 1 lost, write 2 torn missing its last unit
    def rule(k: StateKey) -> bool:
        torn = dict(k.torn)
        return k.kept >> 4 & 1 == 1 and not k.kept >> 1 & 1 and not torn.get(2, 255) >> 7 & 1

    assert run("e0.k4.t2:0-3", rule, make_epochs([6])) == "e0.k0,3-4.t2:0-6"


def test_composite_each_crash_in_turn() -> None:
    # two crashes; the continuation after any first crash is the same log
    first, second = make_epochs([3, 6]), make_epochs([8])

    def space_of(prefix: tuple[StateKey, ...]) -> Space | None:
        return EpochSpace(first if not prefix else second)

    def rule(ks: tuple[StateKey, ...]) -> bool:
        a, b = ks
        return (
            a.epoch == 1
            and a.kept.bit_length() >= 2
            and b.kept >> 5 & 1 == 1
            and not b.kept >> 3 & 1
        )

    keys = (parse_id("e1.p5"), parse_id("e0.k0-2,5-7"))
    got, judged = shrink_composite(keys, rule, space_of)
    assert [format_id(k) for k in got] == ["e1.p2", "e0.k0-2,4-5"]
    assert judged > 2


def test_composite_without_a_continuation_moves_no_first_crash() -> None:
    # only the first crash e1.p5 was continued: the first part cannot move
    first, second = make_epochs([3, 6]), make_epochs([8])

    def space_of(prefix: tuple[StateKey, ...]) -> Space | None:
        if not prefix:
            return EpochSpace(first)
        return EpochSpace(second) if prefix == (parse_id("e1.p5"),) else None

    def rule(ks: tuple[StateKey, ...]) -> bool:
        return ks[1].kept >> 5 & 1 == 1 and not ks[1].kept >> 3 & 1

    got, _ = shrink_composite((parse_id("e1.p5"), parse_id("e0.k5")), rule, space_of)
    assert [format_id(k) for k in got] == ["e1.p5", "e0.k0-2,4-5"]


def test_a_state_that_does_not_fail_is_refused() -> None:
    space = EpochSpace(make_epochs([4]))
    with pytest.raises(CrashlabError, match="not a failing state"):
        shrink(parse_id("e0.p3"), lambda k: False, space)
    with pytest.raises(CrashlabError, match="not a failing state"):
        shrink(parse_id("e0.p9"), lambda k: True, space)  # epoch 0 has 4 writes


# --- a real recording -------------------------------------------------------

MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"  # harness/sweep/builtin_workloads.py
DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
REAL = [
    # journal OFF: a reordered page write leaves a partial transaction
    ("sqlite-off", "DB-ATOMIC"),
    # DELETE/FULL: the journal's unlink is not synced, an acked transaction rolls back
    ("sqlite-delete-full", "DB-DURABLE"),
]


def crash_point(key: StateKey) -> tuple[int, int]:
    """(epoch, writes considered): where a state's crash lies in the log."""
    return key.epoch, (key.kept | key.torn_mask).bit_length()


def check_verdicts(run: RunDir, invariant: str, out: Path) -> dict[str, str | None]:
    """The reorder check of ``run``: state ID -> its status on ``invariant``."""
    check_run(run, CheckOptions(states=Options(strategy="reorder"), jobs=1), out)
    verdicts = {}
    for line in (out / "states.jsonl").read_text().splitlines():
        rec = json.loads(line)
        verdicts[rec["id"]] = rec["v"].get(invariant)
    return verdicts


def neighbours(space: EpochSpace, key: StateKey) -> list[StateKey]:
    """The states one step bigger than ``key`` that the model allows: each
    dropped write restored, each torn write made whole, the crash point
    before (its last kept write not persisted)."""
    out = [replace(key, kept=key.kept | 1 << w) for w in iter_bits(dropped(key))]
    for i, (w, _) in enumerate(key.torn):
        out.append(replace(key, kept=key.kept | 1 << w, torn=key.torn[:i] + key.torn[i + 1 :]))
    last = (key.kept | key.torn_mask).bit_length() - 1
    if last >= 0 and key.kept >> last & 1:
        out.append(replace(key, kept=key.kept & ~(1 << last)))
    return [k for k in out if space.valid(k)]


@pytest.mark.needs_fuse
@pytest.mark.parametrize(("sut", "invariant"), REAL)
def test_real_reorder_state_shrinks_to_a_minimal_witness(
    recorded: Any, tmp_path: Path, sut: str, invariant: str
) -> None:
    run = recorded(sut, MULTI)
    verdicts = check_verdicts(run, invariant, tmp_path / "check")
    failing = [parse_id(i) for i, v in verdicts.items() if v == "fail"]
    # the failing reorder state with the most dropped writes, the last such
    reorder = [k for k in failing if kind_of(k) == "reorder"]
    original = max(reorder, key=lambda k: (dropped(k).bit_count(), crash_point(k)))
    assert dropped(original).bit_count() >= 2
    space = space_of(run)
    (tmp_path / "judge").mkdir()
    checker = state_checker(run, tmp_path / "judge", ReproOptions(), faulted=False)

    def fails(key: StateKey) -> bool:
        state = State(key, space.epoch(key))
        return any(v.invariant == invariant and v.failed for v in checker.check(state))

    try:
        points = []
        for whole_log in (False, True):
            got = minimise(run.path, format_id(original), invariant, whole_log=whole_log)
            minimal = parse_id(got.minimal)
            assert (got.original, got.invariant) == (format_id(original), invariant)
            assert got.kind == kind_of(minimal) and 1 < got.judged < len(verdicts) / 4
            assert crash_point(minimal) <= crash_point(original)
            assert dropped(minimal).bit_count() <= dropped(original).bit_count()
            lost = State(minimal, space.epoch(minimal)).dropped_entries
            assert tuple(w.entry for w in got.lost) == lost
            # judged afresh: it fails, and every state one step bigger passes
            assert fails(minimal), minimal
            for bigger in neighbours(space, minimal):
                assert not fails(bigger), (minimal, bigger)
            # a prefix witness is exact: the check itself passed every earlier
            # prefix state (here every reorder failure shrinks to one: the
            # bug of these SUTs shows without reordering)
            assert got.kind == "prefix"
            earlier = [
                parse_id(i)
                for i in verdicts
                if kind_of(parse_id(i)) == "prefix"
                and crash_point(parse_id(i)) < crash_point(minimal)
                and (whole_log or parse_id(i).epoch == original.epoch)
            ]
            assert all(verdicts[format_id(k)] != "fail" for k in earlier)
            points.append(crash_point(minimal))
        assert points[1] <= points[0]
    finally:
        checker.close()


def space_of(run: RunDir) -> EpochSpace:
    with LogReader(run.log) as reader:
        return EpochSpace(list(iter_epochs(reader, run.log_order)))


def test_minimise_refuses_bad_input(recorded: Any) -> None:
    run = recorded("sqlite-off", MULTI)
    with pytest.raises(CrashlabError, match="unknown invariant 'DB-NOPE'"):
        minimise(run.path, "e0.p0", "DB-NOPE")
    with pytest.raises(CrashlabError, match="does not fail DB-ATOMIC"):
        minimise(run.path, "e0.p0", "DB-ATOMIC")
    with pytest.raises(CrashlabError, match="no epoch 9999"):
        minimise(run.path, "e9999.p0", "DB-ATOMIC")


def test_composite_ids_split_and_join() -> None:
    for sid, kinds in [
        ("e7.k0,2/e3.p1", ["multicrash"]),
        ("e7.k0,2/recovery/e0.p3", ["recovery-crash"]),
        ("e1.p2/e3.p1/recovery/e0.k1", ["multicrash", "recovery-crash"]),
    ]:
        parts, got = split_id(sid)
        assert got == kinds
        assert join_id(tuple(parse_id(p) for p in parts), got) == sid


def test_minimise_stays_in_the_checks_window(recorded: Any, tmp_path: Path) -> None:
    # dhl-nolog-raw fails DB-OPEN from its first transactions, and in its
    # creation window too (a NOLOG store whose set-up is half written): by
    # default the check judges the whole log and the minimal state may lie
    # before setup-done; with the window from setup-done it may not
    run = recorded("dhl-nolog-raw", DHL_INSERT, fs="raw")
    verdicts = check_verdicts(run, "DB-OPEN", tmp_path / "check")
    failing = [i for i, v in verdicts.items() if v == "fail"]
    assert failing
    space = space_of(run)
    with LogReader(run.log) as reader:
        setup = resolve_window(reader, Options(window_start="setup-done"))[0]
    assert setup is not None
    his = []
    for sid in (failing[0], failing[-1]):
        got = minimise(run.path, sid, "DB-OPEN")
        key = parse_id(got.minimal)
        his.append(State(key, space.epoch(key)).cut.hi)
        assert verdicts.get(got.minimal) in ("fail", None)
    assert min(his) <= setup  # found in the creation window
    old = Options(window_start="setup-done")
    late_failing = [
        i for i in failing if State(parse_id(i), space.epoch(parse_id(i))).cut.hi > setup
    ]
    got = minimise(run.path, late_failing[-1], "DB-OPEN", states=old)
    key = parse_id(got.minimal)
    assert State(key, space.epoch(key)).cut.hi > setup, got
    # the window of the check's own options: from a later mark
    late = Options(window_start="txn-ack:5")
    got = minimise(run.path, failing[-1], "DB-OPEN", states=late)
    with LogReader(run.log) as reader:
        ack5 = resolve_window(reader, late)[0]
    key = parse_id(got.minimal)
    assert ack5 is not None and State(key, space.epoch(key)).cut.hi > ack5
