"""A SUT's expected guarantee for one database invariant (checkers/INVARIANTS.md):
promised or not, and the documented rule that says so.  Shared by the SUT
registry (workloads/suts.py) and the SQLite rule table (workloads/sqlite_grammar.py)."""

from __future__ import annotations

from dataclasses import dataclass

DB_INVARIANTS = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX")
# what a SUT promises when the device fails requests (checkers/ioerror.py)
ERR_INVARIANTS = ("ERR-NOACK", "ERR-ATOMIC", "ERR-DURABLE")


@dataclass(frozen=True)
class Guarantee:
    """One invariant of one SUT: promised or not, and the rule that says so."""

    invariant: str
    promised: bool
    rule: str
    source: str
