"""DB-ATOMIC, DB-DURABLE and DB-PREFIX: where the recovered content stands
among the oracle's states.  Works for every SUT: it needs only the
recovered content digest.

``oracle[i]`` is the digest after transaction i (0 = after setup; -1, the
empty database, is before it).  At the
crash point, transactions 1..acked were acknowledged (``txn-ack`` marks) and
transactions up to ``begun`` had started (``txn-begin``): the recovered
content must equal ``oracle[j]`` for some j with ``acked <= j <= begun``.
"""

from __future__ import annotations

from collections.abc import Sequence

from checkers.verdict import Verdict, failed, passed, skipped

# The digest of a database with no rows (a sum over nothing): the content
# before the set-up transaction, transaction index -1.  A SUT that may lose
# acknowledged work (e.g. WAL with synchronous=NORMAL) can lose the set-up
# itself: that is a durability loss, not an atomicity one.
BEFORE_SETUP = "0" * 32
# The ``acked`` of a crash before the set-up was acknowledged (the creation
# window, before the ``setup-done`` mark): the empty database (-1) and the
# set-up's state (0) are both legal then.
NOTHING_ACKED = -1


def matching_indices(digest: str, oracle: Sequence[str]) -> list[int]:
    """Every transaction index whose oracle state has this digest (several
    when a transaction left the content unchanged), -1 for the empty
    database before set-up."""
    before = [-1] if digest == BEFORE_SETUP else []
    return before + [i for i, d in enumerate(oracle) if d == digest]


def judge_content(digest: str, oracle: Sequence[str], acked: int, begun: int) -> list[Verdict]:
    """The three content verdicts for a recovered database."""
    if begun < acked:
        raise ValueError(f"begun {begun} < acked {acked}")
    window = f"{acked}..{begun}" if begun > acked else f"{acked}"
    js = matching_indices(digest, oracle)
    if not js:
        why = "matches no oracle state: the content mixes transactions or is corrupt"
        return [
            failed(
                "DB-ATOMIC", f"recovered content {digest[:12]} {why}", expected=window, actual=None
            ),
            skipped("DB-DURABLE", "no oracle state matches (see DB-ATOMIC)"),
            skipped("DB-PREFIX", "no oracle state matches (see DB-ATOMIC)"),
        ]
    shown = _ranges(js)
    atomic = passed(
        "DB-ATOMIC", f"content equals the oracle after transaction {shown}", actual=shown
    )
    in_window = [j for j in js if acked <= j <= begun]
    if in_window:
        ok = f"transaction {in_window[-1]} recovered; acknowledged {acked}, begun {begun}"
        return [
            atomic,
            passed("DB-DURABLE", ok, expected=window, actual=in_window[-1]),
            passed("DB-PREFIX", ok, expected=window, actual=in_window[-1]),
        ]
    below = [j for j in js if j < acked]
    if below and not [j for j in js if j > begun]:
        first_lost = below[-1] + 1
        lost = f"transactions {first_lost}..{acked}"
        if first_lost == acked:
            lost = "the set-up" if acked == 0 else f"transaction {acked}"
        return [
            atomic,
            failed(
                "DB-DURABLE",
                f"content is {_state_name(below[-1])}, but {lost} had been "
                "acknowledged: an acknowledged commit was lost",
                expected=window,
                actual=below[-1],
            ),
            passed(
                "DB-PREFIX", "no unissued transaction visible", expected=window, actual=below[-1]
            ),
        ]
    above = [j for j in js if j > begun]
    return [
        atomic,
        passed("DB-DURABLE", "no acknowledged transaction lost", expected=window, actual=above[0]),
        failed(
            "DB-PREFIX",
            f"content is the state after transaction {above[0]}, which had not begun "
            f"(last begun: {begun})",
            expected=window,
            actual=above[0],
        ),
    ]


def _state_name(j: int) -> str:
    return "the empty database before set-up" if j == -1 else f"the state after transaction {j}"


def _ranges(xs: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3,7"``."""
    out: list[str] = []
    start = prev = xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(out)
