"""Crash-state enumeration on synthetic logs: exact counts per strategy and
bound, FUA and FLUSH-with-data, mark windows, cuts, lookup by ID,
determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import combinations
from math import comb
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import CrashlabError
from harness.logformat import FLUSH, FUA, LogReader, LogWriter
from harness.states import Enumeration, Options, iter_epochs, state_from_id
from harness.states.synth import page_bytes, write_epochs_log

SIZES = [0, 1, 3, 5, 10, 11, 14]  # the last epoch stays open


def ids(log: Path, **opts) -> list[str]:
    with LogReader(log) as r:
        return [s.id for s in Enumeration(r, Options(**({"dedup": False, "budget": None} | opts)))]


def drop_k(n: int, k: int) -> int:
    return sum(comb(n, i) for i in range(k + 1)) + n - k


@pytest.fixture(scope="module")
def epochs_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("states") / "epochs.log"
    write_epochs_log(path, SIZES)
    return path


def test_epochs_follow_flushes(epochs_log):
    with LogReader(epochs_log) as r:
        eps = list(iter_epochs(r))
    assert [e.nr_writes for e in eps] == SIZES
    assert [e.closed for e in eps] == [True] * (len(SIZES) - 1) + [False]
    for a, b in zip(eps, eps[1:], strict=False):
        assert b.start == a.end + 1  # plain FLUSH entries
    with LogReader(epochs_log) as r:
        assert eps[-1].end == sum(1 for _ in r.entries())


def test_prefix_count(epochs_log):
    got = ids(epochs_log, strategy="prefix")
    assert len(got) == sum(n + 1 for n in SIZES)
    assert len(set(got)) == len(got)
    assert got[:3] == ["e0.p0", "e1.p0", "e1.p1"]


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_reorder_exhaustive_then_drop_k(epochs_log, k):
    got = ids(epochs_log, strategy="reorder", max_exhaustive=10, max_drop=k)
    want = sum(2**n if n <= 10 else drop_k(n, k) for n in SIZES)
    assert len(got) == want
    assert len(set(got)) == len(got)


def test_reorder_exhaustive_bound_is_an_option(epochs_log):
    got = ids(epochs_log, strategy="reorder", max_exhaustive=4, max_drop=1)
    assert len(got) == sum(2**n if n <= 4 else drop_k(n, 1) for n in SIZES)


def test_reorder_prefixes_come_first_and_drops_are_real(epochs_log):
    got = ids(epochs_log, strategy="reorder")
    e3 = [i for i in got if i.startswith("e3.")]
    assert e3[:6] == [f"e3.p{m}" for m in range(6)]
    assert e3[6] == "e3.k1-4"  # one dropped write, combinations order
    assert set(ids(epochs_log, strategy="prefix")) <= set(got)


def test_reorder_sample(epochs_log):
    opts = dict(strategy="reorder", max_exhaustive=10, sample=50, seed=7)
    got = ids(epochs_log, **opts)
    big = [n for n in SIZES if n > 10]
    assert len(got) == sum(2**n for n in SIZES if n <= 10) + sum(n + 1 + 50 for n in big)
    assert len(set(got)) == len(got)
    assert got == ids(epochs_log, **opts)
    assert got != ids(epochs_log, **{**opts, "seed": 8})


def test_deterministic_across_processes_and_hash_seeds(epochs_log):
    code = (
        "import json,sys\n"
        "from harness.logformat import LogReader\n"
        "from harness.states import Enumeration, Options\n"
        "with LogReader(sys.argv[1]) as r:\n"
        "    en = Enumeration(r, Options(strategy='reorder', sample=20, seed=3, budget=None))\n"
        "    print(json.dumps([s.id for s in en] + [en.stats.folded]))\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-c", code, str(epochs_log)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        outs.append(json.loads(res.stdout))
    assert outs[0] == outs[1] and len(outs[0]) > 100


def test_persistence_points(tmp_path):
    log = tmp_path / "pp.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))
        w.flush()
        w.write(8, page_bytes(2))
        w.write(16, page_bytes(3), FLUSH | FUA)  # PREFLUSH+FUA with data
        w.write(24, page_bytes(4))
        w.flush()
        w.write(32, page_bytes(5), FLUSH)  # PREFLUSH without FUA: data stays volatile
        w.flush()
    got = ids(log, strategy="persistence-points")
    assert got == ["e1.p0", "e2.p1", "e3.p0", "e4.p0", "e5.p0"]


def test_flush_with_data_starts_the_new_epoch(tmp_path):
    log = tmp_path / "fd.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))  # entry 0
        w.write(8, page_bytes(2), FLUSH | FUA)  # entry 1: closes epoch 0, write 0 of epoch 1
        w.write(16, page_bytes(3))  # entry 2
    with LogReader(log) as r:
        e0, e1 = list(iter_epochs(r))
        assert (e0.end, e1.start) == (1, 1)
        assert [e.index for e in e1.writes] == [1, 2] and e1.fua_mask == 1
        states = {
            s.id: s for s in Enumeration(r, Options(strategy="reorder", dedup=False, budget=None))
        }
    # e1.k1 would drop the completed FUA write 0 while keeping write 1.
    assert sorted(states) == ["e0.p0", "e0.p1", "e1.p0", "e1.p1", "e1.p2"]
    p0 = states["e1.p0"].cut  # the flush done, its FUA data not yet
    assert (p0.lo, p0.hi) == (1, 1)
    assert (states["e1.p1"].cut.lo, states["e1.p1"].cut.hi) == (2, 3)


def test_fua_keeps_itself_not_earlier_writes(tmp_path):
    log = tmp_path / "fua.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))  # 0: volatile
        w.write(8, page_bytes(2), FUA)  # 1: durable where it appears
        w.write(16, page_bytes(3))  # 2
        w.write(24, page_bytes(4))  # 3
    got = set(ids(log, strategy="reorder"))
    # every subset whose last write comes after write 1 keeps write 1;
    # write 0 may be lost even though FUA write 1 completed after it
    assert "e0.k1-3" in got and "e0.k1,3" in got and "e0.k1" in got
    assert not {"e0.k0,2", "e0.k2-3", "e0.k3", "e0.k0,2-3"} & got
    assert len(got) == 1 + 1 + 2 + 2 + 4  # by last kept write: none, 0, 1, 2, 3
    with LogReader(log) as r:
        for text in ("e0.k0,2", "e0.k2"):
            with pytest.raises(CrashlabError, match="FUA write 1"):
                state_from_id(r, text)
        st1 = state_from_id(r, "e0.p1")
        assert (st1.cut.lo, st1.cut.hi) == (1, 1)  # before the FUA write completes
        torn = state_from_id(r, "e0.p1.t1:0-2")  # the crash hit the FUA write
        assert (torn.cut.lo, torn.cut.hi) == (1, 1)
        with pytest.raises(CrashlabError, match="FUA write 1"):
            state_from_id(r, "e0.p1.t1:0.t2:0")


def test_torn_counts(epochs_log, tmp_path):
    got = ids(epochs_log, strategy="torn")
    assert len(got) == sum(n + 1 + n * 7 for n in SIZES)  # 4 KiB = 8 blocks of 512
    assert len(ids(epochs_log, strategy="torn", torn_pattern="ends")) == sum(
        n + 1 + n * 14 for n in SIZES
    )
    assert len(ids(epochs_log, strategy="torn", torn_pattern="subset")) == sum(
        n + 1 + n * 254 for n in SIZES
    )
    # 4 KiB tear unit, 4 KiB-aligned page writes: nothing can tear
    assert len(ids(epochs_log, strategy="torn", tear_unit=4096)) == sum(n + 1 for n in SIZES)
    log = tmp_path / "odd.log"
    with LogWriter(log) as w:
        w.write(1, page_bytes(1))  # 8 sectors at sector 1: 2 aligned 4 KiB blocks (7 + 1)
        w.write(64, page_bytes(2, 65536))  # 128 units
        w.discard(512, 16)  # discards tear too
    assert ids(log, strategy="torn", tear_unit=4096)[:3] == ["e0.p0", "e0.p0.t0:0-6", "e0.p1"]
    assert len(ids(log, strategy="torn", tear_unit=4096, torn_pattern="subset")) == 4 + 2 + 30 + 2
    assert len(ids(log, strategy="torn")) == 4 + 7 + 32 + 15  # max_tears=32 for 128 units
    assert len(ids(log, strategy="torn", max_tears=200)) == 4 + 7 + 127 + 15
    assert len(ids(log, strategy="torn", torn_pattern="subset", max_subset_blocks=4)) == (
        4 + 2 * 7 + 2 * 32 + 2 * 15  # blocks beyond the subset bound fall back to ends
    )


def test_cut_marks(tmp_path):
    log = tmp_path / "marks.log"
    write_epochs_log(log, [2, 2, 2])
    # 0 begin1, 1 w, 2 w, 3 FLUSH, 4 ack1, 5 begin2, 6 w, 7 w, 8 FLUSH, 9 ack2,
    # 10 begin3, 11 w, 12 w
    with LogReader(log) as r:
        c = state_from_id(r, "e1.p0").cut
        assert (c.lo, c.hi, c.acked, c.begun, c.in_flight) == (4, 8, 1, 1, 2)
        assert (c.marks_lo, c.marks_hi, c.last_mark) == (1, 3, "txn-begin:2")
        c = state_from_id(r, "e1.p1").cut
        assert (c.lo, c.acked, c.begun) == (7, 1, 2)
        c = state_from_id(r, "e2.p2").cut
        assert (c.lo, c.hi, c.acked, c.begun, c.in_flight) == (13, 13, 2, 3, 3)
        c = state_from_id(r, "e0.p0").cut
        assert (c.lo, c.hi, c.acked, c.begun, c.last_mark) == (0, 3, 0, 0, "txn-begin:1")


def test_begun_never_below_acked(tmp_path):
    log = tmp_path / "unsafe.log"
    with LogWriter(log) as w:  # a SUT that acknowledges without syncing
        w.mark("txn-begin:1")
        w.write(0, page_bytes(1))
        w.mark("txn-ack:1")
        w.flush()
    with LogReader(log) as r:
        c = state_from_id(r, "e0.p0").cut  # the write lost, yet acknowledged at hi
        assert (c.acked, c.begun, c.in_flight) == (1, 1, None)


def window_log(path: Path) -> None:
    with LogWriter(path) as w:
        w.write(0, page_bytes(1))  # 0
        w.write(8, page_bytes(2))  # 1
        w.flush()  # 2
        w.mark("setup-done")  # 3
        w.write(16, page_bytes(3))  # 4
        w.write(24, page_bytes(4))  # 5
        w.flush()  # 6
        w.write(32, page_bytes(5))  # 7
        w.mark("workload-end")  # 8
        w.write(40, page_bytes(6))  # 9
        w.flush()  # 10
        w.write(48, page_bytes(7))  # 11


def test_mark_window(tmp_path):
    log = tmp_path / "win.log"
    window_log(log)
    assert len(ids(log)) == 3 + 3 + 3 + 2
    after = [f"e{e}.p{m}" for e in (1, 2) for m in range(3)] + ["e3.p0", "e3.p1"]
    assert ids(log, window_start="setup-done") == after
    both = ids(log, window_start="setup-done", window_end="workload-end")
    assert both == ["e1.p0", "e1.p1", "e1.p2", "e2.p0", "e2.p1"]
    assert ids(log, window_end="workload-end") == ["e0.p0", "e0.p1", "e0.p2"] + both
    with LogReader(log) as r:
        for opts in ({"window_start": "nope"}, {"window_end": "setup-done", "window_start": "x"}):
            with pytest.raises(CrashlabError, match="no mark named"):
                Enumeration(r, Options(**opts))
        with pytest.raises(CrashlabError, match="after 'workload-end'"):
            Enumeration(r, Options(window_start="workload-end", window_end="setup-done"))


def test_window_marks_named_without_their_payload(tmp_path):
    """``txn-ack:1`` names ``txn-ack:1;op=sync`` (the window is the whole
    label's); the whole label still works; a name that marks of different
    labels share, or that names none, is a one-line error."""
    log = tmp_path / "payload.log"
    with LogWriter(log) as w:
        for k in (1, 2, 3):
            w.mark(f"txn-begin:{k};op=sync")
            w.write(8 * k, page_bytes(k))
            w.flush()
            w.mark(f"txn-ack:{k};op=sync")
            w.mark(f"step;k={k}")
    whole = ids(log, window_start="txn-ack:1;op=sync", window_end="txn-begin:3;op=sync")
    assert ids(log, window_start="txn-ack:1", window_end="txn-begin:3") == whole
    assert 0 < len(whole) < len(ids(log))
    with LogReader(log) as r:
        with pytest.raises(CrashlabError, match=r"names 3 different marks .*whole label"):
            Enumeration(r, Options(window_start="step"))
        with pytest.raises(CrashlabError, match="no mark named 'txn-ack:9'"):
            Enumeration(r, Options(window_start="txn-ack:9"))
        with pytest.raises(CrashlabError, match="no mark named 'txn-ack:1;op=other'"):
            Enumeration(r, Options(window_start="txn-ack:1;op=other"))
        with pytest.raises(CrashlabError, match="no mark named 'txn-ack:1' after 'txn-ack:2'"):
            Enumeration(r, Options(window_start="txn-ack:2", window_end="txn-ack:1"))


def test_window_is_a_filter_on_cuts(epochs_log):
    with LogReader(epochs_log) as r:
        full = list(Enumeration(r, Options(strategy="reorder", dedup=False, budget=None)))
        a = next(e.index for e in r.entries() if e.label == "txn-begin:3")
        b = next(e.index for e in r.entries() if e.label == "txn-ack:5")
        win = Enumeration(
            r,
            Options(
                strategy="reorder", dedup=False, window_start="txn-begin:3", window_end="txn-ack:5"
            ),
        )
        got = [s.id for s in win]
    assert got == [s.id for s in full if s.cut.hi > a and s.cut.lo <= b]
    assert 0 < len(got) < len(full)


def test_lookup_returns_every_enumerated_state(epochs_log):
    with LogReader(epochs_log) as r:
        for s in Enumeration(r, Options(strategy="torn", torn_pattern="ends", dedup=False)):
            if s.ordinal % 7:
                continue
            t = state_from_id(r, s.id)
            assert (t.key, t.cut, t.kept_entries, t.torn_entries) == (
                s.key,
                s.cut,
                s.kept_entries,
                s.torn_entries,
            )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("e99.p0", "no epoch 99"),
        ("e1.p2", "has 1 writes, no write 1"),
        ("e2.k0,5", "no write 5"),
        ("e2.p1.t1:8", "8 512-byte units, no unit 8"),
        ("e2.p1.t1:0-7", "every unit kept"),
        ("e2.k1-2,9", "bad state ID"),
    ],
)
def test_lookup_rejects(epochs_log, text, why):
    with LogReader(epochs_log) as r, pytest.raises(CrashlabError) as info:
        state_from_id(r, text if text != "e2.k1-2,9" else "e2.k1-2,9,")
    assert why in str(info.value) and "\n" not in str(info.value)


def test_bad_options(epochs_log):
    with LogReader(epochs_log) as r:
        for opts, why in [
            ({"strategy": "bogus"}, "unknown strategy"),
            ({"torn_pattern": "bogus"}, "unknown torn pattern"),
            ({"tear_unit": 1000}, "power of two"),
            ({"tear_unit": 256}, "power of two"),
            ({"sample": 0}, "sample"),
            ({"max_exhaustive": 40}, "max_exhaustive"),
        ]:
            with pytest.raises(CrashlabError, match=why):
                Enumeration(r, Options(**opts))


def test_state_entries_explained(tmp_path):
    log = tmp_path / "x.log"
    write_epochs_log(log, [1, 5])
    # 0 begin1, 1 w, 2 FLUSH, 3 ack1, 4 begin2, 5..9 writes 0..4
    with LogReader(log) as r:
        s = state_from_id(r, "e1.k0,2.t3:0-2")
        assert s.kept_entries == (5, 7)
        assert s.dropped_entries == (6,)
        assert s.torn_entries == ((8, ((0, 1536),)),)
        assert s.after_cut_entries == (9,)
        assert s.durable_upto == 3
        assert s.program() == [(0, -1), (2, -1), (3, 0b111)]


# ---- brute force against random logs --------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("w"), st.integers(0, 7), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("d"), st.integers(0, 7), st.integers(1, 3), st.just(False)),
        st.tuples(st.just("f"), st.just(0), st.just(0), st.just(False)),
        st.tuples(st.just("fd"), st.integers(0, 7), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("m"), st.integers(1, 3), st.just(0), st.booleans()),
    ),
    max_size=24,
)


def write_ops(path: Path, program) -> list[list[bool]]:
    """Write the log; return, per epoch, the FUA flag of each write (the
    model, computed independently of harness.states)."""
    epochs: list[list[bool]] = [[]]
    with LogWriter(path) as w:
        for i, (kind, a, n, fua) in enumerate(program):
            if kind == "w":
                w.write(a, page_bytes(i, 512 * n), FUA if fua else 0)
                epochs[-1].append(fua)
            elif kind == "d":
                w.discard(a, n)
                epochs[-1].append(False)
            elif kind == "f":
                w.flush()
                epochs.append([])
            elif kind == "fd":
                w.write(a, page_bytes(i, 512 * n), FLUSH | (FUA if fua else 0))
                epochs.append([fua])
            else:
                w.mark(f"txn-{'ack' if fua else 'begin'}:{a}")
    return epochs


def valid_subsets(fuas: list[bool]) -> list[int]:
    out = []
    for mask in range(1 << len(fuas)):
        last = mask.bit_length() - 1
        if all(mask >> f & 1 for f in range(max(last, 0)) if fuas[f]):
            out.append(mask)
    return out


def kept_masks(log: Path, **opts) -> list[set[int]]:
    with LogReader(log) as r:
        n = sum(1 for _ in iter_epochs(r))
        out: list[set[int]] = [set() for _ in range(n)]
        for s in Enumeration(r, Options(**({"dedup": False, "budget": None} | opts))):
            assert s.key.kept not in out[s.epoch.index]
            out[s.epoch.index].add(s.key.kept)
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops)
def test_brute_force_counts(tmp_path, program):
    log = tmp_path / "rand.log"
    model = write_ops(log, program)
    assert kept_masks(log, strategy="prefix") == [
        {(1 << m) - 1 for m in range(len(f) + 1)} for f in model
    ]
    assert kept_masks(log, strategy="reorder", max_exhaustive=24) == [
        set(valid_subsets(f)) for f in model
    ]
    # the budget's exhaustive enumeration builds only valid sets: the same ones
    assert kept_masks(log, strategy="reorder", budget=10**6) == [
        set(valid_subsets(f)) for f in model
    ]
    k = 1
    bounded = kept_masks(log, strategy="reorder", max_exhaustive=2, max_drop=k)
    for fuas, got in zip(model, bounded, strict=True):
        n = len(fuas)
        full = (1 << n) - 1
        want = {
            m
            for m in valid_subsets(fuas)
            if n <= 2 or m & (m + 1) == 0 or bin(full & ~m).count("1") <= k
        }
        assert got == want
    with LogReader(log) as r:
        entries = [e for e in r.entries() if e.is_write]
        torn = list(Enumeration(r, Options(strategy="torn", dedup=False, budget=None)))
    units = sum(e.nr_sectors - 1 for e in entries)
    assert len(torn) == sum(len(f) + 1 for f in model) + units
    flushes = sum(1 for op in program if op[0] in ("f", "fd"))
    assert len(ids(log, strategy="persistence-points")) == flushes


def test_brute_force_drop_sets_are_combinations():
    # the closed form used above, checked against a literal enumeration
    for n in range(0, 9):
        for k in range(0, n + 1):
            full = (1 << n) - 1
            seen = {
                full & ~sum(1 << w for w in d)
                for i in range(k + 1)
                for d in combinations(range(n), i)
            }
            seen |= {(1 << m) - 1 for m in range(n + 1)}
            assert len(seen) == drop_k(n, k)
