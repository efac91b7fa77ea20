"""Fast ext4 recovery of crash images: the same e2fsprogs code as the
reference path (:func:`harness.fs.ext4.recover.recover_ext4`), without a process
start per step and without a full ``e2fsck -fn`` per state.

Per state, one long-lived debugfs (:mod:`harness.fs.ext4.debugfs`) runs
``open -w -z UNDO IMG``, ``jr`` (the journal replay e2fsck uses: same
recovery code; the replayed image equals ``e2fsck -E journal_only``'s except
for the superblock's write time, kbytes-written counter and checksum) and
``rdump``.  The undo file names every block debugfs wrote, so the caller can
restore the scratch image from the durable image block by block instead of
copying the whole image per state.

FS-RECOVER's read-only ``e2fsck -fn`` (exit 0 = nothing to repair beyond
journal replay) is cached by a digest of the replayed image's *metadata*.
The durable image is fixed, so two states of one durable image differ only
in the blocks the overlay or the replay wrote (``U``).  Let ``M`` be the
blocks the replayed file system maps as regular-file data (debugfs
``blocks`` of every file rdump extracted) or journal data (all of the
journal inode's blocks but its superblock): e2fsck reads neither on a clean
journal.  The key is: the durable image, the journal's and every file's
block list (so ``M`` itself), and each block of ``U`` outside ``M`` with its
content.  Equal keys mean equal images outside ``M``.  Only *clean* results
are cached (in each process, and in a file the processes checking one
recording share): if e2fsck found a state clean, no block of ``M`` is also
metadata in it, so a state with the same key presents e2fsck with
byte-identical metadata and is clean too.  A key is made only when the
replay left the journal clean (no needs_recovery flag, journal ``s_start``
0).

Anything unexpected — debugfs printing an error, a journal it cannot
replay, e2fsck finding a problem — falls back to the reference path on a
rebuilt crash image, so failures carry exactly the reference verdicts.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path

import xxhash

from harness.fs.base import FsRecovery, not_copied
from harness.fs.ext4.debugfs import DebugfsError, DebugfsSession
from harness.fs.ext4.debugfs import quote as _quote
from harness.fs.ext4.extract import WantFiles
from harness.fs.ext4.inproc import replay_and_extract
from harness.fs.ext4.layout import EXT4_MAGIC as MAGIC
from harness.fs.ext4.layout import EXT4_SB_OFFSET as SB_OFFSET
from harness.fs.ext4.layout import EXT4_SB_SIZE as SB_SIZE
from harness.fs.ext4.layout import (
    INCOMPAT_RECOVER,
    JOURNAL_INO,
    JSB_START,
    MIN_LOG_BLOCK_SIZE,
    SB_CHECKSUM,
    SB_FEATURE_INCOMPAT,
    SB_KBYTES_WRITTEN,
    SB_LOG_BLOCK_SIZE,
    SB_MAGIC,
    SB_WTIME,
    SB_WTIME_HI,
)
from harness.fs.ext4.memo import BlockMemo
from harness.fs.ext4.ondisk import Unsupported
from harness.fs.ext4.recover import FSCK_CORRECTED, FSCK_REBOOT, recover_ext4
from harness.fs.ext4.tree import files as tree_files
from harness.fs.ext4.tree import list_tree, place, rdump_request
from harness.fs.ext4.undo import written_ranges

# Superblock fields ext2fs_flush sets from the clock and I/O counters, not
# from recovery: masked in the key when debugfs wrote the superblock (then
# its checksum, also masked, is valid by construction).
_SB_VOLATILE = tuple(
    (f.at, f.size) for f in (SB_WTIME, SB_KBYTES_WRITTEN, SB_WTIME_HI, SB_CHECKSUM)
)
FSCK_CACHE = 1 << 16
KEY_SIZE = 16  # bytes of a metadata key (xxh3_128)
_STALE_BITMAP_CSUM = re.compile(
    r".*: (Block|Inode) bitmap checksum does not match bitmap "
    r"while reading allocation bitmaps\n"
)


def _expected_open_banner(undo: Path, image: Path) -> str:
    return (
        "Overwriting existing filesystem; this can be undone using the command:\n"
        f"    e2undo {undo} {image}\n\n"
    )


def _blocks(text: str) -> list[int]:
    return [int(t) for t in text.split()]


class FastExt4:
    """Recovers ext4 crash images through one debugfs process; one per
    worker, closed with :meth:`close`."""

    def __init__(
        self,
        workdir: Path,
        *,
        fsck: bool = True,
        skip: tuple[str, ...] = (),
        inproc: bool = True,
        shared: Path | None = None,
    ) -> None:
        self.workdir = workdir
        # the clean keys every process checking this run has found, appended
        # to one file (a key is 16 bytes, one write): a worker does not run
        # the e2fsck -fn another worker ran already
        self.shared_clean: Path | None = None
        self._shared_read = 0  # bytes of shared_clean read so far
        if shared is not None:
            shared.mkdir(parents=True, exist_ok=True)
            self.shared_clean = shared / "ext4-fsck-clean"
        self.fsck = fsck
        self.inproc = inproc  # replay and extract in this process first (inproc.py)
        self.memo = BlockMemo()
        self.skip = skip  # names in the root directory not to extract
        self.undo = workdir / "recover.undo"
        self.session: DebugfsSession | None = None
        self.clean: OrderedDict[bytes, None] = OrderedDict()
        self._journal: tuple[list[int], bytes, frozenset[int]] | None = None  # _journal_key
        self.stats = {
            "fast": 0,
            "fallback": 0,
            "fsck_run": 0,
            "fsck_cached": 0,
            "e2fsck_replay": 0,
            "inproc": 0,
            "inproc_declined": 0,
        }
        self.last_fallback = ""
        self.last_declined = ""  # why the in-process path last passed a state to debugfs

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        self.memo.close()
        self.undo.unlink(missing_ok=True)

    def _debugfs(self) -> DebugfsSession:
        if self.session is None:
            self.session = DebugfsSession()
        return self.session

    def recover(
        self,
        image: Path,
        out_dir: Path,
        *,
        overlay: Iterable[tuple[int, int]],
        base: object,
        rebuild: Callable[[], Path],
        want_files: WantFiles | None = None,
    ) -> tuple[FsRecovery, list[tuple[int, int]] | None]:
        """Recover ``image`` (the durable image identified by ``base`` plus
        the ``(offset, length)`` ranges of ``overlay``) and extract its files
        to ``out_dir``.  Returns the recovery and the byte ranges written to
        the image, or None when the reference path ran on ``rebuild()``, a
        fresh full copy of the crash image (written anywhere).
        ``want_files``: as :func:`replay_and_extract` takes it, on the
        in-process path only; when that path's recovery is returned and it
        said False, ``out_dir`` was not written (``FsRecovery.extracted``)."""
        overlay = list(overlay)
        if self.inproc:
            got = self._inproc(image, out_dir, overlay, base, want_files)
            if isinstance(got, tuple):
                self.stats["fast"] += 1
                self.stats["inproc"] += 1
                return got
            if got is not None:  # e2fsck -fn found a problem: the reference says what
                return self._reference(got, out_dir, rebuild)
        try:
            fast = self._fast(image, out_dir, overlay, base)
        except DebugfsError as e:
            # A broken session is not trusted again; the state still gets
            # the reference verdict.
            self.close()
            fast = f"debugfs: {e}"
        if isinstance(fast, tuple):
            self.stats["fast"] += 1
            return fast
        return self._reference(fast, out_dir, rebuild)

    def _reference(
        self, why: str, out_dir: Path, rebuild: Callable[[], Path]
    ) -> tuple[FsRecovery, None]:
        """Fall back, for ``why``, to the reference path on ``rebuild()``."""
        self.stats["fallback"] += 1
        self.last_fallback = why
        return recover_ext4(rebuild(), out_dir, check=self.fsck, skip=self.skip), None

    def _inproc(
        self,
        image: Path,
        out_dir: Path,
        overlay: list[tuple[int, int]],
        base: object,
        want_files: WantFiles | None = None,
    ) -> tuple[FsRecovery, list[tuple[int, int]]] | str | None:
        """The in-process path (``inproc.py``); None when it declined the
        state (then ``image`` and ``out_dir`` are as they were before), or
        the reason e2fsck gave to fall back to the reference."""
        undo: list[tuple[int, bytes]] = []
        try:
            got = replay_and_extract(
                image,
                out_dir,
                self.skip,
                undo,
                memo=self.memo,
                base=base,
                differ=overlay,
                want_files=want_files,
            )
        # struct.error: a field that runs past its block (a hostile image)
        except (Unsupported, OSError, struct.error) as e:
            self.stats["inproc_declined"] += 1
            self.last_declined = str(e)
            shutil.rmtree(out_dir, ignore_errors=True)
            if undo:  # put the crash image back: the debugfs path starts afresh
                fd = os.open(image, os.O_WRONLY)
                try:
                    for off, old in reversed(undo):
                        os.pwrite(fd, old, off)
                finally:
                    os.close(fd)
            return None
        rec = FsRecovery(
            "ext4",
            ok=True,
            journal_replayed=got.replayed,
            needed_repair=False,
            files=out_dir,
            steps=[
                "journal replay and extraction in process (fast path)",
                *not_copied(got.skipped),
            ],
            extracted=got.extracted,
        )
        why = self._check(rec, image, base, overlay, got.written, got.journal, got.data)
        return why if why is not None else (rec, got.written)

    def _fast(
        self, image: Path, out_dir: Path, overlay: list[tuple[int, int]], base: object
    ) -> tuple[FsRecovery, list[tuple[int, int]]] | str:
        """The fast path, or the reason to fall back."""
        with open(image, "rb") as f:
            sb = f.read(SB_OFFSET + SB_SIZE)[SB_OFFSET:]
        if len(sb) < SB_SIZE or SB_MAGIC.get(sb) != MAGIC:
            return "no ext4 superblock"
        dbg = self._debugfs()
        replay = self._replay(dbg, image, bool(SB_FEATURE_INCOMPAT.get(sb) & INCOMPAT_RECOVER))
        if isinstance(replay, str):
            return replay
        written = written_ranges(self.undo)
        # the replayed image, closed: its tree read here says whether rdump
        # may write it into a real folder (tree.py)
        try:
            tree = list_tree(image, self.skip)
        except Unsupported as e:
            return f"the recovered tree: {e}"
        request, private = rdump_request(tree, out_dir)
        files = tree_files(tree)
        answers = dbg.request(
            [
                f"open {_quote(image)}",
                *([request] if request else []),
                f"blocks <{JOURNAL_INO}>",
                *[f"blocks <{ino}>" for _, ino in files],
                "close",
            ]
        )
        said = answers[:2] if request else answers[:1]
        if any(said) or answers[-1]:
            return f"debugfs said: {(''.join(said) + answers[-1]).strip()[:200]}"
        steps = ["debugfs open -w -z, jr, rdump (fast path)"]
        if tree.placed:
            steps += not_copied(place(tree, out_dir, private))
        blocks = answers[len(said) : -1]
        try:
            journal = _blocks(blocks[0])
            data = {f: _blocks(a) for (f, _), a in zip(files, blocks[1:], strict=True)}
        except ValueError:
            return f"debugfs blocks said: {' '.join(blocks).strip()[:200]}"
        rec = FsRecovery(
            "ext4",
            ok=True,
            journal_replayed=replay,
            needed_repair=False,
            files=out_dir,
            steps=steps,
        )
        why = self._check(rec, image, base, overlay, written, journal, data)
        return why if why is not None else (rec, written)

    def _replay(self, dbg: DebugfsSession, image: Path, pending: bool) -> bool | str:
        """Replay the journal of ``image`` in place, its writes recorded in
        the undo file: whether a journal was replayed (``pending``: the
        superblock says one is to be), or why the fast path cannot."""
        self.undo.unlink(missing_ok=True)
        opened, jr, closed = dbg.request(
            [f"open -w -z {_quote(self.undo)} {_quote(image)}", "jr", "close"]
        )
        expected = _expected_open_banner(self.undo, image)
        stale = _STALE_BITMAP_CSUM.match(opened)
        if (
            stale
            and opened[stale.end() :] in ("", expected)
            and jr == "jr: Filesystem not open\n"
            and closed == "close: Filesystem not open\n"
        ):
            # Before replay the group descriptors may hold stale bitmap
            # checksums (the fresh ones are in the journal): libext2fs then
            # refuses to open it for jr, and nothing was written.  e2fsck's
            # replay copes (it is the reference's own step), with its writes
            # recorded in the same undo format; debugfs then only reads.
            self.stats["e2fsck_replay"] += 1
            self.undo.unlink(missing_ok=True)
            p = subprocess.run(
                ["e2fsck", "-y", "-E", "journal_only", "-z", str(self.undo), str(image)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if p.returncode & ~(FSCK_CORRECTED | FSCK_REBOOT):
                return f"e2fsck -E journal_only: exit {p.returncode}"
            return "recovering journal" in (p.stdout + p.stderr)
        if opened != expected or jr or closed:
            return f"debugfs said: {(opened + jr + closed).strip()[:200]}"
        return pending

    def _check(
        self,
        rec: FsRecovery,
        image: Path,
        base: object,
        overlay: list[tuple[int, int]],
        written: list[tuple[int, int]],
        journal: list[int],
        data: dict[str, list[int]],
    ) -> str | None:
        """FS-RECOVER's ``e2fsck -fn`` on the replayed ``image`` (or its
        cached clean result), noted in ``rec.steps``; the reason to fall
        back when it finds a problem."""
        if self.fsck:
            key = self._fsck_key(image, base, overlay, written, journal, data)
            if key is not None and self._known_clean(key):
                self.stats["fsck_cached"] += 1
                rec.steps.append("e2fsck -fn: exit 0 (cached for identical metadata)")
            else:
                self.stats["fsck_run"] += 1
                p = subprocess.run(
                    ["e2fsck", "-fn", str(image)], capture_output=True, text=True, timeout=120
                )
                if p.returncode != 0:
                    return f"e2fsck -fn: exit {p.returncode}"
                rec.steps.append("e2fsck -fn: exit 0")
                if key is not None:
                    self._remember_clean(key)
        return None

    def _known_clean(self, key: bytes) -> bool:
        """Whether e2fsck -fn found a state of metadata key ``key`` clean,
        here or (``shared_clean``) in another process checking this run."""
        if key not in self.clean and self.shared_clean is not None:
            self._read_shared()
        if key in self.clean:
            self.clean.move_to_end(key)
            return True
        return False

    def _read_shared(self) -> None:
        """Take the keys other processes appended since the last read.
        Only whole keys: a file's size grows after the bytes written are in
        place, so a key read within the size is complete."""
        assert self.shared_clean is not None
        try:
            with open(self.shared_clean, "rb") as f:
                f.seek(self._shared_read)
                new = f.read()
        except FileNotFoundError:
            return
        new = new[: len(new) - len(new) % KEY_SIZE]
        self._shared_read += len(new)
        for at in range(0, len(new), KEY_SIZE):
            self._remember_clean(new[at : at + KEY_SIZE], share=False)

    def _remember_clean(self, key: bytes, *, share: bool = True) -> None:
        """Note that a state of metadata key ``key`` is clean.  The key is
        shared only after e2fsck said so: a process killed at any point
        leaves no key it did not check."""
        self.clean[key] = None
        if len(self.clean) > FSCK_CACHE:
            self.clean.popitem(last=False)
        if share and self.shared_clean is not None:
            fd = os.open(self.shared_clean, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, key)  # one write of 16 bytes: appended whole
            finally:
                os.close(fd)

    def _journal_key(self, journal: list[int]) -> tuple[bytes, frozenset[int]]:
        """The journal's block list packed for the key, and its blocks but
        the superblock (masked).  The in-process path hands the same list
        for every state of one journal layout: made once for it."""
        if self._journal is None or self._journal[0] is not journal:
            self._journal = (
                journal,
                struct.pack(f"<Q{len(journal)}Q", len(journal), *journal),
                frozenset(journal[1:]),
            )
        return self._journal[1], self._journal[2]

    def _fsck_key(
        self,
        image: Path,
        base: object,
        overlay: list[tuple[int, int]],
        written: list[tuple[int, int]],
        journal: list[int],
        data: dict[str, list[int]],
    ) -> bytes | None:
        """The metadata digest of the replayed image (module comment), or
        None if the replay did not leave a clean journal."""
        fd = os.open(image, os.O_RDONLY)
        try:
            sb = os.pread(fd, SB_SIZE, SB_OFFSET)
            if SB_FEATURE_INCOMPAT.get(sb) & INCOMPAT_RECOVER or not journal:
                return None
            bs = MIN_LOG_BLOCK_SIZE << SB_LOG_BLOCK_SIZE.get(sb)
            jsb = os.pread(fd, JSB_START.end, journal[0] * bs)
            if len(jsb) < JSB_START.end or JSB_START.get(jsb) != 0:
                return None
            h = xxhash.xxh3_128()
            h.update(repr((base, bs)).encode() + b"\0")
            packed, jmasked = self._journal_key(journal)
            h.update(packed)
            masked: set[int] = set()
            for name, blocks in data.items():
                h.update(
                    name.encode() + b"\0" + struct.pack(f"<Q{len(blocks)}Q", len(blocks), *blocks)
                )
                masked.update(blocks)
            touched: set[int] = set()
            for off, length in (*overlay, *written):
                touched.update(range(off // bs, (off + length - 1) // bs + 1))
            sb_written = any(
                off < SB_OFFSET + SB_SIZE and off + n > SB_OFFSET for off, n in written
            )
            h.update(b"\1")
            for b in sorted(b for b in touched if b not in masked and b not in jmasked):
                block = bytearray(os.pread(fd, bs, b * bs))
                if sb_written and b * bs < SB_OFFSET + SB_SIZE and (b + 1) * bs > SB_OFFSET:
                    at = SB_OFFSET - b * bs
                    for off, n in _SB_VOLATILE:
                        block[at + off : at + off + n] = bytes(n)
                h.update(struct.pack("<Q", b))
                h.update(block)
            return h.digest()
        finally:
            os.close(fd)
