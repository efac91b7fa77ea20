"""Deterministic generation: a spec becomes its set-up transaction and the
sequence of transactions 1..txns.  Everything random comes from one
``random.Random(spec.seed)`` consumed in a fixed order, so the same spec
always gives the same operations (and the same op stream bytes).

Every UPDATE, DELETE and SELECT targets a row that exists at that point and
every INSERT a key that does not: the runner treats a miss as an error.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from harness.atomic import write_bytes_atomic
from workloads import opstream
from workloads.apps import PROFILES
from workloads.opstream import DELETE, INSERT, SELECT, UPDATE, Op, Txn
from workloads.spec import AppSpec, MobibenchSpec, WorkloadSpec

RAND_KEY_LIMIT = 1 << 40  # random insert keys are drawn from 1..2^40-1


class _Table:
    """The live keys of one table, with O(1) add, remove and random pick."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.where: dict[int, int] = {}
        self.next_key = 1

    def add(self, key: int) -> None:
        self.where[key] = len(self.keys)
        self.keys.append(key)
        self.next_key = max(self.next_key, key + 1)

    def remove(self, key: int) -> None:
        i = self.where.pop(key)
        last = self.keys.pop()
        if last != key:
            self.keys[i] = last
            self.where[last] = i

    def pick(self, rng: random.Random) -> int:
        return self.keys[rng.randrange(len(self.keys))]


def generate(spec: WorkloadSpec) -> tuple[Txn, Iterator[Txn]]:
    """The set-up transaction (number 0; warm-up inserts, possibly none) and
    an iterator over transactions 1..spec.txns.  Consume the set-up first."""
    if isinstance(spec, MobibenchSpec):
        return _mobibench(spec)
    return _app(spec)


def _warmup(rng: random.Random, tables: list[_Table], rows: int, size: tuple[int, int]) -> Txn:
    ops: list[Op] = []
    for t, table in enumerate(tables):
        for key in range(1, rows + 1):
            ops.append((INSERT, t, key, rng.randbytes(rng.randint(*size))))
            table.add(key)
    return Txn(0, ops)


def _mobibench(spec: MobibenchSpec) -> tuple[Txn, Iterator[Txn]]:
    rng = random.Random(spec.seed)
    tables = [_Table() for _ in range(spec.tables)]
    setup = _warmup(rng, tables, spec.warmup_rows, (spec.size, spec.size))
    cursor = [0] * spec.tables
    rand = spec.order == "rand"

    def one(t: int) -> Op:
        table = tables[t]
        if spec.kind == "insert":
            if rand:
                key = rng.randrange(1, RAND_KEY_LIMIT)
                while key in table.where:
                    key = rng.randrange(1, RAND_KEY_LIMIT)
            else:
                key = table.next_key
            table.add(key)
            return (INSERT, t, key, rng.randbytes(spec.size))
        if spec.kind == "update":
            if rand:
                key = table.pick(rng)
            else:
                key = cursor[t] % spec.warmup_rows + 1
                cursor[t] += 1
            return (UPDATE, t, key, rng.randbytes(spec.size))
        # delete: ascending keys, or a random live one
        if rand:
            key = table.pick(rng)
        else:
            cursor[t] += 1
            key = cursor[t]
        table.remove(key)
        return (DELETE, t, key, b"")

    def txns() -> Iterator[Txn]:
        g = 0
        for n in range(1, spec.txns + 1):
            ops = []
            for _ in range(spec.ops):
                ops.append(one(g % spec.tables))
                g += 1
            yield Txn(n, ops)

    return setup, txns()


def _app(spec: AppSpec) -> tuple[Txn, Iterator[Txn]]:
    prof = PROFILES[spec.app]
    rng = random.Random(spec.seed)
    tables = [_Table() for _ in range(prof.tables)]
    setup = _warmup(rng, tables, spec.warmup, prof.size)
    kinds = (INSERT, UPDATE, DELETE, SELECT)

    def one(kind: int) -> Op:
        t = rng.randrange(prof.tables)
        table = tables[t]
        if kind != INSERT and not table.keys:
            kind = INSERT  # nothing to read, change or delete: add a row instead
        if kind == INSERT:
            key = table.next_key
            table.add(key)
            return (INSERT, t, key, rng.randbytes(rng.randint(*prof.size)))
        key = table.pick(rng)
        if kind == UPDATE:
            return (UPDATE, t, key, rng.randbytes(rng.randint(*prof.size)))
        if kind == DELETE:
            table.remove(key)
        return (kind, t, key, b"")

    def txns() -> Iterator[Txn]:
        s1 = prof.single_select
        s2 = s1 + prof.single_update
        s3 = s2 + prof.single_insert
        for n in range(1, spec.txns + 1):
            r = rng.random()
            if r < s1:
                ops = [one(SELECT)]
            elif r < s2:
                ops = [one(UPDATE)]
            elif r < s3:
                ops = [one(INSERT)]
            else:
                size = rng.randint(*prof.multi_ops)
                ops = [one(k) for k in rng.choices(kinds, weights=prof.multi_mix, k=size)]
            yield Txn(n, ops)

    return setup, txns()


def opstream_bytes(spec: WorkloadSpec) -> bytes:
    """The op stream of ``spec`` (see :mod:`workloads.opstream`)."""
    setup, txns = generate(spec)
    return opstream.encode(spec.ntables, setup, txns)


def write_opstream(spec: WorkloadSpec, path: Path | str) -> Path:
    """Write the op stream of ``spec`` to ``path`` atomically; returns it."""
    write_bytes_atomic(path, opstream_bytes(spec))
    return Path(path)
