"""The op stream: the one definition of the binary file the C runner
executes (``workloads/runner/opstream.c`` reads the same layout; see
workloads/README.md).

All integers little-endian.  Header (24 bytes)::

    8s magic "CLOPSTRM", u32 version (1), u32 ntables, u32 ntxns, u32 flags (0)

then records, each a u8 type and its body::

    BEGIN  1  u32 txn          txn 0 is the set-up (warm-up) transaction
    INSERT 2  u32 table, i64 key, u32 len, len bytes value
    UPDATE 3  u32 table, i64 key, u32 len, len bytes value
    DELETE 4  u32 table, i64 key
    SELECT 5  u32 table, i64 key
    COMMIT 6  u32 txn          the same number as its BEGIN
    MARK   7  u8 len, len bytes label (printable ASCII, no space)
    END    8  u32 ntxns, then ntxns x u64: byte offset of BEGIN of txn 1..ntxns

and nothing after END's index.  Transactions are numbered 1..ntxns in order.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from harness.errors import CrashlabError

MAGIC = b"CLOPSTRM"
VERSION = 1
HEADER = struct.Struct("<8sIIII")

BEGIN, INSERT, UPDATE, DELETE, SELECT, COMMIT, MARK, END = range(1, 9)
OP_NAMES = {
    BEGIN: "BEGIN",
    INSERT: "INSERT",
    UPDATE: "UPDATE",
    DELETE: "DELETE",
    SELECT: "SELECT",
    COMMIT: "COMMIT",
    MARK: "MARK",
    END: "END",
}

_U32 = struct.Struct("<I")
_TK = struct.Struct("<Iq")  # table, key
_TKL = struct.Struct("<IqI")  # table, key, value length
_U64 = struct.Struct("<Q")

# One operation inside a transaction: (op, table, key, value); value is b""
# for DELETE and SELECT.
Op = tuple[int, int, int, bytes]


@dataclass(frozen=True)
class Txn:
    """Transaction ``number`` (0 = set-up) and its operations in order."""

    number: int
    ops: list[Op]


def _check_label(label: str) -> bytes:
    raw = label.encode("ascii", "replace")
    if not 1 <= len(raw) <= 255 or any(c < 0x21 or c > 0x7E for c in raw):
        raise CrashlabError(f"bad mark label {label!r} (1..255 printable ASCII, no space)")
    return raw


def encode(ntables: int, setup: Txn, txns: Iterable[Txn]) -> bytes:
    """The op stream of a set-up transaction (skipped when it has no
    operations), a ``setup-done`` mark, then ``txns`` numbered 1, 2, ..."""
    out = bytearray(HEADER.size)
    index: list[int] = []

    def txn(t: Txn) -> None:
        out.append(BEGIN)
        out.extend(_U32.pack(t.number))
        for op, table, key, value in t.ops:
            out.append(op)
            if op in (INSERT, UPDATE):
                out.extend(_TKL.pack(table, key, len(value)))
                out.extend(value)
            elif op in (DELETE, SELECT):
                out.extend(_TK.pack(table, key))
            else:
                raise CrashlabError(f"op {op} cannot appear inside a transaction")
        out.append(COMMIT)
        out.extend(_U32.pack(t.number))

    if setup.ops:
        txn(setup)
    label = _check_label("setup-done")
    out += bytes((MARK, len(label))) + label
    for n, t in enumerate(txns, start=1):
        if t.number != n:
            raise CrashlabError(f"transaction {t.number} out of order (expected {n})")
        index.append(len(out))
        txn(t)
    out.append(END)
    out += _U32.pack(len(index))
    for off in index:
        out += _U64.pack(off)
    HEADER.pack_into(out, 0, MAGIC, VERSION, ntables, len(index), 0)
    return bytes(out)


@dataclass(frozen=True)
class Record:
    """One decoded record: ``op`` and whichever fields it has."""

    offset: int
    op: int
    txn: int = 0
    table: int = 0
    key: int = 0
    value: bytes = b""
    label: str = ""


def decode(data: bytes) -> tuple[int, int, Iterator[Record]]:
    """``(ntables, ntxns, records)`` of an op stream; the iterator raises
    CrashlabError at the first malformed byte (END's index is checked)."""
    if len(data) < HEADER.size:
        raise CrashlabError("op stream: truncated header")
    magic, version, ntables, ntxns, _flags = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CrashlabError("op stream: bad magic (not an op stream)")
    if version != VERSION:
        raise CrashlabError(f"op stream: version {version} (this reader knows {VERSION})")

    def records() -> Iterator[Record]:
        pos = HEADER.size
        begins: list[int] = []
        try:
            while True:
                off, op = pos, data[pos]
                pos += 1
                if op in (BEGIN, COMMIT):
                    (txn,) = _U32.unpack_from(data, pos)
                    pos += 4
                    if op == BEGIN and txn > 0:
                        begins.append(off)
                    yield Record(off, op, txn=txn)
                elif op in (INSERT, UPDATE):
                    table, key, n = _TKL.unpack_from(data, pos)
                    pos += _TKL.size
                    if pos + n > len(data):
                        raise CrashlabError(f"op stream: byte {off}: value past the end")
                    yield Record(off, op, table=table, key=key, value=data[pos : pos + n])
                    pos += n
                elif op in (DELETE, SELECT):
                    table, key = _TK.unpack_from(data, pos)
                    pos += _TK.size
                    yield Record(off, op, table=table, key=key)
                elif op == MARK:
                    n = data[pos]
                    label = data[pos + 1 : pos + 1 + n].decode("ascii")
                    pos += 1 + n
                    yield Record(off, op, label=label)
                elif op == END:
                    (n,) = _U32.unpack_from(data, pos)
                    pos += 4
                    idx = [v for (v,) in _U64.iter_unpack(data[pos : pos + 8 * n])]
                    if n != ntxns or idx != begins or pos + 8 * n != len(data):
                        raise CrashlabError(f"op stream: byte {off}: END index does not match")
                    yield Record(off, op, txn=n)
                    return
                else:
                    raise CrashlabError(f"op stream: byte {off}: unknown record type {op}")
        except (IndexError, struct.error):
            raise CrashlabError(f"op stream: truncated at byte {pos}") from None

    return ntables, ntxns, records()
