"""REC-AGREE: the database the checkers judge is the one the SUT's own
restart opens.

The checkers recover every crash state on their side (the file system's
recovery with e2fsck or a mount, then the database's recovery: SQLite
through the SUT's VFS, DHL through libdhl, xLog through its replay tool).
A continuation of the multicrash and recovery-crash strategies restarts the
real SUT instead: the runner opens the crash image after the kernel's own
file-system recovery, through its engine, its VFS and its recovery, and
reports the content digest of what that open sees before any transaction
runs (``runner.opened`` in the continuation's meta.json; the digest is the
oracle's, workloads/oracle.py, computed by the runner in C:
workloads/runner/contentdigest.h, libdhl's ``dhl_digest``).  The verdict
compares it with the content the checkers recovered for the same first
crash state (the oracle state after transaction j, which their content
check matched).  Only continued first-crash states are compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checkers.verdict import Verdict, failed, passed, skipped

INV = "REC-AGREE"


def _state(digest: str, oracle: Sequence[str]) -> str:
    """Which oracle states ``digest`` is, in words."""
    js = [i for i, d in enumerate(oracle) if d == digest]
    if not js:
        return "no oracle state (a mix of transactions, or corrupt)"
    return "the oracle state after transaction " + ",".join(map(str, js))


def judge_agree(
    runner: Mapping[str, Any] | None,
    oracle: Sequence[str],
    recovered: int,
    exit_status: int | None = 0,
) -> Verdict:
    """REC-AGREE for one continued first crash: ``runner`` is the
    continuation's runner report (meta.json ``runner``, written right after
    its open, so also when the restart failed later), ``recovered`` the
    oracle index j of the content the checkers recovered for that state,
    ``exit_status`` the continuation's."""
    opened = (runner or {}).get("opened")
    if not isinstance(opened, Mapping) and exit_status:
        return failed(
            INV,
            f"the SUT's own restart exited {exit_status} before it reported what "
            f"it opened, while the checkers recovered transaction {recovered}",
            expected=recovered,
            actual=None,
        )
    if not isinstance(opened, Mapping):
        return skipped(
            INV,
            "the continuation's runner reported no digest of its open "
            "(a runner without the report, or no --stats)",
        )
    expected = oracle[recovered]
    if "digest" not in opened:
        return failed(
            INV,
            "the SUT's own restart could not read its database "
            f"({opened.get('error', 'no reason given')}), while the checkers "
            f"recovered transaction {recovered}",
            expected=recovered,
            actual=None,
        )
    digest = str(opened["digest"])
    if digest == expected:
        return passed(
            INV,
            f"the SUT's own open sees transaction {recovered}, as the checkers recovered",
            expected=recovered,
            actual=recovered,
        )
    return failed(
        INV,
        f"the SUT's own restart opens content {digest[:12]}, "
        f"{_state(digest, oracle)}, but the checkers recovered transaction "
        f"{recovered} ({expected[:12]}): they judged another database than the "
        "SUT opens",
        expected=recovered,
        actual=digest,
    )
