"""Operation throughput normalised to WAL as operations per transaction go
from 1 to 16 (DHL thesis Fig. 10), unrecorded.

Every system runs the same op streams through crashlab-runner on one ext4
file system, never recorded: ``loop`` (default) is a copy of the ext4 base
image in the system temp folder (on disk) behind a loop device with direct
I/O, so a sync reaches the real disk; ``tmpfs`` is the same image on a
tmpfs behind a buffered loop device (no device latency: CPU and kernel
paths only).  Streams: ``KIND:txns=T,ops=K,size=128`` (the thesis's
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

import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError
from harness.images import ensure_image
from harness.sysops import loop_mounted
from workloads.generate import write_opstream
from workloads.run import runner_command
from workloads.spec import parse_spec
from workloads.suts import get_sut

KINDS = ("insert", "update", "delete")
DEVICES = ("loop", "tmpfs")
RECORD_BYTES = 128  # DHL thesis §4.1: "one or two 128-byte records"


def stream(kind: str, txns: int, ops: int) -> str:
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
    return {name: Point(tuple(rs), tuple(r / b for r, b in zip(rs, base, strict=True)),
                        max(rs) / max(base))
            for name, rs in rates.items()}


def _rate(stats: Path, ops: int) -> float:
    s = json.loads(stats.read_text())
    return s["transactions"] * ops / max(s["elapsed_us"], 1) * 1e6


def _image_parent(device: str) -> Path:
    if device == "tmpfs":
        return Path("/dev/shm")
    return Path(tempfile.gettempdir())


def measure(systems: dict[str, str], *, baseline: str, txns: int, ops: tuple[int, ...],
            repeats: int, device: str, kinds: tuple[str, ...] = KINDS,
            progress: Callable[[str], None] = lambda _: None,
            ) -> tuple[dict[str, dict[int, dict[str, Point]]], dict[str, str]]:
    """``systems``: key → SUT name (the baseline among them).  Returns
    kind → ops → system key → Point, and key → why for each system whose
    runner failed (it is dropped from every point; the baseline failing is
    an error)."""
    if device not in DEVICES:
        raise CrashlabError(f"unknown device {device!r} (choose from {', '.join(DEVICES)})")
    base_img, _ = ensure_image("ext4")
    rates: dict[tuple[str, int, str], list[float]] = {}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="crashlab-paper-", dir=_image_parent(device)) as d:
        work = Path(d)
        image, mnt = work / "ext4.img", work / "mnt"
        shutil.copyfile(base_img, image)
        mnt.mkdir()
        streams = {}
        for kind in kinds:
            for k in ops:
                streams[(kind, k)] = write_opstream(parse_spec(stream(kind, txns, k)),
                                                    work / f"{kind}-{k}.ops")
        with loop_mounted(image, mnt, "ext4", direct_io=device == "loop"):
            for rep in range(repeats):
                progress(f"throughput: repeat {rep + 1} of {repeats}")
                for kind in kinds:
                    for k in ops:
                        for key, sut in systems.items():
                            if key in failed:
                                continue
                            stats = work / "stats.json"
                            cmd = runner_command(get_sut(sut), streams[(kind, k)],
                                                 mnt / "paper.db", stats=stats)
                            p = subprocess.run(cmd, capture_output=True, text=True)
                            for f in mnt.glob("paper.db*"):
                                f.unlink()
                            if p.returncode != 0:
                                why = (f"{kind} ops={k}: the runner exited {p.returncode}: "
                                       f"{p.stderr.strip()[-300:]}")
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
