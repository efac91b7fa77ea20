"""The other papers' figures that one ``crashlab paper`` run can answer,
each computed from that run's own measurements (ratios measured in one
run): WALDIO Table 2 (operations per second, as a ratio to WAL's, from Fig.
10's one-operation points) and xLog's two figures (logging speed over the
traditional logging, from the same points; write amplification, from the
Fig. 8 recordings).  And, per figure that no run reproduces, why not
(:data:`NOT_REPRODUCED`), and where the claims answered by other commands
are (:data:`ELSEWHERE`)."""

from __future__ import annotations

from typing import Any

from harness.paper.volume import NVRAM, VALUE_BYTES
from harness.report.papers import (
    WALDIO_TABLE2,
    WALDIO_TABLE2_NOT_BUILT,
    XLOG_SPEEDUP,
    XLOG_WA,
)
from harness.report.systems import BASELINE

ONE_OP = "1"  # Table 2 and the xLog benchmark: one operation per transaction

NOT_REPRODUCED: tuple[tuple[str, str], ...] = (
    (
        "DHL thesis Fig. 7 (latency breakdown)",
        "appears only as Fig. 10's one-operation column: computation, write and "
        "fsync time are not measured apart",
    ),
    (
        "DHL thesis Fig. 11 (recovery time against the aborted transaction's size)",
        "not measured: the runner can kill itself inside a transaction (--crash-at) "
        "and restart from it (--from-txn), but times only BEGIN to commit (--latency): a "
        "recovery run when the database opens is not timed, one run at the first access "
        "is mixed into that transaction's latency; crashlab check recovers each crash "
        "state untimed.  The figure needs the recovery timed on its own per system, after "
        "a 1,200-record warm-up and an aborted insert of 1 to 16 pages",
    ),
    (
        "DHL thesis Fig. 12 (latency CDF of the app traces)",
        "not reproduced: the thesis's Gmail/Facebook/Hangout/KakaoTalk SQL traces are not "
        "published; crashlab's app:gmail/facebook/hangout/kakaotalk workloads are synthetic "
        "profiles drawn from the thesis's Fig. 1 statistics, not the traces, and no command "
        "runs the systems over them and draws the CDF of the runner's --latency output",
    ),
    ("WALDIO Table 2, other rows", WALDIO_TABLE2_NOT_BUILT),
)

ELSEWHERE: tuple[tuple[str, str], ...] = (
    (
        "DHL thesis §3.3, §3.6: WAL's single fsync 'often leads to atomicity violations'",
        "crashlab bench --only walatomic (reorder states where a commit frame persisted "
        "without an earlier frame of its transaction, and what recovery did); the "
        "state faults misdirect,file=wal and corrupt,file=wal (nightly matrix)",
    ),
    (
        "WALDIO §5.1: direct I/O into unwritten extents loses their flag in a crash",
        "the SUT waldio-nofill (no zero-fill): its crash states and its jbd2 commits "
        "per transaction (docs/papers.md, 'WALDIO §5.1')",
    ),
)


def _best(fig10: dict[str, Any], kind: str, key: str) -> float | None:
    p = fig10["kinds"].get(kind, {}).get(ONE_OP, {}).get(key)
    return None if p is None else float(p["best"])


def table2(fig10: dict[str, Any]) -> list[dict[str, Any]]:
    """WALDIO Table 2's rows this run measured: per kind, the paper's
    operations per second over its WAL's, and ours (the best run over WAL's
    best, one operation per transaction)."""
    rows = []
    base = WALDIO_TABLE2[BASELINE]
    for key, numbers in WALDIO_TABLE2.items():
        if key not in fig10["systems"]:
            continue
        cells = []
        for kind in fig10["kinds"]:
            if kind not in ("insert", "update", "delete"):
                continue
            paper = numbers[("insert", "update", "delete").index(kind)]
            base_i = base[("insert", "update", "delete").index(kind)]
            cells.append(
                {
                    "kind": kind,
                    "paper_ops": paper,
                    "paper": paper / base_i,
                    "ours": _best(fig10, kind, key),
                }
            )
        rows.append({"system": key, "cells": cells})
    return rows


def xlog_claims(fig10: dict[str, Any], volumes: dict[str, Any]) -> list[dict[str, str]]:
    """xLog's two figures, where this run measured XLOG (and WAL beside it)."""
    out = []
    if "XLOG" in fig10["systems"]:
        pts = [(b, k) for k in fig10["kinds"] if (b := _best(fig10, k, "XLOG")) is not None]
        if pts:
            b, k = max(pts)
            out.append(
                {
                    "claim": f"xLog logs up to {XLOG_SPEEDUP}x times faster than the "
                    "traditional logging scheme",
                    "here": f"up to {b:.1f}x WAL's throughput ({k}, one operation per "
                    "transaction, best runs; xLog's NVRAM costs no sync until it fills)",
                }
            )
    x, w = volumes.get("XLOG"), volumes.get(BASELINE)
    if x and w:
        nvram = x["files"].get(NVRAM, 0.0) * 1024 / VALUE_BYTES
        out.append(
            {
                "claim": f"xLog drastically reduces the write amplification from "
                f"{XLOG_WA[0]:g}x to {XLOG_WA[1]:g}x",
                "here": f"bytes written per byte of a {VALUE_BYTES}-byte value: WAL "
                f"{w['total_kb'] * 1024 / VALUE_BYTES:.0f}x, xLog "
                f"{x['total_kb'] * 1024 / VALUE_BYTES:.0f}x with its write-back to SQLite, "
                f"{nvram:.1f}x to the NVRAM alone",
            }
        )
    return out
