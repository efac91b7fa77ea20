"""Running a workload: the runner's command line for a SUT and a spec, the
workload part of a run's ``meta.json``, recording it (:func:`record_workload`,
on top of ``harness/record``, which knows nothing of workloads), and the
oracle rebuilt from a run.

meta.json keys written here (merged into the recorder's):

    "sut":      SUT name (workloads/suts.py)
    "workload": canonical spec string (workloads/spec.py), seed included
    "seed":     the spec's seed (also inside "workload"; kept for readers)
    "db":       the database file name, relative to the file system's root (for a
                raw SUT: the name the checkers give the recovered device image)
    "runner":   the runner's --stats report (added after the run, if any)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.env import runner_override, temporary_folder
from harness.errors import CrashlabError
from harness.faults import PROCESS, Fault, by_stage
from harness.fs import NO_FS, get_fs
from harness.marks import txn_mark
from harness.record.backend import DEV_ENV
from harness.record.recorder import RecordRequest, record
from harness.rundir import RunDir, RunMeta
from workloads.generate import write_opstream
from workloads.jlang.lang import parse_canonical
from workloads.jlang.oracle import JlangOracle
from workloads.jlang.spec import DB_FOLDER, JlangSpec, is_jlang, parse_jlang_spec
from workloads.oracle import Oracle
from workloads.spec import WorkloadSpec, parse_spec
from workloads.suts import SUTS, Sut, get_sut

BUILD_DIR = Path(__file__).resolve().parent / "build"
DB_NAME = "crashlab.db"


def runner_path(*, asan: bool = False, name: str = "") -> Path:
    """The built ``crashlab-runner`` (or its ASan+UBSan build), unless
    ``CRASHLAB_RUNNER`` names another (a mutant's); with ``name`` that build
    instead (a SUT's own runner, ``Sut.runner``: no override)."""
    override = None if name else runner_override()
    path = override or BUILD_DIR / (name or ("crashlab-runner-asan" if asan else "crashlab-runner"))
    if not path.exists():
        raise CrashlabError(f"{path} is not built: run `make build`")
    return path


def runner_command(
    sut: Sut,
    ops: Path | str,
    db: Path | str | None,
    *,
    db_env: str | None = None,
    marks: Path | str | None = None,
    stats: Path | str | None = None,
    latency: Path | str | None = None,
    runner: Path | None = None,
) -> list[str]:
    """The argv that runs op stream ``ops`` on ``sut`` with database ``db``.
    Marks go to ``marks`` if given, else to the channel in the environment
    (CRASHLAB_MARK / CRASHLAB_MARK_DM, see workloads/runner/marks.h).  With
    ``db_env`` (and ``db`` None) the runner takes the database path from that
    environment variable when it starts."""
    if (db is None) == (db_env is None):
        raise CrashlabError("runner_command: give exactly one of db and db_env")
    where = ["--db", str(db)] if db is not None else ["--db-env", str(db_env)]
    runner = runner or runner_path(name=sut.runner)
    cmd = [str(runner), "--ops", str(ops), *where, *sut.runner_args()]
    for flag, value in (("--marks", marks), ("--stats", stats), ("--latency", latency)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd


def run_workload(sut: Sut, ops: Path, db: Path, **kwargs: Any) -> subprocess.CompletedProcess:  # noqa: ANN401
    """Run the runner to completion (see :func:`runner_command` for kwargs;
    ``env`` is passed to the process).  Output is captured, not checked."""
    env = kwargs.pop("env", None)
    return subprocess.run(
        runner_command(sut, ops, db, **kwargs), capture_output=True, text=True, env=env
    )


def workload_meta(sut: Sut, spec: WorkloadSpec) -> dict[str, Any]:
    """The meta.json entries from which the oracle is rebuilt."""
    return {"sut": sut.name, "workload": str(spec), "seed": spec.seed, "db": DB_NAME}


def spec_from_meta(meta: RunMeta) -> tuple[Sut, WorkloadSpec | JlangSpec]:
    """The SUT and spec a run was recorded with; CrashlabError unless
    meta.json holds a workload run's keys (``db`` too) and, for a run that
    finished without faults, its marks acknowledge exactly the workload's
    transactions (1..txns, or from ``continues_at`` on): the oracle and
    the checkers stand on them."""
    if meta.sut is None or meta.workload is None or meta.db is None:
        raise CrashlabError("meta.json names no SUT/workload/db: not a workload run")
    sut = get_sut(meta.sut)
    spec = _jlang_from_meta(meta, sut) if sut.engine == "jlang" else parse_spec(meta.workload)
    if meta.exit_status == 0 and not meta.faults:
        acked = sorted({t[1] for t in map(txn_mark, meta.marks) if t and t[0] == "ack"})
        first = meta.continues_at or 1
        if acked != list(range(first, spec.txns + 1)):
            span = f"{acked[0]}..{acked[-1]} ({len(acked)})" if acked else "none"
            raise CrashlabError(
                f"meta.json: the marks acknowledge transactions {span}, but "
                f"the workload runs {first}..{spec.txns}"
            )
    return sut, spec


def _jlang_from_meta(meta: RunMeta, sut: Sut) -> JlangSpec:
    """A j-lang run's spec, its program the canonical text meta.json keeps
    (hostile: parsed strictly); its spec must name a j-lang workload."""
    text = meta.extra.get("jlang")
    if not isinstance(text, str) or not is_jlang(str(meta.workload)):
        raise CrashlabError(f"meta.json: SUT {sut.name} needs a j-lang workload and its program")
    try:
        return JlangSpec(str(meta.workload), parse_canonical(text))
    except CrashlabError as e:
        raise CrashlabError(f"meta.json: its j-lang program: {e}") from None


def oracle_from_meta(meta: RunMeta) -> Oracle | JlangOracle:
    """The oracle of a recorded workload run, from its meta.json alone (made
    once per workload in a process, and inherited by the check's forked
    workers: an Oracle is not changed after it is made)."""
    sut, spec = spec_from_meta(meta)  # its errors, every time
    if isinstance(spec, JlangSpec):
        return _jlang_oracle(spec.source, sut.needs_fs)
    return _oracle(str(meta.workload))


def db_oracle_from_meta(meta: RunMeta) -> Oracle:
    """:func:`oracle_from_meta` of a database workload (what continuing a
    run after a crash needs); a j-lang run has none."""
    oracle = oracle_from_meta(meta)
    if not isinstance(oracle, Oracle):
        raise CrashlabError(
            "multicrash and recovery-crash continue database workloads, not j-lang ones"
        )
    return oracle


@functools.lru_cache(maxsize=8)
def _jlang_oracle(source: str, fs: str) -> JlangOracle:
    return JlangOracle(parse_canonical(source), fs)


@functools.lru_cache(maxsize=8)
def _oracle(workload: str) -> Oracle:
    return Oracle(parse_spec(workload))


def check_sut_fs(sut: Sut, fs: str) -> None:
    """A raw SUT is recorded only on the raw device (no file system) and
    every other SUT only on a file system (its ``needs_fs`` if it names
    one); CrashlabError says which to use."""
    has_files = get_fs(fs).has_files
    if sut.needs_fs and fs != sut.needs_fs:
        raise CrashlabError(
            f"SUT {sut.name} runs only on {sut.needs_fs}: record it with --fs {sut.needs_fs}"
        )
    if sut.raw and has_files:
        raise CrashlabError(f"SUT {sut.name} runs on the raw device: record it with --fs {NO_FS}")
    if not sut.raw and not has_files:
        raise CrashlabError(
            f"SUT {sut.name} needs a file system: --fs {fs} is only for the "
            "raw SUTs (" + ", ".join(n for n, s in SUTS.items() if s.raw) + ")"
        )
    if sut.needs_fs and fs != sut.needs_fs:
        raise CrashlabError(
            f"SUT {sut.name} runs only on {sut.needs_fs}: record it with --fs {sut.needs_fs}"
        )


def check_workload(sut: Sut, spec_text: str) -> JlangSpec | WorkloadSpec:
    """The workload ``spec_text`` names, if ``sut`` can run it: a j-lang
    workload runs on a file-system SUT (fs-*) and only there."""
    if (sut.engine == "jlang") != is_jlang(spec_text):
        jlang_suts = ", ".join(n for n, s in SUTS.items() if s.engine == "jlang")
        raise CrashlabError(
            f"SUT {sut.name} and workload {spec_text!r}: a j-lang workload runs on a "
            f"file-system SUT ({jlang_suts}) and only there"
        )
    return parse_jlang_spec(spec_text) if is_jlang(spec_text) else parse_spec(spec_text)


def workload_command(
    sut_name: str,
    spec_text: str,
    workdir: Path,
    fs: str | None = None,
    *,
    from_txn: int | None = None,
) -> tuple[list[str], dict[str, Any], Path]:
    """For ``crashlab record --sut --workload``: write the op stream into
    ``workdir`` (which must lie outside the recorded file system) and return
    the runner command (database ``DB_NAME`` relative to the cwd, which the
    recorder sets to the mount point; for a raw SUT the device the recorder
    names in ``DEV_ENV``), the meta.json entries and where the runner's
    --stats report will be.  ``fs``, when given, is checked against the SUT
    (:func:`check_sut_fs`).  ``from_txn`` continues the workload at that
    transaction on the database already there (after a crash: the runner's
    --from-txn)."""
    sut = get_sut(sut_name)
    if fs is not None:
        check_sut_fs(sut, fs)
    check_workload(sut, spec_text)
    if is_jlang(spec_text):
        return _jlang_command(sut, parse_jlang_spec(spec_text), workdir, from_txn)
    spec = parse_spec(spec_text)
    ops = write_opstream(spec, workdir / "workload.ops")
    stats = workdir / "runner-stats.json"
    if sut.raw:
        cmd = runner_command(sut, ops, None, db_env=DEV_ENV, stats=stats)
    else:
        cmd = runner_command(sut, ops, DB_NAME, stats=stats)
    meta = workload_meta(sut, spec)
    if from_txn is not None:
        cmd += ["--from-txn", str(from_txn)]
        meta["continues_at"] = from_txn
    return cmd, meta, stats


def _jlang_command(
    sut: Sut, spec: JlangSpec, workdir: Path, from_txn: int | None
) -> tuple[list[str], dict[str, Any], Path]:
    """:func:`workload_command` of a j-lang workload: the canonical program
    written into ``workdir``, run by crashlab-jlang in the folder
    ``DB_FOLDER``; meta.json keeps the program (the oracle's source)."""
    if from_txn is not None:
        raise CrashlabError("a j-lang workload does not continue after a crash (multicrash)")
    program = workdir / "workload.jlang"
    program.write_text(spec.source)
    cmd = [str(runner_path(name=sut.runner)), "--program", str(program), "--root", DB_FOLDER]
    meta = {"sut": sut.name, "workload": str(spec), "seed": 0, "db": DB_FOLDER}
    meta["jlang"] = spec.source
    return cmd, meta, workdir / "no-stats.json"


def record_workload(
    sut: str,
    workload: str,
    out: Path,
    *,
    fs: str = "ext4",
    backend: str = "auto",
    base: tuple[Path, str] | None = None,
    from_txn: int | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    faults: tuple[Fault, ...] = (),
    final_image: Path | None = None,
    blktrace: bool = False,
) -> RunDir:
    """Record crashlab-runner running WORKLOAD on SUT.  meta.json gets the
    SUT, the canonical spec and seed (the oracle is rebuilt from them) and
    the runner's own counts (``runner``: writes and syncs per transaction).
    ``base`` and ``from_txn`` continue the workload on a crash state (see
    :func:`record` and :func:`workloads.run.workload_command`); ``final_image``
    as for :func:`record`.  ``faults`` (harness/faults.py) go to the recorder;
    a process-crash fault makes the runner kill itself at its mark
    (``--crash-at``).  The file system is mounted with the SUT's
    ``mount_options``."""
    with temporary_folder("crashlab-wl-") as tmp:
        cmd, extra, stats = workload_command(sut, workload, tmp, fs, from_txn=from_txn)
        for f in by_stage(faults, PROCESS):
            cmd += ["--crash-at", str(f.get("at"))]
        run = record(
            RecordRequest(
                cmd,
                out,
                fs=fs,
                backend=backend,
                extra_meta={**extra, **(extra_meta or {})},
                base=base,
                faults=faults,
                final_image=final_image,
                blktrace=blktrace,
                nvram=get_sut(sut).nvram,
                mount_options=get_sut(sut).mount_options,
            )
        )
        if stats.exists():
            run.write_meta(dataclasses.replace(run.meta(), runner=json.loads(stats.read_text())))
    return run
