"""Backend selection, the dm backend's availability report, and the
recorder's and CLI's answers to bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.marks import check_label
from harness.record import backends
from harness.record.backends import select_backend
from harness.record.dm import DmBackend
from harness.record.fuse import FuseBackend
from harness.record.qemu import QemuBackend
from harness.record.recorder import RecordRequest, record

CRASHLAB = Path(sys.executable).with_name("crashlab")


def dm_targets_list_log_writes() -> bool:
    proc = subprocess.run(["dmsetup", "targets"], capture_output=True, text=True)
    return proc.returncode == 0 and "log-writes" in proc.stdout


def test_dm_availability_matches_the_kernel():
    ok, why = DmBackend.available()
    assert ok == dm_targets_list_log_writes()
    assert why
    if not ok:
        with pytest.raises(CrashlabError, match="the dm backend is unavailable"):
            select_backend("dm")


def test_auto_prefers_dm_then_fuse_and_says_why():
    if not (DmBackend.available()[0] or FuseBackend.available()[0]):
        if QemuBackend.available()[0]:  # the last resort, never ahead of a host backend
            assert select_backend("auto")[0].name == "qemu"
            return
        with pytest.raises(CrashlabError, match="no recording backend is available"):
            select_backend("auto")
        return
    be, note = select_backend("auto")
    expected = "dm" if DmBackend.available()[0] else "fuse"
    assert be.name == expected
    assert note.startswith(f"backend {expected}")
    if expected == "fuse":
        assert "skipped dm:" in note


def test_auto_order_and_unknown_backend():
    assert [cls.name for cls in backends.ORDER] == ["dm", "fuse", "qemu"]
    with pytest.raises(CrashlabError, match="unknown backend 'nbd'"):
        select_backend("nbd")


def test_fuse_unavailable_without_daemon(monkeypatch, tmp_path):
    monkeypatch.setenv("CRASHLAB_LOGFUSE", str(tmp_path / "missing"))
    ok, why = FuseBackend.available()
    assert not ok


@pytest.mark.parametrize("label", ["", "two words", "tab\tx", "x" * 481, "nul\0"])
def test_bad_mark_labels(label):
    with pytest.raises(CrashlabError, match="bad mark label"):
        check_label(label)


def test_record_rejects_bad_input(tmp_path):
    with pytest.raises(CrashlabError, match="no command"):
        record(RecordRequest([], tmp_path / "r"))
    with pytest.raises(CrashlabError, match="extra_meta may not set backend"):
        record(RecordRequest(["true"], tmp_path / "r", extra_meta={"backend": "x"}))


def test_cli_errors_are_one_line(tmp_path):
    proc = subprocess.run(
        [str(CRASHLAB), "record", "--backend", "dm", "--out", str(tmp_path / "r"), "--", "true"],
        capture_output=True,
        text=True,
    )
    if DmBackend.available()[0]:
        pytest.skip("dm is available here")
    assert proc.returncode == 2
    assert proc.stderr.startswith("crashlab: error: the dm backend is unavailable")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.needs_fuse
def test_cli_record_exit_codes_and_extra_meta(tmp_path, monkeypatch):
    parent = Path("/dev/shm") / f"crashlab-cli-{os.getpid()}"
    env = {**os.environ, "CRASHLAB_TMPDIR": str(parent)}
    ok = subprocess.run(
        [
            str(CRASHLAB),
            "record",
            "--out",
            str(tmp_path / "ok"),
            "--",
            "sh",
            "-c",
            'test "$PWD" = "$CRASHLAB_MNT" && echo hi > $CRASHLAB_MARK',
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert ok.returncode == 0, ok.stderr
    assert "recording with backend fuse" in ok.stderr
    bad = subprocess.run(
        [str(CRASHLAB), "record", "--out", str(tmp_path / "bad"), "--", "false"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 1
    assert "exited with status 1" in bad.stderr
    monkeypatch.setenv("CRASHLAB_TMPDIR", str(parent))
    run = record(
        RecordRequest(
            ["true"],
            tmp_path / "x",
            backend="fuse",
            extra_meta={"seed": 7},
            env={"PATH": os.environ["PATH"]},
        )
    )
    assert run.meta().seed == 7 and run.meta().marks == ()
    parent.rmdir()


def test_dm_log_end_cuts_at_the_last_entry(tmp_path):
    """The dm backend cuts its sparse log device file to the end of the last
    entry; the cut log reads exactly as written."""
    from harness.logformat import LogReader, LogWriter
    from harness.record.dm import log_end

    log = tmp_path / "log"
    with LogWriter(log) as w:
        w.write(8, b"a" * 1024)
        w.flush()
        w.discard(64, 8)
        w.mark("dm-log-writes-end")
    size = log.stat().st_size
    with open(log, "r+b") as f:
        f.truncate(1 << 24)  # the zeroed tail of a log device
    assert log_end(log) == size
    os.truncate(log, log_end(log))
    with LogReader(log) as r:
        assert [e.label for e in r.entries() if e.is_mark] == ["dm-log-writes-end"]


@pytest.mark.needs_fuse
def test_daemon_that_fails_to_start(tmp_path, monkeypatch):
    parent = Path("/dev/shm") / f"crashlab-bad-{os.getpid()}"
    monkeypatch.setenv("CRASHLAB_TMPDIR", str(parent))
    monkeypatch.setenv("CRASHLAB_LOGFUSE", "/bin/false")
    with pytest.raises(CrashlabError, match="logfuse did not start"):
        record(RecordRequest(["true"], tmp_path / "r", backend="fuse"))
    assert list(parent.iterdir()) == []
    assert (
        str(parent) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    )
    parent.rmdir()
