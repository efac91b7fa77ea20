"""The oracle: from the spec alone, the database content expected after every
transaction, as an order-independent content digest.

The digest (project-wide; the DHL engine computes the same in C):

* a row (table index t, key k, value bytes v) hashes to XXH3-128 of
  ``u32 LE t || i64 LE k || v``, read as the integer high64 * 2^64 + low64
  (``xxhash.xxh3_128_intdigest``);
* a database's digest is the sum of its row hashes mod 2^128, written as 32
  lowercase hex digits.  The empty database is ``"0" * 32``.

Being a sum, it is updated in O(1) per operation and does not depend on row
order or page layout.  SQLite tables are ``t0..t{N-1}``, each
``(id INTEGER PRIMARY KEY, value BLOB NOT NULL)`` (a departure from
Mobibench's ``tblMyList<i>(id, Value TEXT, creation_date)``: one key and one
opaque value are what every SUT, DHL included, can store and digest alike).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path

import xxhash

from harness.errors import CrashlabError
from workloads.generate import generate
from workloads.opstream import DELETE, INSERT, SELECT, UPDATE, Txn
from workloads.spec import WorkloadSpec
from workloads.vfs import connect

MOD = 1 << 128
_TK = struct.Struct("<Iq")
_TABLE_NAME = re.compile(r"t(0|[1-9][0-9]*)")


def row_hash(table: int, key: int, value: bytes) -> int:
    """The 128-bit hash of one row (see the module comment)."""
    return xxhash.xxh3_128_intdigest(_TK.pack(table, key) + value)


def hexdigest(total: int) -> str:
    return f"{total % MOD:032x}"


def digest_rows(rows: Iterable[tuple[int, int, bytes]]) -> str:
    """The digest of a set of ``(table, key, value)`` rows."""
    return hexdigest(sum(row_hash(t, k, v) for t, k, v in rows))


class Oracle:
    """``digests[i]`` is the expected digest after transaction i (0 = after
    set-up, before the first measured transaction).  ``indices(d)`` lists
    every i whose digest is ``d`` (read-only transactions repeat a digest)."""

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        self._rows: dict[tuple[int, int], int] = {}
        self._total = 0
        setup, txns = generate(spec)
        self._apply(setup)
        self.digests: list[str] = [hexdigest(self._total)]
        for txn in txns:
            self._apply(txn)
            self.digests.append(hexdigest(self._total))
        self.final_rows = len(self._rows)
        self._rows = {}  # only the digests are kept
        self._index: dict[str, list[int]] = {}
        for i, d in enumerate(self.digests):
            self._index.setdefault(d, []).append(i)

    def _apply(self, txn: Txn) -> None:
        rows = self._rows
        for op, t, k, v in txn.ops:
            if op == SELECT:
                continue
            old = rows.pop((t, k), None)
            if op == INSERT and old is not None or op != INSERT and old is None:
                raise CrashlabError(f"txn {txn.number}: generator bug at table {t} key {k}")
            if old is not None:
                self._total -= old
            if op in (INSERT, UPDATE):
                h = row_hash(t, k, v)
                rows[(t, k)] = h
                self._total += h
            elif op != DELETE:
                raise CrashlabError(f"txn {txn.number}: op {op} in a transaction")
        self._total %= MOD

    @property
    def final(self) -> str:
        return self.digests[-1]

    def indices(self, digest: str) -> list[int]:
        """Every transaction index after which the content has ``digest``
        (empty: the content matches no transaction boundary)."""
        return list(self._index.get(digest, ()))

    @property
    def by_digest(self) -> dict[str, list[int]]:
        return {d: list(v) for d, v in self._index.items()}


def sqlite_digest(db_path: Path | str, vfs: str = "") -> str:
    """The content digest of a SQLite database: every user table must be
    ``t<N>`` (``id``, ``value``).  Opening (through ``vfs``, the SUT's:
    workloads/vfs.py) runs SQLite's own recovery (hot journal rollback,
    WAL recovery) as any opener would; sqlite3 errors propagate (a checker
    turns them into DB-OPEN verdicts)."""
    path = Path(db_path)
    if not path.exists():
        raise CrashlabError(f"{path}: no such database")
    con = connect(path, vfs)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        total = 0
        for name in names:
            m = _TABLE_NAME.fullmatch(name)
            if not m:
                raise CrashlabError(f"{path}: unexpected table {name!r} (expected t0, t1, ...)")
            t = int(m.group(1))
            for k, v in con.execute(f'SELECT id, value FROM "{name}"'):
                raw = bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else str(v).encode()
                total += row_hash(t, k, raw)
        return hexdigest(total)
    finally:
        con.close()
