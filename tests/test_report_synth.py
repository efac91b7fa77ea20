"""Helpers (no tests here): a small synthetic sweep folder for the report
tests: summary.json, violations.jsonl, timing.json, and runs with meta.json, result.json and a
real dm-log-writes log (written with harness.logformat) whose ext4 super
block names a journal region.  Nothing is recorded."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from harness.logformat import LogWriter

BLOCK = 4096
# Journal: fs blocks 100..109 and 200..219 (two extents), as s_jnl_blocks says.
JOURNAL_EXTENTS = [(0, 10, 100), (10, 20, 200)]  # lblk, len, pblk
INVS = ["DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX", "FS-RECOVER"]
GUARANTEED = ["FS-RECOVER", "DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"]
SINGLE = "insert:txns=2,ops=1,tables=1,seed=1"
MULTI = "insert:txns=2,ops=3,tables=3,warmup=10,seed=1"


def ext4_super(
    extents: list[tuple[int, int, int]] = JOURNAL_EXTENTS, *, depth: int = 0, magic: int = 0xEF53
) -> bytes:
    """1024 bytes of an ext4 super block: 4 KiB blocks, journal inode 8,
    s_jnl_blocks = an extent root holding ``extents``."""
    sb = bytearray(1024)
    struct.pack_into("<H", sb, 0x38, magic)
    struct.pack_into("<I", sb, 0x18, 2)  # log2(block size) - 10
    struct.pack_into("<I", sb, 0xE0, 8)
    sb[0xFD] = 1
    struct.pack_into("<HHHH", sb, 0x10C, 0xF30A, len(extents), 4, depth)
    for i, (lblk, length, pblk) in enumerate(extents):
        struct.pack_into(
            "<IHHI", sb, 0x10C + 12 + 12 * i, lblk, length, pblk >> 32, pblk & 0xFFFFFFFF
        )
    return bytes(sb)


def write_log(path: Path, *, with_super: bool = True, txns: int = 2) -> dict[str, int]:
    """A log shaped like a recorded ext4 workload; returns the figures a
    correct measurement must find (window bytes, journal bytes, flushes,
    tail bytes)."""
    with LogWriter(path, sectorsize=512) as w:
        if with_super:
            w.write(0, bytes(1024) + ext4_super() + bytes(BLOCK - 2048))  # block 0
        w.write(50 * 8, b"s" * BLOCK)  # setup: outside the window
        w.flush()
        w.mark("setup-done")
        for t in range(1, txns + 1):
            w.mark(f"txn-begin:{t}")
            w.write(500 * 8, b"d" * 2 * BLOCK)  # data region: 8 KiB
            w.write(100 * 8, b"j" * BLOCK)  # journal: 4 KiB
            w.write(108 * 8, b"x" * 3 * BLOCK)  # blocks 108,109 journal; 110 not: 8 KiB + 4
            w.flush()
            w.mark(f"txn-ack:{t}")
        w.mark("workload-end")
        w.write(600 * 8, b"t" * BLOCK)  # unmount tail
        w.flush()
    return {
        "window": txns * 6 * BLOCK,
        "journal": txns * 3 * BLOCK,
        "flushes": txns,
        "tail": BLOCK,
        "txns": txns,
    }


def verdicts(checked: int, fails: dict[str, int]) -> dict[str, dict[str, int]]:
    return {
        i: {"pass": checked - fails.get(i, 0), "fail": fails.get(i, 0), "skip": 0} for i in INVS
    }


def options(strategy: str) -> dict[str, Any]:
    return {
        "strategy": strategy,
        "window_start": "setup-done",
        "window_end": None,
        "max_exhaustive": 10,
        "max_drop": 2,
        "sample": None,
        "seed": 0,
        "tear_unit": 512,
        "torn_pattern": "prefix",
        "max_tears": 32,
        "max_subset_blocks": 8,
        "dedup": True,
        "max_states": None,
        "fsck": True,
    }


def violation(
    root: Path, run: str, sut: str, workload: str, strategy: str, inv: str, state: str, **extra: Any
) -> dict[str, Any]:  # noqa: ANN401
    return {
        "sut": sut,
        "workload": workload,
        "fs": "ext4",
        "strategy": strategy,
        "state": state,
        "invariant": inv,
        "status": "fail",
        "category": "atomicity",
        "explanation": extra.pop("explanation", f"{inv} failed in {state}"),
        "expected": "1",
        "actual": "0",
        "dropped": [3],
        "torn": [],
        "repro": f"crashlab repro {root / run} {state}",
        **extra,
    }


def make_sweep(
    root: Path, *, broken: bool = True, many: int = 7, explanation: str | None = None
) -> dict[str, Any]:
    """Write the sweep; return what a correct report must show.

    Cells: ``safe-sut`` (guarantees everything; with ``broken`` it fails
    DB-ATOMIC in 2 states), ``weak-sut`` (must violate DB-DURABLE; fails it
    in ``many`` states, more than a group shows), both strategies prefix and
    reorder for safe-sut."""
    root.mkdir(parents=True, exist_ok=True)
    runs = {"safe-sut": f"runs/safe-sut--{MULTI}", "weak-sut": f"runs/weak-sut--{SINGLE}"}
    expected_log = {sut: write_run(root / run, sut) for sut, run in runs.items()}
    cells, viols = safe_cells(root, runs["safe-sut"], 2 if broken else 0, explanation)
    weak, weak_viols = weak_cell(root, runs["weak-sut"], many)
    cells.append(weak)
    viols += weak_viols
    write_results(root, cells)
    summary = {"sweep": "synthetic", "ok": not broken, "cells": cells}
    (root / "summary.json").write_text(json.dumps(summary))
    (root / "violations.jsonl").write_text("".join(json.dumps(v) + "\n" for v in viols))
    (root / "timing.json").write_text(
        json.dumps(
            {
                Path(runs["safe-sut"]).name: {"record_s": 0.2, "prefix": 1.5, "reorder": 6.0},
                Path(runs["weak-sut"]).name: {"record_s": 0.2, "prefix": 2.0},
            }
        )
    )
    return {"summary": summary, "violations": viols, "log": expected_log, "runs": runs}


def write_run(d: Path, sut: str) -> dict[str, int]:
    """The run folder ``d`` of ``sut`` (safe-sut: MULTI in WAL mode;
    weak-sut: SINGLE in DELETE mode, with its runner's figures): writes.log
    and meta.json; returns the log's figures (:func:`write_log`)."""
    d.mkdir(parents=True)
    figures = write_log(d / "writes.log")
    cmd = [
        "/x/crashlab-runner",
        "--ops",
        "w.ops",
        "--db",
        "crashlab.db",
        "--engine",
        "sqlite",
        "--journal-mode",
        "DELETE" if sut == "weak-sut" else "WAL",
        "--synchronous",
        "FULL",
        "--page-size",
        "4096",
    ]
    meta = {
        "sut": sut,
        "workload": MULTI if sut == "safe-sut" else SINGLE,
        "fs": "ext4",
        "command": cmd,
        "exit_status": 0,
        "log": {
            "entries": 20,
            "writes": 8,
            "bytes_written": 40960,
            "flushes": 4,
            "marks": [
                "setup-done",
                "txn-begin:1",
                "txn-ack:1",
                "txn-begin:2",
                "txn-ack:2",
                "workload-end",
            ],
        },
        "image": {"fs": "ext4", "path": "/nonexistent/ext4.img", "sha256": "0"},
    }
    if sut == "weak-sut":
        meta["runner"] = {
            "transactions": 2,
            "workload": {"fsyncs": 8, "bytes_written": 10240, "writes": 6},
        }
    (d / "meta.json").write_text(json.dumps(meta))
    return figures


def safe_cells(
    root: Path, run: str, safe_fails: int, explanation: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """safe-sut's cells (prefix: 30 states, failing DB-ATOMIC in
    ``safe_fails``; reorder: 120 states, clean) and their violations."""
    cells = []
    viols = []
    for strategy, checked in (("prefix", 30), ("reorder", 120)):
        fails = {"DB-ATOMIC": safe_fails} if strategy == "prefix" and safe_fails else {}
        exp = {
            "guaranteed": GUARANTEED,
            "must_violate_any": [],
            "ok": not fails,
            "broken": [f"DB-ATOMIC is guaranteed but failed in {safe_fails} of {checked} states"]
            if fails
            else [],
        }
        cells.append(
            {
                "sut": "safe-sut",
                "workload": MULTI,
                "fs": "ext4",
                "strategy": strategy,
                "run": run,
                "states": {"checked": checked, "generated": checked + 5, "folded": 5},
                "verdicts": verdicts(checked, fails),
                "expectation": exp,
            }
        )
        if fails:
            for k in range(safe_fails):
                viols.append(
                    violation(
                        root,
                        run,
                        "safe-sut",
                        MULTI,
                        strategy,
                        "DB-ATOMIC",
                        f"e{k + 4}.p1",
                        **({"explanation": explanation} if explanation else {}),
                    )
                )
    return cells, viols


def weak_cell(root: Path, run: str, many: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """weak-sut's cell (prefix, 40 states, DB-DURABLE failing in ``many``,
    as it must) and its violations."""
    weak_guaranteed = [g for g in GUARANTEED if g != "DB-DURABLE"]
    cell = {
        "sut": "weak-sut",
        "workload": SINGLE,
        "fs": "ext4",
        "strategy": "prefix",
        "run": run,
        "states": {"checked": 40, "generated": 50, "folded": 10},
        "verdicts": verdicts(40, {"DB-DURABLE": many}),
        "expectation": {
            "guaranteed": weak_guaranteed,
            "must_violate_any": ["DB-DURABLE"],
            "ok": True,
            "broken": [],
        },
    }
    viols = [
        violation(root, run, "weak-sut", SINGLE, "prefix", "DB-DURABLE", f"e{k + 10}.p0")
        for k in range(many)
    ]
    return cell, viols


def write_results(root: Path, cells: list[dict[str, Any]]) -> None:
    """Each cell's result.json in its run's check folder."""
    for i, c in enumerate(cells):
        check = root / c["run"] / "check" / f"{c['strategy']}-{i:08x}"
        check.mkdir(parents=True, exist_ok=True)
        (check / "result.json").write_text(
            json.dumps(
                {
                    "strategy": c["strategy"],
                    "states": c["states"],
                    "verdicts": c["verdicts"],
                    "options": options(c["strategy"]),
                    "violations": [],
                }
            )
        )
