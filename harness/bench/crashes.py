"""Recovery and repeated crashes, measured:

* DHL recovery on a 64 MiB block device: the whole-store scan (today's
  engine) against the old scan bounded by the page count (the
  ``dhl-bounded-scan`` mutant), median of 5 opens each, in one run;
* the checkers' in-memory recovery against the engine's on a loop device,
  over a sample of crash states of a recorded ``dhl-cc-raw`` run: how many
  are byte-identical, and the time per state of each;
* the cost of a multicrash state against a single-crash (reorder) state on
  the same runs (raw DHL and ext4+SQLite): continuations recorded and
  checked, per state.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness.check.check import CheckOptions, check_run, options_for
from harness.check.multicrash import Composite
from harness.env import DHL_LIB, temporary_folder
from harness.logformat import LogReader
from harness.materialize import sparse_copy, write_state_image
from harness.record.fuse import FuseBackend
from harness.states import Enumeration, Options
from harness.sweep.matrix import DHL_INSERT, MULTI, Cell
from harness.sweep.sweep import record_cell
from harness.sysops import loop_attach, loop_detach

NAME = "crashes"
SAMPLE = 200  # crash states compared between the checkers' and the device's recovery

_OPEN_TIMES = """
import sys, time, statistics
from dhl import Database
dev = sys.argv[1]
ts = []
for _ in range(5):
    t = time.perf_counter(); Database(dev, "cc").close(); ts.append(time.perf_counter() - t)
print(statistics.median(ts))
"""


def _recovery_scan(work: Path) -> None:
    from harness.mutants import build, catalogue

    img = work / "dev64.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    dev = loop_attach(img, direct_io=False)
    try:
        from dhl import Database

        with Database(dev, "cc", create=True, truncate=True) as db:
            for k in range(200):
                db.begin()
                db.insert(0, k, b"v" * 100)
                db.commit()
        old = build(next(m for m in catalogue() if m.name == "dhl-bounded-scan"))
        times = {}
        for label, lib in (("whole store", None), ("page count", old / "dhl/build/libdhl.so")):
            env = {**os.environ} | ({DHL_LIB: str(lib)} if lib else {})
            p = subprocess.run(
                [sys.executable, "-c", _OPEN_TIMES, dev],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            times[label] = float(p.stdout)
        print(
            f"  DHL recovery at open on a 64 MiB device (16,384 pages, a 200-transaction "
            f"database): whole-store scan {times['whole store'] * 1000:.1f} ms, old scan "
            f"bounded by the page count {times['page count'] * 1000:.2f} ms "
            f"({times['whole store'] / times['page count']:.0f}x)"
        )
    finally:
        loop_detach(dev)


def _equivalence(work: Path) -> None:
    from dhl.binding import recovered_in_memory, recovered_on_device

    run = record_cell(Cell("dhl-cc-raw", DHL_INSERT, "raw"), work / "raw", "fuse", False)
    image = run.meta().image
    assert image is not None
    base = Path(image.path)
    img = work / "dev.img"
    sparse_copy(base, img)
    dev = loop_attach(img, direct_io=False)
    same = n = 0
    t_mem = t_dev = 0.0
    try:
        with LogReader(run.log) as reader:
            states = list(Enumeration(reader, Options(strategy="reorder")))
            step = max(1, len(states) // SAMPLE)
            for state in states[::step][:SAMPLE]:
                crash = work / "crash.img"
                sparse_copy(base, crash)
                fd = os.open(crash, os.O_RDWR)
                write_state_image(fd, reader, state)
                os.close(fd)
                data = crash.read_bytes()
                t0 = time.perf_counter()
                mine = recovered_in_memory(data, "cc", blockdev=True)
                t1 = time.perf_counter()
                theirs = recovered_on_device(dev, data, "cc")
                t2 = time.perf_counter()
                t_mem, t_dev = t_mem + t1 - t0, t_dev + t2 - t1
                same += mine == theirs
                n += 1
    finally:
        loop_detach(dev)
    print(
        f"  checker recovery vs loop-device recovery, {n} sampled reorder states of "
        f"dhl-cc-raw: {same} byte-identical; {t_mem / n * 1000:.2f} ms vs "
        f"{t_dev / n * 1000:.2f} ms per state"
    )


def _multicrash_cost(work: Path) -> None:
    for sut, wl, fs in (("dhl-cc-raw", DHL_INSERT, "raw"), ("sqlite-wal-full", MULTI, "ext4")):
        run = record_cell(Cell(sut, wl, fs), work / f"mc-{sut}", "fuse", False)
        base = CheckOptions(states=Options(), jobs=2, composite=Composite(backend="fuse"))
        rates = {}
        for strategy in ("reorder", "multicrash", "recovery-crash"):
            t0 = time.perf_counter()
            r = check_run(run, options_for(strategy, base), work / f"out-{sut}-{strategy}")
            rates[strategy] = (r["states"]["checked"], time.perf_counter() - t0)
        one = rates["reorder"][1] / rates["reorder"][0]
        parts = [
            f"{s} {n} states {t:.1f} s ({t / n / one:.1f}x per state)"
            for s, (n, t) in rates.items()
            if n
        ]
        print(f"  {sut}: " + "; ".join(parts))


def run() -> None:
    ok, why = FuseBackend.available()
    if not ok:
        print(f"skipped: the fuse backend is unavailable ({why})")
        return
    with temporary_folder("crashlab-bench-crashes-") as work:
        _recovery_scan(work)
        _equivalence(work)
        _multicrash_cost(work)
    print(
        "  (cost per state relative to a reorder state of the same run; a multicrash "
        "state includes recording its continuation)"
    )
