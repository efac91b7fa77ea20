"""Crash-state enumeration speed and memory (``crashlab bench --only states``).

On a synthetic log of 8-write epochs (4 KiB page writes, txn marks), the
``reorder`` strategy gives 2^8 = 256 states per epoch.  Printed: states/s
enumerated (with each state's ID made, with and without dedup), the
rate of the checks' materialiser on a tmpfs image, and the tracemalloc peak at 10^4 and
10^5 states: flat memory means the peak does not grow with the count.
"""

from __future__ import annotations

import time
import tracemalloc
from itertools import islice
from pathlib import Path

from harness.env import temporary_folder
from harness.logformat import LogReader
from harness.materialize import DurableImage
from harness.states import Enumeration, Options
from harness.states.synth import write_epochs_log

NAME = "states"
WRITES_PER_EPOCH = 8
PER_EPOCH = 2**WRITES_PER_EPOCH


def _log(dirpath: Path, states: int) -> Path:
    path = dirpath / f"bench-{states}.log"
    epochs = states // PER_EPOCH + 2
    write_epochs_log(path, [WRITES_PER_EPOCH] * epochs, pages=256)
    return path


def _enumerate(log: Path, count: int, dedup: bool) -> tuple[int, float, int]:
    """(states, seconds, folded) for the first ``count`` states."""
    with LogReader(log) as r:
        en = Enumeration(r, Options(strategy="reorder", dedup=dedup))
        t0 = time.perf_counter()
        n = sum(1 for s in islice(en, count) if s.id)
        dt = time.perf_counter() - t0
        return n, dt, en.stats.folded


def _peak(log: Path, count: int) -> int:
    """tracemalloc peak (bytes) while enumerating ``count`` states with dedup."""
    with LogReader(log) as r:
        tracemalloc.start()
        try:
            en = Enumeration(r, Options(strategy="reorder"))
            for s in islice(en, count):
                _ = s.id
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def _materialise_rate(log: Path, count: int) -> tuple[int, float]:
    """States/s of the checks' materialiser: the durable image advanced to
    each state's epoch and a scratch image with its overlay, on tmpfs."""
    with temporary_folder("crashlab-bench-states-") as d:
        base = Path(d) / "base.img"
        with open(base, "wb") as f:
            f.truncate(256 * 4096)
        image = DurableImage(base, log, Path(d))
        try:
            n = 0
            t0 = time.perf_counter()
            for s in Enumeration(image.reader, Options(strategy="reorder")):
                image.advance(s.durable_upto)
                image.scratch(s.extents(image.reader))
                n += 1
                if n >= count:
                    break
            return n, time.perf_counter() - t0
        finally:
            image.close()


def run() -> None:
    with temporary_folder("crashlab-bench-enum-") as d:
        small, big = 10_000, 100_000
        log = _log(Path(d), big + 20 * PER_EPOCH)  # room for folded states
        print(f"log: {log.stat().st_size / 1e6:.1f} MB, {WRITES_PER_EPOCH}-write epochs, reorder")
        for dedup in (False, True):
            n, dt, folded = _enumerate(log, big, dedup)
            tag = "dedup on " if dedup else "dedup off"
            print(
                f"enumerate {tag}: {n} states in {dt:.2f} s = {n / dt:,.0f} states/s"
                f" ({folded} folded)"
            )
        n, dt = _materialise_rate(log, 20_000)
        print(
            f"materialise (durable image + scratch overlay on tmpfs): {n} states in "
            f"{dt:.2f} s = {n / dt:,.0f} states/s"
        )
        # One huge epoch (a SUT that never syncs): per-state cost must not
        # grow with the epoch's size.
        huge = Path(d) / "huge.log"
        write_epochs_log(huge, [20_000], pages=256)
        for strategy in ("prefix", "torn"):
            with LogReader(huge) as r:
                en = Enumeration(r, Options(strategy=strategy))
                t0 = time.perf_counter()
                n = sum(1 for s in islice(en, 50_000) if s.id)
                dt = time.perf_counter() - t0
            print(f"one 20,000-write epoch, {strategy}: {n / dt:,.0f} states/s")
        p_small, p_big = _peak(log, small), _peak(log, big)
        print(
            f"tracemalloc peak: {small:,} states {p_small / 1e6:.2f} MB, "
            f"{big:,} states {p_big / 1e6:.2f} MB (ratio {p_big / p_small:.2f})"
        )
