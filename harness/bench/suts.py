"""Every SUT through crashlab-runner, plain and recorded, in one run.

Every named SQLite and DHL SUT, and WAL_OPT (``sqlite:...,walopt=100``)
beside plain WAL with its checkpoint interval, runs the same
insert/update/delete op streams (TXNS transactions of one 100-byte operation
each):

- plain: on one ext4 loop device over a tmpfs copy of the ext4 base image
  (raw SUTs: each run on a fresh bare loop device over a zero-filled tmpfs
  file, no file system); txn/s is the best of REPEATS fresh runs;
- recorded: the same runs under the recorder (harness.record, backend auto),
  one recording per SUT (raw SUTs: one per SUT x kind, since the runner
  formats a blank device).  That one recording gives both the recorded
  txn/s (a single run) and the device figures: every write and flush the
  block device saw between txn-begin:1 and the last txn-ack, ext4's
  journal included.  (SUTs that do not sync leave data in the page cache,
  which reaches the device after the window: their device figures are low.)

txn/s, syncs/txn and KiB/txn handed to the OS come from the runner's own
--stats (counting VFS / DHL counters; measured transactions only, not open,
warm-up or close).  "rec/plain" is recorded txn/s over best plain txn/s:
the share of plain speed kept under recording.  Ratios measured in the same
run are what transfers to other machines.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.env import temporary_folder
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.record.backends import select_backend
from harness.record.recorder import RecordRequest, record
from harness.sysops import loop_attach, loop_detach, loop_mounted, signals_deferred
from workloads.generate import write_opstream
from workloads.run import runner_command, runner_path
from workloads.spec import parse_spec
from workloads.suts import SUTS, Sut, get_sut

NAME = "suts"
TXNS = 500
# Plain runs per SUT x kind, interleaved; the best rate is shown: on this
# shared host other jobs' I/O stalls single runs by up to 10x (measured), and
# the fastest run is the one least disturbed.
REPEATS = 3
KINDS = {
    "insert": f"insert:txns={TXNS}",
    "update": f"update:txns={TXNS},order=rand",
    "delete": f"delete:txns={TXNS},order=rand",
}


# WAL_OPT (DHL thesis §IV): the WAL pre-allocated to 100 frames and
# checkpointed every 100 pages, so that a commit never grows the WAL file;
# beside it plain WAL with the same checkpoint interval.
WAL_OPT = "sqlite:journal=wal,sync=full,walopt=100"
WAL_100 = "sqlite:journal=wal,sync=full,autockpt=100"


def _suts() -> list[Sut]:
    """DHL SUTs first (file, then raw), then every named SQLite SUT, then
    WAL_OPT and its baseline."""
    # (not xLog: its NVRAM belongs to one database and needs the recorder's
    # NVRAM; harness/bench/xlog.py measures it; nor a SUT with its own mount
    # options, selective journaling: harness/bench/selective.py; nor MAW, bound
    # to F2FS: harness/bench/maw.py)
    named = sorted(
        (s for s in SUTS.values() if not s.nvram and not s.mount_options and not s.needs_fs),
        key=lambda s: (s.engine, s.raw),
    )
    return named + [get_sut(WAL_100), get_sut(WAL_OPT)]


def _file_name(sut: Sut) -> str:
    """The SUT's name as part of a file name (a grammar name has ':' ',' '=')."""
    return sut.name.replace(":", "-").replace(",", "-").replace("=", "")


def _stats_path(work: Path, sut: Sut, kind: str, rep: int | str) -> Path:
    """Where the runner's --stats go: ``rep`` is a plain run's number or
    "rec" for the recorded run."""
    return work / f"stats-{_file_name(sut)}-{kind}-{rep}.json"


@contextmanager
def _bare_loop(image: Path) -> Iterator[str]:
    """Attach ``image`` to a loop device (buffered) and yield its name;
    detach exactly that device on success, error and SIGINT/SIGTERM."""
    with signals_deferred():
        dev = loop_attach(image, direct_io=False)
    try:
        yield dev
    finally:
        with signals_deferred():
            loop_detach(dev)


def _plain(work: Path) -> None:
    """REPEATS runs of every SUT x kind, unrecorded: file SUTs on one loop
    ext4, raw SUTs each on a fresh bare loop device."""
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
                        db = mnt / f"{_file_name(sut)}-{kind}-{rep}.db"
                        cmd = runner_command(
                            sut, work / f"{kind}.ops", db, stats=_stats_path(work, sut, kind, rep)
                        )
                        subprocess.run(cmd, check=True, capture_output=True, text=True)
    finally:
        mnt.rmdir()
        image.unlink()
    dev_img = work / "raw.img"
    for rep in range(REPEATS):
        for sut in _suts():
            if not sut.raw:
                continue
            for kind in KINDS:
                shutil.copyfile(raw_base, dev_img)
                try:
                    with _bare_loop(dev_img) as dev:
                        cmd = runner_command(
                            sut, work / f"{kind}.ops", dev, stats=_stats_path(work, sut, kind, rep)
                        )
                        subprocess.run(cmd, check=True, capture_output=True, text=True)
                finally:
                    dev_img.unlink()


@dataclass
class Window:
    """What the block device saw in one runner run's measured transactions
    (txn-begin:1 .. txn-ack:TXNS), in bytes and counts."""

    disk: int = 0  # bytes written to the disk
    nvram: int = 0  # bytes written to the NVRAM (past the disk), if any
    flushes: int = 0
    fua: int = 0  # FUA writes to the disk


def device_windows(log: Path, nvram_at: int | None = None) -> list[Window]:
    """One :class:`Window` per runner run in ``log``, in order; ``nvram_at``:
    the NVRAM's first byte (writes from there on are the NVRAM's), None
    without one."""
    out: list[Window] = []
    w: Window | None = None
    with LogReader(log) as r:
        for e in r.entries():
            if e.is_mark:
                if e.label == "txn-begin:1":
                    w = Window()
                elif e.label == f"txn-ack:{TXNS}" and w is not None:
                    out.append(w)
                    w = None
                continue
            if w is None:
                continue
            w.flushes += e.is_flush
            if e.is_write:
                n = e.nr_sectors * r.sectorsize
                if nvram_at is not None and e.sector * r.sectorsize >= nvram_at:
                    w.nvram += n
                else:
                    w.disk += n
                    w.fua += e.is_fua
    return out


def _device_figures(log: Path) -> list[tuple[float, float]]:
    """(device KiB, flushes) per measured transaction of each runner run in
    ``log``, in order."""
    return [(w.disk / 1024 / TXNS, w.flushes / TXNS) for w in device_windows(log)]


def record_device_figures(
    cmd: list[str], out: Path, fs: str, *, mount_options: str = ""
) -> list[tuple[float, float]]:
    """Record ``cmd`` on a fresh ``fs`` (mounted with ``mount_options``)
    into ``out``; return its device figures (one per runner run) and delete
    the recording."""
    try:
        run = record(RecordRequest(cmd, out, fs=fs, backend="auto", mount_options=mount_options))
        if run.meta().exit_status != 0:
            raise RuntimeError(f"the recorded runner failed ({shlex.join(cmd)[:200]})")
        return _device_figures(run.log)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def write_streams(work: Path, streams: dict[str, str] = KINDS) -> dict[str, Path]:
    """The op stream of every kind of ``streams`` (kind -> workload spec),
    written to ``work``/KIND.ops."""
    return {
        kind: write_opstream(parse_spec(text), work / f"{kind}.ops")
        for kind, text in streams.items()
    }


def record_streams(
    sut: Sut, work: Path, kinds: Iterable[str] = KINDS, mount_options: str = ""
) -> list[tuple[str, float, float, dict]]:
    """Run the op streams ``kinds`` of ``work`` (write_streams) with ``sut``
    one after the other, in one recording on ext4 mounted with
    ``mount_options``; per kind: (kind, device KiB per transaction, device
    flushes per transaction, the runner's --stats report)."""
    kinds = list(kinds)
    stats = {kind: work / f"stats-{kind}.json" for kind in kinds}
    script = " && ".join(
        shlex.join(runner_command(sut, work / f"{kind}.ops", f"{kind}.db", stats=stats[kind]))
        for kind in kinds
    )
    figs = record_device_figures(
        ["sh", "-c", script], work / "run", "ext4", mount_options=mount_options
    )
    return [
        (kind, kib, flushes, json.loads(stats[kind].read_text()))
        for kind, (kib, flushes) in zip(kinds, figs, strict=True)
    ]


def device_table(
    names: tuple[str, ...], work: Path, note: str = ""
) -> dict[tuple[str, str], float]:
    """Record the op streams of ``work`` (write_streams) for each SUT of
    ``names`` (record_streams), and print per SUT x kind the device KiB and
    flushes per transaction and the runner's syncs and KiB handed to the OS
    (``note``: said after the table's first line).  Returns the device KiB
    per transaction of each (SUT, kind)."""
    width = max(len(n) for n in names)
    print(f"{TXNS} one-operation transactions per kind, one recording per SUT on ext4{note}")
    print(
        f"{'SUT':{width}s} {'kind':6s} {'dev KiB/txn':>11s} {'dev flush/txn':>13s} "
        f"{'syncs/txn':>9s} {'KiB/txn':>7s}"
    )
    dev: dict[tuple[str, str], float] = {}
    for name in names:
        for kind, kib, flushes, report in record_streams(get_sut(name), work):
            w = report["workload"]
            dev[(name, kind)] = kib
            print(
                f"{name:{width}s} {kind:6s} {kib:11.1f} {flushes:13.2f} "
                f"{w['fsyncs'] / TXNS:9.2f} {w['bytes_written'] / TXNS / 1024:7.1f}"
            )
    return dev


def _recorded(work: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """Every SUT x kind recorded once, writing its --stats under "rec";
    returns device (KiB, flushes) per txn for each."""
    figures: dict[tuple[str, str], tuple[float, float]] = {}
    for sut in _suts():
        if sut.raw:
            for kind in KINDS:
                cmd = runner_command(
                    sut,
                    work / f"{kind}.ops",
                    None,
                    db_env="CRASHLAB_DEV",
                    stats=_stats_path(work, sut, kind, "rec"),
                )
                figs = record_device_figures(cmd, work / f"run-{_file_name(sut)}-{kind}", "raw")
                figures[(sut.name, kind)] = figs[0]
            continue
        # Databases in the cwd the recorder gives: the recorded mount point.
        script = " && ".join(
            shlex.join(
                runner_command(
                    sut,
                    work / f"{kind}.ops",
                    f"{_file_name(sut)}-{kind}.db",
                    stats=_stats_path(work, sut, kind, "rec"),
                )
            )
            for kind in KINDS
        )
        figs = record_device_figures(["sh", "-c", script], work / f"run-{_file_name(sut)}", "ext4")
        for kind, fig in zip(KINDS, figs, strict=True):
            figures[(sut.name, kind)] = fig
    return figures


def _rate(stats: dict) -> float:
    return stats["transactions"] / max(stats["elapsed_us"], 1) * 1e6


def _figures(work: Path, sut: Sut, kind: str) -> tuple[float, float, float]:
    """(best plain transactions/s, syncs/txn, KiB handed to the OS/txn) from
    the --stats of the REPEATS plain runs (the counts are the same in every
    run)."""
    runs = [json.loads(_stats_path(work, sut, kind, r).read_text()) for r in range(REPEATS)]
    n, w = runs[0]["transactions"], runs[0]["workload"]
    return max(_rate(s) for s in runs), w["fsyncs"] / n, w["bytes_written"] / n / 1024


def run() -> None:
    runner_path()  # fails early with "run make build"
    with temporary_folder("crashlab-bench-suts-") as work:
        write_streams(work)
        _plain(work)
        try:
            dev = _recorded(work)
            note = select_backend("auto")[1]
        except Exception as e:  # the plain figures still stand
            dev, note = {}, f"unavailable ({e})"
        print(
            f"{TXNS} transactions of one 100-byte operation each; plain = best of {REPEATS} "
            f"runs, ext4 on a loop device over tmpfs (raw: bare loop device); rec = one "
            f"recorded run, also the source of the dev columns; recorder: {note}"
        )
        width = max(len(s.name) for s in _suts())
        print(
            f"{'SUT':{width}s} {'kind':6s} {'plain tx/s':>10s} {'rec tx/s':>8s} "
            f"{'rec/plain':>9s} {'syncs/txn':>9s} {'KiB/txn':>7s} {'dev KiB/txn':>11s} "
            f"{'dev flush/txn':>13s}"
        )
        rates: dict[tuple[str, str], float] = {}
        for sut in _suts():
            for kind in KINDS:
                tps, syncs, kib = _figures(work, sut, kind)
                rates[(sut.name, kind)] = tps
                rec_path = _stats_path(work, sut, kind, "rec")
                d = dev.get((sut.name, kind))
                if d and rec_path.exists():
                    rtps = _rate(json.loads(rec_path.read_text()))
                    rtxt = f"{rtps:8.0f} {rtps / tps:9.2f}"
                    dtxt = f"{d[0]:11.1f} {d[1]:13.2f}"
                else:
                    rtxt, dtxt = f"{'-':>8s} {'-':>9s}", f"{'-':>11s} {'-':>13s}"
                print(
                    f"{sut.name:{width}s} {kind:6s} {tps:10.0f} {rtxt} {syncs:9.2f} {kib:7.1f} "
                    f"{dtxt}"
                )
        for kind in KINDS:
            cc = rates[("dhl-cc", kind)]
            print(
                f"{kind}: dhl-cc / sqlite-wal-full {cc / rates[('sqlite-wal-full', kind)]:.2f}x, "
                f"/ sqlite-delete-full {cc / rates[('sqlite-delete-full', kind)]:.2f}x, "
                f"dhl-cc-opt / dhl-nolog "
                f"{rates[('dhl-cc-opt', kind)] / rates[('dhl-nolog', kind)]:.2f}x, "
                f"dhl-cc-raw / dhl-cc {rates[('dhl-cc-raw', kind)] / cc:.2f}x"
            )
            opt, plain = dev.get((WAL_OPT, kind)), dev.get(("sqlite-wal-full", kind))
            if opt and plain:
                print(
                    f"{kind}: WAL_OPT device KiB/txn {opt[0]:.1f} against sqlite-wal-full "
                    f"{plain[0]:.1f} ({plain[0] / max(opt[0], 1e-9):.1f}x less)"
                )
