"""A SUT's expected guarantee for one database invariant (checkers/INVARIANTS.md):
promised or not, and the documented rule that says so; the DB-PREFIX rule
every SUT keeps, and the lists of guarantees a safe or unsafe commit design
gives.  Shared by the SUT definitions (workloads/suts.py, dhl_suts.py,
paper_suts.py) and the SQLite rule table (workloads/sqlite_rules.py)."""

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


DOC_CRASHLAB = "crashlab README, What a sweep does"
PREFIX_RULE = (
    "a crash state holds only writes issued before the cut, and no SUT writes a "
    "transaction's rows before the transaction is issued"
)


def safe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    """Open, integrity and atomicity promised by ``rule``; durability as given."""
    return [
        Guarantee("DB-OPEN", True, rule, source),
        Guarantee("DB-INTEGRITY", True, rule, source),
        Guarantee("DB-ATOMIC", True, rule, source),
        durable,
    ]


def unsafe(rule: str, source: str, durable: Guarantee) -> list[Guarantee]:
    """Open, integrity and atomicity not promised, by ``rule``; durability as given."""
    return [
        Guarantee("DB-OPEN", False, rule, source),
        Guarantee("DB-INTEGRITY", False, rule, source),
        Guarantee("DB-ATOMIC", False, rule, source),
        durable,
    ]
