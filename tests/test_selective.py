"""Selective journaling (workloads/runner/selvfs.h; the SUTs ``selective``,
``selective-fsonly``, ``selective-ordered``) on real recordings: fuse
backend, ext4 mounted as each SUT says.

* both paths are taken (the runner's counts) and ext4 is mounted
  data=journal (meta.json keeps it);
* the checkers open a crash image as the SUT does: stock SQLite and the
  SUT's VFS agree on every sampled prefix state, hot journals included, and
  both read a state of the oracle; the SUT's runner reopening a state whose
  hot journal rolls pages back finishes the workload at the oracle's end
  (the mutant selvfs-hot-journal-in-memory fails here);
* ``selective`` holds every promise (prefix, a sample of torn) on a
  workload that takes both paths (large transactions and reorder: the
  selective matrix);
* its broken variants are caught: every transaction through ext4's journal
  splits a large transaction across jbd2 commits (DB-OPEN ...), and the
  one-page path on data=ordered is lost half-written under torn writes;
* it is recorded only on ext4, and the nightly matrix has it only there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import Recordings, crashlab

from harness.fs.ext4.recover import recover_ext4
from harness.logformat import LogReader
from harness.materialize.state import write_state_image
from harness.rundir import RunDir
from harness.states.enumerate import enumerate_states
from harness.states.strategies import Options
from harness.sweep.matrix import matrix
from workloads import vfs
from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import DB_NAME, runner_command
from workloads.spec import parse_spec
from workloads.suts import get_sut

pytestmark = [pytest.mark.needs_fuse, pytest.mark.timeout(900)]
# KakaoTalk's shape: most transactions one update (one page besides the
# header: ext4's data journal), some several (SQLite's rollback journal)
SMALL = "app:kakaotalk,txns=10,seed=1"
# transactions of 300 one-page rows: more than a jbd2 transaction holds (a
# quarter of the base image's 4 MiB journal); the second one's half,
# beside the first one's pages, is what does not open
LARGE = "insert:txns=2,ops=300,size=4000,tables=1,seed=1"
BROKEN = ("DB-OPEN", "DB-ATOMIC", "DB-INTEGRITY")


@pytest.fixture(scope="module")
def runs(recorded: Recordings) -> dict[str, RunDir]:
    out = recorded.many({"selective": SMALL, "selective-ordered": SMALL})
    large = recorded.many({"selective": LARGE, "selective-fsonly": LARGE})
    return out | {f"{k}-large": v for k, v in large.items()}


def _check(run: RunDir, strategy: str, out: Path, *flags: str) -> dict:
    """``crashlab check`` of one strategy (and ``flags``); its result.json."""
    p = crashlab("check", str(run.path), "--strategy", strategy, "--out", str(out), *flags)
    assert p.returncode in (0, 1), p.stderr
    return json.loads((out / "result.json").read_text())


def _failed(result: dict, invariants: tuple[str, ...]) -> int:
    return sum(result["verdicts"].get(i, {}).get("fail", 0) for i in invariants)


def test_both_paths_and_the_mount(runs: dict[str, RunDir]) -> None:
    for name in ("selective", "selective-large"):
        meta = runs[name].meta()
        assert meta.exit_status == 0
        assert meta.mount_options == "data=journal"
    sel = runs["selective"].meta().runner["selective"]
    assert sel["fs_journal_txns"] > 0 and sel["sqlite_journal_txns"] > 0, sel
    # the large transactions and the set-up (page 1's schema) took SQLite's
    assert runs["selective-large"].meta().runner["selective"] == {
        "max_pages": 1,
        "fs_journal_txns": 0,
        "sqlite_journal_txns": 3,
    }
    assert runs["selective-fsonly-large"].meta().runner["selective"]["sqlite_journal_txns"] == 0
    assert runs["selective-ordered"].meta().mount_options == ""
    assert "mount_options" not in json.loads(runs["selective-ordered"].meta_path.read_text())


def _digest(files: Path, work: Path, vfs: str, *, journal: bool = True) -> str | None:
    """The database digest of a copy of ``files`` opened through ``vfs``
    (without its journal when not ``journal``); None if it cannot be read."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(files, work)
    if not journal:
        (work / f"{DB_NAME}-journal").unlink(missing_ok=True)
    try:
        return sqlite_digest(work / DB_NAME, vfs)
    except Exception:  # noqa: BLE001  (a half-written database: no digest)
        return None


def test_checker_and_sut_open_crash_images_alike(runs: dict[str, RunDir], tmp_path: Path) -> None:
    """Stock SQLite and the SUT's VFS read the same content on sampled
    prefix states (hot journals included, some rolling back pages already
    written), a content of the oracle; and the SUT itself, reopening such a
    state and running the rest of the workload (the runner's --from-txn),
    ends at the oracle's last state."""
    run = runs["selective"]
    meta = run.meta()
    spec = parse_spec(meta.workload or "")
    oracle = Oracle(spec)
    opts = Options(strategy="prefix", window_start="setup-done", log_order=meta.log_order)
    assert meta.image is not None
    hot, compared, rolled_back = 0, 0, []
    with LogReader(run.log) as reader:
        states = list(enumerate_states(reader, opts))
        for n, state in enumerate(states[::5]):
            image = tmp_path / "state.img"
            shutil.copyfile(meta.image.path, image)
            fd = os.open(image, os.O_RDWR)
            try:
                write_state_image(fd, reader, state)
            finally:
                os.close(fd)
            files = tmp_path / f"files{n}"
            rec = recover_ext4(image, files, check=False)
            assert rec.ok, rec.detail
            stock = _digest(files, tmp_path / "a", "")
            assert stock == _digest(files, tmp_path / "b", vfs.SELECTIVE_VFS), state.id
            assert stock in oracle.by_digest, state.id
            compared += 1
            if (files / f"{DB_NAME}-journal").exists():
                hot += 1
                if _digest(files, tmp_path / "c", "", journal=False) != stock:
                    rolled_back.append((files, stock))
                    continue
            shutil.rmtree(files)
    assert compared >= 25 and hot >= 2 and rolled_back, (compared, hot, len(rolled_back))
    ops = write_opstream(spec, tmp_path / "workload.ops")
    for files, digest in rolled_back[:2]:
        first = min(oracle.indices(digest)) + 1
        p = subprocess.run(
            [*runner_command(get_sut("selective"), ops, files / DB_NAME), "--from-txn", str(first)],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0, p.stderr
        assert sqlite_digest(files / DB_NAME) == oracle.digests[-1]


def test_selective_holds(runs: dict[str, RunDir], tmp_path: Path) -> None:
    # torn: a budget of 150 kept sets, ~2,500 states (all: ~46,000); the
    # same budget finds 24 torn-write failures of selective-ordered
    for strategy in ("prefix", "torn"):  # reorder: the selective matrix (docs/findings.md)
        result = _check(runs["selective"], strategy, tmp_path / strategy, "--budget", "150")
        assert result["states"]["checked"] > 50
        assert _failed(result, (*BROKEN, "DB-DURABLE", "DB-PREFIX")) == 0, result["verdicts"]
    # large transactions: the selective matrix (docs/findings.md, "Selective journaling")


def test_broken_variants_are_caught(runs: dict[str, RunDir], tmp_path: Path) -> None:
    split = _check(runs["selective-fsonly-large"], "prefix", tmp_path / "fsonly")
    assert _failed(split, BROKEN) > 0, split["verdicts"]
    torn = _check(runs["selective-ordered"], "torn", tmp_path / "ordered")
    assert _failed(torn, BROKEN) > 0, torn["verdicts"]


def test_only_on_ext4(tmp_path: Path) -> None:
    p = crashlab(
        "record",
        "--sut",
        "selective",
        "--workload",
        SMALL,
        "--fs",
        "xfs",
        "--out",
        str(tmp_path / "x"),
    )
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "crashlab: error: SUT selective runs only on ext4: record it with --fs ext4"
    )
    cells = [c for c in matrix("nightly") if c.sut.startswith("selective")]
    assert {c.sut for c in cells} == {"selective", "selective-fsonly", "selective-ordered"}
    assert {c.fs for c in cells} == {"ext4"}


def test_checkers_load_the_library_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = vfs.SHIMS[vfs.SELECTIVE_VFS]
    monkeypatch.setenv(shim.env, str(tmp_path / "mutant.so"))
    assert vfs.library(shim.name) == tmp_path / "mutant.so"
    monkeypatch.delenv(shim.env)
    assert vfs.library(shim.name) == shim.library
