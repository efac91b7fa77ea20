"""The raw tier's fast path (a crash state's image from the durable image to
the engine's checks in memory, no file: harness/check/rawpath.py) gives
byte-identical states.jsonl and result.json to the file path it replaced
(CRASHLAB_RECOVERY=reference), on real recordings: a correct engine's
reorder and torn states, and an unsafe one's (NOLOG) torn states, many of
which do not open or do not decode.  The fast path takes the DHL facts in
one C call per state (checkers/dhl_native.py); its facts equal the Python
checker's on every state (CRASHLAB_RECOVERY=python keeps that path), and
the files of both are the reference's."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import Recordings

from checkers import dhl
from harness.check.check import CheckOptions, check_run, default_window
from harness.check.rawpath import MemoryPath, NativePath
from harness.check.worker import StateChecker
from harness.env import recovery_path
from harness.logformat import LogReader
from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.states import Enumeration, Options
from harness.sweep.matrix import DHL_INSERT, MULTI

pytestmark = pytest.mark.needs_fuse
CASES = [("dhl-cc-raw", "reorder"), ("dhl-cc-raw", "torn"), ("dhl-nolog-raw", "torn")]
LONG_UPDATES = "update:txns=100,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
# a stratified sample of every epoch's kept sets (the auto budget walks
# about 10,000 states a case): ~300-800 states, each compared in full
BUDGET = 300


def _options(strategy: str) -> Options:
    return Options(strategy=strategy, budget=BUDGET)


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    return recorded.many({"dhl-cc-raw": DHL_INSERT, "dhl-nolog-raw": MULTI}, fs="raw")


def _files(out: Path) -> tuple[bytes, bytes]:
    return (out / STATES_NAME).read_bytes(), (out / RESULT_NAME).read_bytes()


@pytest.mark.parametrize("sut, strategy", CASES)
def test_the_fast_raw_path_gives_the_file_paths_verdicts(
    runs: dict[str, RunDir], tmp_path: Path, sut: str, strategy: str
) -> None:
    run = runs[sut]
    checker = StateChecker(run, tmp_path / "w")
    assert isinstance(checker.path, NativePath)  # the default: native facts
    checker.close()
    opts = CheckOptions(states=_options(strategy), jobs=2)
    fast = check_run(run, opts, tmp_path / "fast")
    with recovery_path("python"):
        assert type(StateChecker(run, tmp_path / "w1").path) is MemoryPath
        check_run(run, opts, tmp_path / "python")
    with recovery_path("reference"):
        checker = StateChecker(run, tmp_path / "w2")
        assert checker.path is checker.files
        check_run(run, opts, tmp_path / "reference")
    assert fast["states"]["checked"] > 200
    assert _files(tmp_path / "fast") == _files(tmp_path / "reference")
    assert _files(tmp_path / "python") == _files(tmp_path / "reference")


@pytest.mark.parametrize("sut, strategy", CASES)
def test_the_native_facts_are_the_python_checkers(
    runs: dict[str, RunDir], tmp_path: Path, sut: str, strategy: str
) -> None:
    """Every state's facts, from the C call and from checkers/dhl.py's
    examine_image on the same image, field by field."""
    run = runs[sut]
    sc = StateChecker(run, tmp_path / "w")
    assert isinstance(sc.path, NativePath)
    native, label = sc.path.native, sc.path.db_label
    compared, differ, fallbacks = 0, [], []
    with LogReader(run.log) as reader:
        for state in Enumeration(reader, default_window(run, _options(strategy))):
            sc.image.advance(state.durable_upto)
            writes = list(state.extents(sc.image.reader))
            blob = native.examine(sc.image.size, sc.image.data_end, writes, label)
            py = dhl.examine_image(
                lambda buf, w=writes: sc.image.load_state(buf, w), label, blockdev=True
            )
            if blob is None:  # a case the Python path takes (none in these runs)
                fallbacks.append(state.id)
                continue
            compared += 1
            if native.facts(blob) != py:
                differ.append(state.id)
    sc.close()
    assert compared > 200
    assert differ == []
    assert len(fallbacks) <= compared // 100, fallbacks


@pytest.mark.parametrize("sut, strategy", CASES)
def test_one_call_per_chunk_gives_each_states_own_facts(
    runs: dict[str, RunDir], tmp_path: Path, sut: str, strategy: str
) -> None:
    """The worker's chunk call (overlays read from the log in C) gives every
    state the facts its own call gives; the log spans are the extents."""
    from harness.check.check import _chunks
    from harness.states.model import item_spans

    run = runs[sut]
    sc = StateChecker(run, tmp_path / "w")
    assert isinstance(sc.path, NativePath)
    native, label = sc.path.native, sc.path.db_label
    log = run.log.read_bytes()
    compared = 0
    with LogReader(run.log) as reader:
        states = Enumeration(reader, default_window(run, _options(strategy)))
        for chunk in _chunks(iter(states), 0, None):
            sc.image.advance(chunk[0].durable_upto)
            spans, extents = [], []
            for s in chunk:
                spans.append(
                    [
                        x
                        for w, u in s.program()
                        for x in item_spans(s.epoch.writes[w], u, reader.sectorsize)
                    ]
                )
                extents.append(list(s.extents(reader)))
                assert [
                    (o, bytes(n) if src is None else log[src : src + n]) for o, src, n in spans[-1]
                ] == extents[-1], s.id
            got = native.examine_chunk(sc.image.size, sc.image.data_end, run.log, spans, label)
            for s, blob, writes in zip(chunk, got, extents, strict=True):
                assert blob == native.examine(sc.image.size, sc.image.data_end, writes, label), s.id
                compared += blob is not None
    sc.close()
    assert compared > 200


def _log_resident_kib(log: Path) -> int:
    """This process's resident KiB of its mappings of ``log``."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isdigit() or line[:1] in "abcdef" and "-" in line.split()[0]:
            inside = line.rstrip().endswith(str(log))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_the_log_stays_mapped_but_not_resident(
    recorded: Recordings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker lets go of the mapped log's pages behind its chunks: with
    a 16 KiB allowance, what of a 3 MB log stays resident is bounded
    whatever the check has read, and every line is the one the whole
    mapping gives."""
    from checkers import dhl_native
    from harness.check.check import _chunks

    run = recorded("dhl-cc-raw", LONG_UPDATES, "raw")
    opts = default_window(run, Options(strategy="prefix"))

    def lines(sc: StateChecker) -> tuple[bytes, int]:
        out, peak = [], 0
        with LogReader(run.log) as reader:
            for chunk in _chunks(iter(Enumeration(reader, opts)), 0, None):
                out.append(sc.lines(chunk))
                peak = max(peak, _log_resident_kib(run.log))
        sc.close()
        return b"".join(out), peak

    whole, whole_peak = lines(StateChecker(run, tmp_path / "a"))
    monkeypatch.setattr(dhl_native, "LOG_RESIDENT", 16 << 10)
    released, peak = lines(StateChecker(run, tmp_path / "b"))
    assert released == whole
    size_kib = run.log.stat().st_size >> 10
    assert size_kib > 2000 and whole_peak > size_kib // 2 and peak < size_kib // 8, (
        whole_peak,
        peak,
        size_kib,
    )
