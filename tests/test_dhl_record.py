"""`crashlab record --sut dhl-… --workload …` end to end on the fuse backend:
file SUTs on ext4, raw SUTs on the bare recorded device (``--fs raw``).  The
log holds every mark in order, and the database rebuilt from the log alone
(replay; ext4 journal replay and extraction for the file SUTs; DHL's own
recovery at open) equals the oracle at the end and at a txn-ack.  On the raw
device the log shows each commit protocol's flushes per transaction."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dhl import Database
from harness.fs.ext4.recover import recover_ext4
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.materialize import replay
from harness.rundir import RunDir, RunMeta
from workloads.run import DB_NAME, oracle_from_meta
from workloads.suts import SUTS

pytestmark = pytest.mark.needs_fuse
CRASHLAB = Path(sys.executable).with_name("crashlab")
DHL_SUTS = sorted(n for n, s in SUTS.items() if s.engine == "dhl")
# Three trees, three ops per transaction: every transaction dirties >= 3
# leaves (and the header page unless metadata is embedded).
WORKLOADS = [
    "insert:txns=10,ops=3,tables=3,warmup=40,seed=1",
    "update:txns=10,ops=3,tables=3,order=rand,warmup=40,seed=2",
    "delete:txns=10,ops=3,tables=3,order=rand,warmup=40,seed=3",
]


def dhl_mode(sut: str) -> str:
    return SUTS[sut].mode


def _ours(parent: Path) -> list[str]:
    """Loop devices and mounts that mention ``parent`` (other agents' tests
    run concurrently: only what lives under our private parent is ours)."""
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    text = loops + Path("/proc/mounts").read_text()
    return [ln for ln in text.splitlines() if str(parent) in ln]


def _record(tmp: Path, sut: str, workload: str, fs: str) -> subprocess.CompletedProcess:
    parent = Path("/dev/shm") / f"crashlab-dhlrec-{os.getpid()}-{tmp.name}"
    parent.mkdir()
    try:
        proc = subprocess.run(
            [
                str(CRASHLAB),
                "record",
                "--backend",
                "fuse",
                "--fs",
                fs,
                "--sut",
                sut,
                "--workload",
                workload,
                "--out",
                str(tmp / "run"),
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, CRASHLAB_TMPDIR=str(parent)),
        )
        assert _ours(parent) == [], "a loop device or mount leaked"
        assert list(parent.iterdir()) == [], "a working directory was left behind"
    finally:
        parent.rmdir()
    return proc


def _digest_after(run: RunDir, fs: str, mode: str, tmp: Path, end_mark: str | None) -> str:
    """The DHL digest of the database as a crash at ``end_mark`` (None: the
    end of the log) leaves it, after file-system and DHL recovery."""
    img = tmp / f"img-{end_mark}"
    base, _ = ensure_image(fs)
    replay(base, run.log, img, end_mark=end_mark)
    if fs == "raw":
        db = img
    else:
        rec = recover_ext4(img, tmp / f"files-{end_mark}")
        assert rec.ok, rec.detail
        db = tmp / f"files-{end_mark}" / DB_NAME
    with Database(db, mode) as d:
        d.check()
        return d.digest()


def _marks(run: RunDir) -> list[str]:
    with LogReader(run.log) as r:
        return [e.label for e in r.entries() if e.is_mark]


def expected_marks(n: int) -> list[str]:
    out = ["setup-done"]
    for k in range(1, n + 1):
        out += [f"txn-begin:{k}", f"txn-ack:{k}"]
    return out + ["workload-end"]


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("sut", DHL_SUTS)
def test_record_dhl_workload(tmp_path, sut, workload):
    fs = "raw" if SUTS[sut].raw else "ext4"
    proc = _record(tmp_path, sut, workload, fs)
    assert proc.returncode == 0, proc.stderr
    run = RunDir(tmp_path / "run")
    meta = run.meta().to_json()
    assert meta["sut"] == sut and meta["fs"] == fs and meta["db"] == DB_NAME
    assert meta["image"]["fs"] == fs and meta["exit_status"] == 0
    if fs == "raw":
        assert "--db-env" in meta["command"] and "CRASHLAB_DEV" in meta["command"]
    oracle = oracle_from_meta(RunMeta.from_json(meta))
    n = oracle.spec.txns
    assert meta["runner"]["transactions"] == n and meta["runner"]["dhl_mode"] == dhl_mode(sut)
    assert _marks(run) == expected_marks(n)
    mode = dhl_mode(sut)
    assert _digest_after(run, fs, mode, tmp_path, None) == oracle.final
    # Every DHL mode syncs before dhl_commit returns: at txn-ack:K the
    # (recovered) content is state K.
    k = n // 2
    assert _digest_after(run, fs, mode, tmp_path, f"txn-ack:{k}") == oracle.digests[k]


@pytest.mark.parametrize(
    ("sut", "flushes"),
    [("dhl-tc-raw", 2), ("dhl-cc-raw", 1), ("dhl-cc-opt-raw", 1), ("dhl-nolog-raw", 1)],
)
def test_raw_log_shows_the_commit_protocol(tmp_path, sut, flushes):
    """On the bare device nothing but the engine writes: between txn-begin:K
    and txn-ack:K the log holds exactly the protocol's flushes, each after
    the transaction's page writes (TC: pages, flush, header, flush)."""
    proc = _record(tmp_path, sut, WORKLOADS[0], "raw")
    assert proc.returncode == 0, proc.stderr
    run = RunDir(tmp_path / "run")
    per_txn: list[list[str]] = []
    cur: list[str] | None = None
    with LogReader(run.log) as r:
        for e in r.entries():
            if e.is_mark and e.label.startswith("txn-begin:"):
                cur = []
            elif e.is_mark and e.label.startswith("txn-ack:"):
                assert cur is not None
                per_txn.append(cur)
                cur = None
            elif cur is not None:
                cur.append("F" if e.is_flush else ("W0" if e.sector == 0 else "W"))
    assert len(per_txn) == 10
    for seq in per_txn:
        assert seq.count("F") == flushes, seq
        assert seq[-1] == "F", seq
        if sut == "dhl-tc-raw":  # the header page (sector 0) alone between the two flushes
            first = seq.index("F")
            assert seq[first + 1 :] == ["W0", "F"], seq
            assert seq[:first].count("W") >= 3 and "W0" not in seq[:first], seq
        if sut == "dhl-cc-opt-raw":  # header page untouched unless it changed
            assert seq.count("W") >= 3, seq


@pytest.mark.parametrize(
    ("sut", "fs", "needle"),
    [
        ("dhl-cc-raw", "ext4", "SUT dhl-cc-raw runs on the raw device: record it with --fs raw"),
        ("sqlite-wal-full", "raw", "SUT sqlite-wal-full needs a file system"),
        ("dhl-cc", "raw", "SUT dhl-cc needs a file system"),
    ],
)
def test_sut_and_fs_must_agree(tmp_path, sut, fs, needle):
    proc = subprocess.run(
        [
            str(CRASHLAB),
            "record",
            "--backend",
            "fuse",
            "--fs",
            fs,
            "--sut",
            sut,
            "--workload",
            "insert:txns=2",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"crashlab: error: {needle}"), proc.stderr
    assert not (tmp_path / "run").exists()


def test_raw_command_gets_the_device(tmp_path):
    """A plain command recorded with --fs raw sees the device in CRASHLAB_DEV
    (a block device of the raw image's size) and runs outside any mount."""
    parent = Path("/dev/shm") / f"crashlab-dhlrec-{os.getpid()}-cmd"
    parent.mkdir()
    out = tmp_path / "run"
    script = (
        'test -b "$CRASHLAB_DEV" && test -z "$CRASHLAB_MNT" && '
        'blockdev --getsize64 "$CRASHLAB_DEV" > "$OUTFILE" && '
        'printf x | dd of="$CRASHLAB_DEV" bs=1 seek=4096 conv=fsync status=none'
    )
    try:
        proc = subprocess.run(
            [
                str(CRASHLAB),
                "record",
                "--backend",
                "fuse",
                "--fs",
                "raw",
                "--out",
                str(out),
                "--",
                "sh",
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ, CRASHLAB_TMPDIR=str(parent), OUTFILE=str(tmp_path / "size")),
        )
        assert _ours(parent) == []
    finally:
        for p in parent.iterdir():
            raise AssertionError(f"left behind: {p}")
        parent.rmdir()
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "size").read_text().strip() == str(1 << 20)
    img = tmp_path / "final.img"
    replay(ensure_image("raw")[0], RunDir(out).log, img)
    data = img.read_bytes()
    assert data[4096:4097] == b"x" and data.count(0) == len(data) - 1


def test_full_raw_device_fails_the_commit_unacknowledged(tmp_path):
    """A workload that outgrows the 1 MiB raw device: the commit that writes
    past its end fails (ENOSPC), the record exits 1 with the runner's line,
    the log ends that transaction with txn-begin, txn-error and no txn-ack,
    and the device recovers to the state before it."""
    proc = _record(tmp_path, "dhl-cc-raw", "insert:txns=400,size=3000", "raw")
    assert proc.returncode == 1
    assert (
        "commit failed (attempt 1): commit: write of page 256 failed: No space left on "
        "device (DHL_EIO); stopped" in proc.stderr
    )
    run = RunDir(tmp_path / "run")
    assert run.meta().exit_status == 3
    marks = _marks(run)
    k = int(marks[-2].split(":")[1])
    assert marks[-2].startswith("txn-begin:") and 100 < k < 400
    assert marks[-1].startswith(f"txn-error:{k};attempt=1;op=commit;why=commit_write_of_page_256")
    assert marks == expected_marks(k - 1)[:-1] + [f"txn-begin:{k}", marks[-1]]
    oracle = oracle_from_meta(run.meta())
    assert _digest_after(run, "raw", "cc", tmp_path, None) == oracle.digests[k - 1]
