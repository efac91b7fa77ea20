"""What happened around a minimal witness's crash, read off the log's
marks and the state's explanation: the acknowledgements given after its
last persisted write, the transaction in flight and which of its writes
persisted, the device errors before it, and the FLUSH that would have
made the unwritten writes durable.  Triage's explanation says these in
words (:func:`says_context`); all generic, from roles and marks, never a
SUT's own words.  Not part of the signature: it carries numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.faults import FAULT_MARK_PREFIX
from harness.marks import TXN_ERROR
from harness.triage.roles import says

ACK = "txn-ack:"
BEGIN = "txn-begin:"


@dataclass(frozen=True)
class Context:
    """Around a crash at log entries ``lo``..``hi`` (its last persisted
    write before ``lo``, the epoch's closing FLUSH at ``hi``) of the
    epoch that began at entry ``start`` (after the last FLUSH before the
    crash): ``acks`` the transactions acknowledged since ``start`` (entry,
    number), ``begins`` the transactions begun then, ``in_flight`` the one begun
    and not acknowledged at the crash (entry of its begin, number),
    ``kept``/``unwritten`` the roles of its epoch's writes that persisted
    since it began / were not yet written, ``errors`` the error marks
    before the crash (entry, label)."""

    start: int
    lo: int
    hi: int
    acks: tuple[tuple[int, str], ...] = ()
    begins: tuple[tuple[int, str], ...] = ()
    in_flight: tuple[int, str] | None = None
    kept: tuple[tuple[str, ...], ...] = ()
    unwritten: tuple[tuple[str, ...], ...] = ()
    errors: tuple[tuple[int, str], ...] = ()


def marks_between(
    marks: Sequence[tuple[int, str]], lo: int, hi: int, prefix: str
) -> tuple[tuple[int, str], ...]:
    """The marks labelled ``prefix<N>`` at entries ``lo`` <= i < ``hi``,
    as (entry, N)."""
    return tuple(
        (i, label[len(prefix) :].split(";")[0])
        for i, label in marks
        if lo <= i < hi and label.startswith(prefix)
    )


def begin_of(marks: Sequence[tuple[int, str]], txn: int | None) -> tuple[int, str] | None:
    """The entry of transaction ``txn``'s begin mark (None: none)."""
    if txn is None:
        return None
    found = marks_between(marks, 0, 1 << 62, BEGIN)
    return next(((i, k) for i, k in found if k == str(txn)), None)


def says_context(c: Context) -> str:
    """The context in sentences (empty when there is nothing to say)."""
    out = [_errors(c), _acks(c), _in_flight(c)]
    return " ".join(s for s in out if s)


def _distinct(roles: Sequence[tuple[str, ...]]) -> str:
    """Each distinct role set once, in order, in words."""
    seen: list[tuple[str, ...]] = []
    for r in roles:
        if r not in seen:
            seen.append(r)
    return "; ".join(says(r) for r in seen)


def _errors(c: Context) -> str:
    failed = [(i, lab) for i, lab in c.errors if lab.startswith(FAULT_MARK_PREFIX)]
    rolled = [(i, lab) for i, lab in c.errors if lab.startswith(TXN_ERROR + ":")]
    if not failed:
        return ""
    i, lab = failed[-1]
    what = lab[len(FAULT_MARK_PREFIX) :].split(";")[0].replace("eio-", "")
    acked = [k for e, k in c.acks if e > i]
    later = f"; transaction {', '.join(acked)} was acknowledged after it" if acked else ""
    rb = "" if rolled else ", and no transaction failed (no txn-error mark)"
    return (
        f"Before the crash the device failed a {what} with EIO (entry {i}): "
        f"its data never reached the device{rb}{later}."
    )


def _acks(c: Context) -> str:
    """An acknowledgement after the last FLUSH, its writes not all on disk."""
    if not c.acks:
        return ""
    txns = ", ".join(k for _, k in c.acks)
    first = c.acks[0][0]
    pending = _distinct(c.unwritten) or "nothing"
    nxt = [i for i, _ in c.begins if i > first]
    late = f" after the next transaction began (entry {nxt[0]})" if nxt else ""
    return (
        f"Transaction {txns} was acknowledged (entry {first}) after the last FLUSH, with "
        f"writes still pending: of those issued before the next FLUSH (entry {c.hi}), these "
        f"were not on disk: {pending}; and that FLUSH only came{late}: nothing forced the "
        "acknowledged change to disk before the acknowledgement."
    )


def _in_flight(c: Context) -> str:
    """The transaction in flight, when some of its writes persisted; what
    is wrong with that only when no acknowledgement is (a half-done
    transaction that recovery did not undo)."""
    if c.in_flight is None or not c.kept:
        return ""
    i, k = c.in_flight
    n = len(c.kept)
    head = (
        f"Transaction {k}, in flight (begun at entry {i}, not acknowledged), had "
        f"{n} write{'s' if n != 1 else ''} persisted: {_distinct(c.kept)}"
    )
    if c.acks:
        return f"{head}."
    rest = f"; its writes not yet on disk: {_distinct(c.unwritten)}" if c.unwritten else ""
    return f"{head}{rest}; a recovery that cannot undo them shows it half done."
