"""DB-OPEN and DB-INTEGRITY on SQLite, FS-RECOVER on ext4: each shown able
to fail on a state built to break it, and to pass on a sound one."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from checkers.sqlite import content_key, examine, judge
from harness.check.filepath import fs_verdict
from harness.fs.ext4.recover import recover_ext4
from harness.images import ensure_image
from workloads.oracle import sqlite_digest
from workloads.spec import parse_spec


class FakeOracle:
    """Just the digests list the judge reads."""

    def __init__(self, digests: list[str]) -> None:
        self.digests = digests


def make_db(path: Path, rows: int = 300) -> str:
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size=4096")
    con.execute("CREATE TABLE t0(id INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    con.executemany(
        "INSERT INTO t0 VALUES(?, ?)", [(i, b"v" * 100 + bytes([i % 256])) for i in range(rows)]
    )
    con.commit()
    con.close()
    return sqlite_digest(path)


def by_id(vs: list) -> dict[str, str]:
    return {v.invariant: v.status for v in vs}


def test_sound_database_passes(tmp_path: Path) -> None:
    d = make_db(tmp_path / "a.db")
    vs = judge(examine(tmp_path / "a.db"), FakeOracle(["x", d]), acked=1, begun=1)
    assert set(by_id(vs).values()) == {"pass"}


def test_missing_database_fails_open(tmp_path: Path) -> None:
    vs = judge(examine(tmp_path / "none.db"), FakeOracle(["x"]), 0, 0)
    assert by_id(vs)["DB-OPEN"] == "fail" and "does not exist" in vs[0].explanation
    assert by_id(vs)["DB-ATOMIC"] == "skip"


def test_garbage_header_fails_open(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    db.write_bytes(b"this is not a database" * 400)
    vs = judge(examine(db), FakeOracle(["x"]), 0, 0)
    assert by_id(vs)["DB-OPEN"] == "fail"
    assert "DatabaseError" in vs[0].explanation


def test_corrupt_btree_page_fails_integrity(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    d = make_db(db)
    # Page 2 is a leaf of t0's b-tree: point its first cell beyond the page.
    with open(db, "r+b") as f:
        f.seek(4096 + 8)  # leaf header is 8 bytes; first cell pointer follows
        f.write(b"\xff\xf0")
    facts = examine(db)
    vs = judge(facts, FakeOracle([d]), 0, 0)
    statuses = by_id(vs)
    assert statuses["DB-INTEGRITY"] == "fail" or statuses["DB-OPEN"] == "fail", statuses


def test_content_key_follows_journal_and_wal(tmp_path: Path) -> None:
    make_db(tmp_path / "k.db")
    k1 = content_key(tmp_path, "k.db")
    (tmp_path / "k.db-journal").write_bytes(b"j" * 512)
    k2 = content_key(tmp_path, "k.db")
    (tmp_path / "k.db-journal").unlink()
    (tmp_path / "k.db-wal").write_bytes(b"j" * 512)
    assert len({k1, k2, content_key(tmp_path, "k.db")}) == 3


def test_content_key_of_pieces_is_the_files_key(tmp_path: Path) -> None:
    """The key made from pieces in memory (the ext4 in-process path) is the
    key of the files, which is the digest of each sidecar's suffix, NUL,
    bytes, NUL (or suffix, 1 when absent): the cache key is unchanged."""
    import xxhash

    from checkers.sqlite import SIDECARS, content_key_of

    make_db(tmp_path / "k.db")
    (tmp_path / "k.db-wal").write_bytes(bytes(range(256)) * 20)
    files = {n: (tmp_path / n).read_bytes() for n in ("k.db", "k.db-wal")}
    h = xxhash.xxh3_128()
    for suffix in SIDECARS:
        data = files.get("k.db" + suffix)
        h.update(suffix.encode() + (b"\1" if data is None else b"\0" + data + b"\0"))

    def read(name: str) -> list[bytes | memoryview] | None:
        data = files.get(name)
        if data is None:
            return None
        return [memoryview(data)[:100], b"", memoryview(data)[100:]]

    assert content_key_of(read, "k.db") == content_key(tmp_path, "k.db") == h.digest()


def test_oracle_digest_agrees_with_spec_runner_schema(tmp_path: Path) -> None:
    """The checker's digest is the oracle's: a database holding exactly the
    spec's set-up rows has digest oracle.digests[0]."""
    from workloads.generate import generate
    from workloads.oracle import Oracle

    spec = parse_spec("insert:txns=2,tables=2,warmup=5,seed=3")
    setup, _ = generate(spec)
    con = sqlite3.connect(tmp_path / "o.db")
    for t in range(2):
        con.execute(f"CREATE TABLE t{t}(id INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    for _op, t, k, v in setup.ops:
        con.execute(f"INSERT INTO t{t} VALUES(?, ?)", (k, v))
    con.commit()
    con.close()
    assert examine(tmp_path / "o.db").digest == Oracle(spec).digests[0]


def _ext4_with_file(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "crashlab.db").write_bytes(b"x" * 8192)
    base, _ = ensure_image("ext4")
    img = tmp_path / "fs.img"
    shutil.copyfile(base, img)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-d", str(src), str(img)], check=True)
    return img


def test_fs_recover_passes_on_a_clean_image(tmp_path: Path) -> None:
    img = _ext4_with_file(tmp_path)
    rec = recover_ext4(img, tmp_path / "out")
    assert rec.ok and not rec.needed_repair
    assert fs_verdict(rec).status == "pass"
    assert (tmp_path / "out" / "crashlab.db").read_bytes() == b"x" * 8192


def test_fs_recover_fails_when_fsck_must_repair(tmp_path: Path) -> None:
    img = _ext4_with_file(tmp_path)
    # A wrong link count: journal replay cannot fix it, fsck must.
    subprocess.run(
        ["debugfs", "-w", "-R", "sif /crashlab.db links_count 7", str(img)],
        check=True,
        capture_output=True,
    )
    rec = recover_ext4(img, tmp_path / "out")
    v = fs_verdict(rec)
    assert v.status == "fail" and "needed fsck repairs" in v.explanation
    assert rec.ok  # repaired, then extracted: the database is still checked


def test_fs_recover_fails_on_a_destroyed_superblock(tmp_path: Path) -> None:
    img = _ext4_with_file(tmp_path)
    with open(img, "r+b") as f:
        f.seek(1024)
        f.write(bytes(4096))
    rec = recover_ext4(img, tmp_path / "out", check=True)
    v = fs_verdict(rec)
    if rec.ok:  # e2fsck found a backup superblock and repaired
        assert v.status == "fail" and "needed fsck repairs" in v.explanation
    else:
        assert v.status == "fail"


@pytest.mark.parametrize("fsck", [True, False])
def test_fs_recover_without_fsck_still_replays(tmp_path: Path, fsck: bool) -> None:
    img = _ext4_with_file(tmp_path)
    rec = recover_ext4(img, tmp_path / "out", check=fsck)
    assert rec.ok and rec.steps[0].startswith("e2fsck -E journal_only")
    assert any("-fn" in s for s in rec.steps) == fsck


def test_a_schema_name_that_is_not_utf8_fails_the_open(tmp_path: Path) -> None:
    # found by a corrupt-fault check in CI: SQLite's "malformed database
    # schema (NAME)" carried the corrupted name, and Python could not decode
    # the message, so the sqlite3 exception became a UnicodeDecodeError
    db = tmp_path / "u.db"
    con = sqlite3.connect(db)
    con.execute("create table tqqqq(a)")
    con.execute("insert into tqqqq values (1)")
    con.commit()
    con.close()
    raw = bytearray(db.read_bytes())
    for at in (raw.find(b"tqqqq"), raw.find(b"CREATE TABLE tqqqq") + 13):
        raw[at + 1 : at + 3] = b"\xc5\x28"
    db.write_bytes(bytes(raw))
    facts = examine(db)
    assert facts.exists and facts.open_error is not None
    assert facts.open_error.startswith("malformed database (a name is not UTF-8")
