"""Recording with the fuse backend on real ext4, xfs and btrfs: the log
replays to the final image byte for byte, jbd2 commits show the flush
pattern, and marks land after the flushes of their transaction."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.images import ensure_image
from harness.logformat import LogReader
from harness.materialize import replay
from harness.record.fuse import FuseBackend
from harness.record.recorder import RecordRequest, record

pytestmark = pytest.mark.needs_fuse

BLOCK = 4096
JBD2_MAGIC = bytes.fromhex("c03b3998")
JBD2_COMMIT = (2).to_bytes(4, "big")


def sqlite_loop(mode: str, n: int = 12) -> list[str]:
    """A shell workload: n autocommit inserts by the sqlite3 CLI, each
    followed by a txn-ack mark."""
    script = (
        f'sqlite3 db "pragma journal_mode={mode}; create table t(id integer primary key, v text)"'
        " >/dev/null && echo setup-done > $CRASHLAB_MARK && "
        f"for i in $(seq 1 {n}); do "
        'sqlite3 db "pragma synchronous=full; insert into t values($i, hex(randomblob(100)))"'
        " && echo txn-ack:$i > $CRASHLAB_MARK || exit 1; done"
    )
    return ["sh", "-c", script]


@pytest.fixture
def tmpdir_env(tmp_path, monkeypatch):
    """Working directories of the recordings under one private parent."""
    parent = Path("/dev/shm") / f"crashlab-test-{os.getpid()}-{tmp_path.name}"
    monkeypatch.setenv("CRASHLAB_TMPDIR", str(parent))
    yield parent
    assert not list(parent.iterdir()), "a working directory was left behind"
    parent.rmdir()


def recorded(tmp_path: Path, fs: str, command: list[str]) -> tuple[Path, Path, Path]:
    """Record ``command``; return (run dir, base image, replayed == final)."""
    out = tmp_path / "run"
    final = tmp_path / "final.img"
    run = record(RecordRequest(command, out, fs=fs, backend="fuse", final_image=final))
    meta = run.meta().to_json()
    assert meta["exit_status"] == 0, meta
    assert meta["backend"] == "fuse" and meta["fs"] == fs
    base, digest = ensure_image(fs)
    assert meta["image"] == {"fs": fs, "path": str(base), "sha256": digest}
    replayed = tmp_path / "replayed.img"
    with LogReader(run.log) as r:
        n = r.summary().entries
        assert r.salvaged == 0 and r.nr_entries == n  # super block up to date
    assert replay(base, run.log, replayed) == n
    assert replayed.read_bytes() == final.read_bytes(), "replay differs from the final image"
    return out, base, final


def journal_sectors(image: Path) -> set[int]:
    """The 512-byte sectors of the ext4 journal (inode 8)."""
    out = subprocess.run(
        ["debugfs", "-R", "stat <8>", str(image)], capture_output=True, text=True, check=True
    ).stdout
    blocks: set[int] = set()
    for m in re.finditer(r"\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?", out):
        start = int(m.group(3))
        end = int(m.group(4) or start)
        blocks.update(range(start, end + 1))
    assert len(blocks) >= 1024, out
    return {b * (BLOCK // 512) + i for b in blocks for i in range(BLOCK // 512)}


@pytest.mark.parametrize("mode", ["delete", "wal"])
def test_ext4_sqlite_log(tmp_path, tmpdir_env, mode):
    out, base, final = recorded(tmp_path, "ext4", sqlite_loop(mode))
    jsec = journal_sectors(base)
    with LogReader(out / "writes.log") as r:
        entries = list(r.entries())
        commits = []
        for e in entries:
            if e.has_payload and e.sector in jsec:
                data = r.payload(e)
                for off in range(0, len(data), BLOCK):
                    if data[off : off + 4] == JBD2_MAGIC and data[off + 4 : off + 8] == JBD2_COMMIT:
                        commits.append(e.index)
    assert len(commits) >= 12, "each synchronous insert commits the journal at least once"
    last_commit = -1
    for c in commits:
        # journal blocks, FLUSH, commit block (alone), FLUSH
        assert entries[c].nr_sectors == BLOCK // 512
        assert entries[c - 1].is_flush and not entries[c - 1].has_payload
        assert entries[c + 1].is_flush and not entries[c + 1].has_payload
        body = [e for e in entries[last_commit + 1 : c - 1] if e.has_payload and e.sector in jsec]
        assert body, f"commit at entry {c} without journal blocks before its flush"
        last_commit = c
    marks = [e for e in entries if e.is_mark]
    assert [m.label for m in marks] == ["setup-done"] + [f"txn-ack:{i}" for i in range(1, 13)]
    for m in marks:
        before = entries[: m.index]
        last_write = max(e.index for e in before if e.is_write)
        assert any(e.is_flush for e in before[last_write + 1 :]) or before[last_write].is_flush, (
            f"mark {m.label} is not preceded by a flush after the last write"
        )
    # The database in the final image holds the 12 rows.
    db = tmp_path / "db"
    subprocess.run(["debugfs", "-R", f"dump /db {db}", str(final)], capture_output=True, check=True)
    rows = subprocess.run(
        ["sqlite3", str(db), "select count(*) from t"], capture_output=True, text=True, check=True
    ).stdout
    assert rows.strip() == "12"


@pytest.mark.parametrize("fs", ["xfs", "btrfs"])
def test_other_fs_replay_equals_final(tmp_path, tmpdir_env, fs):
    out, _, _ = recorded(tmp_path, fs, sqlite_loop("wal", 5))
    assert out.joinpath("meta.json").exists()


def test_discard_and_zero_range_are_logged(tmp_path, tmpdir_env):
    """Discards and zeroing of the block device reach the log as DISCARD and
    zero-write entries, and the replay still equals the final image."""
    script = (
        "dev=$(findmnt -n -o SOURCE --target $CRASHLAB_MNT); cd /; umount $CRASHLAB_MNT && "
        "blkdiscard -f -o 1048576 -l 1048576 $dev && fallocate -z -o 4194304 -l 65536 $dev && "
        "mount $dev $CRASHLAB_MNT && echo done > $CRASHLAB_MARK"
    )
    out, _, _ = recorded(tmp_path, "ext4", ["sh", "-c", script])
    with LogReader(out / "writes.log") as r:
        entries = list(r.entries())
        discards = [(e.sector, e.nr_sectors) for e in entries if e.is_discard]
        zeros = [e for e in entries if e.has_payload and e.sector == 4194304 // 512]
        assert (1048576 // 512, 1048576 // 512) in discards
        assert zeros and not any(r.payload(zeros[0]))


def test_mark_channel_rules(tmp_path, tmpdir_env):
    """Several lines in one write are several marks; a label too long for a
    header fails the write and logs nothing."""
    script = (
        "printf 'a\\nb\\n' > $CRASHLAB_MARK && "
        "if printf '%0600d\\n' 0 > $CRASHLAB_MARK; then exit 3; fi; echo c > $CRASHLAB_MARK"
    )
    out, _, _ = recorded(tmp_path, "ext4", ["sh", "-c", script])
    with LogReader(out / "writes.log") as r:
        assert [e.label for e in r.entries() if e.is_mark] == ["a", "b", "c"]


def test_failing_command_still_leaves_a_run(tmp_path, tmpdir_env):
    out = tmp_path / "run"
    run = record(
        RecordRequest(["sh", "-c", "echo before > $CRASHLAB_MARK; exit 7"], out, backend="fuse")
    )
    meta = run.meta().to_json()
    assert meta["exit_status"] == 7 and meta["marks"] == ["before"]
    with pytest.raises(CrashlabError, match="already holds a recorded run"):
        record(RecordRequest(["true"], out, backend="fuse"))


def test_attach_sets_and_restores_loop_queue(tmp_path, tmpdir_env, monkeypatch):
    """While attached, the loop queue does not merge and caps requests at
    1 MiB; afterwards the previous values are back and the device is gone."""
    from harness import sysops
    from harness.record import fuse as fusemod

    calls: list[tuple[str, dict[str, str], dict[str, str]]] = []

    def spy(dev: str, settings: dict[str, str]) -> dict[str, str]:
        previous = sysops.set_queue(dev, settings)
        calls.append((dev, settings, previous))
        return previous

    monkeypatch.setattr(fusemod, "set_queue", spy)
    tmpdir_env.mkdir()
    work = tmpdir_env / "w"
    work.mkdir()
    image = work / "img"
    base, _ = ensure_image("ext4")
    image.write_bytes(base.read_bytes())
    queue = None
    with FuseBackend().attach(image, work / "log", work) as dev:
        queue = Path("/sys/block") / Path(dev.path).name / "queue"
        assert (queue / "nomerges").read_text().strip() == "2"
        assert (queue / "max_sectors_kb").read_text().strip() == "1024"
        with open(dev.path, "r+b", buffering=0) as f:
            f.write(b"\xab" * 4096)
            os.fsync(f.fileno())
        dev.mark("attached")
    dev_name, _, previous = calls[0]
    assert calls[1] == (dev_name, previous, {"nomerges": "2", "max_sectors_kb": "1024"})
    for name, value in previous.items():
        assert (queue / name).read_text().strip() == value
    assert str(work) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    with LogReader(work / "log") as r:
        kinds = [("mark" if e.is_mark else "flush" if e.is_flush else "write") for e in r]
    assert kinds[-2:] == ["flush", "mark"] and "write" in kinds
    assert image.read_bytes()[:4096] == b"\xab" * 4096
    for p in work.iterdir():
        if p.is_dir():
            p.rmdir()
        else:
            p.unlink()
    work.rmdir()


def _attached_work(root: Path) -> tuple[Path, Path]:
    """A working folder holding a copy of the ext4 base image."""
    root.mkdir()
    work = root / "w"
    work.mkdir()
    base, _ = ensure_image("ext4")
    (work / "img").write_bytes(base.read_bytes())
    return work, work / "img"


def _nothing_left(work: Path) -> None:
    """Nothing mounted or attached under ``work``; then remove it."""
    assert str(work) not in Path("/proc/mounts").read_text()
    assert str(work) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    shutil.rmtree(work)


def test_teardown_waits_for_a_loop_device_still_open_at_detach(tmpdir_env):
    """Someone (a udev probe, a blkid) still has the loop device open when
    it is detached: the kernel lets go of the daemon's file only at that
    last close, and the daemon's unmount waits for it instead of failing
    (CI once failed so: "logfuse did not exit in 30 s", the mount left)."""
    work, image = _attached_work(tmpdir_env)
    holder: list[int] = []
    with FuseBackend().attach(image, work / "log", work) as dev:
        holder.append(os.open(dev.path, os.O_RDONLY))
        threading.Timer(1.0, os.close, holder).start()
    _nothing_left(work)


def test_a_mount_that_stays_busy_is_detached_and_its_daemon_ended(tmpdir_env, monkeypatch):
    """The daemon's mount stays busy past the retries (its file held open
    here): the teardown says so in one error, ends the daemon by its PID and
    leaves nothing mounted."""
    from harness.record import fuse as fusemod

    monkeypatch.setattr(fusemod, "UNMOUNT_BUSY_S", 0.5)
    work, image = _attached_work(tmpdir_env)
    held = None
    with pytest.raises(CrashlabError, match="fusermount3 -u .*busy.*logfuse \\(pid"):
        with FuseBackend().attach(image, work / "log", work):
            held = open(work / "fuse" / "disk", "rb")  # noqa: SIM115 (held past the teardown)
    assert held is not None
    with contextlib.suppress(OSError):  # its file system is gone
        held.close()
    daemon_pid = int((work / "owned-processes").read_text().split()[1])
    assert (
        not Path(f"/proc/{daemon_pid}").exists()
        or Path(f"/proc/{daemon_pid}/stat").read_text().split()[2] == "Z"
    )
    _nothing_left(work)
