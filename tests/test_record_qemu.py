"""The qemu backend records on the kernel's real dm-log-writes target (a
Debian kernel booted under TCG).  What must hold of its logs: the project's
reader reads them as written (the kernel's super block count included);
replay to a mark, as xfstests' replay-log does it (``crashlab replay
--end-mark``), gives the acknowledged database; every ``txn-ack`` follows
the flush that made its transaction durable; the crash states honour the
kernel's log order (FUA writes logged on completion, the others at the next
flush); ``crashlab check`` holds for correct SQLite configurations.  And a
guest that fails or hangs leaves one line, no process and no file."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from runner_support import expected_marks
from support import crashlab, procs_mentioning

from harness.errors import CrashlabError
from harness.fs import get_fs
from harness.logformat import LogReader
from harness.outlock import LOCK_NAME
from harness.qemu.initramfs import base_archive
from harness.qemu.vm import guest_kernel
from harness.record.blktrace import events
from harness.record.recorder import RecordRequest, record
from harness.report.plots import timeline_chart
from harness.rundir import RunDir
from harness.states import Enumeration, Options, state_from_id
from workloads.oracle import Oracle, sqlite_digest
from workloads.spec import parse_spec

CRASHLAB = Path(sys.executable).with_name("crashlab")
TXNS = 10  # MULTI's transactions


def _meta(run: Path) -> dict:
    return json.loads((run / "meta.json").read_text())


def test_the_kernels_log_reads_back(qemu_runs: dict[str, Path]) -> None:
    for sut, run in qemu_runs.items():
        with LogReader(run / "writes.log") as r:  # no salvage: the count is right
            s = r.summary()
            marks = [e.label for e in r.entries() if e.is_mark]
        assert s.nr_entries_super == s.entries, sut
        assert marks == [*expected_marks(TXNS), "dm-log-writes-end"], sut
        assert s.fua > 0 and s.metadata > 0, sut  # real FUA and REQ_META, unlike fuse
        meta = _meta(run)
        assert meta["backend"] == "qemu" and meta["log_order"] == "dm-log-writes"
        guest = meta["guest"]
        assert meta["kernel"] == guest["release"]
        assert all(
            re.fullmatch(r"[0-9a-f]{64}", guest[k])
            for k in ("kernel_sha256", "initramfs_sha256", "job_sha256")
        )
        # the initramfs is byte-reproducible: built again, same digest
        modules = get_fs("ext4").guest_modules
        assert base_archive(guest_kernel(modules), modules).sha256 == guest["initramfs_sha256"]
        assert meta["runner"]["transactions"] == TXNS


def test_every_txn_ack_follows_its_flush(qemu_runs: dict[str, Path]) -> None:
    """Between ``txn-begin:K`` and ``txn-ack:K`` the log has a FLUSH, and
    after the last one only FUA writes (durable on completion) precede the
    mark: everything logged before the acknowledgement is durable."""
    for sut, run in qemu_runs.items():
        with LogReader(run / "writes.log") as r:
            entries = list(r.entries())
        begun: dict[str, int] = {}
        acks = 0
        for i, e in enumerate(entries):
            if e.is_mark and e.label.startswith("txn-begin:"):
                begun[e.label.split(":")[1]] = i
            if e.is_mark and e.label.startswith("txn-ack:"):
                k = e.label.split(":")[1]
                flushes = [j for j in range(begun[k], i) if entries[j].is_flush]
                assert flushes, f"{sut}: txn-ack:{k} without a flush since txn-begin:{k}"
                tail = entries[flushes[-1] + 1 : i]
                assert all(t.is_mark or t.is_fua for t in tail), f"{sut}: txn-ack:{k}"
                acks += 1
        assert acks == TXNS


def test_replay_to_a_mark_gives_the_acknowledged_database(
    qemu_runs: dict[str, Path], tmp_path: Path
) -> None:
    """replay-log's --end-mark semantics: entries up to and including the
    mark.  At ``txn-ack:K`` the recovered database is the oracle's after K;
    replayed to the end, the image is the guest's final image byte for byte."""
    for sut, run in qemu_runs.items():
        oracle = Oracle(parse_spec(_meta(run)["workload"]))
        for k in (1, 4, TXNS):
            img = tmp_path / f"{sut}-{k}.img"
            p = crashlab("replay", str(run), "--end-mark", f"txn-ack:{k}", "-o", str(img))
            assert p.returncode == 0, p.stderr
            out = tmp_path / f"{sut}-{k}"
            rec = get_fs("ext4").recover(
                img, out, workdir=tmp_path / f"w-{sut}-{k}", db_name="crashlab.db"
            )
            assert rec.ok, rec.detail
            assert sqlite_digest(out / "crashlab.db") == oracle.digests[k], (sut, k)
        end = tmp_path / f"{sut}-end.img"
        p = crashlab("replay", str(run), "--end-mark", "dm-log-writes-end", "-o", str(end))
        assert p.returncode == 0, p.stderr
        assert end.read_bytes() == (run.parent / f"{sut}.final.img").read_bytes()


def test_states_follow_the_kernels_log_order(qemu_runs: dict[str, Path]) -> None:
    """In the kernel's order a non-FUA write logged after a FUA write may
    have persisted while the FUA write was lost: such states exist in this
    log's reorder enumeration, are impossible in completion order, and are
    found by ID only in the kernel's order."""
    run = qemu_runs["sqlite-wal-full"]
    assert RunDir(run).log_order == "dm-log-writes"
    found = []
    with LogReader(run / "writes.log") as r:
        entries = list(r.entries())
        opts = Options(strategy="reorder", dedup=False, log_order="dm-log-writes")
        for s in Enumeration(r, opts):
            kept = set(s.kept_entries)
            lost_fua = [d for d in s.dropped_entries if entries[d].is_fua]
            if any(k > d and not entries[k].is_fua for d in lost_fua for k in kept):
                found.append(s.id)
        assert found, "no state keeps a non-FUA write past a lost FUA write"
        completion = {
            s.id
            for s in Enumeration(
                r, Options(strategy="reorder", dedup=False, log_order="completion")
            )
        }
        assert not set(found) & completion
        with pytest.raises(CrashlabError, match="FUA write"):
            state_from_id(r, found[0])
        assert state_from_id(r, found[0], "dm-log-writes").id == found[0]


def test_blktrace_agrees_with_the_log(qemu_runs: dict[str, Path], tmp_path: Path) -> None:
    """``--blktrace``: blkparse's text beside the log; every write the
    device was asked for during the command is a write of the log, every
    FUA write a FUA entry; the report draws its I/O timeline."""
    run = qemu_runs["sqlite-wal-full"]
    evs = events(run / "blktrace.txt")
    writes = Counter((e.sector, e.sectors) for e in evs if e.op == "W" and e.sector is not None)
    fua = Counter((e.sector, e.sectors) for e in evs if e.op == "W" and e.fua)
    assert sum(writes.values()) > TXNS and sum(fua.values()) > 0
    assert any(e.preflush for e in evs)
    with LogReader(run / "writes.log") as r:
        logged = [e for e in r.entries() if e.has_payload]
    assert not writes - Counter((e.sector, e.nr_sectors) for e in logged)
    assert not fua - Counter((e.sector, e.nr_sectors) for e in logged if e.is_fua)
    assert not (qemu_runs["sqlite-delete-extra"] / "blktrace.txt").exists()
    png = tmp_path / "timeline.png"
    timeline_chart(run / "blktrace.txt", png, "timeline")
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("strategy", ["prefix", "reorder"])
def test_check_holds_for_correct_sqlite(qemu_runs: dict[str, Path], strategy: str) -> None:
    for sut, run in qemu_runs.items():
        p = crashlab("check", str(run), "--strategy", strategy)
        assert p.returncode == 0, p.stdout + p.stderr
        (res,) = glob.glob(str(run / "check" / f"{strategy}-*" / "result.json"))
        result = json.loads(Path(res).read_text())
        assert result["options"]["log_order"] == "dm-log-writes"
        assert result["violations"] == [], (sut, strategy)
        assert result["states"]["checked"] > TXNS
        assert all(v["fail"] == 0 for v in result["verdicts"].values()), (sut, strategy)


@pytest.mark.needs_qemu
def test_a_failing_guest_is_one_line_and_leaves_nothing(private_tmp: Path, tmp_path: Path) -> None:
    """A base image with no file system: the guest's mount fails; the error
    names it, and no run folder, qemu process or working file is left."""
    zeros = tmp_path / "zeros.img"
    with open(zeros, "wb") as f:
        f.truncate(16 << 20)
    out = tmp_path / "run"
    with pytest.raises(CrashlabError, match=r"in the guest: mount -t ext4 .* failed"):
        record(RecordRequest(["true"], out, fs="ext4", backend="qemu", base=(zeros, "0" * 64)))
    assert not out.exists()


@pytest.mark.needs_qemu
def test_a_hung_guest_is_killed_and_its_console_kept(
    private_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRASHLAB_QEMU_TIMEOUT", "20")
    out = tmp_path / "run"
    t0 = time.monotonic()
    with pytest.raises(CrashlabError, match="did not finish in 20 s and was killed") as e:
        record(RecordRequest(["sleep", "600"], out, fs="ext4", backend="qemu"))
    assert time.monotonic() - t0 < 60
    assert str(out / "console.log") in str(e.value)
    console = (out / "console.log").read_text()
    assert "crashlab-guest: running the command on ext4" in console
    # no half log (the lock file stays: harness/outlock.py)
    assert sorted(p.name for p in out.iterdir() if p.name != LOCK_NAME) == ["console.log"]


@pytest.mark.needs_qemu
def test_ctrl_c_stops_the_guest(private_tmp: Path, tmp_path: Path) -> None:
    """SIGINT while the guest runs: qemu is killed by its PID, exit 130."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [str(CRASHLAB), "record", "--backend", "qemu", "--out", str(out), "--", "sleep", "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 60
    while not [p for p in procs_mentioning(str(private_tmp)) if p != proc.pid]:
        assert time.monotonic() < deadline and proc.poll() is None, "qemu never started"
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert not out.exists()
