"""What the runner tests of every engine share (tests/test_workloads_runner.py
for SQLite, tests/test_dhl_runner.py for DHL)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from workloads.generate import write_opstream
from workloads.run import runner_command, runner_path
from workloads.spec import WorkloadSpec, parse_spec
from workloads.suts import get_sut


@contextmanager
def shm_dir(prefix: str) -> Iterator[Path]:
    """A private scratch folder on tmpfs (where there is one)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix=prefix, dir=base) as d:
        yield Path(d)


def expected_marks(ntxns: int) -> list[str]:
    out = ["setup-done"]
    for k in range(1, ntxns + 1):
        out += [f"txn-begin:{k}", f"txn-ack:{k}"]
    return out + ["workload-end"]


def runner(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(runner_path()), *args], capture_output=True, text=True, env=env)


def fsize_limit(limit: int) -> Callable[[], None]:
    """A preexec_fn: writes past ``limit`` bytes fail with EFBIG."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def fail_a_commit(
    sut_name: str, shm: Path
) -> tuple[subprocess.CompletedProcess, int, WorkloadSpec]:
    """Run a workload whose database outgrows a file-size limit: the commit
    that crosses it fails.  Asserts what every engine must show — the runner
    stops (exit 3) with one line, that transaction K has txn-begin and
    txn-error but no txn-ack, every earlier one is acknowledged — and
    returns (process, K, spec)."""
    spec = parse_spec("insert:txns=300,size=3000")
    ops = write_opstream(spec, shm / "ops")
    marks = shm / "marks"
    marks.touch()
    env = dict(os.environ, CRASHLAB_MARK=str(marks))
    cmd = runner_command(get_sut(sut_name), ops, shm / "db")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, preexec_fn=fsize_limit(200 * 1024)
    )
    assert proc.returncode == 3, proc.stderr
    lines = marks.read_text().splitlines()
    begin, error = lines[-2:]
    assert begin.startswith("txn-begin:"), lines[-3:]
    k = int(begin.split(":")[1])
    assert error.startswith(f"txn-error:{k};attempt=1;op=commit;why="), error
    assert 5 < k < spec.txns
    assert f"txn-ack:{k}" not in lines
    assert lines == expected_marks(k - 1)[:-1] + [begin, error]
    assert proc.stderr.startswith(f"crashlab-runner: txn {k}: commit failed (attempt 1): ")
    assert proc.stderr.rstrip().endswith("; stopped")
    assert len(proc.stderr.splitlines()) == 1
    return proc, k, spec
