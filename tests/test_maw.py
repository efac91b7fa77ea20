"""MAW: SQLite's own batch atomic write on F2FS (crashlab-runner-maw, built
against the pinned amalgamation with SQLITE_ENABLE_BATCH_ATOMIC_WRITE).

Without a guest: the SUTs are bound to F2FS and to their runner, the
nightly matrix leaves them to the qemu matrix, and --batch-atomic refuses a
SQLite or a file system without batch atomic write (so a silently
non-atomic build cannot pass).  In F2FS guests (skipped where qemu cannot
record F2FS; small: the recovery guest checks ~1-3 states/s): every commit
of ``maw`` went through F2FS_IOC_START/COMMIT_ATOMIC_WRITE, F2FS wrote its
pages out of place and a node block after them, and its prefix states hold
every promise; ``maw-noioctl`` (the ioctls faked) rewrote the same blocks in
place and is caught breaking atomicity."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from runner_support import shm_dir
from support import build, procs_mentioning

from harness.check.check import CheckOptions, check_run, options_for
from harness.errors import CrashlabError
from harness.rundir import RunDir
from harness.sweep.expectations import evaluate
from harness.sweep.matrix import Cell, matrix
from workloads.generate import write_opstream
from workloads.oracle import Oracle, sqlite_digest
from workloads.run import BUILD_DIR, check_sut_fs, record_workload
from workloads.spec import parse_spec
from workloads.suts import MAW_RUNNER, get_sut

# 2 transactions of 3 inserts on 3 tables, 100 warm-up rows per table: each
# transaction dirties page 1 and three leaves far apart in the file
WORKLOAD = "insert:txns=2,ops=3,tables=3,warmup=100,seed=1"
SUTS = ("maw", "maw-noioctl")


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    build("workloads/build/crashlab-runner", f"workloads/build/{MAW_RUNNER}")


def test_registered_for_f2fs_and_its_own_runner() -> None:
    for name in ("maw", "maw-noioctl", "maw-full"):
        sut = get_sut(name)
        assert sut.needs_fs == "f2fs" and sut.runner == MAW_RUNNER
        assert "--batch-atomic" in sut.runner_args()
        check_sut_fs(sut, "f2fs")
        with pytest.raises(CrashlabError, match="runs only on f2fs"):
            check_sut_fs(sut, "ext4")
    assert set(get_sut("maw").promises) == {
        "DB-OPEN",
        "DB-INTEGRITY",
        "DB-ATOMIC",
        "DB-DURABLE",
        "DB-PREFIX",
    }
    assert "DB-ATOMIC" in get_sut("maw-noioctl").may_violate
    assert get_sut("maw-full").may_violate == ("DB-DURABLE",)
    assert not any(c.sut.startswith("maw") for c in matrix("nightly"))
    qemu = {c.sut: c for c in matrix("qemu") if c.sut.startswith("maw")}
    assert set(qemu) == {"maw", "maw-noioctl", "maw-full"}
    assert all(c.fs == "f2fs" and c.backend == "qemu" for c in qemu.values())
    assert qemu["maw-noioctl"].must_violate_any and qemu["maw-full"].must_violate_any
    assert not qemu["maw"].must_violate_any


SMALL = "insert:txns=4,ops=3,tables=3,warmup=20,seed=1"


def _run(
    runner: str, args: list[str], db_digest: list[str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``runner`` on SMALL in a tmpfs folder; with ``db_digest`` the
    database's digest as the checkers read it is appended."""
    with shm_dir("crashlab-maw-") as d:
        ops = write_opstream(parse_spec(SMALL), d / "ops")
        proc = subprocess.run(
            [str(BUILD_DIR / runner), "--ops", str(ops), "--db", str(d / "x.db"), *args],
            capture_output=True,
            text=True,
        )
        if db_digest is not None and proc.returncode == 0:
            db_digest.append(sqlite_digest(d / "x.db"))
        return proc


def test_batch_atomic_refuses_what_cannot_be_atomic() -> None:
    """The system SQLite has no batch atomic write; tmpfs offers none to the
    MAW build; a bad mode is a usage error."""
    plain = _run("crashlab-runner", ["--batch-atomic", "require"])
    assert plain.returncode == 1 and "without SQLITE_ENABLE_BATCH_ATOMIC_WRITE" in plain.stderr
    tmpfs = _run(MAW_RUNNER, ["--batch-atomic", "require"])
    assert tmpfs.returncode == 1 and "offers no batch atomic write" in tmpfs.stderr
    bad = _run(MAW_RUNNER, ["--batch-atomic", "maybe"])
    assert bad.returncode == 2 and "bad --batch-atomic maybe" in bad.stderr
    # the same build without --batch-atomic is plain SQLite 3.50.4; the
    # checkers' SQLite (the system's) reads what it wrote as the oracle says
    digest: list[str] = []
    assert _run(MAW_RUNNER, [], digest).returncode == 0
    assert digest == [Oracle(parse_spec(SMALL)).final]


@pytest.fixture(scope="module")
def maw_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    root = tmp_path_factory.mktemp("maw")
    return {
        sut: record_workload(sut, WORKLOAD, root / sut, fs="f2fs", backend="qemu") for sut in SUTS
    }


@pytest.mark.needs_qemu("f2fs")
def test_every_commit_went_through_an_atomic_write(maw_runs: dict[str, RunDir]) -> None:
    from harness.bench.maw import io_per_txn

    txns = parse_spec(WORKLOAD).txns
    for sut, run in maw_runs.items():
        meta = run.meta()
        assert meta.exit_status == 0 and meta.fs == "f2fs" and meta.backend == "qemu"
        batch = (meta.runner or {})["batch_atomic"]
        # the warm-up and every measured transaction; only the first one (the
        # tables, on an empty file) wrote through the on-disk journal
        assert batch["committed"] == batch["begun"] == txns + 1, (sut, batch)
        assert batch["commit_failed"] == batch["begin_failed"] == 0
        assert batch["db_batched"] >= 4 * (txns + 1) and batch["journal"] > 0
    io = {sut: io_per_txn(run) for sut, run in maw_runs.items()}
    for t in io["maw"]:  # pages written out of place, then the node block (FUA)
        assert t.areas and t.areas["data"] >= 16384 and t.areas["node"] > 0 and t.fua >= 1
    blocks = {sut: [_data_blocks(maw_runs[sut], k) for k in (1, 2)] for sut in SUTS}
    assert not blocks["maw"][0] & blocks["maw"][1]  # new blocks every commit
    assert blocks["maw-noioctl"][0] == blocks["maw-noioctl"][1]  # the same, in place


def _data_blocks(run: RunDir, k: int) -> set[int]:
    """The F2FS data-log blocks transaction ``k`` wrote."""
    from harness.fs.f2fs_layout import read_layout
    from harness.images import verified_base_for_run
    from harness.logformat import LogReader

    layout = read_layout(verified_base_for_run(run))
    out: set[int] = set()
    inside = False
    with LogReader(run.log) as r:
        for e in r.entries():
            if e.is_mark:
                inside = e.label == f"txn-begin:{k}" or (inside and e.label != f"txn-ack:{k}")
            elif inside and e.is_write:
                first = e.sector * r.sectorsize // 4096
                blocks = range(first, first + e.nr_sectors * r.sectorsize // 4096)
                out |= {b for b in blocks if layout.area(b) == "data"}
    assert out
    return out


@pytest.mark.needs_qemu("f2fs")
def test_prefix_states(maw_runs: dict[str, RunDir], private_tmp: Path) -> None:
    """maw holds every promise; maw-noioctl breaks atomicity (its cell's
    must-violate set), and both verdicts are the qemu matrix's."""
    for sut, run in maw_runs.items():
        res = check_run(run, options_for("prefix", CheckOptions(jobs=1)))
        n = res["states"]["checked"]
        print(f"{sut} prefix: {n} states, {json.dumps(res['verdicts'])}")
        assert n > 10 and res["verdicts"]["FS-RECOVER"]["pass"] == n
        cell = Cell(sut, WORKLOAD, "f2fs", ("prefix",), get_sut(sut).weaknesses)
        verdict = evaluate(
            cell.expectation("prefix"), res["verdicts"], n, res.get("skips"), res.get("errors")
        )
        assert verdict.ok, (sut, verdict)
        if sut == "maw":
            assert res["violations"] == []
        else:
            assert res["verdicts"]["DB-ATOMIC"]["fail"] > 0
    assert procs_mentioning(str(private_tmp)) == []  # every guest powered off
