"""``crashlab merge OUT SHARD...``: the sweep folders of ``crashlab sweep
--shard 1/N`` .. ``N/N`` (N CI jobs, one matrix) put together as the one
sweep folder an unsharded run would have written.

Contract:
* every shard's summary.json names its matrix and ``i/N``
  (``summary["shard"]``); the shards given must be exactly ``1/N`` ..
  ``N/N`` of one matrix, else a CrashlabError says which is wrong;
* the cells come back in the matrix's order (:func:`harness.sweep.matrix.unshard`),
  so summary.json and junit.xml are byte-identical to an unsharded sweep
  of the same recordings, and violations.jsonl is too once its repro
  commands name the same folder;
* each shard's run folders are linked (hard links; copies across file
  systems) into ``OUT/runs/``, so the report's I/O cost, ``crashlab repro``
  and ``crashlab report OUT`` work on OUT alone; repro commands are
  rewritten to name them;
* nothing in the shard folders is changed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from harness.confine import read_regular, resolved
from harness.errors import CrashlabError
from harness.outlock import LOCK_NAME, locked_output
from harness.rundir import SweepDir, check_cell, check_group_ref
from harness.sweep.matrix import unshard
from harness.sweep.sweep import write_outputs

MAX_SHARDS = 4096  # CI jobs of one sweep, at most
SUMMARY_LIMIT = 256 << 20  # bytes of a shard's summary.json at most
VIOLATIONS_LIMIT = 4 << 30  # and of its violations.jsonl
Group = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # one cell: its records, violations


def merge_shards(shards: list[Path], out: Path) -> tuple[dict[str, Any], int]:
    """Write the merged sweep folder ``out``; return its summary and the
    exit code the unsharded sweep would have had (0: every expectation held)."""
    loaded = sorted((_load(p) for p in shards), key=lambda s: s[1]["shard"]["index"])
    matrices = {s["shard"]["matrix"] for _, s in loaded}
    counts = {s["shard"]["of"] for _, s in loaded}
    if len(matrices) > 1 or len(counts) > 1:
        raise CrashlabError(
            "the shards are of different sweeps: "
            + ", ".join(sorted(s["sweep"] for _, s in loaded))
        )
    n = counts.pop()
    if n > MAX_SHARDS:
        raise CrashlabError(f"the shards say they are 1 of {n}: more than {MAX_SHARDS} shards")
    have = [s["shard"]["index"] for _, s in loaded]
    missing = [f"{i}/{n}" for i in range(1, n + 1) if i not in have]
    dup = sorted({f"{i}/{n}" for i in have if have.count(i) > 1})
    if missing or dup:
        raise CrashlabError(
            f"need shards 1/{n} .. {n}/{n} once each: "
            + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else [])
                + ([f"twice {', '.join(dup)}"] if dup else [])
            )
        )
    target = out.resolve()
    if any(target == p.resolve() or p.resolve() in target.parents for p, _ in loaded):
        raise CrashlabError(f"{out}: the merged folder may not be (inside) a shard")
    with locked_output(out):  # one writer (harness/outlock.py)
        return _merge_into(out, loaded, matrices.pop())


def _merge_into(
    out: Path, loaded: list[tuple[Path, dict[str, Any]]], matrix: str
) -> tuple[dict[str, Any], int]:
    """:func:`merge_shards` of the checked shards ``loaded`` into the locked
    folder ``out``."""
    parts = [_groups(path, summary) for path, summary in loaded]
    groups = unshard(parts)
    timing: dict[str, Any] = {}
    for (path, _), part in zip(loaded, parts, strict=True):
        timing.update(_optional(SweepDir(path).timing))
        for records, _ in part:
            _link_tree(path / records[0]["run"], out / records[0]["run"])
    cells = [rec for records, _ in groups for rec in records]
    violations = [_moved(v, records[0]["run"], out) for records, vs in groups for v in vs]
    ok = all(c["expectation"]["ok"] for c in cells)
    summary = {"sweep": matrix, "ok": ok, "cells": cells}
    order = list(dict.fromkeys(Path(c["run"]).name for c in cells))
    write_outputs(SweepDir(out), summary, violations, {k: timing[k] for k in order if k in timing})
    return summary, 0 if ok else 1


def _load(path: Path) -> tuple[Path, dict[str, Any]]:
    """A shard's folder and summary.json, every field merge reads checked
    for its type (and each cell's ``run`` confined to the shard)."""
    spath = SweepDir(path).summary
    try:
        summary = json.loads(read_regular(spath, SUMMARY_LIMIT, str(spath)))
    except (OSError, ValueError, RecursionError) as e:
        raise CrashlabError(f"{path}: not a finished sweep folder ({spath.name}: {e})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("shard"), dict):
        raise CrashlabError(f"{path}: not a shard (its sweep ran without --shard i/N)")
    sh = summary["shard"]
    if not (
        _is(sh.get("index"), int)
        and _is(sh.get("of"), int)
        and 1 <= sh["index"] <= sh["of"]
        and isinstance(sh.get("matrix"), str)
        and isinstance(summary.get("sweep"), str)
        and isinstance(summary.get("cells"), list)
    ):
        raise CrashlabError(f"{spath}: shard, sweep or cells of the wrong type")
    for i, rec in enumerate(summary["cells"]):
        _check_cell(path, rec, f"{spath}: cell {i}")
    return path, summary


def _is(v: object, kind: type) -> bool:
    return isinstance(v, kind) and not isinstance(v, bool)


def _check_cell(shard: Path, rec: object, where: str) -> None:
    """A summary cell as merge and the merged report read it
    (:func:`harness.rundir.check_cell`), its ``run`` a run folder of
    the shard."""
    check_cell(rec, where)
    assert isinstance(rec, dict)
    run = SweepDir(shard).cell_run(rec["run"], where)
    if not run.is_dir() or run.is_symlink():
        raise CrashlabError(f"{where}: {rec['run']} is not a folder of the shard")


def _optional(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _groups(path: Path, summary: dict[str, Any]) -> list[Group]:
    """The shard's cells in its order, each with its summary records (one
    per strategy) and its violations.  violations.jsonl lists a record's
    failing verdicts in the record's order, one per failing verdict, so
    the failure counts split it; each line is checked against its record."""
    groups: list[Group] = []
    for rec in summary["cells"]:
        if groups and groups[-1][0][-1]["run"] == rec["run"]:
            groups[-1][0].append(rec)
        else:
            groups.append(([rec], []))
    vpath = SweepDir(path).violations
    lines = _lines(vpath) if vpath.exists() or vpath.is_symlink() else []
    at = 0
    for records, vs in groups:
        for rec in records:
            fails = sum(c.get("fail", 0) for c in rec["verdicts"].values())
            for line in lines[at : at + fails]:
                v = _violation(line, f"{vpath}: line {at + 1}")
                if [v.get(k) for k in ("sut", "workload", "fs", "strategy")] != [
                    rec[k] for k in ("sut", "workload", "fs", "strategy")
                ]:
                    raise CrashlabError(
                        f"{vpath}: line {at + 1} is not of {rec['run']} {rec['strategy']}"
                    )
                vs.append(v)
                at += 1
    if at != len(lines):
        raise CrashlabError(f"{vpath}: {len(lines)} lines, summary.json counts {at} failures")
    return groups


def _lines(path: Path) -> list[str]:
    try:
        return read_regular(path, VIOLATIONS_LIMIT, str(path)).decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise CrashlabError(f"{path}: not UTF-8 (byte {e.start})") from None


def _violation(line: str, where: str) -> dict[str, Any]:
    """A violations.jsonl line: an object whose repro is a string."""
    try:
        v = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise CrashlabError(f"{where}: corrupt JSON ({e})") from None
    if not isinstance(v, dict) or not isinstance(v.get("repro"), str):
        raise CrashlabError(f"{where}: not a violation record (with a repro command)")
    check_group_ref(v.get("group"), where)
    return v


def _moved(v: dict[str, Any], cell_run: str, out: Path) -> dict[str, Any]:
    """A violation whose repro command names the run under ``out``."""
    words = v["repro"].split(" ")
    for i, w in enumerate(words):
        at = w.find(cell_run)
        if at >= 0 and (at == 0 or w[at - 1] == "/"):
            words[i] = str(out / w[at:])
            break
    return {**v, "repro": " ".join(words)}


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` a copy of the folder ``src`` made of hard links (copies
    across file systems); an older ``dst`` is replaced."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    for p in src.rglob("*"):  # a link out of the shard would lead the reader there
        if p.is_symlink() and not resolved(p).is_relative_to(src.resolve()):
            raise CrashlabError(f"{p}: a symbolic link out of the shard's run folder")
        if not (p.is_symlink() or p.is_dir() or p.is_file()):
            raise CrashlabError(f"{p}: neither a file nor a folder (a FIFO, device...)")
    # a shard's lock file stays its own: linked, it would lock both folders
    shutil.copytree(
        src, dst, copy_function=link, symlinks=True, ignore=shutil.ignore_patterns(LOCK_NAME)
    )
