"""Cross-validation: the fuse recorder against the kernel's dm-log-writes
(qemu backend), same SUT and workload.  What must agree: every write SQLite
and the file system made, per transaction and per region (database,
journal, metadata; the file-system journal to within one block, which
timing decides even between two recordings on one backend); and the
verdicts (no violation for correct configurations, prefix and reorder).
What differs, and must differ in exactly this way: the kernel logs real FUA writes, which the fuse
recorder sees as an extra flush each (loop has no FUA)."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from harness.check.check import CheckOptions, check_run, options_for
from harness.record.crossval import compare, markdown
from harness.record.shape import REGIONS, txn_shapes
from harness.rundir import RunDir
from harness.sweep.matrix import MULTI
from workloads.run import record_workload

pytestmark = [pytest.mark.needs_fuse, pytest.mark.needs_qemu]


@pytest.fixture(scope="module")
def pairs(
    qemu_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, RunDir]]:
    root = tmp_path_factory.mktemp("crossval")
    out: dict[str, dict[str, RunDir]] = {}
    for sut, qrun in qemu_runs.items():
        frun = record_workload(sut, MULTI, root / sut, backend="fuse")
        out[sut] = {"fuse": frun, "qemu": RunDir(qrun)}
        for run in out[sut].values():
            for st in ("prefix", "reorder"):  # the qemu runs may be checked already
                if not glob.glob(str(run.path / "check" / f"{st}-*" / "result.json")):
                    check_run(run, options_for(st, CheckOptions()))
    return out


# How many blocks the kernel puts in one transaction's file-system journal
# commit depends on timing, not on the backend: of 8 fuse recordings of
# sqlite-wal-full's workload on one machine (record_workload, txn_shapes),
# 4 journal one block more in transaction 5 than the other 4.
FS_JOURNAL_SLACK = 4096


def test_same_writes_per_transaction_and_region(pairs: dict[str, dict[str, RunDir]]) -> None:
    for sut, by_be in pairs.items():
        fuse, qemu = txn_shapes(by_be["fuse"]), txn_shapes(by_be["qemu"])
        assert [s.txn for s in fuse] == [s.txn for s in qemu] == list(range(1, 11)), sut
        for f, q in zip(fuse, qemu, strict=True):
            assert f.regions is not None and q.regions is not None
            for r in REGIONS:  # SQLite's own writes and the metadata written in place
                if r != "fs-journal":
                    assert f.regions[r] == q.regions[r], (sut, r, f, q)
            fsj = abs(f.regions["fs-journal"] - q.regions["fs-journal"])
            assert fsj <= FS_JOURNAL_SLACK, (sut, f, q)
            assert abs(f.writes - q.writes) == fsj // 4096, (sut, f, q)
            assert abs(f.bytes - q.bytes) == fsj, (sut, f, q)
            assert f.regions["journal"] > 0 and f.regions["fs-journal"] > 0
            assert q.regions["fs-journal"] > 0
            # loop has no FUA: each FUA write reaches fuse as write + flush
            assert f.fua == 0 < q.fua
            assert f.flushes == q.flushes + q.fua, (sut, f, q)


def test_same_verdicts(pairs: dict[str, dict[str, RunDir]]) -> None:
    cmp = compare(pairs)
    for sut, sides in cmp.items():
        for st in ("prefix", "reorder"):
            invs = [set(s.verdicts[st]) for s in sides.values()]
            assert invs[0] == invs[1], (sut, st)
            for be, s in sides.items():
                assert s.states[st] > 0
                assert all(v["fail"] == 0 for v in s.verdicts[st].values()), (sut, be, st)
    table = markdown(cmp)
    assert "| sqlite-wal-full | qemu | reorder |" in table
