"""Killing a recording mid-run — the workload (SIGINT, SIGKILL) or the
`crashlab record` process itself (SIGINT, SIGTERM) — leaves no loop device,
mount or daemon behind, and the log written up to then still reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import CRASHLAB, procs_mentioning, tagged

from harness import env
from harness.logformat import LogReader, LogWriter
from harness.record import proc as proc_mod
from harness.record.recorder import RecordRequest, record
from harness.sysops import Interrupted, in_use_under

pytestmark = pytest.mark.needs_fuse


def reads(log: Path) -> list[str]:
    with LogReader(log, salvage=True) as r:
        return [e.label or "" for e in r.entries() if e.is_mark]


PRELUDE = (
    'sqlite3 db "create table t(x); insert into t values(1)" && echo one > $CRASHLAB_MARK '
    "|| exit 1; "
)


@pytest.mark.parametrize("sig", ["INT", "KILL"])
def test_workload_killed(tmp_path, private_tmp, sig):
    # A background child keeps the mount busy unless the recorder ends the
    # whole process group of the command.
    script = PRELUDE + f"(cd $CRASHLAB_MNT && sleep 60) & kill -{sig} $$; sleep 60"
    t0 = time.monotonic()
    run = record(RecordRequest(["sh", "-c", script], tmp_path / "run", backend="fuse"))
    assert time.monotonic() - t0 < 20
    meta = run.meta().to_json()
    assert meta["signal"] == f"SIG{sig}"
    assert meta["exit_status"] == 128 + getattr(signal, f"SIG{sig}")
    assert reads(run.log) == ["one"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_recorder_interrupted(tmp_path, private_tmp, sig):
    started = tmp_path / "started"
    out = tmp_path / "run"
    script = PRELUDE + f"touch {started}; sleep 60"
    proc = subprocess.Popen(
        [str(CRASHLAB), "record", "--backend", "fuse", "--out", str(out), "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.05)
        daemons = procs_mentioning(str(private_tmp))
        assert daemons, "no daemon found while recording"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert "interrupted" in err
    for pid in daemons:
        assert not Path(f"/proc/{pid}").exists()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["interrupted"] == sig.name
    assert reads(out / "writes.log") == ["one"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_while_the_command_starts(tmp_path, private_tmp, monkeypatch, sig):
    # Under load the command can run (here: its shell has started) before
    # Popen has returned in the recorder, so an interrupt can land while the
    # recorder still starts it and notes its group.  That interrupt must end
    # the group too: a live workload keeps the mount busy, and the teardown
    # then hangs on its retries with the loop device attached.
    real = proc_mod.own_process

    def own_process(folder: Path, kind: str, pid: int) -> None:
        if kind == "group":
            os.kill(os.getpid(), sig)  # the interrupt, just before the note
        real(folder, kind, pid)

    monkeypatch.setattr(proc_mod, "own_process", own_process)
    token = f"start-{os.getpid()}-{time.monotonic_ns()}"
    script = PRELUDE + "(sleep 60) & sleep 60"
    t0 = time.monotonic()
    with pytest.raises(Interrupted) as caught:
        record(
            RecordRequest(
                ["sh", "-c", script],
                tmp_path / "run",
                backend="fuse",
                env={**os.environ, "CRASHLAB_TEST_TOKEN": token},
            )
        )
    assert time.monotonic() - t0 < 20
    assert caught.value.signum == sig
    assert tagged(token) == [], "the workload outlived the interrupted recording"
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["interrupted"] == sig.name


def test_recorder_killed_outright_is_reaped(tmp_path, private_tmp):
    # SIGKILL gives the recorder no chance to tear down: its workload, the
    # FUSE daemon (each in its own session), the loop device and both mounts
    # stay.  The next reaper (a check, or the next recording) takes them
    # down by the names and PIDs the dead recorder noted.
    started = tmp_path / "started"
    script = PRELUDE + f"touch {started}; sleep 600"
    token = f"reap-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [
            str(CRASHLAB),
            "record",
            "--backend",
            "fuse",
            "--out",
            str(tmp_path / "run"),
            "--",
            "sh",
            "-c",
            script,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CRASHLAB_TEST_TOKEN": token},
    )
    deadline = time.monotonic() + 30
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the workload never started"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    (workdir,) = private_tmp.iterdir()
    left = in_use_under(workdir)
    assert any(x.startswith("/dev/loop") for x in left) and len(left) >= 3, left
    orphans = procs_mentioning(str(private_tmp))
    assert orphans, "the daemon should outlive its recorder"
    assert tagged(token), "the workload should outlive its recorder"
    assert env.reap_work_folders() == [workdir]
    assert in_use_under(private_tmp) == []
    assert procs_mentioning(str(private_tmp)) == [] and tagged(token) == []
    assert not workdir.exists()


def test_a_killed_workload_recording_is_reaped_by_the_next_command(tmp_path, private_tmp):
    # `record --sut` has two working folders: the recorder's and the
    # workload's (its op stream and stats).  Both carry their owner's PID
    # and start time, so after a SIGKILL of the recorder any next command
    # takes down what is mounted under them and removes them.
    token = f"wl-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [
            str(CRASHLAB),
            "record",
            "--backend",
            "fuse",
            "--sut",
            "sqlite-wal-full",
            "--workload",
            "insert:txns=1000000,ops=1,tables=1,seed=1",
            "--out",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CRASHLAB_TEST_TOKEN": token},
    )
    try:
        deadline = time.monotonic() + 30
        while (
            not any(in_use_under(d) for d in private_tmp.iterdir())
            or len(list(private_tmp.iterdir())) < 2
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no workload ran"
            time.sleep(0.05)
        time.sleep(0.5)  # the workload is writing
    finally:
        proc.kill()
        proc.wait()
    kinds = sorted(d.name.split("-")[1] for d in private_tmp.iterdir())
    assert kinds == ["rec", "wl"], kinds
    assert in_use_under(private_tmp) and tagged(token)
    log = tmp_path / "x.log"
    with LogWriter(log) as w:
        w.mark("m")
    p = subprocess.run(
        [str(CRASHLAB), "log", "stat", str(log)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert list(private_tmp.iterdir()) == []
    assert in_use_under(private_tmp) == [] and tagged(token) == []
    assert procs_mentioning(str(private_tmp)) == []
