"""The in-process ext4 path (harness/fs/ext4/inproc.py) against debugfs
and the reference, on real recordings:

* the replayed image equals debugfs ``jr``'s block for block (but the
  superblock's write time, kbytes-written and checksum) and the extracted
  files equal ``rdump``'s (contents, sizes, directories, mode, owner,
  times), with the block lists ``blocks`` prints, on every crash state of
  several recordings;
* states.jsonl and result.json are byte-identical between the in-process
  path (default), the debugfs path (CRASHLAB_RECOVERY=debugfs) and the
  reference (CRASHLAB_RECOVERY=reference): SQLite WAL, DELETE and TRUNCATE
  journals, a workload that deletes rows, prefix, reorder and torn,
  failing states included;
* each reason to decline hands the state to debugfs with the crash image
  unchanged and the same recovery;
* a log written here with revoke records and an escaped block replays as
  debugfs replays it.

The debugfs steps and the comparisons: tests/ext4_compare.py; the
mutated images: tests/ext4_mutations.py.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from ext4_compare import (
    blocks_of,
    debugfs_recovery,
    masked,
    replay_undone,
    state_images,
    tree,
)
from ext4_mutations import (
    DECLINE,
    _db_ino,
    _inode_at,
    _log_blocks,
    _set_inode_u32,
    _write_log,
)
from support import record_runs

from checkers import sqlite
from harness.check.check import CheckOptions, check_run, default_window
from harness.check.worker import StateChecker
from harness.fs.ext4 import jbd2, replay
from harness.fs.ext4.debugfs import DebugfsSession
from harness.fs.ext4.extract import FileReader
from harness.fs.ext4.fast import FastExt4
from harness.fs.ext4.inproc import replay_and_extract
from harness.fs.ext4.memo import BlockMemo
from harness.fs.ext4.ondisk import Unsupported, crc32c
from harness.fs.ext4.undo import written_ranges
from harness.logformat import LogReader
from harness.materialize import sparse_copy
from harness.rundir import RESULT_NAME, STATES_NAME, RunDir
from harness.states import Enumeration, Options

pytestmark = pytest.mark.needs_fuse

SMALL = "insert:txns=4,ops=3,tables=2,warmup=50,seed=1"
RUNS = {
    "sqlite-wal-full": SMALL,
    "sqlite-delete-extra": SMALL,
    "sqlite-truncate-full": SMALL,  # the journal file shrinks to 0 at each commit
    "sqlite-off": SMALL,  # torn states fail FS-RECOVER and DB-INTEGRITY
    "sqlite-wal-normal": "delete:txns=4,ops=3,tables=2,warmup=40,seed=1",  # rows deleted
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    return record_runs(tmp_path_factory.mktemp("inprocruns"), RUNS)


@pytest.mark.parametrize(
    ("sut", "strategy"),
    [
        ("sqlite-wal-full", "reorder"),
        ("sqlite-delete-extra", "torn"),
        ("sqlite-truncate-full", "reorder"),
        ("sqlite-wal-normal", "prefix"),
        ("sqlite-off", "torn"),
    ],
)
def test_replayed_image_and_files_equal_debugfs(
    runs: dict[str, RunDir],
    tmp_path: Path,
    sut: str,
    strategy: str,
) -> None:
    """Block for block: the images differ from the crash image only where
    one of the two wrote (debugfs's undo file, the in-process path's own
    list), so those blocks are compared."""
    a, b, undo = tmp_path / "a.img", tmp_path / "b.img", tmp_path / "u.undo"
    fa, fb = tmp_path / "fa", tmp_path / "fb"
    db = str(runs[sut].meta().db)
    compared = declined = 0
    with DebugfsSession() as dbg:
        for sid, image in state_images(runs[sut], strategy, 60, tmp_path / "w"):
            sparse_copy(image, a)
            sparse_copy(image, b)
            shutil.rmtree(fa, ignore_errors=True)
            shutil.rmtree(fb, ignore_errors=True)
            fa.mkdir()
            keys: list[bytes] = []

            def want(read: FileReader, keys: list[bytes] = keys) -> bool:
                keys.append(sqlite.content_key_of(read, db))
                return True

            try:
                got = replay_and_extract(b, fb, want_files=want)
            except Unsupported:
                declined += 1
                continue
            files = sorted(got.data)
            blocks = debugfs_recovery(dbg, a, fa, undo, files)
            assert blocks is not None, sid  # what the in-process path replays, debugfs can
            differ = sorted(blocks_of(written_ranges(undo)) | blocks_of(got.written))
            with open(a, "rb") as fa_, open(b, "rb") as fb_:
                for blk in differ:
                    x, y = (
                        os.pread(fa_.fileno(), 4096, blk * 4096),
                        os.pread(fb_.fileno(), 4096, blk * 4096),
                    )
                    if blk == 0:
                        x, y = masked(x), masked(y)
                    assert x == y, (sid, blk)
            assert tree(fa) == tree(fb), sid
            # the DB-facts key from the extraction's memory is the files' key
            # (read after the comparison: reading moves the access times)
            assert keys == [sqlite.content_key(fb, db)], sid
            assert [int(x) for x in blocks[0].split()] == got.journal, sid
            assert {
                f: [int(x) for x in s.split()] for f, s in zip(files, blocks[1:], strict=True)
            } == got.data
            compared += 1
    assert compared >= 30 and declined <= compared // 4, (compared, declined)


def _check(
    run: RunDir,
    strategy: str,
    out: Path,
    mode: str,
    limit: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRASHLAB_RECOVERY", mode)
    check_run(run, CheckOptions(states=Options(strategy=strategy), jobs=2, max_states=limit), out)


@pytest.mark.parametrize(
    ("sut", "strategy", "limit"),
    [
        ("sqlite-wal-full", "reorder", 150),
        ("sqlite-delete-extra", "torn", 100),
        ("sqlite-truncate-full", "prefix", None),
        ("sqlite-wal-normal", "reorder", 100),
        ("sqlite-off", "torn", 200),  # FS-RECOVER, DB-INTEGRITY, DB-ATOMIC failures
    ],
)
def test_three_paths_give_identical_verdicts(
    runs: dict[str, RunDir],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sut: str,
    strategy: str,
    limit: int | None,
) -> None:
    for mode in ("fast", "debugfs", "reference"):
        _check(runs[sut], strategy, tmp_path / mode, mode, limit, monkeypatch)
    for name in (STATES_NAME, RESULT_NAME):
        want = (tmp_path / "reference" / name).read_bytes()
        assert (tmp_path / "fast" / name).read_bytes() == want, name
        assert (tmp_path / "debugfs" / name).read_bytes() == want, name
    if sut == "sqlite-off":
        assert b'"FS-RECOVER": "fail"' in (tmp_path / "fast" / STATES_NAME).read_bytes()


# --- each reason to decline (the images: tests/ext4_mutations.py) -------------


@pytest.fixture(scope="module")
def needs_replay(runs: dict[str, RunDir], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A crash image whose journal holds committed transactions (among the
    workload's states: the creation window's first ones have none yet)."""
    work = tmp_path_factory.mktemp("replay")
    for _, path in state_images(runs["sqlite-wal-full"], "reorder", 40, work / "w", workload=True):
        image = path.read_bytes()
        if struct.unpack_from("<I", image, 1024 + 0x60)[0] & 4 and len(_log_blocks(image)[2]) >= 2:
            return image
    raise AssertionError("no state with a journal to replay")


@pytest.mark.parametrize("reason", sorted(DECLINE))
def test_each_decline_goes_to_debugfs_unchanged(
    needs_replay: bytes,
    tmp_path: Path,
    reason: str,
) -> None:
    replayed, mutate = DECLINE[reason]
    img = bytearray(needs_replay)
    if replayed:  # a mutation of what replay leaves: replay first
        p = tmp_path / "r.img"
        p.write_bytes(img)
        replay_and_extract(p, tmp_path / "r")
        img = bytearray(p.read_bytes())
    mutate(img)
    crash = bytes(img)
    a = tmp_path / "a.img"
    a.write_bytes(crash)
    with pytest.raises(Unsupported, match=reason):
        replay_and_extract(a, tmp_path / "x")
    # FastExt4 declines and puts the crash image back as it was
    fast = FastExt4(tmp_path / "w")
    try:
        a.write_bytes(crash)
        assert fast._inproc(a, tmp_path / "w" / "files", [], None) is None
        assert reason in fast.last_declined and fast.stats["inproc_declined"] == 1
        assert a.read_bytes() == crash and not (tmp_path / "w" / "files").exists()
    finally:
        fast.close()
    # ... and the state is recovered as the debugfs path alone recovers it
    results = []
    for use in (True, False):
        work = tmp_path / f"w{use}"
        work.mkdir()
        a.write_bytes(crash)
        fast = FastExt4(work, inproc=use)
        try:

            def rebuild() -> Path:
                a.write_bytes(crash)
                return a

            rec, _ = fast.recover(a, work / "files", overlay=[], base=None, rebuild=rebuild)
        finally:
            fast.close()
        assert fast.stats["inproc"] == 0
        files = (
            {
                p.relative_to(work / "files").as_posix(): p.read_bytes() if p.is_file() else None
                for p in sorted((work / "files").rglob("*"))
            }
            if rec.ok
            else None
        )
        results.append((rec.ok, rec.journal_replayed, rec.needed_repair, rec.detail, files))
    assert results[0] == results[1]


def test_crc32c_is_libext2fs() -> None:
    """The checksums are e2fsprogs's own crc32c_le (no inversions)."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("ext2fs") or "libext2fs.so.2")
    lib.ext2fs_crc32c_le.restype = ctypes.c_uint32
    lib.ext2fs_crc32c_le.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    for seed in (0, 0xFFFFFFFF, 0x1234ABCD):
        for data in (b"", b"a", os.urandom(4096)):
            assert crc32c(seed, data) == lib.ext2fs_crc32c_le(seed, data, len(data))


def test_skipped_root_entries_as_debugfs(needs_replay: bytes, tmp_path: Path) -> None:
    """With root entries to skip (an enospc fault's fill file), the files,
    their folder's own mode and times included, are those of the debugfs
    path (``rdump`` of the other root entries)."""
    a = tmp_path / "a.img"
    trees = []
    for use in (True, False):
        work = tmp_path / f"w{use}"
        work.mkdir()
        a.write_bytes(needs_replay)
        fast = FastExt4(work, skip=("crashlab.db-shm",), inproc=use)
        try:
            rec, _ = fast.recover(
                a, work / "files", overlay=[], base=None, rebuild=lambda: pytest.fail("fell back")
            )  # type: ignore[arg-type,return-value]  # a rebuild that must not run
        finally:
            fast.close()
        assert rec.ok and fast.stats["inproc"] == int(use), fast.stats
        trees.append(tree(work / "files"))
    assert "crashlab.db-shm" not in trees[0] and "crashlab.db" in trees[0]
    # the folder keeps its own times (now): its mode and owner are compared
    assert trees[0].pop(".")[:3] == trees[1].pop(".")[:3]
    assert trees[0] == trees[1]


def test_unwanted_files_are_not_written(needs_replay: bytes, tmp_path: Path) -> None:
    """``want_files`` answering False: the same replay, block lists and
    reader contents, and no file written; answering True: the files as
    without it (the key read from memory is the files' key)."""
    got, keys, images = [], [], []
    for wanted in (True, False):
        img, out = tmp_path / f"{wanted}.img", tmp_path / f"files{wanted}"
        img.write_bytes(needs_replay)

        def want(read: FileReader, wanted: bool = wanted) -> bool:
            keys.append(sqlite.content_key_of(read, "crashlab.db"))
            assert read("crashlab.db-nothing") is None
            return wanted

        rec = replay_and_extract(img, out, want_files=want)
        assert rec.extracted is wanted and out.exists() is wanted
        got.append((rec.replayed, rec.written, rec.journal, rec.data))
        images.append(masked(img.read_bytes()))
    assert got[0] == got[1] and images[0] == images[1]
    assert keys[0] == keys[1] == sqlite.content_key(tmp_path / "filesTrue", "crashlab.db")
    assert "crashlab.db" in got[0][3]


def test_revoke_records_and_escaped_blocks_as_debugfs(needs_replay: bytes, tmp_path: Path) -> None:
    """A log written here with revoke records (of an earlier transaction's
    block, of the same transaction's, of a later one's) and an escaped
    block (its content starts with the jbd2 magic): the in-process replay
    writes what debugfs jr writes."""
    p = tmp_path / "r.img"
    p.write_bytes(needs_replay)
    replay_and_extract(p, tmp_path / "r")  # a clean journal to write a log into
    img = bytearray(p.read_bytes())
    magic = struct.pack(">I", jbd2.MAGIC)
    a_, b_, c_, d_ = 9000, 9001, 9002, 9003  # free blocks of the 16384
    _write_log(
        img,
        [
            ([(a_, b"A" * 4096), (b_, magic + b"B" * 4092), (d_, b"D" * 4096)], []),
            ([(c_, b"C" * 4096)], [a_, c_]),  # revokes A (older) and C (its own)
            ([(d_, b"d" * 4096)], []),  # D written again, later
        ],
    )
    crash = bytes(img)
    a, b, undo = tmp_path / "a.img", tmp_path / "b.img", tmp_path / "u.undo"
    a.write_bytes(crash)
    b.write_bytes(crash)
    got = replay_and_extract(b, tmp_path / "fb")
    (tmp_path / "fa").mkdir()
    with DebugfsSession() as dbg:
        blocks = debugfs_recovery(dbg, a, tmp_path / "fa", undo, sorted(got.data))
    assert blocks is not None
    A, B = a.read_bytes(), b.read_bytes()
    assert masked(A) == masked(B)
    assert tree(tmp_path / "fa") == tree(tmp_path / "fb")
    assert B[a_ * 4096 : (a_ + 1) * 4096] == crash[a_ * 4096 : (a_ + 1) * 4096]  # revoked
    assert B[c_ * 4096 : (c_ + 1) * 4096] == crash[c_ * 4096 : (c_ + 1) * 4096]  # revoked
    assert B[b_ * 4096 : (b_ + 1) * 4096] == magic + b"B" * 4092  # escaped, restored
    assert B[d_ * 4096 : (d_ + 1) * 4096] == b"d" * 4096  # the later copy


def test_scan_memo_resumes_only_before_the_first_differing_block(
    needs_replay: bytes, tmp_path: Path
) -> None:
    """The journal scan resumes where a scan of the same durable image got
    to, before the first block that differs (replay.ScanMemo).  On a log
    of three transactions with revoke records, each journal block in turn
    is named as differing, once with its content unchanged and once with
    its first bytes zeroed (a header: the scan must end there; a data
    block: its checksum fails): every replay with the memo does what a
    replay without it does, and the scans resume at every commit of the
    log, not only at its start."""
    p = tmp_path / "r.img"
    p.write_bytes(needs_replay)
    replay_and_extract(p, tmp_path / "r")
    img = bytearray(p.read_bytes())
    a_, b_, c_, d_ = 9000, 9001, 9002, 9003
    _write_log(
        img,
        [
            ([(a_, b"A" * 4096), (b_, b"B" * 4096), (d_, b"D" * 4096)], []),
            ([(c_, b"C" * 4096)], [a_, c_]),
            ([(d_, b"d" * 4096)], []),
        ],
    )
    p.write_bytes(img)

    def outcome(**memo: object) -> object:
        try:
            got, wrote = replay_undone(p, tmp_path / "f", **memo)
        except Unsupported as e:
            return str(e)
        return got.written, got.journal, got.data, wrote

    durable = outcome()
    assert isinstance(durable, tuple) and len(durable[0]) > 3
    memo = BlockMemo()
    assert outcome(memo=memo, base="log", differ=[]) == durable
    scan = next(v for v in memo.known.values() if isinstance(v, replay.ScanMemo))
    first = struct.unpack_from(">I", img, durable[1][0] * 4096 + 20)[0]
    # a block past the log differs: the replay of all three transactions is kept
    past = durable[1][first + 40]
    assert outcome(memo=memo, base="log", differ=[(past * 4096, 4096)]) == durable
    assert 3 in scan.replayed
    resumed, ended = set(), set()
    for j in durable[1][first : first + 12]:
        resumed.add(scan.resume_point({j}).txns)
        assert outcome(memo=memo, base="log", differ=[(j * 4096, 4096)]) == durable, j
        with open(p, "r+b") as f:  # the header zeroed: a different crash image
            f.seek(j * 4096)
            f.write(bytes(12))
        try:
            want = outcome()
            ended.add(want == durable)
            assert outcome(memo=memo, base="log", differ=[(j * 4096, 4096)]) == want, j
        finally:
            p.write_bytes(img)
    assert resumed == {0, 1, 2, 3}, resumed
    assert ended == {True, False}  # some zeroed headers changed the replay


def test_memo_over_real_states_equals_no_memo(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """Every reorder state of a recording replayed as a worker replays it
    (one memo across states: the durable image's position and the
    overlay's ranges) writes and extracts what a replay without memo does:
    the scan resumes, and most directory walks are taken from the memo
    (BlockMemo.walked)."""
    run = runs["sqlite-wal-full"]
    memo = BlockMemo()
    sc = StateChecker(run, tmp_path / "w", fast=False)
    n = resumed = 0
    walks = [0]  # states whose walk was a kept one
    try:
        with LogReader(run.log) as r:
            for state in Enumeration(r, default_window(run, Options(strategy="reorder"))):
                sc.image.advance(state.durable_upto)
                image = sc.image.scratch(sc.files._writes(state))
                try:
                    want = replay_undone(image, tmp_path / "a")
                except Unsupported:
                    continue
                differ = sc.image.overlay
                if memo.base == sc.image.position:  # where this state's scan will resume
                    unstable = {
                        b
                        for off, k in differ
                        for b in range(off // 4096, (off + k - 1) // 4096 + 1)
                    }
                    resumed += any(
                        v.resume_point(unstable).txns > 0
                        for v in memo.known.values()
                        if isinstance(v, replay.ScanMemo)
                    )
                kept = list(memo.walks)
                got = replay_undone(
                    image, tmp_path / "b", memo=memo, base=sc.image.position, differ=differ
                )
                walks[0] += len(memo.walks) == len(kept) and memo.walks[-1] in kept
                assert (got[0].written, got[0].journal, got[0].data, got[1]) == (
                    want[0].written,
                    want[0].journal,
                    want[0].data,
                    want[1],
                ), state.id
                assert tree(tmp_path / "a") == tree(tmp_path / "b"), state.id
                n += 1
    finally:
        sc.close()
    assert n >= 100 and resumed >= n // 2, (n, resumed)  # most states skip part of the scan
    assert walks[0] >= n // 2, (n, walks)  # and take a kept walk


def test_kept_walk_only_for_the_same_blocks(needs_replay: bytes, tmp_path: Path) -> None:
    """A directory walk is taken from the memo only while every block it
    read holds the same bytes: after a file's inode changes (its mtime and
    size, checksum valid; superblock and group descriptors unchanged), the
    next replay walks again and extracts the new mtime and size."""
    p = tmp_path / "r.img"
    p.write_bytes(needs_replay)
    replay_and_extract(p, tmp_path / "r")  # a clean journal: replay writes only its superblocks
    img = bytearray(p.read_bytes())
    memo = BlockMemo()
    replay_undone(p, tmp_path / "a", memo=memo, base="clean", differ=[])
    ino = _db_ino(bytes(img))
    replay_undone(p, tmp_path / "b", memo=memo, base="clean", differ=[])
    assert len(memo.walks) == 1  # the second replay took the kept walk
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    _set_inode_u32(0x10, lambda t: t - 1000)(img)  # i_mtime
    _set_inode_u32(0x4, lambda n: n - 4096)(img)  # i_size_lo
    p.write_bytes(img)
    at = _inode_at(bytes(img), ino)
    differ = [(at - at % 4096, 4096)]
    got, _ = replay_undone(p, tmp_path / "c", memo=memo, base="clean", differ=differ)
    want, _ = replay_undone(p, tmp_path / "d")
    assert tree(tmp_path / "c") == tree(tmp_path / "d")
    changed = [
        n
        for n in os.listdir(tmp_path / "a")
        if (tmp_path / "a" / n).stat().st_mtime != (tmp_path / "c" / n).stat().st_mtime
    ]
    assert changed and len(memo.walks) == 2, changed
    assert got.data == want.data


def test_workers_share_clean_fsck_keys(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """Two state checkers of one check (one shared folder) run each
    e2fsck -fn once between them: the second takes every clean key the
    first appended, and makes the same lines.  A checker of another
    folder, or of the same recording changed, runs its own."""
    from harness.check.check import _chunks
    from harness.check.filepath import run_folder

    run = runs["sqlite-wal-full"]
    with LogReader(run.log) as r:
        chunks = list(
            _chunks(iter(Enumeration(r, default_window(run, Options(strategy="reorder")))), 0, 200)
        )

    def check(work: str, shared: Path) -> tuple[bytes, dict[str, int]]:
        sc = StateChecker(run, tmp_path / work, shared=shared)
        try:
            return b"".join(sc.lines(c) for c in chunks), dict(sc.files.fast.stats)
        finally:
            sc.close()

    first, a = check("a", tmp_path / "shared")
    second, b = check("b", tmp_path / "shared")
    alone, c = check("c", tmp_path / "other")
    assert first == second == alone
    assert a["fsck_run"] > 0 and b["fsck_run"] == 0 and c["fsck_run"] == a["fsck_run"], (a, b, c)
    assert b["fsck_cached"] == a["fsck_cached"] + a["fsck_run"]
    before = run_folder(run)
    copy = RunDir(tmp_path / "copy")
    shutil.copytree(run.path, copy.path)
    assert run_folder(copy) != before  # another path
    run.meta_path.write_bytes(run.meta_path.read_bytes() + b" ")
    try:
        assert run_folder(run) != before  # recorded again at the same path
    finally:
        run.meta_path.write_bytes(run.meta_path.read_bytes()[:-1])
