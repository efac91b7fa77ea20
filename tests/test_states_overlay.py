"""Overlay application and undo, and dedup correctness: states fold only
when their overlays (and mark context) are identical."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.logformat import FLUSH, FUA, LogReader, LogWriter
from harness.materialize import replay, write_state_image
from harness.states import Enumeration, Options, State
from harness.states.synth import page_bytes, write_epochs_log

SECTORS = 128  # 64 KiB test images


def base_image(path: Path) -> bytes:
    data = bytes((i * 7 + 3) % 251 for i in range(SECTORS * 512))
    path.write_bytes(data)
    return data


def expected_image(base: bytes, reader: LogReader, state: State) -> bytes:
    """The state's image built the slow, obvious way."""
    img = bytearray(base)

    def put(entry, units: int) -> None:
        n = entry.nr_sectors * 512
        data = bytes(n) if entry.is_discard else reader.payload(entry)
        off = entry.sector * 512
        for u in range(n // 512):
            if units == -1 or units >> u & 1:
                img[off + u * 512 : off + (u + 1) * 512] = data[u * 512 : (u + 1) * 512]

    for entry in reader.entries():
        if entry.index < state.durable_upto and entry.is_write:
            put(entry, -1)
    torn = dict(state.key.torn)
    for w, entry in enumerate(state.epoch.writes):
        if state.key.kept >> w & 1:
            put(entry, -1)
        elif w in torn:
            put(entry, torn[w])
    return bytes(img)


def overlay_map(reader: LogReader, state: State) -> dict[int, bytes]:
    """Unit address → content, for comparing overlays directly."""
    out: dict[int, bytes] = {}
    for off, data in state.extents(reader):
        for u in range(len(data) // 512):
            out[off // 512 + u] = data[u * 512 : (u + 1) * 512]
    return out


def read_all(fd: int) -> bytes:
    return os.pread(fd, SECTORS * 512, 0)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("w"), st.integers(0, 24), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("d"), st.integers(0, 24), st.integers(1, 4), st.just(False)),
        st.tuples(st.just("f"), st.just(0), st.just(0), st.just(False)),
        st.tuples(st.just("fd"), st.integers(0, 24), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("m"), st.integers(1, 3), st.just(0), st.booleans()),
        st.tuples(st.just("same"), st.integers(0, 24), st.integers(1, 4), st.just(False)),
    ),
    max_size=16,
)


def write_ops(path: Path, program) -> None:
    with LogWriter(path) as w:
        for i, (kind, a, n, flag) in enumerate(program):
            if kind == "w":
                w.write(a, page_bytes(i, 512 * n), FUA if flag else 0)
            elif kind == "same":  # content repeated on purpose, to make folds
                w.write(a, bytes([n]) * (512 * n))
            elif kind == "d":
                w.discard(a, n)
            elif kind == "f":
                w.flush()
            elif kind == "fd":
                w.write(a, page_bytes(i, 512 * n), FLUSH | (FUA if flag else 0))
            else:
                w.mark(f"txn-{'ack' if flag else 'begin'}:{a}")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops, st.sampled_from(["reorder", "torn", "prefix"]))
def test_state_images_are_what_the_model_says(tmp_path, program, strategy):
    """Every state's materialised image is the base image with the durable
    entries and exactly the state's kept (and torn) writes."""
    log, img = tmp_path / "o.log", tmp_path / "o.img"
    write_ops(log, program)
    base = base_image(img)
    with LogReader(log) as r:
        opts = Options(strategy=strategy, dedup=False, torn_pattern="ends")
        for s in Enumeration(r, opts):
            img.write_bytes(base)
            fd = os.open(img, os.O_RDWR)
            try:
                write_state_image(fd, r, s)
                assert read_all(fd) == expected_image(base, r, s), s.id
            finally:
                os.close(fd)


def test_prefix_states_equal_replay_limit(tmp_path):
    log, img = tmp_path / "p.log", tmp_path / "base.img"
    write_epochs_log(log, [3, 0, 4, 2], page=4096, pages=12, fua_every=3)
    base = base_image(img)
    with LogReader(log) as r:
        for s in Enumeration(r, Options(strategy="prefix", dedup=False)):
            out = tmp_path / "replayed.img"
            replay(img, log, out, limit=s.cut.lo)
            work = tmp_path / "state.img"
            work.write_bytes(base)
            fd = os.open(work, os.O_RDWR)
            try:
                write_state_image(fd, r, s)
                assert read_all(fd) == out.read_bytes()[: SECTORS * 512], s.id
            finally:
                os.close(fd)


# ---- dedup --------------------------------------------------------------------


def fold_run(log: Path, **opts) -> tuple[list[State], list[tuple[State, str]], Enumeration]:
    folds: list[tuple[State, str]] = []
    with LogReader(log) as r:
        en = Enumeration(r, Options(**opts), on_fold=lambda s, into: folds.append((s, into)))
        kept = list(en)
    return kept, folds, en


def test_overwritten_write_folds(tmp_path):
    log = tmp_path / "d.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))  # w0
        w.write(8, page_bytes(2))  # w1
        w.write(0, page_bytes(3))  # w2 overwrites w0 entirely
    states, folds, en = fold_run(log, strategy="reorder")
    assert sorted((s.id, into) for s, into in folds) == [("e0.k1-2", "e0.p3"), ("e0.k2", "e0.k0,2")]
    assert (en.stats.generated, en.stats.folded, en.stats.emitted) == (8, 2, 6)
    assert len(states) == 6


def test_partial_overwrite_does_not_fold(tmp_path):
    log = tmp_path / "d.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))  # w0: sectors 0-7
        w.write(8, page_bytes(2))
        w.write(0, page_bytes(3, 2048))  # w2: sectors 0-3 only
    _, folds, en = fold_run(log, strategy="reorder")
    assert folds == [] and en.stats.emitted == 8


def test_same_content_from_another_write_folds_unless_a_mark_separates(tmp_path):
    for mark in (False, True):
        log = tmp_path / f"s{mark}.log"
        with LogWriter(log) as w:
            w.write(0, page_bytes(1))  # w0
            w.write(8, page_bytes(2))  # w1
            if mark:
                w.mark("txn-ack:1")
            w.write(0, page_bytes(1))  # w2: w0's content again
        _, folds, _ = fold_run(log, strategy="reorder")
        got = sorted((s.id, into) for s, into in folds)
        if mark:  # k1-2's cut starts after the mark, p2's before: different context
            assert ("e0.k1-2", "e0.p2") not in got
        else:
            assert ("e0.k1-2", "e0.p2") in got


def test_full_epoch_folds_with_next_empty_state(tmp_path):
    log = tmp_path / "x.log"
    with LogWriter(log) as w:
        w.write(0, page_bytes(1))
        w.flush()
        w.write(8, page_bytes(2))
        w.flush()
        w.mark("txn-ack:1")
        w.write(16, page_bytes(3))
    states, folds, en = fold_run(log, strategy="prefix")
    assert [s.id for s in states] == ["e0.p0", "e0.p1", "e1.p1", "e2.p0", "e2.p1"]
    assert [(s.id, into) for s, into in folds] == [("e1.p0", "e0.p1")]  # e2.p0 sees the mark
    _, folds, en = fold_run(log, strategy="prefix", dedup=False)
    assert folds == [] and en.stats.emitted == 6


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops, st.sampled_from(["reorder", "torn"]))
def test_fold_iff_identical_overlay_and_context(tmp_path, program, strategy):
    log = tmp_path / "f.log"
    write_ops(log, program)
    with LogReader(log) as r:
        every = list(Enumeration(r, Options(strategy=strategy, dedup=False, torn_pattern="ends")))
        by_id = {s.id: s for s in every}
        folds: list[tuple[State, str]] = []
        kept = list(
            Enumeration(
                r,
                Options(strategy=strategy, torn_pattern="ends"),
                on_fold=lambda s, into: folds.append((s, into)),
            )
        )
        assert len(kept) + len(folds) == len(every)

        base = bytes(SECTORS * 512)
        for s, into in folds:  # sound: a fold changes nothing a checker sees
            t = by_id[into]
            assert expected_image(base, r, s) == expected_image(base, r, t), (s.id, into)
            assert (s.cut.marks_lo, s.cut.marks_hi) == (t.cut.marks_lo, t.cut.marks_hi)
            # across epochs only by keeping a whole epoch (of p0s of empty epochs)
            assert s.epoch.index == t.epoch.index or not overlay_map(r, s)
        seen: dict[tuple, str] = {}
        for s in kept:  # complete: no two emitted states have the same overlay
            ov = tuple(sorted(overlay_map(r, s).items()))
            k = (s.epoch.index, ov, s.cut.marks_lo, s.cut.marks_hi)
            assert k not in seen, (s.id, seen.get(k))
            seen[k] = s.id
            full = s.epoch.closed and not s.key.torn and s.key.kept == s.epoch.full_mask
            if full:  # the durable base of the next epoch, which its p0 must not repeat
                seen[(s.epoch.index + 1, (), s.cut.marks_lo, s.cut.marks_hi)] = s.id


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops, st.sampled_from(["reorder", "torn", "prefix"]), st.sampled_from([0, 4]))
def test_incremental_digest_matches_definition(tmp_path, program, strategy, factor):
    from harness.states.dedup import EpochContent, direct_digest

    log = tmp_path / "g.log"
    write_ops(log, program)
    with LogReader(log) as r:
        content = None
        for s in Enumeration(
            r, Options(strategy=strategy, dedup=False, torn_pattern="subset", tear_unit=1024)
        ):
            if content is None or content.epoch is not s.epoch:
                content = EpochContent(r, s.epoch)
                content.direct_factor = factor
            assert content.digest(s) == direct_digest(content, s), s.id
            # from scratch too: by units, or by writes where no unit is touched twice
            assert content.direct(s.key.kept, dict(s.key.torn)) == direct_digest(content, s)
