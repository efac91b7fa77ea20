"""State faults in the enumeration, on synthetic logs: which states a lost
flush adds and what their cuts say, where misdirect and corrupt land
(deterministic, inside the given database spans), that every faulted ID
looks its state up again, and that the images are what the faults say,
built the slow obvious way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.faults import parse_faults
from harness.logformat import LogReader
from harness.materialize import DurableImage, write_state_image
from harness.states import Enumeration, Options, State, state_from_id
from harness.states.inject import StateFaults
from harness.states.model import loses_to_flush
from harness.states.synth import write_epochs_log

SECTORS = 128  # 64 KiB images: the synthetic logs write pages 0..15 of 4 KiB


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "e.log"
    write_epochs_log(p, [3, 2, 4, 1], pages=16)
    return p


def states(log: Path, **opts: object) -> list[State]:
    with LogReader(log) as r:
        return list(Enumeration(r, Options(dedup=False, **opts)))  # type: ignore[arg-type]  # opts holds Options fields


def test_lost_flush_merges_each_flush_in_turn(log: Path) -> None:
    got = states(log, strategy="prefix", faults=parse_faults("lost-flush"))
    # epochs 0-1, 1-2, 2-3 merged; in order only the prefixes that stop
    # inside the first epoch lose a write to the lost flush
    assert [s.id for s in got] == [
        "e0-1.p0",
        "e0-1.p1",
        "e0-1.p2",
        "e1-2.p0",
        "e1-2.p1",
        "e2-3.p0",
        "e2-3.p1",
        "e2-3.p2",
        "e2-3.p3",
    ]
    for s in got:
        assert s.key.last == s.epoch.index + 1 and s.epoch.lost_flushes
        assert loses_to_flush(s.epoch, s.key.kept, s.cut.hi)
        flush = s.epoch.lost_flushes[0]
        assert s.cut.lo <= flush < s.cut.hi  # the crash may come after the lying flush


def test_lost_flush_cut_acknowledges_after_the_flush(log: Path) -> None:
    """Epoch i is transaction i+1, acknowledged after its flush: with the
    flush lost, a state missing epoch 1's writes may crash after txn 2 was
    acknowledged — a durability loss the device caused."""
    s = next(
        s
        for s in states(log, strategy="prefix", faults=parse_faults("lost-flush"))
        if s.id == "e1-2.p0"
    )
    assert s.cut.acked == 2 and s.durable_upto == s.epoch.start
    assert not s.kept_entries


def test_lost_flush_nth_and_strategies(log: Path) -> None:
    only = states(log, strategy="prefix", faults=parse_faults("lost-flush,nth=2"))
    assert {s.epoch.index for s in only} == {1}
    pp = states(log, strategy="persistence-points", faults=parse_faults("lost-flush"))
    assert [s.id for s in pp] == ["e0-1.p0", "e1-2.p0", "e2-3.p0"]
    plain = {s.id for s in states(log, strategy="reorder")}
    faulted = states(log, strategy="reorder", faults=parse_faults("lost-flush"))
    assert len(faulted) > len(plain) / 2
    assert all(s.id not in plain for s in faulted)


def test_every_faulted_state_looks_itself_up(log: Path) -> None:
    faults = parse_faults(["lost-flush", "misdirect,seed=3", "corrupt,bits=5"])
    got = states(log, strategy="reorder", faults=faults)
    assert got
    with LogReader(log) as r:
        for s in got:
            again = state_from_id(r, s.id)
            assert again.id == s.id and again.cut == s.cut
            assert again.key.misdirect and again.key.corrupt
            assert again.key.corrupt[1].bit_count() == 5


def test_targets_are_deterministic_and_follow_the_seed(log: Path) -> None:
    a = [s.id for s in states(log, faults=parse_faults("corrupt,seed=1"))]
    assert a == [s.id for s in states(log, faults=parse_faults("corrupt,seed=1"))]
    assert a != [s.id for s in states(log, faults=parse_faults("corrupt,seed=2"))]


def test_targets_stay_in_the_database_spans(log: Path) -> None:
    """With the database's device spans known, corrupted sectors and
    misdirected landings lie inside them, and the misdirected write is a
    write to them."""
    spans = ((0, 4096 * 8, 0),)  # pages 0-7 are the database file
    with LogReader(log) as r:
        opts = Options(strategy="reorder", faults=parse_faults(["misdirect", "corrupt"]))
        en = Enumeration(r, opts, targets=spans)
        got = list(en)
        assert got and en.stats.unplaced > 0
        for s in got:
            assert s.key.corrupt[0] * 512 < 4096 * 8
            assert s.key.misdirect[1] * 512 < 4096 * 8
            v = s.victim(r)
            assert v is not None and v.sector * 512 < 4096 * 8


def test_state_faults_only_and_one_line_errors(log: Path) -> None:
    with pytest.raises(CrashlabError, match="device fault.*crashlab record --fault"):
        StateFaults.of(parse_faults("eio:write"))
    with pytest.raises(CrashlabError, match="process fault"):
        Options(faults=parse_faults("process-crash,at=x")).validate()
    with pytest.raises(CrashlabError, match="two corrupt faults"):
        StateFaults.of(parse_faults(["corrupt", "corrupt,seed=2"]))
    with LogReader(log) as r:
        with pytest.raises(CrashlabError, match="ordinary state"):
            state_from_id(r, "e0-1.p3")  # keeps all of epoch 0: not a lost-flush state
        with pytest.raises(CrashlabError, match="no write the state keeps"):
            state_from_id(r, "e2.p1.m99@3")
        with pytest.raises(CrashlabError, match="no write with data"):
            state_from_id(r, "e2.p1.m0@3")  # entry 0 is a mark


def _base(path: Path) -> bytes:
    data = bytes((i * 7 + 3) % 251 for i in range(SECTORS * 512))
    path.write_bytes(data)
    return data


def _expected(base: bytes, reader: LogReader, state: State) -> bytes:
    """The faulted image the slow obvious way: every write of the state in
    log order (durable entries, then the kept and torn ones), the
    misdirected one at its landing place, then the flipped bits."""
    img = bytearray(base)
    victim = state.key.misdirect[0] if state.key.misdirect else -1

    def put(entry, units: int) -> None:  # noqa: ANN001
        data = bytes(entry.nr_sectors * 512) if entry.is_discard else reader.payload(entry)
        off = state.key.misdirect[1] * 512 if entry.index == victim else entry.sector * 512
        for u in range(len(data) // 512):
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
    for off, mask in state.flips():
        img[off] ^= mask
    return bytes(img)


@pytest.mark.parametrize("strategy", ["prefix", "reorder", "torn"])
def test_faulted_images_are_what_the_faults_say(log: Path, tmp_path: Path, strategy: str) -> None:
    base = tmp_path / "base.img"
    data = _base(base)
    faults = parse_faults(["lost-flush", "misdirect", "corrupt,bits=3"])
    work = tmp_path / "w"
    work.mkdir()
    img = DurableImage(base, log, work)
    try:
        with LogReader(log) as r:
            got = list(Enumeration(r, Options(strategy=strategy, faults=faults)))
            assert got
            for s in got:
                want = _expected(data, r, s)
                copy = tmp_path / "ref.img"
                copy.write_bytes(data)
                fd = os.open(copy, os.O_RDWR)
                try:
                    write_state_image(fd, r, s, base)
                finally:
                    os.close(fd)
                assert copy.read_bytes() == want, s.id
                from harness.materialize import misdirect_extents

                img.advance(s.durable_upto)
                path = img.scratch(
                    [*s.extents(img.reader), *misdirect_extents(img.reader, base, s)], s.flips()
                )
                assert path.read_bytes() == want, s.id
    finally:
        img.close()
