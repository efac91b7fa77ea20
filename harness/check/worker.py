"""The work done for one crash state, in a worker process:
materialise → file-system recovery → SUT recovery and checkers.

One :class:`StateChecker` per process holds the run's log, oracle and a
durable image that advances through the log as states are handed out in
log order.  A state's faults are part of its image (a misdirected write's
two places, flipped bits); a state with a misdirect or corrupt fault is
judged on CORRUPT-DETECT too (``checkers/detect.py``)."""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import shutil
from collections import OrderedDict
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from checkers.detect import ID as DETECT_ID
from checkers.detect import judge_detect
from checkers.engines import engine_of
from checkers.invariants import ERROR_LEVEL
from checkers.ioerror import judge_errors
from checkers.verdict import Verdict, failed, passed, skipped
from harness.check.records import StateRecord
from harness.check.usercheck import (
    PyChecker,
    UserChecker,
    log_marks,
    run_checker,
    state_facts,
)
from harness.env import native_checks, reference_recovery
from harness.faults import DEVICE, FILL_NAME, by_stage, parse_faults
from harness.fs import FsRecovery, get_fs
from harness.fs.confined import links_on_way, replace_file
from harness.fs.raw import DEVICE_NAME
from harness.images import verified_base_for_run
from harness.logformat import LogReader
from harness.materialize import DurableImage, misdirect_extents, sparse_copy
from harness.materialize.nvram import NVRAM_SUFFIX, nvram_region, read_nvram
from harness.rundir import RunDir
from harness.states import State
from harness.states.inject import Spans
from harness.states.model import item_spans
from workloads.run import oracle_from_meta, spec_from_meta
from workloads.suts import Sut

CACHE_SIZE = 4096


def fs_verdict(rec: FsRecovery) -> Verdict | None:
    """FS-RECOVER, or None with no file system to recover (a raw device)."""
    fs = get_fs(rec.fs)
    if not fs.has_files:
        return None
    if rec.ok and not rec.needed_repair:
        return passed("FS-RECOVER", fs.recovered_how(rec))  # says what was checked
    if rec.ok:
        return failed("FS-RECOVER", f"needed fsck repairs beyond journal replay: {rec.detail}")
    return failed("FS-RECOVER", rec.detail or "file-system recovery failed")


def _run_folder(run: RunDir) -> str:
    """A folder name for this recording: its log's absolute path and its
    meta.json's digest (which differs for every recording, also for one
    recorded again at the same path)."""
    h = hashlib.sha256(os.fsencode(run.log.resolve()) + b"\0")
    h.update(hashlib.sha256(run.meta_path.read_bytes()).digest())
    return h.hexdigest()[:16]


class StateChecker:
    """Checks states of one run; ``workdir`` is private to this process."""

    # ``crashlab repro`` sets ``keep`` to a folder: check() then leaves there
    # crash.img (before recovery), recovered.img and files/ (as the file
    # system recovered them, before the SUT's own recovery).
    keep: Path | None = None
    last_recovery: FsRecovery | None = None  # of the last state checked

    def __init__(self, run: RunDir, workdir: Path, *, fsck: bool = True,
                 fast: bool | None = None, run_facts: object = None,
                 checkers: Sequence[UserChecker | PyChecker] = (),
                 db_spans: Spans | None = None, shared: Path | None = None) -> None:
        self.run = run
        # the database file's device spans (harness/filetrace.py): whether a
        # misdirect or corrupt fault touched it (None: unknown, taken as yes)
        self.db_spans = db_spans
        # what the run-level stage learnt from the whole log, for the
        # engine's judge (DHL: checkers.dhl_trace.RunFacts; None: none)
        self.run_facts = run_facts
        self.meta = run.meta()
        # A run of a built-in SUT is judged by its engine's checker against
        # the oracle; any run, by the user's checkers (a run recorded with
        # `crashlab record -- COMMAND` has only those).
        self.sut: Sut | None = None
        self.checker: Any = None
        if self.meta.sut is not None:
            self.sut, _ = spec_from_meta(self.meta)
            self.checker = engine_of(self.sut).checker
            self.oracle = oracle_from_meta(self.meta)
        self.user_checkers = tuple(checkers)
        # A run recorded with device faults is also judged by the error
        # invariants (checkers/ioerror.py), from its marks.
        faults = parse_faults(list(self.meta.faults))
        self.judge_errors = self.checker is not None and bool(by_stage(faults, DEVICE))
        # an enospc fault's fill file is the harness's, not the workload's
        self.skip = (FILL_NAME,) if any(f.kind == "enospc" for f in faults) else ()
        self.marks_log: list[tuple[int, str]] = []
        if checkers or self.judge_errors:  # made once, for every state
            with LogReader(run.log) as reader:
                self.marks_log = log_marks(reader)
            self.mark_entries = [e for e, _ in self.marks_log]
        if checkers:  # what every state's checker gets from the run, made once
            self.run_abs = run.path.resolve()
            self.meta_json = self.meta.to_json()
            self.child_env = dict(os.environ)  # a copy for the children, not a setting read
        self.fs: str = self.meta.fs
        self.fsobj = get_fs(self.fs)
        self.db_name: str = self.meta.db or DEVICE_NAME
        # a SUT with an emulated NVRAM: where the image keeps it
        self.nvram = nvram_region(self.meta.extra)
        # On the raw tier the database is the recorded block device itself:
        # the checkers run the SUT's recovery as on a block device.
        self.blockdev = not self.fsobj.has_files
        # A continuation (multicrash) starts from a crash state whose
        # acknowledged and recovered transactions hold for its whole log.
        cont = self.meta.continues
        self.floor = (cont.acked, cont.recovered_txn) if cont is not None else (0, 0)
        self.fsck = fsck
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.image = DurableImage(verified_base_for_run(run), run.log, workdir)
        self.cache: OrderedDict[bytes, Any] = OrderedDict()
        self.cache_hits = 0
        # the DB-facts key (and cached facts, or None) of the state being
        # checked, taken from the in-process extraction (_want_files)
        self._pre: tuple[bytes, Any] | None = None
        self.files_unwritten = 0  # states whose files were never written (DB facts cached)
        if fast is None:
            # CRASHLAB_RECOVERY=reference: a full image copy and fresh
            # e2fsprogs processes per state; verdicts are identical
            # (tests/test_sweep_perf.py).
            fast = not reference_recovery()
        # ``shared``: a folder the processes checking states of this run
        # share; the fast recovery keeps results there that the others may
        # reuse, in a folder of this recording's (a check also checks other
        # runs: the recoveries of REC-CRASHSAFE, the continuations of
        # multicrash; a Dask worker keeps its folder across checks)
        own = shared / _run_folder(run) if shared is not None else None
        self.fast = self.fsobj.fast_recovery(workdir, fsck, self.skip, own) if fast else None
        # The raw tier's fast path: the state's image goes from the durable
        # image to the engine's checks in memory, no file in between (the
        # file path is the reference, CRASHLAB_RECOVERY=reference; verdicts
        # are byte-identical, tests/test_raw_fast.py).  Not with the user's
        # checkers, which read files, nor with the error invariants, which
        # :meth:`check` adds (a state with a misdirect or corrupt fault takes
        # the file path too).
        self.in_memory = (fast and self.blockdev and not checkers and self.checker is not None
                          and not self.judge_errors and hasattr(self.checker, "examine_image"))
        # ... and where the engine's checker has a native twin (DHL:
        # checkers/dhl_native.py), it takes the facts in one C call; equal
        # facts (equal serialised bytes) at equal marks give equal verdicts,
        # made once (CRASHLAB_RECOVERY=python: the Python checker's facts).
        self.native: Any = None
        if self.in_memory and native_checks() and hasattr(self.checker, "native_examiner"):
            self.native = self.checker.native_examiner(self.image.path)
        self.judged: dict[tuple[bytes, int, int], tuple[list[Verdict], StateRecord]] = {}
        # a passing record's line around its ID, by (facts, marks): line()
        self.cut_lines: dict[tuple[bytes, int, int], tuple[bytes, bytes] | None] = {}
        self.db_label = workdir / "files" / self.db_name  # what the file path would examine
        self._epoch_payloads: _EpochPayloads | None = None

    def close(self) -> None:
        if self.fast is not None:
            self.fast.close()
        if self.native is not None:
            self.native.close()
        self.image.close()

    def check(self, state: State) -> list[Verdict]:
        """Every verdict for ``state``, FS-RECOVER first."""
        if self.in_memory and self.keep is None and state.key.misdirect is None \
                and state.key.corrupt is None:
            return self._check_in_memory(state)
        rec = self.recover_files(state, facts_only=True)
        files = self.workdir / "files"
        victim = state.victim(self.image.reader)
        fsv = fs_verdict(rec)
        verdicts = [fsv] if fsv is not None else []
        if not rec.ok:
            # nothing to open: every database verdict is skipped, saying so
            why = "the file system did not recover, so there is no database (see FS-RECOVER)"
            ids = [*(self.checker.IDS if self.checker else ()),
                   *(ERROR_LEVEL if self.judge_errors else ()),
                   *((DETECT_ID,) if self.checker and state.fault_ranges(victim) else ()),
                   *(uc.invariant for uc in self.user_checkers)]
            return verdicts + [skipped(i, why) for i in ids]
        acked, begun = self.marks(state)
        if self.checker is not None:
            facts = self._facts(files)
            judged = self.checker.judge(facts, self.oracle, acked, begun,
                                        run_facts=self.run_facts)
            verdicts += judged
            if self.judge_errors:
                upto = bisect.bisect_left(self.mark_entries, state.cut.hi)
                verdicts += judge_errors([lab for _, lab in self.marks_log[:upto]], judged)
            ranges = state.fault_ranges(victim)
            if ranges:
                verdicts.append(judge_detect(judged, "; ".join(state.fault_notes(victim)),
                                             self._touched(ranges)))
        if self.user_checkers:
            facts = state_facts(self.run_abs, state.id, state.cut.lo, state.cut.hi, acked,
                                begun, self.marks_log, self.meta_json)
            verdicts += [run_checker(uc, files, facts, self.workdir / "user", self.child_env)
                         for uc in self.user_checkers]
        return verdicts

    def recover_files(self, state: State, *, reference: bool = False,
                      facts_only: bool = False) -> FsRecovery:
        """The files of ``state`` as its file system recovers them, in
        ``workdir/files`` (the database, its NVRAM beside it); with ``keep``,
        copies there too.  ``reference``: by the reference tools, as with
        ``keep`` (the run-level stage's REC-CRASHSAFE, which needs only the
        files, takes them so).  ``facts_only``: :meth:`check` asks, the
        files are for the engine's checks only (:meth:`_facts`), and are
        not written when their DB facts are cached (``rec.extracted``)."""
        self.image.advance(state.durable_upto)
        img = self.image.scratch(self._writes(state), state.flips())
        if self.keep is not None:
            sparse_copy(img, self.keep / "crash.img")
        files = self.workdir / "files"
        shutil.rmtree(files, ignore_errors=True)
        nvram = read_nvram(img, self.nvram) if self.nvram else None
        rec = self._recover(state, img, files, reference=reference, facts_only=facts_only)
        if nvram is not None and rec.ok:  # for the SUT's recovery, beside the database
            try:
                replace_file(files, self.db_name + NVRAM_SUFFIX, nvram)
            except OSError:
                pass  # a folder on the database's way is not one: _facts refuses it
        self.last_recovery = rec
        if self.keep is not None:
            self._keep_recovered(img, files)
        return rec

    def _writes(self, state: State) -> list[tuple[int, bytes]]:
        """What to write on the durable image for ``state``: its overlay,
        then a misdirected write's two places."""
        reader = self.image.reader
        return [*state.extents(reader), *misdirect_extents(reader, self.image.base, state)]

    def _touched(self, ranges: tuple[tuple[int, int], ...]) -> bool:
        """Whether a fault's device ranges meet the database file (True when
        the run has no block map)."""
        if self.db_spans is None:
            return True
        return any(a < off + n and off < b for off, n in ranges for a, b, _ in self.db_spans)
    def _check_in_memory(self, state: State) -> list[Verdict]:
        """:meth:`check` of a raw-tier state without files: the image is
        the database (no file-system recovery), loaded into the engine's
        buffer from the durable image and the state's overlay, and examined
        there (no cache by content: the key would cost a hash of the
        image, and raw-tier states rarely repeat one)."""
        self.image.advance(state.durable_upto)
        writes = list(state.extents(self.image.reader))
        db = self.workdir / "files" / self.db_name  # where the file path would put it
        if self.native is not None:
            blob = self.native.examine(self.image.size, self.image.data_end, writes, self.db_label)
            if blob is not None:
                return list(self._judge_native(blob, self.marks(state))[0])

        def load(buf: Any) -> None:  # noqa: ANN401
            self.image.load_state(buf, writes)

        facts = self.checker.examine_image(load, db, blockdev=True)
        acked, begun = self.marks(state)
        return list(self.checker.judge(facts, self.oracle, acked, begun,
                                       run_facts=self.run_facts))

    def _judge_native(self, blob: bytes, marks: tuple[int, int]
                      ) -> tuple[list[Verdict], StateRecord]:
        """The verdicts of serialised native facts at ``marks``, and the
        state record they make (without the state's own fields), judged
        once per distinct (facts, marks) and reused: judging is pure, and
        neither is changed after."""
        key = (blob, *marks)
        hit = self.judged.get(key)
        if hit is None:
            facts = self.native.facts(blob)
            verdicts = list(self.checker.judge(facts, self.oracle, *marks,
                                               run_facts=self.run_facts))
            part = verdict_record("", verdicts, acked=marks[0], begun=marks[1])
            del part["id"]  # type: ignore[misc]
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
            self._epoch_payloads = _EpochPayloads(self.image.reader, state.epoch)
        return self._epoch_payloads

    def _native_ok(self, state: State) -> bool:
        """Whether ``state``'s facts are taken natively (a native checker,
        and neither a kept nor a faulted state)."""
        return self.native is not None and self.keep is None and state.key.misdirect is None \
            and state.key.corrupt is None

    def _native_blob(self, state: State) -> bytes | None:
        """The serialised native facts of ``state``, or None where the state
        takes :meth:`check` (not :meth:`_native_ok`, or a case the C call
        leaves to the Python path)."""
        if not self._native_ok(state):
            return None
        self.image.advance(state.durable_upto)
        writes = list(state.extents(self._payloads(state)))  # type: ignore[arg-type]
        return self.native.examine(self.image.size, self.image.data_end, writes, self.db_label)

    def _native_record(self, state: State, blob: bytes, marks: tuple[int, int]) -> StateRecord:
        """The record of ``state`` whose native facts are ``blob``."""
        rec: StateRecord = {"id": state.id, **self._judge_native(blob, marks)[1]}  # type: ignore[typeddict-item]
        if "fail" in rec:
            rec["dropped"] = list(state.dropped_entries)
            rec["torn"] = [e for e, _ in state.torn_entries]
            rec["cut"] = [state.cut.lo, state.cut.hi]
        return rec

    def record(self, state: State) -> StateRecord:
        """:func:`state_record` of ``state``'s verdicts; a record of native
        facts is made from the one its (facts, marks) made before."""
        blob = self._native_blob(state)
        if blob is None:
            return state_record(state, self.check(state), self.marks(state))
        return self._native_record(state, blob, self.marks(state))

    def lines(self, states: Sequence[State]) -> bytes:
        """The :meth:`line` of each of ``states`` (a chunk: one epoch's),
        the native facts of all of them taken in one C call, their overlays
        read from the log there."""
        todo = [i for i, s in enumerate(states) if self._native_ok(s)]
        blobs: dict[int, bytes | None] = {}
        if todo and len({states[i].durable_upto for i in todo}) == 1:
            self.image.advance(states[todo[0]].durable_upto)
            ss = self.image.reader.sectorsize
            whole: dict[int, tuple[int, int | None, int]] = {}  # a whole write's one span

            def spans_of(state: State) -> list[tuple[int, int | None, int]]:
                out: list[tuple[int, int | None, int]] = []
                for w, units in state.program():
                    entry = state.epoch.writes[w]
                    if units != -1:
                        out.extend(item_spans(entry, units, ss))
                        continue
                    span = whole.get(w)
                    if span is None:
                        (span,) = item_spans(entry, units, ss)
                        whole[w] = span
                    out.append(span)
                return out

            spans = [spans_of(states[i]) for i in todo]
            got = self.native.examine_chunk(self.image.size, self.image.data_end, self.run.log,
                                            spans, self.db_label)
            blobs = dict(zip(todo, got, strict=True))
        return b"".join(self._line(s, blobs[i]) if i in blobs else self.line(s)
                        for i, s in enumerate(states))

    def line(self, state: State) -> bytes:
        """:meth:`record` serialised as its states.jsonl line (``json.dumps``
        with sorted keys, and a newline).  A record of native facts without
        a failure is the line its (facts, marks) made before but for its ID:
        that line is kept, cut around the ID."""
        return self._line(state, self._native_blob(state))

    def _line(self, state: State, blob: bytes | None) -> bytes:
        """:meth:`line` of ``state`` whose native facts are ``blob`` (None:
        the state takes :meth:`check`)."""
        if blob is None:
            return dump_line(state_record(state, self.check(state), self.marks(state)))
        marks = self.marks(state)
        key = (blob, *marks)
        cut = self.cut_lines.get(key, False)
        if cut is False:
            part = self._judge_native(blob, marks)[1]
            cut = None if "fail" in part else _cut_at_id(part)
            if len(self.cut_lines) >= CACHE_SIZE:
                self.cut_lines.clear()
            self.cut_lines[key] = cut
        if cut is None:  # a failure names the state's own entries: made whole
            return dump_line(self._native_record(state, blob, marks))
        return cut[0] + encode_basestring_ascii(state.id).encode() + cut[1]

    def marks(self, state: State) -> tuple[int, int]:
        """(acknowledged, begun) at the state's crash: its cut's, raised to
        the floor a continuation inherits from its first crash."""
        acked = max(state.cut.acked, self.floor[0])
        return acked, max(state.cut.begun, self.floor[1], acked)

    def _recover(self, state: State, img: Path, files: Path, *, reference: bool = False,
                 facts_only: bool = False) -> FsRecovery:
        """File-system recovery of the scratch image ``img`` into ``files``
        (by the reference tools with ``keep`` or ``reference``); tells the
        durable image what it wrote."""
        self._pre = None
        if self.fast is not None and self.keep is None and not reference:
            def rebuild() -> Path:
                self.image.invalidate()
                return self.image.scratch(self._writes(state), state.flips())

            # The files are written only when the DB facts are not cached
            # (the key from the extraction's memory, the same key); only
            # for the engine's own checks: the user's checkers and an
            # NVRAM beside the database need the files.
            want = self._want_files if (
                facts_only and self.checker is not None and hasattr(self.checker, "content_key_of")
                and not self.user_checkers and not self.nvram) else None
            rec, written = self.fast.recover(
                img, files, overlay=self.image.overlay, base=self.image.position,
                rebuild=rebuild, want_files=want)
            if rec.extracted:  # (by whichever path) the key is taken from the files
                self._pre = None
            else:
                self.files_unwritten += 1
            if written is None:
                self.image.invalidate()
            else:
                self.image.mark_dirty(written)
            return rec
        rec = self.fsobj.recover(img, files, workdir=self.workdir, db_name=self.db_name,
                                 fsck=self.fsck, skip=self.skip)
        # The reference tools write wherever they need to.
        self.image.invalidate()
        return rec

    def _keep_recovered(self, img: Path, files: Path) -> None:
        """Copy the recovered image (on a raw device: the database file) and
        files into ``self.keep``."""
        assert self.keep is not None
        raw = files / self.db_name
        src = img if img.exists() else raw
        if src.is_file() and not src.is_symlink():
            sparse_copy(src, self.keep / "recovered.img")
        shutil.rmtree(self.keep / "files", ignore_errors=True)
        if files.exists():
            shutil.copytree(files, self.keep / "files", symlinks=True)

    def _want_files(self, read: Callable[[str], Any]) -> bool:
        """Whether the state's files must be written: not when its DB facts
        are cached by the key of their contents (``read``: the extraction's
        :data:`harness.fs.ext4.extract.FileReader`); :meth:`_facts` then
        takes that key and those facts."""
        key = self.checker.content_key_of(read, self.db_name)
        facts = self.cache.get(key)
        self._pre = (key, facts)
        return facts is None

    def _facts(self, files: Path) -> Any:  # noqa: ANN401
        """The engine's examination of the recovered files, cached by their
        content (many crash states recover to identical files)."""
        pre, self._pre = self._pre, None
        if pre is not None:  # the key made from the extraction's memory
            key, facts = pre
        else:
            # the engine opens the database and the files beside it read-write:
            # never through a link of the recovered tree (harness/fs/README.md)
            linked = links_on_way(files, self.db_name)
            if linked is not None:
                return self.checker.refused(linked)
            key = self.checker.content_key(files, self.db_name)
            facts = self.cache.get(key)
        if facts is not None:
            self.cache.move_to_end(key)
            self.cache_hits += 1
            return facts
        facts = self.checker.examine(files / self.db_name, blockdev=self.blockdev,
                                     vfs=self.sut.vfs if self.sut else "")
        self.cache[key] = facts
        if len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)
        return facts


class _EpochPayloads:
    """A log reader's ``sectorsize`` and ``payload`` for one epoch's states,
    each payload read once (:func:`harness.states.model.item_extents`)."""

    def __init__(self, reader: LogReader, epoch: object) -> None:
        self.reader, self.epoch = reader, epoch
        self.sectorsize = reader.sectorsize
        self._kept: dict[int, bytes] = {}

    def payload(self, entry: Any) -> bytes:  # noqa: ANN401
        data = self._kept.get(entry.offset)
        if data is None:
            data = self._kept[entry.offset] = self.reader.payload(entry)
        return data


def verdict_record(rec_id: str, verdicts: list[Verdict], **head: int) -> StateRecord:
    """A states.jsonl / run.jsonl line: ``id`` (then ``head``), each
    invariant's status, and the skip and error reasons, the passes whose
    situation did not arise, the failures — each key only when it has any."""
    rec: StateRecord = {"id": rec_id, **head,  # type: ignore[typeddict-item]
                        "v": {v.invariant: v.status for v in verdicts}}
    skips = {v.invariant: v.explanation for v in verdicts if v.status == "skip"}
    if skips:
        rec["skip"] = skips
    errors = {v.invariant: v.explanation for v in verdicts if v.status == "error"}
    if errors:
        rec["error"] = errors
    idle = [v.invariant for v in verdicts if v.status == "pass" and not v.exercised]
    if idle:
        rec["ne"] = idle  # passed, but the situation did not arise
    fails = [v.to_json() for v in verdicts if v.failed]
    if fails:
        rec["fail"] = fails
    return rec


def dump_line(rec: StateRecord) -> bytes:
    """A record's states.jsonl line: sorted keys, ``json.dumps``'s
    separators and ASCII escapes, a newline."""
    return json.dumps(rec, sort_keys=True).encode() + b"\n"


_MARK = "\x00id\x00"  # an ID no state has: where the ID goes in a cut line
_MARK_JSON = encode_basestring_ascii(_MARK).encode()


def _cut_at_id(part: StateRecord) -> tuple[bytes, bytes] | None:
    """The line of a record with the fields ``part`` and any ID, as the
    bytes before and after the ID's JSON string (None: the mark is not
    found exactly once, so the line must be made whole)."""
    pieces = dump_line({"id": _MARK, **part}).split(_MARK_JSON)  # type: ignore[typeddict-item]
    return (pieces[0], pieces[1]) if len(pieces) == 2 else None


def state_record(state: State, verdicts: list[Verdict], marks: tuple[int, int]
                 ) -> StateRecord:
    """The line a state leaves in states.jsonl (``marks``: the acknowledged
    and begun transactions it was judged against); with a failure, what
    the state dropped and tore, and its cut."""
    rec = verdict_record(state.id, verdicts, acked=marks[0], begun=marks[1])
    if "fail" in rec:
        rec["dropped"] = list(state.dropped_entries)
        rec["torn"] = [e for e, _ in state.torn_entries]
        rec["cut"] = [state.cut.lo, state.cut.hi]
    return rec
