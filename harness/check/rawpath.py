"""The raw tier's fast paths: a crash state's image goes from the durable
image to the engine's checks in memory, no file in between
(:class:`MemoryPath`), and where the engine has a native twin of its
checker (DHL: ``checkers/dhl_native.py``) its facts come in one C call
(:class:`NativePath`).  The file path (``harness/check/filepath.py``) is
the reference (CRASHLAB_RECOVERY=reference; CRASHLAB_RECOVERY=python keeps
the in-memory path without the native one); verdicts are byte-identical
(tests/test_raw_fast.py).  A state either path does not take — a kept one
(``crashlab repro``), one with a misdirect or corrupt fault, one of the
creation window whose device is blank — takes the file path."""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring_ascii

from checkers.protocol import ImageExaminer, NativeExaminer
from checkers.verdict import Verdict
from harness.check.context import CheckContext
from harness.check.filepath import CACHE_SIZE, FilePath, zeros_only
from harness.check.records import StateRecord, cut_at_id, dump_line, state_record, verdict_record
from harness.logformat import Entry, LogReader
from harness.materialize.durable import Loadable
from harness.states import State
from harness.states.epochs import Epoch
from harness.states.model import item_spans


class MemoryPath:
    """Examines a raw-tier state's image in the engine's buffer, loaded from
    the durable image and the state's overlay (the image is the database:
    no file-system recovery; no cache by content: the key would cost a
    hash of the image, and raw-tier states rarely repeat one)."""

    def __init__(
        self, ctx: CheckContext, files: FilePath, examine_image: ImageExaminer[object]
    ) -> None:
        self.ctx, self.files, self.examine_image = ctx, files, examine_image
        self.db_label = ctx.workdir / "files" / ctx.db_name  # what the file path would examine
        self._durable_blank: tuple[int, bool] | None = None  # (durable position, blank)

    def close(self) -> None:
        self.files.close()

    def takes(self, state: State) -> bool:
        """Whether ``state`` is checked in memory (else by files: a kept one,
        a faulted one, and one of the creation window whose device is
        blank, which ``FilePath.check`` judges so)."""
        return (
            self.files.keep is None
            and state.key.misdirect is None
            and state.key.corrupt is None
            and not (self.ctx.creating(state) and self._blank(state))
        )

    def _blank(self, state: State) -> bool:
        """Whether ``state``'s device holds only zero bytes: its durable
        image (looked at once per durable position) and its overlay."""
        image = self.ctx.image
        image.advance(state.durable_upto)
        at = state.durable_upto
        if self._durable_blank is None or self._durable_blank[0] != at:
            self._durable_blank = (at, zeros_only(image.path, image.data_end))
        return self._durable_blank[1] and all(
            data.count(0) == len(data) for _, data in state.extents(image.reader)
        )

    def check(self, state: State) -> list[Verdict]:
        if not self.takes(state):
            return self.files.check(state)
        self.ctx.image.advance(state.durable_upto)
        return self.in_memory(list(state.extents(self.ctx.image.reader)), self.ctx.marks(state))

    def in_memory(self, writes: list[tuple[int, bytes]], marks: tuple[int, int]) -> list[Verdict]:
        """The verdicts at ``marks`` of the durable image (advanced to the
        state) with ``writes`` on top, examined by the engine's Python checker."""
        image = self.ctx.image

        def load(buf: Loadable) -> None:
            image.load_state(buf, writes)

        return self.ctx.judge(self.examine_image(load, self.db_label, blockdev=True), marks)

    def record(self, state: State) -> StateRecord:
        return state_record(state, self.check(state), self.ctx.marks(state))

    def lines(self, states: Sequence[State]) -> bytes:
        return b"".join(dump_line(self.record(s)) for s in states)


class NativePath:
    """Takes a raw-tier state's facts natively, serialised: equal facts
    (equal bytes) at equal marks give equal verdicts, judged once and their
    states.jsonl line kept; a state the native call leaves to the Python
    checker takes :class:`MemoryPath`."""

    def __init__(
        self, ctx: CheckContext, memory: MemoryPath, native: NativeExaminer[object]
    ) -> None:
        self.ctx, self.memory, self.native = ctx, memory, native
        self.db_label = memory.db_label
        self.judged: dict[tuple[bytes, int, int], tuple[list[Verdict], StateRecord]] = {}
        # a passing record's line around its ID, by (facts, marks): _line()
        self.cut_lines: dict[tuple[bytes, int, int], tuple[bytes, bytes] | None] = {}
        self.cache_hits = 0
        self._epoch_payloads: _EpochPayloads | None = None

    def close(self) -> None:
        self.native.close()
        self.memory.close()

    def check(self, state: State) -> list[Verdict]:
        if not self.memory.takes(state):
            return self.memory.files.check(state)
        image = self.ctx.image
        image.advance(state.durable_upto)
        writes = list(state.extents(image.reader))
        blob = self.native.examine(image.size, image.data_end, writes, self.db_label)
        if blob is not None:
            return list(self._judge_native(blob, self.ctx.marks(state))[0])
        return self.memory.in_memory(writes, self.ctx.marks(state))

    def _judge_native(
        self, blob: bytes, marks: tuple[int, int]
    ) -> tuple[list[Verdict], StateRecord]:
        """The verdicts of serialised native facts at ``marks``, and the
        state record they make (without the state's own fields), judged
        once per distinct (facts, marks) and reused: judging is pure, and
        neither is changed after."""
        key = (blob, *marks)
        hit = self.judged.get(key)
        if hit is None:
            verdicts = self.ctx.judge(self.native.facts(blob), marks)
            part = verdict_record("", verdicts, acked=marks[0], begun=marks[1])
            del part["id"]  # a StateRecord without its id
            if len(self.judged) >= CACHE_SIZE:
                self.judged.clear()
            hit = self.judged[key] = (verdicts, part)
        else:
            self.cache_hits += 1
        return hit

    def _payloads(self, state: State) -> _EpochPayloads:
        """The log reader for ``state``'s overlay, keeping the payloads of
        its epoch's writes (the states of an epoch share them)."""
        if self._epoch_payloads is None or self._epoch_payloads.epoch is not state.epoch:
            self._epoch_payloads = _EpochPayloads(self.ctx.image.reader, state.epoch)
        return self._epoch_payloads

    def _blob(self, state: State) -> bytes | None:
        """The serialised native facts of ``state``, or None where the state
        takes :meth:`check` (not taken in memory, or a case the C call
        leaves to the Python checker)."""
        if not self.memory.takes(state):
            return None
        image = self.ctx.image
        image.advance(state.durable_upto)
        writes = list(state.extents(self._payloads(state)))
        return self.native.examine(image.size, image.data_end, writes, self.db_label)

    def _record(self, state: State, blob: bytes, marks: tuple[int, int]) -> StateRecord:
        """The record of ``state`` whose native facts are ``blob``."""
        rec: StateRecord = {"id": state.id, **self._judge_native(blob, marks)[1]}
        if "fail" in rec:
            rec["dropped"] = list(state.dropped_entries)
            rec["torn"] = [e for e, _ in state.torn_entries]
            rec["cut"] = [state.cut.lo, state.cut.hi]
        return rec

    def record(self, state: State) -> StateRecord:
        """:func:`state_record` of ``state``'s verdicts; a record of native
        facts is made from the one its (facts, marks) made before."""
        blob = self._blob(state)
        if blob is None:
            return state_record(state, self.memory.check(state), self.ctx.marks(state))
        return self._record(state, blob, self.ctx.marks(state))

    def lines(self, states: Sequence[State]) -> bytes:
        """The states.jsonl line of each of ``states`` (a chunk: one
        epoch's), the native facts of all of them taken in one C call,
        their overlays read from the log there."""
        todo = [i for i, s in enumerate(states) if self.memory.takes(s)]
        blobs: dict[int, bytes | None] = {}
        if todo and len({states[i].durable_upto for i in todo}) == 1:
            image = self.ctx.image
            image.advance(states[todo[0]].durable_upto)
            spans = _ChunkSpans(image.reader.sectorsize)
            got = self.native.examine_chunk(
                image.size,
                image.data_end,
                self.ctx.run.log,
                [spans.of(states[i]) for i in todo],
                self.db_label,
            )
            blobs = dict(zip(todo, got, strict=True))
        return b"".join(
            self._line(s, blobs[i] if i in blobs else self._blob(s)) for i, s in enumerate(states)
        )

    def _line(self, state: State, blob: bytes | None) -> bytes:
        """The states.jsonl line (``json.dumps`` with sorted keys, and a
        newline) of ``state`` whose native facts are ``blob`` (None: the
        state takes :meth:`MemoryPath.check`).  A record of native facts
        without a failure is the line its (facts, marks) made before but
        for its ID: that line is kept, cut around the ID."""
        marks = self.ctx.marks(state)
        if blob is None:
            return dump_line(state_record(state, self.memory.check(state), marks))
        key = (blob, *marks)
        try:
            cut = self.cut_lines[key]
        except KeyError:  # new (facts, marks)
            part = self._judge_native(blob, marks)[1]
            cut = None if "fail" in part else cut_at_id(part)
            if len(self.cut_lines) >= CACHE_SIZE:
                self.cut_lines.clear()
            self.cut_lines[key] = cut
        if cut is None:  # a failure names the state's own entries: made whole
            return dump_line(self._record(state, blob, marks))
        return cut[0] + encode_basestring_ascii(state.id).encode() + cut[1]


class _ChunkSpans:
    """The log spans of the overlays of one chunk's states (all over the
    same durable image), a whole write's one span made once."""

    def __init__(self, sectorsize: int) -> None:
        self.sectorsize = sectorsize
        self.whole: dict[int, tuple[int, int | None, int]] = {}

    def of(self, state: State) -> list[tuple[int, int | None, int]]:
        out: list[tuple[int, int | None, int]] = []
        for w, units in state.program():
            entry = state.epoch.writes[w]
            if units != -1:
                out.extend(item_spans(entry, units, self.sectorsize))
                continue
            span = self.whole.get(w)
            if span is None:
                (span,) = item_spans(entry, units, self.sectorsize)
                self.whole[w] = span
            out.append(span)
        return out


class _EpochPayloads:
    """A log reader's ``sectorsize`` and ``payload`` for one epoch's states,
    each payload read once (:func:`harness.states.model.item_extents`)."""

    def __init__(self, reader: LogReader, epoch: Epoch) -> None:
        self.reader, self.epoch = reader, epoch
        self.sectorsize = reader.sectorsize
        self._kept: dict[int, bytes] = {}

    def payload(self, entry: Entry) -> bytes:
        data = self._kept.get(entry.offset)
        if data is None:
            data = self._kept[entry.offset] = self.reader.payload(entry)
        return data
