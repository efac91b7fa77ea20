"""j-lang workloads recorded and checked on ext4: the answer known both
ways.  A file created in folder A, then A fsynced: every crash state after
the persistence point has A/foo (FS-DIR-ENTRIES holds, judged).  The same
recording judged as if the directory fsync had not been run — the oracle
of the program with it, the recording of the program without it, as a
runner that drops directory fsyncs would leave — must fail FS-DIR-ENTRIES:
ext4 does not write the new entry before its next journal commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.check.check import CheckOptions, check_run, options_for
from harness.rundir import RunDir
from workloads.jlang.lang import canonical, parse
from workloads.run import record_workload

pytestmark = pytest.mark.needs_fuse

BODY = """# run
mkdir A 0777
sync
checkpoint 1
open Afoo O_RDWR|O_CREAT 0777
write Afoo 0 5000
close Afoo
opendir A 0777
{fsync}
checkpoint 2
close A
"""


def _record(tmp: Path, name: str, dir_fsync: bool) -> RunDir:
    src = tmp / f"{name}.jlang"
    src.write_text(BODY.format(fsync="fsync A" if dir_fsync else "none"))
    return record_workload("fs-ext4", f"jlang:file={src}", tmp / name, fs="ext4", backend="fuse")


def _statuses(run: RunDir, out_dir: Path) -> dict[str, set[str]]:
    check_run(run, options_for("prefix", CheckOptions(jobs=1)), out_dir)
    out: dict[str, set[str]] = {}
    for line in (out_dir / "states.jsonl").read_text().splitlines():
        state = json.loads(line)
        if state["acked"] == 2:
            for inv, status in state["v"].items():
                out.setdefault(inv, set()).add(status)
    return out


def test_with_the_directory_fsync_it_holds(tmp_path: Path, private_tmp: Path) -> None:
    got = _statuses(_record(tmp_path, "with", True), tmp_path / "check")
    assert got["FS-DIR-ENTRIES"] == {"pass"} and got["FS-SYNC"] == {"pass"}


def test_without_the_directory_fsync_it_fails(tmp_path: Path, private_tmp: Path) -> None:
    run = _record(tmp_path, "without", False)
    meta = json.loads(run.meta_path.read_text())
    meta["jlang"] = canonical(parse(BODY.format(fsync="fsync A")))  # what it claims it ran
    run.meta_path.write_text(json.dumps(meta))
    assert "fail" in _statuses(run, tmp_path / "check")["FS-DIR-ENTRIES"]
