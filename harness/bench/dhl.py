"""DHL engine path, through the Python binding: autocommit inserts,
updates and deletes (one 100-byte record per transaction, 3 trees) per
second in every DHL mode on a file in /dev/shm (tmpfs: the sync is nearly
free, so this is the engine's CPU path plus its page writes), syncs and KiB
per txn as the engine counted them.

DHL against SQLite through crashlab-runner on the same device is
``harness/bench/suts.py`` (``crashlab bench --only suts``).  Ratios between
modes in the same run are what transfers to other machines.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from dhl import Database
from harness.env import temporary_folder, tmp_parent

NAME = "dhl"
N = 1000
MODES = ("tc", "cc", "tc_opt", "cc_opt", "nolog")


def _phase(db: Database, op: str, keys: list[int], value: bytes) -> tuple[float, float, float]:
    db.reset_counters()
    t0 = time.perf_counter()
    for k in keys:
        t = k % 3
        if op == "insert":
            db.insert(t, k, value)
        elif op == "update":
            db.update(t, k, value)
        else:
            db.delete(t, k)
    dt = time.perf_counter() - t0
    c = db.counters()
    n = len(keys)
    return n / dt, c.syncs / n, c.bytes_written / n


def _engine() -> None:
    rng = random.Random(1)
    keys = list(range(N))
    upd = rng.sample(keys, N)
    print(
        f"DHL engine on a file in {tmp_parent()} (4 KiB pages, {N} autocommit txns per op, "
        "1 record of 100 B each, 3 trees)"
    )
    print(f"{'mode':8} {'op':7} {'txn/s':>9} {'syncs/txn':>10} {'KiB/txn':>8}")
    with temporary_folder("crashlab-dhl-bench-") as d:
        results = {}
        for mode in MODES:
            with Database(Path(d) / f"{mode}.dhl", mode, create=True, ntrees=3) as db:
                for op, ks in (("insert", keys), ("update", upd), ("delete", upd)):
                    rate, syncs, bytes_ = _phase(db, op, ks, b"v" * 100)
                    results[(mode, op)] = rate
                    print(f"{mode:8} {op:7} {rate:9.0f} {syncs:10.2f} {bytes_ / 1024:8.1f}")
        for op in ("insert", "update", "delete"):
            ratio = results[("cc", op)] / results[("tc", op)]
            print(
                f"{op}: CC / TC throughput {ratio:.2f}x, "
                f"CC_OPT / NOLOG {results[('cc_opt', op)] / results[('nolog', op)]:.2f}x"
            )


def run() -> None:
    _engine()
