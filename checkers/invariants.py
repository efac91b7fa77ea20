"""The invariant IDs: the one definition (checkers/INVARIANTS.md explains them).

Every verdict names one of these.  ``CATEGORY`` is how reports classify a
violation: corruption, atomicity, durability, DHL-theorem, counting-commit,
FS, recovery, error-handling.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.jlang.rules import FS_INVARIANTS


@dataclass(frozen=True)
class Invariant:
    id: str
    category: str
    holds_when: str


INVARIANTS: dict[str, Invariant] = {
    inv.id: inv
    for inv in (
        Invariant(
            "DB-OPEN",
            "corruption",
            "the recovered database opens and answers a full scan without error",
        ),
        Invariant(
            "DB-INTEGRITY",
            "corruption",
            "SQLite integrity_check is ok / the DHL structure check passes",
        ),
        Invariant(
            "DB-ATOMIC",
            "atomicity",
            "the recovered content equals the oracle state after some transaction j",
        ),
        Invariant(
            "DB-DURABLE", "durability", "that j is at least the last acknowledged transaction"
        ),
        Invariant(
            "DB-PREFIX",
            "atomicity",
            "j is at most the in-flight transaction (nothing never issued appears)",
        ),
        Invariant("FS-RECOVER", "FS", "file-system recovery succeeds with journal replay alone"),
        Invariant(
            "DHL-T1",
            "DHL-theorem",
            "every page reachable in the committed state has a committed slot header",
        ),
        Invariant(
            "DHL-T2",
            "DHL-theorem",
            "a page write overwrites only a committed slot header older than the valid one",
        ),
        Invariant(
            "DHL-READ",
            "DHL-theorem",
            "reading through greatest-TID<=FCC yields the committed oracle content",
        ),
        Invariant("DHL-INV", "DHL-theorem", "after recovery no slot header has TID > FCC"),
        Invariant(
            "CC-COUNT",
            "counting-commit",
            "after recovery the count of TID == FCC equals the transaction size",
        ),
        Invariant(
            "CC-ROLLBACK",
            "counting-commit",
            "recovery rolls back the newest transaction exactly when it is incomplete (by the "
            "write trace, else by its count): FCC becomes the previous commit record's TID, "
            "whose size matches its count, and no header of the rolled-back TID remains",
        ),
        Invariant(
            "CC-NEXT",
            "counting-commit",
            "a slot header of TID T is never overwritten by transaction T+1",
        ),
        Invariant(
            "CC-MONO",
            "counting-commit",
            "committed FCC never decreases across acknowledged transactions",
        ),
        Invariant("REC-IDEMPOTENT", "recovery", "recovering a recovered image changes nothing"),
        Invariant(
            "REC-MINIMAL",
            "recovery",
            "recovery writes only pages holding an aborted transaction's slot header and "
            "changes there only those headers' TID and commit fields",
        ),
        Invariant(
            "REC-CRASHSAFE",
            "recovery",
            "every crash state of recovery's own writes recovers to the same state",
        ),
        Invariant(
            "REC-AGREE",
            "recovery",
            "the SUT's own restart on a crash image sees the content the checkers "
            "recovered from it (judged on continued first crashes)",
        ),
        Invariant(
            "ERR-NOACK",
            "error-handling",
            "no transaction whose commit reported an error is acknowledged "
            "(unless a new attempt of it succeeded)",
        ),
        Invariant(
            "ERR-ATOMIC",
            "error-handling",
            "a transaction in doubt after an error is wholly present or wholly absent",
        ),
        Invariant(
            "ERR-DURABLE",
            "error-handling",
            "after an I/O error, every later acknowledged transaction survives",
        ),
        # What a j-lang workload's persistence points made durable
        # (checkers/fssemantics.py; the rules per file system:
        # workloads/jlang/rules.py)
        Invariant(
            "FS-FSYNC-DATA",
            "durability",
            "a file's bytes and size after its fsync/fdatasync (O_SYNC write, msync) returned",
        ),
        Invariant(
            "FS-FSYNC-NAME",
            "durability",
            "a file or folder fsynced keeps its names and the folders on their way",
        ),
        Invariant(
            "FS-DIR-ENTRIES",
            "durability",
            "a folder's entries (created, removed, renamed) after its fsync returned",
        ),
        Invariant("FS-SYNC", "durability", "every entry and file's bytes after sync() returned"),
        Invariant(
            "FS-LINK",
            "durability",
            "a durable file's link count, and its durable hard links name one inode",
        ),
        Invariant("FS-XATTR", "durability", "a durable file's extended attributes"),
        Invariant(
            "FS-REPLACE",
            "durability",
            "a file renamed over another, the rename durable, has its bytes (ext4 auto_da_alloc)",
        ),
        Invariant(
            "CORRUPT-DETECT",
            "corruption",
            "a corrupted or misdirected database block is reported, never returned as data",
        ),
    )
}

# A user's own checker (``crashlab check --checker NAME=CMD``) judges an
# invariant of its own, ``USER:NAME``: it holds when the checker exits 0.
USER_PREFIX = "USER:"

DB_LEVEL = ("DB-OPEN", "DB-INTEGRITY", "DB-ATOMIC", "DB-DURABLE", "DB-PREFIX", "FS-RECOVER")
# judged only on states with a misdirect or corrupt fault (checkers/detect.py)
FAULT_LEVEL = ("CORRUPT-DETECT",)
# judged once per run over the write trace (checkers/dhl_trace.py)
TRACE_LEVEL = ("DHL-T2", "CC-NEXT", "CC-MONO")
# judged on the first crashes that multicrash and recovery-crash continue:
# the SUT's own restart against the checkers' recovery (checkers/agree.py)
RESTART_LEVEL = ("REC-AGREE",)
# judged on j-lang runs (checkers/fssemantics.py), in the order of the
# file-system rules that promise them
FS_LEVEL = FS_INVARIANTS
# judged on runs recorded with device faults (checkers/ioerror.py)
ERROR_LEVEL = ("ERR-NOACK", "ERR-ATOMIC", "ERR-DURABLE")


def invariant(inv_id: str) -> Invariant:
    """The invariant with this ID (a user's ``USER:NAME`` too); a KeyError
    names an unknown ID."""
    if inv_id.startswith(USER_PREFIX) and len(inv_id) > len(USER_PREFIX):
        return Invariant(
            inv_id,
            "user",
            f"the user's checker {inv_id[len(USER_PREFIX) :]!r} exits 0 on the recovered files",
        )
    return INVARIANTS[inv_id]
