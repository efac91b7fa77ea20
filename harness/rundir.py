"""A run directory: the one definition of what a recorded run leaves on disk.

    RUN/writes.log   the dm-log-writes log of every block write
    RUN/meta.json    backend, fs, kernel, base image and its digest, command,
                     tool versions, marks, and (for workload runs) the SUT,
                     workload spec and seed from which the oracle is rebuilt
                     (:class:`RunMeta`, the one definition of its keys)

A run never holds a copy of its base image: ``meta.json`` names the image and
its digest, and replay refuses an image whose digest differs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.atomic import write_json_atomic
from harness.errors import CrashlabError

LOG_NAME = "writes.log"
META_NAME = "meta.json"
CHECK_DIR = "check"  # RUN/check/<strategy>-<options digest>/, one per check
STATES_NAME = "states.jsonl"  # a check's per-state records
RESULT_NAME = "result.json"  # a check's result, written last
RUN_NAME = "run.jsonl"  # a check's run-level records (harness/check/runlevel.py)
# what a check is (its options, the recording's meta.json digest), written
# when it starts: --resume continues a states.jsonl only for the same check
IDENTITY_NAME = "check.json"
# what makes a folder hold results that `--out` does not silently replace
# (harness/outlock.py: refuse_results): a check's, and a sweep's or merge's
CHECK_RESULTS = (RESULT_NAME, STATES_NAME)
SUMMARY_NAME = "summary.json"
RUNS_DIR = "runs"
SWEEP_RESULTS = (SUMMARY_NAME, RUNS_DIR)


@dataclass(frozen=True)
class ImageRef:
    """The base image a run was recorded on."""

    fs: str
    path: str
    sha256: str


@dataclass(frozen=True)
class Continues:
    """A continuation (multicrash, recovery-crash): the run and crash state
    it continues, and what held at that first crash."""

    run: str
    state: str
    kind: str
    recovered_txn: int = 0
    acked: int = 0
    begun: int = 0


@dataclass(frozen=True)
class RunMeta:
    """``meta.json``.  The recorder's part (``harness/record/recorder.py``):
    how and where the run was recorded, and the log's summary.  A workload
    run's part (``workloads/run.py``): the SUT, the canonical workload spec
    and its seed (the oracle is rebuilt from them), the database file's
    name, the runner's counts, and for a continuation where it starts.
    A run recorded in a qemu guest also has ``guest``.
    Keys this class does not know (a caller's own) are kept in ``extra``."""

    fs: str = ""
    backend: str = ""
    backend_choice: str = ""
    # what a write's position in the log means for crash states (the
    # recording backend's; runs from before it was recorded: fuse's)
    log_order: str = "completion"
    kernel: str = ""
    image: ImageRef | None = None
    command: tuple[str, ...] = ()
    # shell convention: 128 + N when the command was killed by signal N
    exit_status: int | None = None
    signal: str | None = None
    interrupted: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    marks: tuple[str, ...] = ()
    log: dict[str, Any] | None = None  # LogReader.summary(), or {"error": ...}
    wall_time_s: float = 0.0
    started: str = ""
    # the faults beyond power loss given to the recording (harness/faults.py,
    # canonical spellings; written only when there are some): the check
    # stage applies the state kinds among them to every crash state
    faults: tuple[str, ...] = ()
    # a run recorded in a guest (backend qemu): kernel package and sha256s
    # of the kernel, the initramfs and the job archive (harness/record/qemu.py)
    guest: dict[str, Any] | None = None
    # extra mount options the recorder gave the file system (a SUT's
    # Sut.mount_options, e.g. ext4 data=journal; written only when some)
    mount_options: str = ""
    # a workload run
    sut: str | None = None
    workload: str | None = None
    seed: int | None = None
    db: str | None = None
    runner: dict[str, Any] | None = None  # crashlab-runner's --stats report
    continues_at: int | None = None  # the runner's --from-txn
    continues: Continues | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunMeta:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kw = {k: v for k, v in d.items() if k in names}
        if kw.get("image"):
            kw["image"] = ImageRef(**kw["image"])
        if kw.get("continues"):
            kw["continues"] = Continues(**kw["continues"])
        for k in ("command", "marks", "faults"):
            if k in kw:
                kw[k] = tuple(kw[k])
        return cls(**kw, extra={k: v for k, v in d.items() if k not in names})

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the recorder's keys always (null when unknown),
        a workload run's only when set, then ``extra``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "extra" or (v is None and f.name in _OPTIONAL_KEYS) or (
                    f.name in ("faults", "mount_options") and not v):
                continue
            if dataclasses.is_dataclass(v):
                v = dataclasses.asdict(v)  # type: ignore[arg-type]
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return {**out, **self.extra}


# written only when set: a workload run's keys, and a guest's facts
_OPTIONAL_KEYS = ("sut", "workload", "seed", "db", "runner", "continues_at", "continues",
                  "guest")


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def log(self) -> Path:
        return self.path / LOG_NAME

    @property
    def meta_path(self) -> Path:
        return self.path / META_NAME

    def meta(self) -> RunMeta:
        try:
            raw = json.loads(self.meta_path.read_text())
        except FileNotFoundError:
            raise CrashlabError(f"{self.path}: not a run directory (no {META_NAME})") from None
        except json.JSONDecodeError as e:
            raise CrashlabError(f"{self.meta_path}: corrupt JSON ({e})") from None
        try:
            return RunMeta.from_json(raw)
        except TypeError as e:
            raise CrashlabError(f"{self.meta_path}: not a crashlab meta.json ({e})") from None

    @property
    def log_order(self) -> str:
        """What log order means for this run's crash states: the recording
        backend's (meta.json), except that a run in the kernel's
        ``dm-log-writes`` order on a file system that waits for each FUA write
        before issuing the next write (:attr:`FileSystem.fua_waited`) keeps
        its FUA writes ordered before every write logged after them, which is
        ``completion`` order (harness/states/model.py)."""
        from harness.fs import get_fs  # harness.fs imports from this module's users

        meta = self.meta()
        if meta.log_order == "dm-log-writes" and meta.fs and get_fs(meta.fs).fua_waited:
            return "completion"
        return meta.log_order

    def write_meta(self, meta: RunMeta) -> None:
        write_json_atomic(self.meta_path, meta.to_json())

    def check_dir(self, tag: str) -> Path:
        """Where a check of this run with options ``tag`` writes."""
        return self.path / CHECK_DIR / tag

    def check_results(self) -> list[Path]:
        """Every finished check's result.json."""
        return sorted((self.path / CHECK_DIR).glob(f"*/{RESULT_NAME}"))


@dataclass(frozen=True)
class SweepDir:
    """A sweep folder: the one definition of what a sweep leaves on disk.

        SWEEP/runs/<cell>/      one run folder per cell (:class:`RunDir`)
        SWEEP/summary.json      the cells: verdict counts, expectations
        SWEEP/violations.jsonl  every failing verdict, with its repro command
        SWEEP/junit.xml         one test case per cell and strategy
        SWEEP/timing.json       seconds per recording and per check
        SWEEP/report.html, report.md, plots/   the reports (harness/report/)
    """

    path: Path

    def run(self, cell_name: str) -> RunDir:
        return RunDir(self.path / RUNS_DIR / cell_name)

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY_NAME

    @property
    def violations(self) -> Path:
        return self.path / "violations.jsonl"

    @property
    def junit(self) -> Path:
        return self.path / "junit.xml"

    @property
    def timing(self) -> Path:
        return self.path / "timing.json"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def report_md(self) -> Path:
        return self.path / "report.md"

    @property
    def plots(self) -> Path:
        return self.path / "plots"


def resolve_log(target: Path | str) -> Path:
    """A log path from either a run directory or a log file."""
    p = Path(target)
    if p.is_dir():
        p = RunDir(p).log
    if not p.exists():
        raise CrashlabError(f"{target}: no such run directory or log")
    return p
