"""The explainers without root: an ext4 image made with ``mkfs.ext4 -d``
(a known file and a SQLite database found by their bytes in the image, so
that where they live is learnt independently of debugfs), jbd2 descriptor
tags built by hand, SQLite journal/WAL byte layouts, DHL pages through the
binding."""

from __future__ import annotations

import os
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest

from harness.explain.sqlitefile import describe_files, explain_db, explain_journal, explain_wal
from harness.fs.ext4 import jbd2
from harness.fs.ext4.explain import Ext4Explainer, journal_map, journal_superblock, read_layout

BS = 4096


@pytest.fixture(scope="module")
def ext4(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, Path]:
    """A 16 MiB ext4 image holding ``known.bin`` (distinct 4 KiB blocks)
    and ``crashlab.db`` (a SQLite database of several 4 KiB pages)."""
    root = tmp_path_factory.mktemp("ext4")
    src = root / "src"
    src.mkdir()
    known = b"".join(bytes([0xA0 + i]) * 8 + os.urandom(BS - 8) for i in range(3))
    (src / "known.bin").write_bytes(known)
    con = sqlite3.connect(src / "crashlab.db")
    con.execute("PRAGMA page_size=4096")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
    con.executemany("INSERT INTO t VALUES(?, ?)", [(i, "x" * 300) for i in range(60)])
    con.commit()
    con.close()
    img = root / "fs.img"
    subprocess.run(
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-b",
            "4096",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
            "-d",
            str(src),
            str(img),
            "16M",
        ],
        check=True,
        capture_output=True,
    )
    return img, known, src / "crashlab.db"


def _find(image: Path, needle: bytes) -> int:
    data = image.read_bytes()
    at = data.find(needle)
    assert at >= 0 and at % BS == 0, "test data not block-aligned in the image"
    return at


def _explainer(img: Path) -> Ext4Explainer:
    layout = read_layout(img)
    return Ext4Explainer(
        layout, [("image", img)], "crashlab.db", 4096, journal_superblock(layout, img)
    )


def test_known_file_block_is_attributed_to_it(ext4: tuple[Path, bytes, Path]) -> None:
    img, known, _ = ext4
    off = _find(img, known[BS : 2 * BS])  # the file's second block
    [what] = _explainer(img).explain([(off, known[BS : 2 * BS])])
    assert len(what) == 1
    assert f"block {off // BS}: known.bin (inode" in what[0]
    assert f"bytes {BS}..{2 * BS}" in what[0]


def test_a_run_of_blocks_is_one_phrase(ext4: tuple[Path, bytes, Path]) -> None:
    img, known, _ = ext4
    off = _find(img, known)
    [what] = _explainer(img).explain([(off, known)])
    assert what == [
        f"blocks {off // BS}-{off // BS + 2}: known.bin "
        f"(inode {what[0].split('inode ')[1].split(')')[0]}) bytes 0..{3 * BS}"
    ]


def test_sqlite_pages_are_named(ext4: tuple[Path, bytes, Path]) -> None:
    img, _, db = ext4
    pages = db.read_bytes()
    page3 = pages[2 * BS : 3 * BS]
    off = _find(img, page3)
    ex = _explainer(img)
    [what] = ex.explain([(off, page3)])
    assert "crashlab.db (inode" in what[0] and "page 3 (" in what[0]
    off1 = _find(img, pages[:BS])
    [what1] = ex.explain([(off1, pages[:BS])])
    assert "page 1 (table leaf)" in what1[0] or "page 1 (table interior)" in what1[0]
    assert "db header: change counter" in what1[0]


def test_static_metadata_and_journal(ext4: tuple[Path, bytes, Path]) -> None:
    img, _, _ = ext4
    ex = _explainer(img)
    layout = ex.layout
    with open(img, "rb") as f:
        sb = f.read(BS)
        j0 = layout.journal_fs_block(0)
        assert j0 is not None
        f.seek(j0 * BS)
        jblock = f.read(BS)
    itable = layout.itables[0][0]
    w0, w1, w2, w3 = ex.explain(
        [
            (0, sb),
            (j0 * BS, jblock),
            (itable * BS, bytes(BS)),
            (layout.journal_fs_block(5) * BS, bytes(BS)),
        ]
    )
    assert w0 == ["block 0: superblock (group 0)"]
    assert w1[0].startswith(f"block {j0}: journal block 0: jbd2 superblock")
    assert w2[0].startswith(f"block {itable}: inode table (group 0) inodes 1-16: <2> /")
    assert "journal block 5: journal data" in w3[0]


def _jsb(incompat: int, maxlen: int = 1024, first: int = 1) -> jbd2.JournalSuper:
    return jbd2.JournalSuper(BS, maxlen, first, 7, 1, incompat)


def _descriptor(seq: int, tags: list[bytes]) -> bytes:
    return (struct.pack(">III", jbd2.MAGIC, jbd2.DESCRIPTOR, seq) + b"".join(tags)).ljust(BS, b"\0")


def test_descriptor_tags_csum_v3() -> None:
    sb = _jsb(jbd2.INCOMPAT_64BIT | jbd2.INCOMPAT_CSUM_V3)
    uuid = bytes(range(16))
    tags = [
        struct.pack(">IIII", 41, 0, 0, 0) + uuid,  # first tag carries the UUID
        struct.pack(">IIII", 10, jbd2.FLAG_SAME_UUID, 1, 0),  # 64-bit high part
        struct.pack(">IIII", 9, jbd2.FLAG_SAME_UUID | jbd2.FLAG_LAST_TAG, 0, 0),
        struct.pack(">IIII", 99, jbd2.FLAG_SAME_UUID, 0, 0),
    ]  # after LAST_TAG: ignored
    got = jbd2.descriptor_tags(_descriptor(5, tags), sb)
    assert [t.fs_block for t in got] == [41, (1 << 32) | 10, 9]
    assert jbd2.describe(_descriptor(5, tags), sb) == "jbd2 descriptor of txn 5 (3 blocks follow)"


def test_descriptor_tags_plain_32bit_and_wrap(ext4: tuple[Path, bytes, Path]) -> None:
    sb = _jsb(0, maxlen=1024, first=1)
    assert sb.tag_bytes == 8
    tags = [
        struct.pack(">IHH", 100, 0, 0) + bytes(16),
        struct.pack(">IHH", 200, 0, jbd2.FLAG_SAME_UUID | jbd2.FLAG_LAST_TAG),
    ]
    assert [t.fs_block for t in jbd2.descriptor_tags(_descriptor(3, tags), sb)] == [100, 200]
    # a descriptor in the journal's last block: its blocks wrap to s_first
    img, _, _ = ext4
    layout = read_layout(img)
    last = layout.journal_fs_block(1023)
    assert last is not None
    jm = journal_map(layout, sb, [(last * BS, _descriptor(3, tags))])
    assert jm == {1: (100, 3), 2: (200, 3)}


def test_jbd2_commit_and_non_jbd2() -> None:
    commit = struct.pack(">III", jbd2.MAGIC, jbd2.COMMIT, 12).ljust(BS, b"\0")
    assert jbd2.describe(commit, None) == "jbd2 commit block of txn 12"
    assert jbd2.header(bytes(BS)) is None


def test_sqlite_journal_and_wal_layouts(tmp_path: Path) -> None:
    hdr = bytes.fromhex("d9d505f920a163d7") + struct.pack(">IIIII", 2, 0, 13, 512, 4096)
    journal = (
        hdr.ljust(512, b"\0")
        + struct.pack(">I", 7)
        + bytes(4096)
        + bytes(4)
        + struct.pack(">I", 1)
        + bytes(4100)
    )
    assert (
        explain_journal(0, journal[:8192], 4096)
        == "journal header (nRec 2, db was 13 pages); records 1 (page 7), 2 (page 1)"
    )
    assert explain_journal(8192, journal[8192:], 4096) == "journal record 2"
    wal = struct.pack(">IIII", 0x377F0682, 3007000, 4096, 0).ljust(32, b"\0")
    wal += struct.pack(">II", 5, 0).ljust(24, b"\0") + bytes(4096)
    wal += struct.pack(">II", 2, 9).ljust(24, b"\0") + bytes(4096)
    assert (
        explain_wal(0, wal, 4096)
        == "WAL header (checkpoint 0); frames 1 (page 5), 2 (page 2, commit: db 9 pages)"
    )
    assert explain_wal(4096, wal[4096:8192], 4096) == "WAL frames 1, 2 (page 2, commit: db 9 pages)"
    assert explain_wal(100, wal[100:4000], 4096) == "WAL frame 1"
    page = bytes([13]) + bytes(4095)
    assert explain_db(4096 * 4, page, 4096) == "page 5 (table leaf)"
    (tmp_path / "crashlab.db-journal").write_bytes(journal)
    (tmp_path / "crashlab.db").write_bytes(bytes(100))
    lines = describe_files(tmp_path, "crashlab.db")
    assert any("crashlab.db-journal" in ln and "HOT" in ln and "nRec 2" in ln for ln in lines)


def test_dhl_pages_and_slot_headers(tmp_path: Path) -> None:
    from dhl.binding import Database
    from harness.explain.dhl import DhlExplainer

    path = tmp_path / "d.dhl"
    crash = tmp_path / "crash.img"
    with Database(path, "tc", create=True, ntrees=1) as db:
        for k in range(3):
            db.begin()
            db.insert(0, k, b"v" * 20)
            db.commit()
            if k == 1:  # the crash image: after two transactions
                crash.write_bytes(path.read_bytes())
    with Database(crash, "tc", readonly=True, recover=False) as db:
        fcc, ps, before = db.fcc, db.info().page_size, db.page(1)
    with Database(path, "tc", readonly=True, recover=False) as db:
        after = db.page(1)
    assert (before.slots[0].tid, before.slots[1].tid) != (after.slots[0].tid, after.slots[1].tid)
    ex = DhlExplainer(crash, tmp_path, "tc")
    assert ex.header().startswith(f"crash image: FCC {fcc}, page size {ps}")
    # the third transaction's write of page 1, missing from the crash image
    [[what]] = ex.explain([(ps, path.read_bytes()[ps : 2 * ps])])
    tids = f"{before.slots[0].tid}/{before.slots[1].tid}"
    assert what.startswith(f"DHL page 1: crash image slot TIDs {tids}")
    assert f"with this write slot TIDs {after.slots[0].tid}/{after.slots[1].tid}" in what
    # a page that makes the image unreadable is said so, with the crash view kept
    [[zeroed]] = ex.explain([(0, bytes(ps))])
    assert zeroed.startswith("DHL page 0: crash image header page meta slots TIDs")
    assert "with this write" in zeroed
