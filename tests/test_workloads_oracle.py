"""The oracle's content digest: definition, incremental maintenance, the
digest -> transaction index, and the same digest computed from SQLite."""

from __future__ import annotations

import sqlite3

import pytest
import xxhash

from harness.errors import CrashlabError
from workloads.generate import generate
from workloads.opstream import DELETE, INSERT, UPDATE
from workloads.oracle import Oracle, digest_rows, row_hash, sqlite_digest
from workloads.spec import parse_spec


def test_row_hash_definition():
    # XXH3-128 over u32 LE table || i64 LE key || value, as high64 * 2^64 + low64
    raw = (2).to_bytes(4, "little") + (-5).to_bytes(8, "little", signed=True) + b"xyz"
    h = xxhash.xxh3_128(raw)
    assert row_hash(2, -5, b"xyz") == int.from_bytes(h.digest(), "big")
    # Known answers for the C implementations (DHL) to check against.
    assert digest_rows([(0, 1, b"a")]) == "fe9e14dcfa78ade73a72bef4c5f09d13"
    assert digest_rows([(0, 1, b"a"), (3, -2, b"hello")]) == "f4a3349bd48d5f6ed5fd1a636ad992b8"
    assert digest_rows([(0, 1, b"a"), (1, 2, b"")]) == digest_rows([(1, 2, b""), (0, 1, b"a")])
    assert digest_rows([]) == "0" * 32
    assert len(digest_rows([(0, 1, b"a")])) == 32


@pytest.mark.parametrize(
    "text", ["update:order=rand,txns=60,ops=3", "delete:order=rand,txns=60", "app:gmail,txns=15"]
)
def test_incremental_digests_equal_full_recomputation(text):
    oracle = Oracle(parse_spec(text))
    setup, txns = generate(parse_spec(text))
    rows: dict[tuple[int, int], bytes] = {}
    for i, txn in enumerate([setup, *txns]):
        for op, t, k, v in txn.ops:
            if op in (INSERT, UPDATE):
                rows[(t, k)] = v
            elif op == DELETE:
                del rows[(t, k)]
        assert oracle.digests[i] == digest_rows((t, k, v) for (t, k), v in rows.items())


def test_index_maps_digests_to_transactions():
    oracle = Oracle(parse_spec("app:facebook,txns=40,seed=4"))
    assert len(oracle.digests) == 41
    for i, d in enumerate(oracle.digests):
        assert i in oracle.indices(d)
    # single selects leave the content unchanged: their digest repeats
    assert any(len(v) > 1 for v in oracle.by_digest.values())
    assert oracle.indices("f" * 32) == []
    assert oracle.final == oracle.digests[-1]


def _make_db(path, rows):
    con = sqlite3.connect(path)
    for t in sorted({t for t, _, _ in rows}):
        con.execute(f"CREATE TABLE t{t}(id INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    for t, k, v in rows:
        con.execute(f"INSERT INTO t{t}(id, value) VALUES(?, ?)", (k, v))
    con.commit()
    con.close()


def test_sqlite_digest_equals_digest_of_rows(tmp_path):
    rows = [(0, 1, b"a" * 100), (0, 9, b"\0\xff"), (1, -3, b"z"), (1, 2**40, b"")]
    _make_db(tmp_path / "db", rows)
    assert sqlite_digest(tmp_path / "db") == digest_rows(rows)


def test_sqlite_digest_rejects_foreign_tables_and_missing_files(tmp_path):
    con = sqlite3.connect(tmp_path / "db")
    con.execute("CREATE TABLE tblMyList0(id INTEGER PRIMARY KEY, Value TEXT)")
    con.close()
    with pytest.raises(CrashlabError, match="unexpected table 'tblMyList0'"):
        sqlite_digest(tmp_path / "db")
    with pytest.raises(CrashlabError, match="no such database"):
        sqlite_digest(tmp_path / "missing")
