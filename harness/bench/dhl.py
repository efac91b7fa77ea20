"""DHL against SQLite, in one run.

1. Engine path: autocommit inserts, updates and deletes (one 100-byte record
   per transaction, 3 trees) per second in every DHL mode through the Python
   binding on a file in /dev/shm (tmpfs: the sync is nearly free, so this is
   the engine's CPU path plus its page writes), syncs and KiB per txn as the
   engine counted them.
2. Same device, through the runner: every DHL mode and every SQLite SUT runs
   the same insert/update/delete op streams with crashlab-runner on one ext4
   loop device over a tmpfs file (DHL raw SUTs on a bare loop device over a
   tmpfs file, no file system).  txn/s (best of REPEATS fresh runs),
   syncs/txn and KiB/txn the engine handed to the OS come from the runner's
   --stats (measured transactions only); device KiB and flushes per txn
   come from a recording of the same runs (harness.record, backend auto):
   every write and flush the block device saw between txn-begin:1 and the
   last txn-ack, ext4's journal included.  (SUTs that do not sync leave
   data in the page cache, which reaches the device after the window: their
   device figures are low.)

Ratios between modes in the same run are what transfers to other machines.
"""

from __future__ import annotations

import json
import random
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from dhl import Database
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.record.recorder import record, tmp_parent
from harness.sysops import loop_attach, loop_detach, loop_mounted
from workloads.generate import write_opstream
from workloads.run import runner_command, runner_path
from workloads.spec import parse_spec
from workloads.suts import SUTS, Sut

NAME = "dhl"
N = 1000
MODES = ("tc", "cc", "tc_opt", "cc_opt", "nolog")
TXNS = 500
# Runner runs per SUT x kind, interleaved; the best rate is shown: on this
# shared host other jobs' I/O stalls single runs by up to 10x (measured), and
# the fastest run is the one least disturbed.
REPEATS = 3
KINDS = {
    "insert": f"insert:txns={TXNS}",
    "update": f"update:txns={TXNS},order=rand",
    "delete": f"delete:txns={TXNS},order=rand",
}


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
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    rng = random.Random(1)
    keys = list(range(N))
    upd = rng.sample(keys, N)
    print(f"1. DHL engine on a file in {base} (4 KiB pages, {N} autocommit txns per op, "
          "1 record of 100 B each, 3 trees)")
    print(f"{'mode':8} {'op':7} {'txn/s':>9} {'syncs/txn':>10} {'KiB/txn':>8}")
    with tempfile.TemporaryDirectory(dir=base, prefix="dhl-bench-") as d:
        results = {}
        for mode in MODES:
            with Database(Path(d) / f"{mode}.dhl", mode, create=True, ntrees=3) as db:
                for op, ks in (("insert", keys), ("update", upd), ("delete", upd)):
                    rate, syncs, bytes_ = _phase(db, op, ks, b"v" * 100)
                    results[(mode, op)] = rate
                    print(f"{mode:8} {op:7} {rate:9.0f} {syncs:10.2f} {bytes_ / 1024:8.1f}")
        for op in ("insert", "update", "delete"):
            ratio = results[("cc", op)] / results[("tc", op)]
            print(f"{op}: CC / TC throughput {ratio:.2f}x, "
                  f"CC_OPT / NOLOG {results[('cc_opt', op)] / results[('nolog', op)]:.2f}x")


def _suts() -> list[Sut]:
    """DHL SUTs first (file, then raw), then every SQLite SUT."""
    dhl = [s for s in SUTS.values() if s.engine == "dhl"]
    return sorted(dhl, key=lambda s: s.raw) + [s for s in SUTS.values() if s.engine != "dhl"]


def _stats_path(work: Path, sut: Sut, kind: str, rep: int) -> Path:
    return work / f"plain-{sut.name}-{kind}-{rep}.json"


def _plain(work: Path) -> None:
    """Every SUT x kind through the runner: file SUTs on one loop ext4 over
    a tmpfs copy of the ext4 base image, raw SUTs each on a fresh bare loop
    device over a zero-filled tmpfs file."""
    base, _ = ensure_image("ext4")
    raw_base, _ = ensure_image("raw")
    image = work / "plain.img"
    shutil.copyfile(base, image)
    mnt = work / "plain-mnt"
    mnt.mkdir()
    try:
        with loop_mounted(image, mnt, "ext4"):
            for rep in range(REPEATS):
                for sut in _suts():
                    if sut.raw:
                        continue
                    for kind in KINDS:
                        db = mnt / f"{sut.name}-{kind}-{rep}.db"
                        cmd = runner_command(sut, work / f"{kind}.ops", db,
                                             stats=_stats_path(work, sut, kind, rep))
                        subprocess.run(cmd, check=True, capture_output=True, text=True)
    finally:
        mnt.rmdir()
        image.unlink()
    for rep in range(REPEATS):
        for sut in _suts():
            if not sut.raw:
                continue
            for kind in KINDS:
                dev_img = work / "raw.img"
                shutil.copyfile(raw_base, dev_img)
                dev = loop_attach(dev_img, direct_io=False)
                try:
                    cmd = runner_command(sut, work / f"{kind}.ops", dev,
                                         stats=_stats_path(work, sut, kind, rep))
                    subprocess.run(cmd, check=True, capture_output=True, text=True)
                finally:
                    loop_detach(dev)
                    dev_img.unlink()


def _device_figures(log: Path) -> list[tuple[float, float]]:
    """(device KiB, flushes) per measured transaction of each runner run in
    ``log``, in order: the window of one run is txn-begin:1 .. txn-ack:TXNS."""
    out = []
    counting = False
    nbytes = flushes = 0
    with LogReader(log) as r:
        for e in r.entries():
            if e.is_mark:
                if e.label == "txn-begin:1":
                    counting, nbytes, flushes = True, 0, 0
                elif e.label == f"txn-ack:{TXNS}" and counting:
                    counting = False
                    out.append((nbytes / 1024 / TXNS, flushes / TXNS))
                continue
            if counting:
                flushes += e.is_flush
                if e.is_write:
                    nbytes += e.nr_sectors * r.sectorsize
    return out


def _recorded(work: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """Device (KiB, flushes) per txn for every SUT x kind, recorded."""
    figures: dict[tuple[str, str], tuple[float, float]] = {}
    for sut in _suts():
        if sut.raw:  # a fresh device per kind: the runner formats a blank one
            for kind in KINDS:
                cmd = runner_command(sut, work / f"{kind}.ops", None, db_env="CRASHLAB_DEV")
                out = work / f"run-{sut.name}-{kind}"
                run = record(cmd, out, fs="raw", backend="auto")
                if run.meta()["exit_status"] != 0:
                    raise RuntimeError(f"{sut.name}: the recorded runner failed")
                figures[(sut.name, kind)] = _device_figures(run.log)[0]
                shutil.rmtree(out)
            continue
        script = " && ".join(
            shlex.join(runner_command(sut, work / f"{kind}.ops", f"{sut.name}-{kind}.db"))
            for kind in KINDS)
        out = work / f"run-{sut.name}"
        run = record(["sh", "-c", script], out, fs="ext4", backend="auto")
        if run.meta()["exit_status"] != 0:
            raise RuntimeError(f"{sut.name}: the recorded runner failed")
        for kind, fig in zip(KINDS, _device_figures(run.log), strict=True):
            figures[(sut.name, kind)] = fig
        shutil.rmtree(out)
    return figures


def _figures(work: Path, sut: Sut, kind: str) -> tuple[float, float, float]:
    """(best transactions/s, syncs/txn, KiB handed to the OS/txn) from the
    --stats of the REPEATS runs (the counts are the same in every run)."""
    runs = [json.loads(_stats_path(work, sut, kind, r).read_text()) for r in range(REPEATS)]
    rates = sorted(s["transactions"] / max(s["elapsed_us"], 1) * 1e6 for s in runs)
    n, w = runs[0]["transactions"], runs[0]["workload"]
    return rates[-1], w["fsyncs"] / n, w["bytes_written"] / n / 1024


def _same_device() -> None:
    runner_path()  # fails early with "run make build"
    with tempfile.TemporaryDirectory(prefix="crashlab-bench-dhl-", dir=tmp_parent()) as tmp:
        work = Path(tmp)
        for kind, text in KINDS.items():
            write_opstream(parse_spec(text), work / f"{kind}.ops")
        _plain(work)
        try:
            dev = _recorded(work)
            note = "recorded"
        except Exception as e:  # the runner figures still stand
            dev, note = {}, f"device figures unavailable ({e})"
        print(f"\n2. Same device, through crashlab-runner: {TXNS} transactions of one 100-byte "
              f"operation each, best of {REPEATS} runs; ext4 on a loop device over tmpfs "
              f"(raw: bare loop device); device columns {note}")
        print(f"{'SUT':22s} {'kind':6s} {'txn/s':>8s} {'syncs/txn':>9s} {'KiB/txn':>7s} "
              f"{'dev KiB/txn':>11s} {'dev flush/txn':>13s}")
        rates: dict[tuple[str, str], float] = {}
        for sut in _suts():
            for kind in KINDS:
                tps, syncs, kib = _figures(work, sut, kind)
                rates[(sut.name, kind)] = tps
                d = dev.get((sut.name, kind))
                dtxt = f"{d[0]:11.1f} {d[1]:13.2f}" if d else f"{'-':>11s} {'-':>13s}"
                print(f"{sut.name:22s} {kind:6s} {tps:8.0f} {syncs:9.2f} {kib:7.1f} {dtxt}")
        for kind in KINDS:
            cc = rates[("dhl-cc", kind)]
            print(f"{kind}: dhl-cc / sqlite-wal-full {cc / rates[('sqlite-wal-full', kind)]:.2f}x, "
                  f"/ sqlite-delete-full {cc / rates[('sqlite-delete-full', kind)]:.2f}x, "
                  f"dhl-cc-opt / dhl-nolog "
                  f"{rates[('dhl-cc-opt', kind)] / rates[('dhl-nolog', kind)]:.2f}x, "
                  f"dhl-cc-raw / dhl-cc {rates[('dhl-cc-raw', kind)] / cc:.2f}x")


def run() -> None:
    _engine()
    _same_device()
