"""The golden corpus: a few recorded runs committed under tests/data/corpus/,
and the numbers a check of them gives (tests/data/golden/<run>.json).

Each corpus run is a run folder as harness/rundir.py defines it, stored as
``meta.json`` and ``writes.log.xz`` (the log, xz-compressed).  No base image
is stored: meta.json names the image by its digest, and the ext4 and raw
images are byte-identical on every build (images/build-image.sh), so the
check stage finds (or builds) the same one in any checkout.

The golden numbers of a run (:func:`golden`):

* ``states``: per enumeration strategy (every one of harness/states, without
  state faults), the states generated in the check's window, folded by
  dedup, emitted, and the kept sets visited out of those possible;
* ``checks``: per strategy its cell checks (with the cell's state faults),
  the states checked, generated and folded, the kept sets visited, and every
  invariant's verdict counts (pass, fail, skip, not exercised, error),
  run-level records included.

tests/test_golden_counts.py compares them exactly; tests/tools/record_corpus.py
records the corpus again.  Both take the runs from :data:`CORPUS`."""

from __future__ import annotations

import dataclasses
import lzma
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.check.check import CheckOptions, check_run, options_for
from harness.check.window import default_window
from harness.faults import parse_faults
from harness.logformat import LogReader
from harness.rundir import LOG_NAME, META_NAME, RunDir
from harness.states import STRATEGIES, Enumeration, Options, coverage
from harness.sweep.builtin_workloads import BUILTIN_WORKLOADS
from harness.sweep.cell import Cell
from workloads.suts import get_sut

DATA = Path(__file__).resolve().parent / "data"
CORPUS_DIR = DATA / "corpus"
GOLDEN_DIR = DATA / "golden"
PACKED_LOG = LOG_NAME + ".xz"
# a corpus log unpacks to at most this (the largest is ~1.5 MiB): a damaged
# or hostile .xz cannot fill the disk
UNPACKED_LIMIT = 64 << 20


@dataclass(frozen=True)
class CorpusRun:
    """One run of the corpus: the cell it is recorded as (a built-in
    workload name), and the strategies whose verdicts are golden."""

    name: str
    sut: str
    workload: str
    fs: str
    checks: tuple[str, ...]
    faults: tuple[str, ...] = ()
    why: str = ""  # what the run stands for in the corpus

    @property
    def cell(self) -> Cell:
        """The matrix cell this run is a recording of."""
        return Cell(
            self.sut,
            BUILTIN_WORKLOADS[self.workload],
            self.fs,
            self.checks,
            get_sut(self.sut).weaknesses,
            faults=parse_faults(self.faults),
        )

    @property
    def folder(self) -> Path:
        return CORPUS_DIR / self.name

    @property
    def golden_path(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.json"


CORPUS = (
    CorpusRun(
        "sqlite-wal-full", "sqlite-wal-full", "MULTI", "ext4", ("prefix", "reorder"), why="SQLite"
    ),
    CorpusRun("dhl-cc", "dhl-cc", "DHL_UPDATE", "ext4", ("prefix", "reorder"), why="DHL"),
    CorpusRun(
        "waldio", "waldio", "MULTI", "ext4", ("prefix", "reorder", "torn"), why="a seed system"
    ),
    CorpusRun(
        "sqlite-delete-full",
        "sqlite-delete-full",
        "SINGLE",
        "ext4",
        ("prefix",),
        why="known-unsafe: loses the last acknowledged transaction (DB-DURABLE)",
    ),
    CorpusRun(
        "dhl-nolog-raw",
        "dhl-nolog-raw",
        "MULTI",
        "raw",
        ("prefix", "reorder"),
        why="known-unsafe: torn transactions (DB-ATOMIC)",
    ),
    CorpusRun(
        "sqlite-delete-extra-corrupt",
        "sqlite-delete-extra",
        "MULTI",
        "ext4",
        ("prefix",),
        ("corrupt",),
        why="a state fault",
    ),
    CorpusRun(
        "dhl-cc-raw-eio-flush",
        "dhl-cc-raw",
        "DHL_INSERT",
        "raw",
        ("prefix",),
        ("eio:flush,after=txn-begin:5",),
        why="a device fault",
    ),
)


def corpus_run(name: str) -> CorpusRun:
    """The corpus run called ``name`` (KeyError naming the choices)."""
    for r in CORPUS:
        if r.name == name:
            return r
    raise KeyError(f"no corpus run {name!r} (choose from {', '.join(r.name for r in CORPUS)})")


def unpack(run: CorpusRun, dest: Path) -> RunDir:
    """The corpus run as a run folder at ``dest`` (made; must not exist)."""
    dest.mkdir(parents=True)
    shutil.copyfile(run.folder / META_NAME, dest / META_NAME)
    with lzma.open(run.folder / PACKED_LOG) as src, open(dest / LOG_NAME, "wb") as out:
        total = 0
        while chunk := src.read(1 << 20):
            total += len(chunk)
            if total > UNPACKED_LIMIT:
                raise ValueError(f"{run.folder / PACKED_LOG}: unpacks past {UNPACKED_LIMIT} bytes")
            out.write(chunk)
    return RunDir(dest)


def pack(recorded: RunDir, run: CorpusRun) -> None:
    """Store the recorded run folder as corpus run ``run`` (replacing it):
    its meta.json and its log, compressed."""
    tmp = run.folder.with_name(run.folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(recorded.meta_path, tmp / META_NAME)
    with open(recorded.log, "rb") as src, lzma.open(tmp / PACKED_LOG, "wb", preset=9) as out:
        shutil.copyfileobj(src, out)
    shutil.rmtree(run.folder, ignore_errors=True)
    tmp.rename(run.folder)


def state_counts(run: RunDir) -> dict[str, dict[str, int | None]]:
    """Per strategy, its enumeration of ``run`` as a check's window takes
    it (no state faults): states generated, folded, emitted, kept sets."""
    out: dict[str, dict[str, int | None]] = {}
    with LogReader(run.log) as reader:
        for strategy in STRATEGIES:
            opts = default_window(run, Options(strategy=strategy))
            en = Enumeration(reader, dataclasses.replace(opts, faults=()))
            for _ in en:
                pass
            cov = coverage.summary(en.stats.coverage)
            out[strategy] = {
                "generated": en.stats.generated,
                "folded": en.stats.folded,
                "emitted": en.stats.emitted,
                "kept_sets_checked": cov["kept_sets_checked"],
                "kept_sets_possible": cov["kept_sets_possible"],
            }
    return out


def check_counts(run: RunDir, corpus: CorpusRun, strategy: str, out: Path) -> dict[str, Any]:
    """The check of ``run`` under ``strategy`` with the cell's state faults
    (results in ``out``), reduced to its golden numbers."""
    base = CheckOptions(states=Options(faults=corpus.cell.state_faults), jobs=2)
    result = check_run(run, options_for(strategy, base), out)
    cov = result["coverage"]
    return {
        "checked": result["states"]["checked"],
        "generated": result["states"]["generated"],
        "folded": result["states"]["folded"],
        "kept_sets_checked": cov["kept_sets_checked"],
        "kept_sets_possible": cov["kept_sets_possible"],
        "verdicts": {inv: dict(sorted(v.items())) for inv, v in sorted(result["verdicts"].items())},
    }


def golden(corpus: CorpusRun, work: Path) -> dict[str, Any]:
    """Every golden number of ``corpus`` (unpacked and checked in ``work``)."""
    run = unpack(corpus, work / corpus.name)
    return {
        "states": state_counts(run),
        "checks": {s: check_counts(run, corpus, s, work / f"check-{s}") for s in corpus.checks},
    }


def differences(want: Any, got: Any, where: str = "") -> list[str]:  # noqa: ANN401
    """Every leaf where ``got`` differs from ``want``, one line each:
    ``checks.reorder.verdicts.DB-DURABLE.fail: 12 -> 0``."""
    if isinstance(want, dict) and isinstance(got, dict):
        lines = []
        for k in sorted(set(want) | set(got)):
            sub = f"{where}.{k}" if where else str(k)
            if k not in got:
                lines.append(f"{sub}: {want[k]!r} -> (absent)")
            elif k not in want:
                lines.append(f"{sub}: (absent) -> {got[k]!r}")
            else:
                lines += differences(want[k], got[k], sub)
        return lines
    return [] if want == got else [f"{where}: {want!r} -> {got!r}"]
