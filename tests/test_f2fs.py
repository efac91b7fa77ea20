"""F2FS, recorded and recovered only in qemu guests (the host kernel has no
F2FS): the base image is byte-reproducible; SQLite in its correct
configurations holds its promises (WAL+FULL on reorder states, DELETE+EXTRA
on prefix states: a recovery guest boots per check, so each SUT is checked
once here; the qemu matrix has every combination), every state recovered by
one long-lived recovery guest per check (mount = the kernel's roll-forward
recovery, then fsck.f2fs); no guest outlives its check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import procs_mentioning

from harness.check.check import CheckOptions, check_run, options_for
from harness.images import IMAGES_DIR
from harness.rundir import RunDir
from harness.sweep.expectations import evaluate
from harness.sweep.matrix import Cell
from workloads.run import record_workload
from workloads.suts import get_sut

WORKLOAD = "insert:txns=2,ops=1,tables=1,seed=1"  # few states: ~1-3 states/s per guest
SUTS = ("sqlite-wal-full", "sqlite-delete-extra")


@pytest.fixture(scope="module")
def f2fs_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    root = tmp_path_factory.mktemp("f2fs")
    return {
        sut: record_workload(sut, WORKLOAD, root / sut, fs="f2fs", backend="auto") for sut in SUTS
    }


def test_image_recipe_is_reproducible(tmp_path: Path) -> None:
    digests = []
    for i in range(2):
        out = tmp_path / f"f{i}.img"
        subprocess.run([str(IMAGES_DIR / "build-image.sh"), "f2fs", str(out)], check=True)
        digests.append(out.with_name(out.name + ".sha256").read_text())
    assert digests[0] == digests[1]


@pytest.mark.needs_qemu("f2fs")
def test_recorded_in_the_f2fs_guest(f2fs_runs: dict[str, RunDir]) -> None:
    for run in f2fs_runs.values():
        meta = run.meta()
        assert meta.backend == "qemu" and meta.fs == "f2fs"  # auto: the host has no f2fs
        assert meta.guest is not None and meta.kernel.endswith("-amd64")
        assert "cloud" not in meta.kernel  # the cloud flavour has no F2FS
        assert meta.log_order == "dm-log-writes"
        assert run.log_order == "completion"  # F2FS waits for its checkpoint FUA writes
        assert meta.exit_status == 0 and (meta.log or {}).get("fua", 0) > 0


@pytest.mark.parametrize(
    "sut, strategy", [("sqlite-wal-full", "reorder"), ("sqlite-delete-extra", "prefix")]
)
@pytest.mark.needs_qemu("f2fs")
def test_sqlite_holds_its_promises(
    f2fs_runs: dict[str, RunDir], sut: str, strategy: str, private_tmp: Path
) -> None:
    run = f2fs_runs[sut]
    res = check_run(run, options_for(strategy, CheckOptions(jobs=1)))
    n, secs = res["states"]["checked"], res["timing"]["seconds"]
    print(
        f"{sut} f2fs {strategy}: {n} states in {secs:.1f} s "
        f"({n / secs:.2f} states/s, one recovery guest, its boot included)"
    )
    assert n > 4
    assert res["verdicts"]["FS-RECOVER"]["pass"] == n  # mounted, fsck.f2fs clean
    cell = Cell(sut, WORKLOAD, "f2fs", (strategy,), get_sut(sut).weaknesses)
    verdict = evaluate(
        cell.expectation(strategy), res["verdicts"], n, res.get("skips"), res.get("errors")
    )
    assert verdict.ok, (sut, strategy, verdict)
    assert res["violations"] == []
    assert procs_mentioning(str(private_tmp)) == []  # every guest powered off
