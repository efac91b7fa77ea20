"""The file path of a crash state (every run can take it): its image made a
file from the durable image, recovered by its file system (a fast
recovery kept across states, or the reference tools), and the recovered
database examined by the engine's checker on the files (facts cached by
the files' content), judged together with the error invariants
(``checkers/ioerror.py``), CORRUPT-DETECT (``checkers/detect.py``: a
state's misdirect or corrupt faults are part of its image) and the user's
checkers."""

from __future__ import annotations

import bisect
import hashlib
import os
import shutil
import stat
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from checkers.detect import ID as DETECT_ID
from checkers.detect import judge_detect
from checkers.invariants import ERROR_LEVEL
from checkers.ioerror import judge_errors
from checkers.protocol import FilePieces, KeyOfPieces
from checkers.verdict import Verdict, errored, failed, passed, skipped
from harness.check.context import CheckContext
from harness.check.persist import Servers
from harness.check.records import StateRecord, dump_line, state_record
from harness.check.usercheck import PyChecker, UserChecker, log_marks, run_checker, state_facts
from harness.faults import DEVICE, FILL_NAME, by_stage
from harness.fs import FsRecovery, get_fs
from harness.fs.confined import copy_tree, links_on_way, replace_file
from harness.logformat import Entry, LogReader
from harness.materialize import misdirect_extents, sparse_copy
from harness.materialize.nvram import NVRAM_SUFFIX, read_nvram
from harness.rundir import RunDir
from harness.states import State
from harness.states.inject import Spans

CACHE_SIZE = 4096  # distinct DB facts (and judged native facts) kept per worker


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


def blank(db: Path) -> bool:
    """Whether the database file ``db`` is absent or holds only zero bytes
    (never written: a file created but empty, a raw device not yet
    formatted).  A link or anything but a regular file is not blank: the
    engine refuses it."""
    try:
        st = os.lstat(db)
    except FileNotFoundError:
        return True
    return stat.S_ISREG(st.st_mode) and zeros_only(db, st.st_size)


def zeros_only(path: Path, size: int) -> bool:
    """Whether the first ``size`` bytes of the file ``path`` are all zero."""
    with open(path, "rb") as f:
        while size > 0 and (chunk := f.read(min(size, 1 << 20))):
            if chunk.count(0) != len(chunk):
                return False
            size -= len(chunk)
    return True


def run_folder(run: RunDir) -> str:
    """A folder name for this recording: its log's absolute path and its
    meta.json's digest (which differs for every recording, also for one
    recorded again at the same path)."""
    h = hashlib.sha256(os.fsencode(run.log.resolve()) + b"\0")
    h.update(hashlib.sha256(run.meta_path.read_bytes()).digest())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class RunMarks:
    """The marks of the run's log (read once): what the user's checkers
    and the error invariants are told of a state's past."""

    log: list[tuple[int, str]]  # (entry, label), in log order
    entries: list[int]

    @classmethod
    def read(cls, run: RunDir) -> RunMarks:
        with LogReader(run.log) as reader:
            marks = log_marks(reader)
        return cls(marks, [e for e, _ in marks])

    def labels_before(self, entry: int) -> list[str]:
        """The labels of the marks before log entry ``entry``."""
        return [lab for _, lab in self.log[: bisect.bisect_left(self.entries, entry)]]


@dataclass(frozen=True)
class UserRun:
    """What every state's user checker gets from the run, made once."""

    checkers: tuple[UserChecker | PyChecker, ...]
    run_abs: Path
    meta_json: dict[str, object]
    child_env: dict[str, str]  # a copy for the children, not a setting read
    servers: Servers  # the persistent and Python checkers of this process


class KeyProbe:
    """The ext4 fast path's ``want_files``: the DB-facts key of a state's
    files taken from the extraction's memory and looked up in the facts
    cache; the files are wanted only when their facts are not cached.
    What it found (:attr:`found`) goes to the examination explicitly."""

    def __init__(
        self, key_of: KeyOfPieces, db_name: str, cache: OrderedDict[bytes, object]
    ) -> None:
        self.key_of, self.db_name, self.cache = key_of, db_name, cache
        self.found: tuple[bytes, object | None] | None = None  # (key, cached facts or None)

    def __call__(self, read: FilePieces) -> bool:
        key = self.key_of(read, self.db_name)
        facts = self.cache.get(key)
        self.found = (key, facts)
        return facts is None


class FilePath:
    """Checks states by files (the reference for the raw tier's paths,
    and the one path of a file system's runs)."""

    # ``crashlab repro`` sets ``keep`` to a folder: check() then leaves there
    # crash.img (before recovery), recovered.img and files/ (as the file
    # system recovered them, before the SUT's own recovery).
    keep: Path | None = None
    last_recovery: FsRecovery | None = None  # of the last state checked
    last_image: Path | None = None  # the scratch image the last state was recovered in

    def __init__(
        self,
        ctx: CheckContext,
        *,
        fsck: bool,
        fast: bool,
        shared: Path | None,
        checkers: Sequence[UserChecker | PyChecker] = (),
        db_spans: Spans | None = None,
    ) -> None:
        self.ctx = ctx
        # the database file's device spans (harness/filetrace.py): whether a
        # misdirect or corrupt fault touched it (None: unknown, taken as yes)
        self.db_spans = db_spans
        # A run recorded with device faults is also judged by the error
        # invariants (checkers/ioerror.py), from its marks.
        self.judge_errors = ctx.engine is not None and bool(by_stage(ctx.faults, DEVICE))
        # an enospc fault's fill file is the harness's, not the workload's
        self.skip = (FILL_NAME,) if any(f.kind == "enospc" for f in ctx.faults) else ()
        self.marks = RunMarks.read(ctx.run) if checkers or self.judge_errors else None
        self.user = (
            UserRun(
                tuple(checkers),
                ctx.run.path.resolve(),
                ctx.meta.to_json(),
                dict(os.environ),
                Servers(Path.cwd(), ctx.workdir / "serve"),
            )
            if checkers
            else None
        )
        self.fsck = fsck
        # ``shared``: a folder the processes checking states of this run
        # share; the fast recovery keeps results there that the others may
        # reuse, in a folder of this recording's (a check also checks other
        # runs: the recoveries of REC-CRASHSAFE, the continuations of
        # multicrash; a Dask worker keeps its folder across checks)
        own = shared / run_folder(ctx.run) if shared is not None else None
        self.fast = ctx.fsobj.fast_recovery(ctx.workdir, fsck, self.skip, own) if fast else None
        self.cache: OrderedDict[bytes, object] = OrderedDict()  # DB facts by content key
        self.cache_hits = 0
        self.files_unwritten = 0  # states whose files were never written (DB facts cached)

    def close(self) -> None:
        if self.fast is not None:
            self.fast.close()
        if self.user is not None:
            self.user.servers.close()

    def record(self, state: State) -> StateRecord:
        return state_record(state, self.check(state), self.ctx.marks(state))

    def lines(self, states: Sequence[State]) -> bytes:
        return b"".join(dump_line(self.record(s)) for s in states)

    def check(self, state: State) -> list[Verdict]:
        """Every verdict for ``state``, FS-RECOVER first."""
        ctx = self.ctx
        creating = ctx.creating(state)
        # the creation window asks whether the database is blank: its files are wanted
        rec, pre = self._recover_files(state, facts_only=not creating)
        files = ctx.workdir / "files"
        victim = state.victim(ctx.image.reader)
        fsv = fs_verdict(rec)
        verdicts = [fsv] if fsv is not None else []
        if not rec.ok:
            return verdicts + self._skipped_all(state, victim)
        marks = ctx.marks(state)
        if ctx.engine is not None:
            if creating and blank(files / ctx.db_name):
                judged = ctx.unborn()
            else:
                judged = ctx.judge(self._facts(files, pre), marks)
            verdicts += judged
            if self.judge_errors:
                assert self.marks is not None
                verdicts += judge_errors(self.marks.labels_before(state.cut.hi), judged)
            ranges = state.fault_ranges(victim)
            if ranges:
                verdicts.append(
                    judge_detect(
                        judged, "; ".join(state.fault_notes(victim)), self._touched(ranges)
                    )
                )
        if self.user is not None:
            verdicts += self._user_verdicts(state, marks, files)
        return verdicts

    def _user_verdicts(self, state: State, marks: tuple[int, int], files: Path) -> list[Verdict]:
        """The user's checkers' verdicts on ``state``'s files.  The
        recovered image is theirs to read only (the state contract's
        ``image``): one that changed it gets a checker error, and the next
        state a fresh copy of the durable image."""
        user, ctx = self.user, self.ctx
        assert user is not None and self.marks is not None
        image = self.readable_image()
        facts = state_facts(
            user.run_abs,
            state.id,
            state.cut.lo,
            state.cut.hi,
            max(marks[0], 0),  # the contract's "nothing acknowledged" is 0
            marks[1],
            self.marks.log,
            user.meta_json,
            image=None if image is None else str(image),
        )
        out = []
        for uc in user.checkers:
            before = _stamp(image)
            v = run_checker(uc, files, facts, ctx.workdir / "user", user.child_env, user.servers)
            if _stamp(image) != before:
                ctx.image.invalidate()
                v = errored(
                    uc.invariant,
                    f"the checker changed the recovered image {image}, which checkers may "
                    "only read (the state contract's image)",
                )
            out.append(v)
        return out

    def readable_image(self) -> Path | None:
        """The last state's recovered image, where the host holds one (its
        file system recovers in place on the host and the file is there)."""
        img = self.last_image
        if img is None or not self.ctx.fsobj.recovered_on_host or not img.is_file():
            return None
        return img

    def _skipped_all(self, state: State, victim: Entry | None) -> list[Verdict]:
        """Every database verdict of a state whose file system did not
        recover: skipped, saying so (there is nothing to open)."""
        why = "the file system did not recover, so there is no database (see FS-RECOVER)"
        engine = self.ctx.engine
        ids = [
            *(engine.IDS if engine else ()),
            *(ERROR_LEVEL if self.judge_errors else ()),
            *((DETECT_ID,) if engine and state.fault_ranges(victim) else ()),
            *(uc.invariant for uc in (self.user.checkers if self.user else ())),
        ]
        return [skipped(i, why) for i in ids]

    def recover_files(self, state: State, *, reference: bool = False) -> FsRecovery:
        """The files of ``state`` as its file system recovers them, in
        ``workdir/files`` (the database, its NVRAM beside it); with ``keep``,
        copies there too.  ``reference``: by the reference tools, as with
        ``keep`` (the run-level stage's REC-CRASHSAFE, which needs only the
        files, takes them so)."""
        return self._recover_files(state, reference=reference)[0]

    def _recover_files(
        self, state: State, *, reference: bool = False, facts_only: bool = False
    ) -> tuple[FsRecovery, tuple[bytes, object | None] | None]:
        """:meth:`recover_files`, and the DB-facts key (and cached facts, or
        None) taken from the extraction's memory, or None.  ``facts_only``:
        :meth:`check` asks, the files are for the engine's checks only
        (:meth:`_facts`), and are not written when their DB facts are
        cached (``rec.extracted``)."""
        ctx = self.ctx
        ctx.image.advance(state.durable_upto)
        img = ctx.image.scratch(self._writes(state), state.flips())
        if self.keep is not None:
            sparse_copy(img, self.keep / "crash.img")
        files = ctx.workdir / "files"
        shutil.rmtree(files, ignore_errors=True)
        nvram = read_nvram(img, ctx.nvram) if ctx.nvram else None
        rec, pre = self._recover(state, img, files, reference=reference, facts_only=facts_only)
        if nvram is not None and rec.ok:  # for the SUT's recovery, beside the database
            try:
                replace_file(files, ctx.db_name + NVRAM_SUFFIX, nvram)
            except OSError:
                pass  # a folder on the database's way is not one: _facts refuses it
        self.last_recovery, self.last_image = rec, img
        if self.keep is not None:
            self._keep_recovered(img, files)
        return rec, pre

    def _writes(self, state: State) -> list[tuple[int, bytes]]:
        """What to write on the durable image for ``state``: its overlay,
        then a misdirected write's two places."""
        image = self.ctx.image
        return [*state.extents(image.reader), *misdirect_extents(image.reader, image.base, state)]

    def _touched(self, ranges: tuple[tuple[int, int], ...]) -> bool:
        """Whether a fault's device ranges meet the database file (True when
        the run has no block map)."""
        if self.db_spans is None:
            return True
        return any(a < off + n and off < b for off, n in ranges for a, b, _ in self.db_spans)

    def _probe(self, facts_only: bool) -> KeyProbe | None:
        """The fast recovery's ``want_files`` for a state: only for the
        engine's own checks (the user's checkers and an NVRAM beside the
        database need the files) of an engine with a key of files in memory."""
        engine = self.ctx.engine
        if (
            not facts_only
            or engine is None
            or engine.content_key_of is None
            or self.user is not None
            or self.ctx.nvram
        ):
            return None
        return KeyProbe(engine.content_key_of, self.ctx.db_name, self.cache)

    def _recover(
        self, state: State, img: Path, files: Path, *, reference: bool, facts_only: bool
    ) -> tuple[FsRecovery, tuple[bytes, object | None] | None]:
        """File-system recovery of the scratch image ``img`` into ``files``
        (by the reference tools with ``keep`` or ``reference``); tells the
        durable image what it wrote.  Also what :meth:`_probe` found when
        the files were not written (their DB facts are cached)."""
        ctx = self.ctx
        if self.fast is None or self.keep is not None or reference:
            rec = ctx.fsobj.recover(
                img, files, workdir=ctx.workdir, db_name=ctx.db_name, fsck=self.fsck, skip=self.skip
            )
            ctx.image.invalidate()  # the reference tools write wherever they need to
            return rec, None

        def rebuild() -> Path:
            ctx.image.invalidate()
            return ctx.image.scratch(self._writes(state), state.flips())

        probe = self._probe(facts_only)
        rec, written = self.fast.recover(
            img,
            files,
            overlay=ctx.image.overlay,
            base=ctx.image.position,
            rebuild=rebuild,
            want_files=probe,
        )
        pre = None
        if not rec.extracted:  # (by whichever path) else the key is taken from the files
            self.files_unwritten += 1
            pre = probe.found if probe is not None else None
        if written is None:
            ctx.image.invalidate()
        else:
            ctx.image.mark_dirty(written)
        return rec, pre

    def _keep_recovered(self, img: Path, files: Path) -> None:
        """Copy the recovered image (on a raw device: the database file) and
        files into ``self.keep``."""
        assert self.keep is not None
        raw = files / self.ctx.db_name
        src = img if img.exists() else raw
        if src.is_file() and not src.is_symlink():
            sparse_copy(src, self.keep / "recovered.img")
        shutil.rmtree(self.keep / "files", ignore_errors=True)
        if files.exists():
            copy_tree(files, self.keep / "files")  # hard links and attributes kept

    def _facts(self, files: Path, pre: tuple[bytes, object | None] | None) -> object:
        """The engine's examination of the recovered files, cached by their
        content (many crash states recover to identical files); ``pre``:
        the key (and cached facts) taken from the extraction's memory."""
        ctx = self.ctx
        engine = ctx.engine
        assert engine is not None
        if pre is not None:
            key, facts = pre
        else:
            # the engine opens the database and the files beside it read-write:
            # never through a link of the recovered tree (harness/fs/README.md)
            linked = links_on_way(files, ctx.db_name)
            if linked is not None:
                return engine.refused(linked)
            key = engine.content_key(files, ctx.db_name)
            facts = self.cache.get(key)
        if facts is not None:
            self.cache.move_to_end(key)
            self.cache_hits += 1
            return facts
        facts = engine.examine(
            files / ctx.db_name, blockdev=ctx.blockdev, vfs=ctx.sut.vfs if ctx.sut else ""
        )
        self.cache[key] = facts
        if len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)
        return facts


def _stamp(image: Path | None) -> tuple[int, int, int] | None:
    """What a write to ``image`` changes: its size, modification and
    change times (None: no image)."""
    if image is None:
        return None
    st = os.stat(image)
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns
