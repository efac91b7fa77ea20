"""What the environment does to a command: a full or read-only output
folder or ``CRASHLAB_TMPDIR``, one that cannot be made, ``--out`` naming a
file, an unreachable Dask scheduler: each is one line, exit 2, no
traceback, nothing half-written and no working folder left.  A bug (an
exception crashlab did not expect, in the command or in a worker) is one
line naming a file that holds the traceback, exit 70."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import CRASHLAB, ROOT, Recordings

from harness.rundir import RunDir

pytestmark = pytest.mark.needs_fuse
TINY = "insert:txns=3,ops=1,tables=1,seed=1"


@pytest.fixture(scope="module")
def run(recorded: Recordings) -> RunDir:
    return recorded("sqlite-wal-full", TINY)


@contextlib.contextmanager
def tmpfs(where: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (read-only if asked: chmod
    does not stop root), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def crashlab(*args: str | Path, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if tmp is not None:
        env["CRASHLAB_TMPDIR"] = str(tmp)
    return subprocess.run(
        [str(CRASHLAB), *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )


def error(p: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one stderr line of a command that failed with ``code``."""
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def check(run: RunDir, out: Path, tmp: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return crashlab("check", run.path, "--out", out, "--jobs", "2", "--no-progress", *more, tmp=tmp)


def test_a_full_output_folder(run: RunDir, tmp_path: Path, private_tmp: Path) -> None:
    with tmpfs(tmp_path / "full", "8k") as full:
        line = error(check(run, full / "c", private_tmp))
        assert line == f"crashlab: error: {full}/c/states.jsonl: no space left on the device"
        assert not (full / "c" / "result.json").exists()  # whole or absent
    assert list(private_tmp.iterdir()) == []


def test_a_sweep_into_a_full_output_folder_leaves_no_working_folder(
    tmp_path: Path, private_tmp: Path
) -> None:
    # the recording's log is copied out last: that copy failing left the
    # recorder's working folder (its disk image) behind
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        f'[[cell]]\nsut = "sqlite-wal-full"\nworkload = "{TINY}"\nstrategies = ["prefix"]\n'
    )
    with tmpfs(tmp_path / "full", "64k") as full:
        line = error(
            crashlab(
                "sweep",
                "--matrix",
                matrix,
                "--out",
                full / "s",
                "--jobs",
                "1",
                "--no-progress",
                tmp=private_tmp,
            )
        )
        assert line.startswith(f"crashlab: error: {full}/s/runs/")
        assert line.endswith("/writes.log: no space left on the device")
        assert not list((full / "s" / "runs").glob("*/.writes.log.partial"))
    assert list(private_tmp.iterdir()) == []


def test_a_read_only_output_folder(run: RunDir, tmp_path: Path, private_tmp: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        assert error(check(run, ro, private_tmp)) == f"crashlab: error: {ro}: read-only file system"
        assert (
            error(check(run, ro / "new", private_tmp))
            == f"crashlab: error: {ro}/new: read-only file system"
        )
    assert list(private_tmp.iterdir()) == []


def test_a_full_crashlab_tmpdir(run: RunDir, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "tmp", "64k") as tmp:
        line = error(check(run, tmp_path / "c", tmp))
        assert line.startswith(f"crashlab: error: {tmp}/crashlab-check-")
        assert line.endswith(
            f": no space left on the device (a working folder under {tmp}: "
            "set CRASHLAB_TMPDIR to another folder)"
        )
        assert list(tmp.iterdir()) == []
    assert not (tmp_path / "c").exists()  # made for the check, nothing in it: gone


def test_a_read_only_or_unmakeable_crashlab_tmpdir(run: RunDir, tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        for tmp, why in (
            (ro, "read-only file system"),
            (ro / "missing", "read-only file system"),
            (a_file / "tmp", "Not a directory"),
        ):
            assert error(check(run, tmp_path / "c", tmp)) == (
                f"crashlab: error: {tmp}: cannot make a working folder there ({why}; set "
                "CRASHLAB_TMPDIR to another folder)"
            )
            assert not (tmp_path / "c").exists()


def test_a_missing_crashlab_tmpdir_is_made(run: RunDir, tmp_path: Path) -> None:
    tmp = tmp_path / "not" / "yet"
    assert check(run, tmp_path / "c", tmp).returncode == 0
    assert list(tmp.iterdir()) == []


def test_out_naming_a_file(run: RunDir, tmp_path: Path, private_tmp: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("mine\n")
    assert (
        error(check(run, a_file, private_tmp))
        == f"crashlab: error: {a_file}: exists and is not a folder"
    )
    assert (
        error(crashlab("sweep", "--out", a_file, tmp=private_tmp))
        == f"crashlab: error: {a_file}: exists and is not a folder"
    )
    assert (
        error(check(run, a_file / "sub", private_tmp))
        == f"crashlab: error: {a_file}/sub: exists and is not a folder"
    )
    assert a_file.read_text() == "mine\n"


def test_an_unreachable_scheduler(run: RunDir, tmp_path: Path, private_tmp: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    t0 = time.monotonic()
    line = error(
        check(run, tmp_path / "c", private_tmp, "--executor", "dask", "--scheduler", address)
    )
    assert time.monotonic() - t0 < 10
    assert line == (
        f"crashlab: error: --scheduler {address}: no Dask scheduler answers there "
        "(Connection refused)"
    )
    assert not (tmp_path / "c").exists()
    line = error(
        crashlab(
            "sweep",
            "--out",
            tmp_path / "s",
            "--executor",
            "dask",
            "--scheduler",
            address,
            tmp=private_tmp,
        )
    )
    assert "no Dask scheduler answers there" in line and not (tmp_path / "s").exists()


# An unexpected exception: in the check's parent, or in a worker process
# (forked: the patch is inherited).
BUG = """
import sys
import harness.check.check as check
import harness.check.worker as worker
def boom(*args, **kwargs):
    raise RuntimeError("an unexpected bug")
if sys.argv[1] == "worker":
    worker.StateChecker.lines = boom
else:
    check.summarise = boom
sys.argv = ["crashlab", *sys.argv[2:]]
from harness.cli import main
main()
"""


@pytest.mark.parametrize("where", ["parent", "worker"])
def test_a_bug_is_one_line_and_a_file(
    run: RunDir, tmp_path: Path, private_tmp: Path, where: str
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BUG,
            where,
            "check",
            str(run.path),
            "--out",
            str(tmp_path / "c"),
            "--jobs",
            "2",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "CRASHLAB_TMPDIR": str(private_tmp)},
    )
    out, err = proc.communicate(timeout=300)
    line = error(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), 70)
    (saved,) = private_tmp.iterdir()  # and no working folder
    assert line == f"crashlab: internal error, please report; details in {saved}"
    assert saved.name.startswith("crashlab-internal-error-")
    assert saved.name.endswith(f"-{proc.pid}.txt")
    text = saved.read_text()
    assert text.startswith(f"crashlab check {run.path}")
    assert "RuntimeError: an unexpected bug" in text and "Traceback" in text
    if where == "worker":
        assert "RemoteTraceback" in text  # the worker's own traceback too
    assert not (tmp_path / "c" / "result.json").exists()
    saved.unlink()


def test_exit_codes_are_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "exit code 70" in readme and "--force" in readme
