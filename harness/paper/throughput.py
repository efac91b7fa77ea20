"""Operation throughput normalised to WAL as operations per transaction go
from 1 to 16 (DHL thesis Fig. 10), unrecorded.

Every system runs the same op streams through crashlab-runner on a file
system (ext4, or the one the SUT needs, with its ``mount_options``: one
image and mount per such pair), never recorded: ``loop`` (default) is a
copy of the base image in the system temp folder (on disk, not
``CRASHLAB_TMPDIR``'s tmpfs) behind a loop device with direct I/O, so a sync
reaches the real disk; ``tmpfs`` is the same image on a tmpfs behind a
buffered loop device (no device latency: CPU and kernel paths only).  The
file system is emptied after every run.  Streams: ``KIND:txns=T,ops=K,size=128`` (the thesis's
128-byte records; update and delete on random live rows), one fresh
database per run, deleted after it.

Repeats are interleaved (repeat, kind, ops, system) so that drift on this
shared host hits every system alike.  A point is the system's best run over
WAL's best run (the least disturbed runs: on this host another job's I/O
stalls single runs up to tenfold, as ``crashlab bench --only suts`` also
finds), and its spread the range of the per-repeat ratios (each repeat's run
over the same repeat's WAL run), which always contains the point.
Throughput = operations / the runner's workload time (first BEGIN to last
commit: ``--stats`` ``elapsed_us``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.env import temporary_folder
from harness.errors import CrashlabError
from harness.images import ensure_image
from harness.sysops import loop_mounted
from workloads.generate import write_opstream
from workloads.run import runner_command
from workloads.spec import parse_spec
from workloads.suts import Sut, get_sut

KINDS = ("insert", "update", "delete")
DEVICES = ("loop", "tmpfs")
RECORD_BYTES = 128  # DHL thesis §4.1: "one or two 128-byte records"


def stream(kind: str, txns: int, ops: int) -> str:
    """The workload spec of one throughput run."""
    order = "" if kind == "insert" else ",order=rand"
    return f"{kind}:txns={txns},ops={ops},size={RECORD_BYTES}{order}"


@dataclass(frozen=True)
class Point:
    """One system, kind and operations per transaction, over the repeats."""

    ops_per_s: tuple[float, ...]  # one per repeat
    ratio: tuple[float, ...]  # to the baseline's run of the same repeat

    best: float  # the best run over the baseline's best run

    @property
    def median(self) -> float:
        """The median of the per-repeat ratios."""
        return statistics.median(self.ratio)

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.ratio), max(self.ratio)


def normalise(rates: dict[str, list[float]], baseline: str) -> dict[str, Point]:
    """Per system, its best run over the baseline's best, and each repeat's
    throughput over the baseline's in the same repeat.  ``rates[system][r]``
    is repeat r's operations per second."""
    base = rates[baseline]
    if any(b <= 0 for b in base):
        raise CrashlabError(f"the baseline {baseline} measured no throughput")
    return {
        name: Point(
            tuple(rs), tuple(r / b for r, b in zip(rs, base, strict=True)), max(rs) / max(base)
        )
        for name, rs in rates.items()
    }


def _rate(stats: Path, ops: int) -> float:
    """Operations per second of a run, from the runner's --stats."""
    s = json.loads(stats.read_text())
    return s["transactions"] * ops / max(s["elapsed_us"], 1) * 1e6


def _image_parent(device: str) -> Path:
    """Where the file-system image of ``device`` lies."""
    if device == "tmpfs":
        return Path("/dev/shm")
    return Path(tempfile.gettempdir())


def _clear(mnt: Path) -> None:
    """Remove everything a run left in the file system (its database, logs,
    shadow files), so that every run starts on the same empty file system."""
    for f in mnt.iterdir():
        if f.name == "lost+found":
            continue
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f)
        else:
            f.unlink()


def _where(sut: Sut, fs: str) -> tuple[str, str]:
    """(file system, mount options) a SUT runs on: its ``mount_options``
    (absent on builds before that field) on ``fs``."""
    return fs, getattr(sut, "mount_options", "") or ""


def measure(
    systems: dict[str, str],
    *,
    baseline: str,
    txns: int,
    ops: tuple[int, ...],
    repeats: int,
    device: str,
    kinds: tuple[str, ...] = KINDS,
    fs: dict[str, str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[dict[str, dict[int, dict[str, Point]]], dict[str, str]]:
    """``systems``: key → SUT name (the baseline among them).  Returns
    kind → ops → system key → Point, and key → why for each system whose
    runner failed (it is dropped from every point; the baseline failing is
    an error).  ``fs``: key → the file system it runs on (default ext4);
    each (file system, mount options) gets its own image and mount."""
    if device not in DEVICES:
        raise CrashlabError(f"unknown device {device!r} (choose from {', '.join(DEVICES)})")
    suts = {key: get_sut(name) for key, name in systems.items()}
    where = {key: _where(sut, (fs or {}).get(key, "ext4")) for key, sut in suts.items()}
    rates: dict[tuple[str, int, str], list[float]] = {}
    failed: dict[str, str] = {}
    with (
        temporary_folder("crashlab-paper-", _image_parent(device)) as work,
        contextlib.ExitStack() as mounts,
    ):
        mnts: dict[tuple[str, str], Path] = {}
        for i, (fsname, options) in enumerate(sorted(set(where.values()))):
            image, mnt = work / f"fs{i}.img", work / f"mnt{i}"
            shutil.copyfile(ensure_image(fsname)[0], image)
            mnt.mkdir()
            mounts.enter_context(
                loop_mounted(
                    image, mnt, fsname, options=options or None, direct_io=device == "loop"
                )
            )
            mnts[(fsname, options)] = mnt
        streams = {}
        for kind in kinds:
            for k in ops:
                streams[(kind, k)] = write_opstream(
                    parse_spec(stream(kind, txns, k)), work / f"{kind}-{k}.ops"
                )
        for rep in range(repeats):
            progress(f"throughput: repeat {rep + 1} of {repeats}")
            for kind in kinds:
                for k in ops:
                    for key, sut in systems.items():
                        if key in failed:
                            continue
                        stats = work / "stats.json"
                        mnt = mnts[where[key]]
                        cmd = runner_command(
                            suts[key], streams[(kind, k)], mnt / "paper.db", stats=stats
                        )
                        p = subprocess.run(cmd, capture_output=True, text=True)
                        _clear(mnt)
                        if p.returncode != 0:
                            why = (
                                f"{kind} ops={k}: the runner exited {p.returncode}: "
                                f"{p.stderr.strip()[-300:]}"
                            )
                            if key == baseline:
                                raise CrashlabError(f"{key} ({sut}) {why}")
                            failed[key] = why
                            continue
                        rates.setdefault((kind, k, key), []).append(_rate(stats, k))
    out: dict[str, dict[int, dict[str, Point]]] = {}
    for kind in kinds:
        for k in ops:
            per = {key: rates[(kind, k, key)] for key in systems if key not in failed}
            out.setdefault(kind, {})[k] = normalise(per, baseline)
    return out, failed
