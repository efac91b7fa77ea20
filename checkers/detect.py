"""CORRUPT-DETECT: a SUT that promises to detect corruption reports a
corrupted or misdirected block of its database (an error opening or
reading it, an integrity failure) and never returns it as data.

Judged only on crash states carrying a ``misdirect`` or ``corrupt`` state
fault (``harness/states/inject.py``), from the verdicts the engine's
checker already gave the state: it needs nothing but them and whether the
fault touched the database file.
"""

from __future__ import annotations

from checkers.verdict import Verdict, failed, passed, skipped

ID = "CORRUPT-DETECT"


def judge_detect(verdicts: list[Verdict], fault: str, touched: bool) -> Verdict:
    """CORRUPT-DETECT of one faulted state.  ``fault``: the fault in words;
    ``touched``: whether it wrote into the database file (unknown where
    the run has no block map: then taken as touched).

    * the fault missed the database: passes, not exercised;
    * opening/scanning failed (DB-OPEN) or the structure check did
      (DB-INTEGRITY): passes, the corruption was reported;
    * it read without error but is no oracle state (DB-ATOMIC), loses
      acknowledged transactions (DB-DURABLE) or shows an unissued one
      (DB-PREFIX): fails, the corruption was returned as data;
    * it read without error as an oracle state in acknowledged..begun:
      passes, not exercised (the fault changed nothing the database
      returns: the bits lay in unused space, a later write or the SUT's
      recovery replaced them)."""
    by = {v.invariant: v for v in verdicts}
    if not touched:
        return passed(ID, f"{fault}: no block of the database file was hit", exercised=False)
    for inv in ("DB-OPEN", "DB-INTEGRITY"):
        v = by.get(inv)
        if v is not None and v.failed:
            return passed(ID, f"{fault}: reported ({inv}: {v.explanation})")
    for inv in ("DB-ATOMIC", "DB-DURABLE", "DB-PREFIX"):
        v = by.get(inv)
        if v is not None and v.failed:
            return failed(
                ID,
                f"{fault}: the database opened and read without error, but "
                f"{inv} failed: {v.explanation}: the damage was returned as data",
                expected="an error or the oracle state",
                actual=v.actual,
                implicated=list(v.implicated),
            )
    if by.get("DB-ATOMIC") is None or by["DB-ATOMIC"].status != "pass":
        return skipped(ID, "the content was not judged (see DB-ATOMIC)")
    return passed(
        ID,
        f"{fault}: the database reads as an oracle state within the acknowledged "
        "window: the fault changed nothing it returns",
        exercised=False,
    )
