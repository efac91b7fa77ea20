"""WAL's single-fsync atomicity (DHL thesis §3.3, §3.6; docs/papers.md):
for SQLite WAL cells, the reorder states in which a transaction's commit
frame persisted while an earlier frame of it did not, what the check
judged there, and where WAL recovery stops on those states' WAL bytes
(``harness/paper/walatomic.py``).  Each cell is recorded on ext4 and
checked with the default reorder options (default window)."""

from __future__ import annotations

from pathlib import Path

from harness.check.check import CheckOptions, check_run
from harness.env import temporary_folder
from harness.paper.walatomic import analyse
from harness.states import Options
from harness.sweep.builtin_workloads import DELETE, MULTI, UPDATE
from workloads.run import record_workload

NAME = "walatomic"
JOBS = 2
# the default matrix's WAL cell on its three workload shapes, WAL with
# synchronous=NORMAL (no sync per commit), and WAL_OPT with a WAL small
# enough to be restarted over its own stale frames during the workload
CELLS = (
    ("sqlite-wal-full", MULTI),
    ("sqlite-wal-full", UPDATE),
    ("sqlite-wal-full", DELETE),
    ("sqlite-wal-normal", MULTI),
    ("sqlite:journal=wal,sync=full,walopt=8", MULTI),
)


def run() -> None:
    print(
        "reorder states with a commit frame persisted before an earlier frame of its "
        "transaction (split), their verdicts, and where WAL recovery stops on them"
    )
    print(
        f"{'SUT':40s} {'workload':8s} {'states':>6s} {'frames':>6s} {'multi':>5s} "
        f"{'split':>5s} {'passed':>6s} {'failed':>6s}  recovery stopped at the missing frame"
    )
    names = {MULTI: "MULTI", UPDATE: "UPDATE", DELETE: "DELETE"}
    with temporary_folder("crashlab-bench-walatomic-") as work:
        for i, (sut, wl) in enumerate(CELLS):
            d = Path(work) / f"c{i}"
            rec = record_workload(sut, wl, d / "run")
            check_run(rec, CheckOptions(states=Options(strategy="reorder"), jobs=JOBS), d / "chk")
            r = analyse(rec, d / "chk", d / "scratch")
            failed = r.split - r.passed - r.unjudged
            how = ", ".join(f"{why} {n}" for why, n in r.stopped.most_common()) or "-"
            if r.failed:
                how += "; failing: " + ", ".join(f"{k} {n}" for k, n in r.failed.most_common())
            if r.not_caught:
                how += f"; read past it in {len(r.not_caught)} ({r.not_caught[0]} ...)"
            print(
                f"{sut:40s} {names[wl]:8s} {r.states:6d} {r.frames:6d} "
                f"{r.multi_frame_txns:5d} {r.split:5d} {r.passed:6d} {failed:6d}  {how}"
            )
