"""ERR-NOACK, ERR-ATOMIC, ERR-DURABLE: the oracle under I/O errors.

A run recorded with device faults (harness/faults.py) carries two kinds of
marks besides the transaction marks: the device's ``fault:eio-OP`` where it
failed a request (harness/fuse/faultrules.h), and the runner's
``txn-error:K;attempt=N;...`` where a transaction failed and was rolled back
(workloads/runner/main.c).  A transaction whose commit failed is *in doubt*:
after recovery it may be wholly present or wholly absent, never partly.  A
later attempt of the same transaction (``txn-begin:K;attempt=2``) is a new
transaction with the same content: acknowledged, it must survive.

The judges read the marks logged before the state's cut ``hi`` (the latest
instant of its crash, as DB-DURABLE's ``acked`` does) and the engine's own
content verdicts (checkers/content.py): the recovered content's place among
the oracle states is known there already, and judged once.
"""

from __future__ import annotations

from collections.abc import Sequence

from checkers.verdict import Verdict, failed, passed, skipped
from harness.faults import FAULT_MARK_PREFIX
from harness.marks import TXN_ERROR, parse_label


def _txn_of(name: str, kind: str) -> int | None:
    """K of a mark named ``kind:K`` (None for any other name)."""
    head, sep, num = name.partition(":")
    return int(num) if sep and head == kind and num.isdigit() else None


def judge_errors(labels: Sequence[str], content: Sequence[Verdict]) -> list[Verdict]:
    """The three verdicts for a state whose crash came after the marks
    ``labels`` (in log order), given the engine's content verdicts
    ``content`` (DB-ATOMIC and DB-DURABLE among them when the database
    opened)."""
    by_id = {v.invariant: v for v in content}
    return [
        _noack(labels),
        _atomic(labels, by_id.get("DB-ATOMIC")),
        _durable(labels, by_id.get("DB-DURABLE")),
    ]


def _noack(labels: Sequence[str]) -> Verdict:
    """ERR-NOACK: no attempt of a transaction has both a txn-error and a
    txn-ack, in either order (an attempt runs from its txn-begin:K to the
    next)."""
    attempt: dict[int, int] = {}
    errored: set[tuple[int, int]] = set()
    acked: set[tuple[int, int]] = set()
    for label in labels:
        name = parse_label(label).name
        if (k := _txn_of(name, "txn-begin")) is not None:
            attempt[k] = attempt.get(k, 0) + 1
        elif (k := _txn_of(name, TXN_ERROR)) is not None:
            errored.add((k, attempt.get(k, 0)))
        elif (k := _txn_of(name, "txn-ack")) is not None:
            acked.add((k, attempt.get(k, 0)))
        both = errored & acked
        if both:
            k, n = min(both)
            return failed(
                "ERR-NOACK",
                f"transaction {k} (attempt {n}) was acknowledged although "
                "its commit reported an error",
                actual=k,
            )
    if not errored:
        return passed("ERR-NOACK", "no transaction failed before the crash", exercised=False)
    return passed("ERR-NOACK", "no failed transaction was acknowledged")


def _atomic(labels: Sequence[str], atomic: Verdict | None) -> Verdict:
    """ERR-ATOMIC: after a failed transaction the content is still some
    oracle state (the in-doubt transaction wholly in or out)."""
    failed_txns = [
        k for lab in labels if (k := _txn_of(parse_label(lab).name, TXN_ERROR)) is not None
    ]
    if not failed_txns:
        return skipped("ERR-ATOMIC", "no transaction failed before the crash")
    k = failed_txns[-1]
    if atomic is None or atomic.status == "skip":
        return skipped("ERR-ATOMIC", "the database did not open (see DB-OPEN)")
    if atomic.failed:
        return failed(
            "ERR-ATOMIC",
            f"after transaction {k} failed, the recovered content "
            "matches no oracle state: a failed transaction is partly present",
            expected=f"{k - 1} or {k}",
            actual=None,
        )
    return passed(
        "ERR-ATOMIC",
        f"transaction {k} failed; the content is whole ({atomic.actual})",
        actual=atomic.actual,
    )


def _durable(labels: Sequence[str], durable: Verdict | None) -> Verdict:
    """ERR-DURABLE: every transaction acknowledged after the first error —
    the device's failure of a request, or a transaction's failure (a full
    file system fails no request) — is in the recovered content."""
    after_fault = False
    acked_after = 0
    for label in labels:
        name = parse_label(label).name
        if name.startswith(FAULT_MARK_PREFIX) or _txn_of(name, TXN_ERROR) is not None:
            after_fault = True
        elif after_fault and (k := _txn_of(name, "txn-ack")) is not None:
            acked_after = max(acked_after, k)
    if not after_fault:
        return skipped("ERR-DURABLE", "no error before the crash")
    if not acked_after:
        return passed(
            "ERR-DURABLE", "nothing was acknowledged after the first error", exercised=False
        )
    if durable is None or durable.status == "skip" or not isinstance(durable.actual, int):
        return skipped("ERR-DURABLE", "no oracle state matches the content (see DB-ATOMIC)")
    j = durable.actual
    if j < acked_after:
        return failed(
            "ERR-DURABLE",
            f"transaction {acked_after} was acknowledged after an I/O "
            f"error, but the recovered content is the state after transaction {j}: "
            "the error was swallowed and the data lost",
            expected=acked_after,
            actual=j,
        )
    return passed(
        "ERR-DURABLE",
        f"transaction {acked_after}, acknowledged after an I/O error, survived (content after {j})",
        expected=acked_after,
        actual=j,
    )
