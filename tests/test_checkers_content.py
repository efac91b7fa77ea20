"""DB-ATOMIC / DB-DURABLE / DB-PREFIX: each can pass and each can fail."""

from __future__ import annotations

import pytest

from checkers.content import judge_content
from checkers.verdict import Verdict

ORACLE = ["s0", "s1", "s2", "s3", "s3", "s5"]  # txn 4 left the content unchanged


def by_id(vs: list[Verdict]) -> dict[str, str]:
    return {v.invariant: v.status for v in vs}


def test_committed_state_in_window_passes() -> None:
    assert by_id(judge_content("s2", ORACLE, acked=2, begun=3)) == {
        "DB-ATOMIC": "pass",
        "DB-DURABLE": "pass",
        "DB-PREFIX": "pass",
    }
    assert by_id(judge_content("s3", ORACLE, acked=2, begun=3))["DB-DURABLE"] == "pass"


def test_mixed_content_breaks_atomicity() -> None:
    vs = judge_content("garbage", ORACLE, acked=2, begun=3)
    assert by_id(vs) == {"DB-ATOMIC": "fail", "DB-DURABLE": "skip", "DB-PREFIX": "skip"}
    assert "matches no oracle state" in vs[0].explanation


def test_lost_acknowledged_transaction_breaks_durability() -> None:
    vs = judge_content("s1", ORACLE, acked=2, begun=2)
    assert by_id(vs) == {"DB-ATOMIC": "pass", "DB-DURABLE": "fail", "DB-PREFIX": "pass"}
    durable = vs[1]
    assert durable.actual == 1 and durable.expected == "2"
    assert "transaction 2 had been acknowledged" in durable.explanation


def test_future_state_breaks_prefix() -> None:
    vs = judge_content("s5", ORACLE, acked=2, begun=3)
    assert by_id(vs) == {"DB-ATOMIC": "pass", "DB-DURABLE": "pass", "DB-PREFIX": "fail"}
    assert vs[2].actual == 5


def test_unchanged_content_matches_several_indices() -> None:
    # s3 is the state after 3 and after 4: acked 4 is durable.
    assert by_id(judge_content("s3", ORACLE, acked=4, begun=4))["DB-DURABLE"] == "pass"
    assert judge_content("s3", ORACLE, acked=0, begun=5)[0].actual == "3-4"


def test_bad_window_is_a_bug() -> None:
    with pytest.raises(ValueError):
        judge_content("s1", ORACLE, acked=3, begun=2)


def test_lost_setup_is_a_durability_loss_not_an_atomicity_one() -> None:
    """An empty database is the state before set-up (index -1): with the
    set-up acknowledged (acked 0) it fails DB-DURABLE only."""
    vs = judge_content("0" * 32, ORACLE, acked=0, begun=1)
    assert by_id(vs) == {"DB-ATOMIC": "pass", "DB-DURABLE": "fail", "DB-PREFIX": "pass"}
    assert vs[1].actual == -1
    assert "empty database before set-up, but the set-up had been acknowledged" in vs[1].explanation
