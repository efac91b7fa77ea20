"""Workload runner speed: transactions per second and fsyncs per
transaction for every SUT on insert/update/delete, on ext4 over a plain loop
device backed by a tmpfs file and, in the same run, on ext4 recorded by the
recorder (``harness.record.recorder.record``, backend auto).  Counts come
from the runner's own --stats (the counting VFS); times cover the measured
transactions only (not open, warm-up or close)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.images import ensure_image
from harness.record.backends import select_backend
from harness.record.recorder import record, tmp_parent
from harness.sysops import loop_mounted
from workloads.generate import write_opstream
from workloads.run import runner_command, runner_path
from workloads.spec import parse_spec
from workloads.suts import SUTS, Sut

NAME = "workloads"
TXNS = 500
KINDS = {
    "insert": f"insert:txns={TXNS}",
    "update": f"update:txns={TXNS},order=rand",
    "delete": f"delete:txns={TXNS},order=rand",
}


def _commands(sut: Sut, work: Path, where: str, mnt: Path | None) -> list[list[str]]:
    """One runner command per kind; databases in ``mnt`` (or the cwd the
    recorder gives: the mount point), op streams and stats in ``work``."""
    cmds = []
    for kind in KINDS:
        db = f"{sut.name}-{kind}.db"
        cmds.append(runner_command(sut, work / f"{kind}.ops", (mnt / db) if mnt else db,
                                   stats=work / f"{where}-{sut.name}-{kind}.json"))
    return cmds


def _plain(base: Path, work: Path) -> None:
    """Every SUT x kind on one plain loop ext4 over a tmpfs copy of ``base``."""
    image = work / "plain.img"
    shutil.copyfile(base, image)
    mnt = work / "plain-mnt"
    mnt.mkdir()
    try:
        with loop_mounted(image, mnt, "ext4"):
            for sut in SUTS.values():
                for cmd in _commands(sut, work, "plain", mnt):
                    subprocess.run(cmd, check=True, capture_output=True, text=True)
    finally:
        mnt.rmdir()
        image.unlink()


def _recorded(work: Path) -> str:
    """Every SUT x kind recorded, one recording per SUT; returns the
    backend note."""
    _, note = select_backend("auto")
    for sut in SUTS.values():
        script = " && ".join(shlex.join(cmd) for cmd in _commands(sut, work, "rec", None))
        out = work / f"run-{sut.name}"
        run = record(["sh", "-c", script], out, fs="ext4", backend="auto")
        if run.meta()["exit_status"] != 0:
            raise RuntimeError(f"{sut.name}: the recorded runner failed")
        shutil.rmtree(out)
    return note


def _figures(path: Path) -> tuple[float, float, float]:
    """(transactions/s, fsyncs/txn, KiB written/txn) from a --stats file."""
    s = json.loads(path.read_text())
    n, w = s["transactions"], s["workload"]
    return n / max(s["elapsed_us"], 1) * 1e6, w["fsyncs"] / n, w["bytes_written"] / n / 1024


def run() -> None:
    runner_path()  # fails early with "run make build"
    base, _ = ensure_image("ext4")
    with tempfile.TemporaryDirectory(prefix="crashlab-bench-wl-", dir=tmp_parent()) as tmp:
        work = Path(tmp)
        for kind, text in KINDS.items():
            write_opstream(parse_spec(text), work / f"{kind}.ops")
        _plain(base, work)
        try:
            note = _recorded(work)
        except Exception as e:  # the plain figures still stand
            note = f"unavailable ({e})"
        print(f"{TXNS} transactions of one 100-byte operation each; plain = loop ext4 over "
              f"tmpfs; rec = recorder, {note}")
        print(f"{'SUT':22s} {'kind':6s} {'plain tx/s':>10s} {'rec tx/s':>9s} {'slowdown':>8s} "
              f"{'fsync/txn':>9s} {'KiB/txn':>7s}")
        for sut in SUTS:
            for kind in KINDS:
                tps, fs, kib = _figures(work / f"plain-{sut}-{kind}.json")
                rec = work / f"rec-{sut}-{kind}.json"
                rtps = _figures(rec)[0] if rec.exists() else None
                rtxt = f"{rtps:9.0f} {tps / rtps:7.2f}x" if rtps else f"{'-':>9s} {'-':>8s}"
                print(f"{sut:22s} {kind:6s} {tps:10.0f} {rtxt} {fs:9.2f} {kib:7.1f}")
