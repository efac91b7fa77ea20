"""What a SUT promises under a state fault (``harness/faults.py``: a lying
flush, a misdirected write, flipped bits): the guarantees of
``workloads/suts.py`` assume a disk that persists what it acknowledged,
where it was told; under a state fault only what these rules say is left.

``fault_guarantees(sut, kind)`` gives one :class:`Guarantee` per database
invariant and CORRUPT-DETECT, each with its cited rule:

* ``lost-flush``: every SUT here orders its writes with fsync (SQLite's
  journal and WAL syncs, DHL's commit syncs), so a FLUSH acknowledged and
  not performed voids open/integrity/atomicity/durability; only DB-PREFIX
  stays (every write in a crash image was issued before the crash).  A
  transaction acknowledged before the lost FLUSH and lost is a durability
  loss the device caused: DB-DURABLE failing there is the expected finding.
* ``misdirect``: no SUT here checks that a page read is the page written
  there; SQLite's checksum VFS neither (its checksum covers the page's own
  bytes): CORRUPT-DETECT is promised by none.
* ``corrupt``: plain SQLite and DHL keep no redundancy to detect flipped
  bits; the checksum VFS promises CORRUPT-DETECT (where the SUT promises
  durability: a SUT that loses acknowledged data after any crash fails
  CORRUPT-DETECT for that loss, checkers/INVARIANTS.md).  Detection means
  the database does not open or scan, so DB-OPEN, DB-INTEGRITY, DB-ATOMIC
  and DB-DURABLE are promised by none.
* ``misdirect`` and ``corrupt`` aimed at the WAL (``file=wal``; the DHL
  thesis, §3.6, doubts that WAL's checksums catch what one fsync leaves):
  WAL recovery stops at the first frame whose salts or checksum do not
  hold and keeps the frames up to the last commit before it, so a damaged
  transaction is dropped whole: a WAL SUT keeps DB-INTEGRITY and
  DB-ATOMIC; it loses the acknowledged transactions from the damaged frame
  on (DB-DURABLE, silently: CORRUPT-DETECT) and, where the crash cuts a
  checkpoint, the frames that would finish it (DB-OPEN).
"""

from __future__ import annotations

from workloads.guarantee import DB_INVARIANTS, Guarantee
from workloads.sut import Sut

DETECT = "CORRUPT-DETECT"
INVARIANTS = (*DB_INVARIANTS, DETECT)

DOC_HW = "https://www.sqlite.org/atomiccommit.html#hardware_assumptions"
DOC_CKSUM = "https://www.sqlite.org/cksumvfs.html; workloads/runner/cksumvfs.h"
DOC_DHL = "DHL thesis §III; dhl/DESIGN.md"

_FSYNC = (
    "SQLite 'assumes that the flush or fsync will not return until all pending write "
    "operations for the file that is being flushed have completed ... It opens SQLite up "
    "to the possibility of database corruption following a power loss in the middle of "
    "a commit' when flush is broken (atomic commit, Hardware Assumptions)"
)
_DHL_FSYNC = (
    "DHL orders its commit with fsync (TC: pages, fsync, commit record, fsync; CC: "
    "pages and commit record, then one fsync that makes them durable) and recovers "
    "from what the device kept; a FLUSH that persisted nothing leaves a commit whose "
    "pages, or an acknowledged transaction, are not on disk"
)
_BITS = (
    "SQLite 'assumes that the detection and/or correction of bit errors ... is the "
    "responsibility of the underlying hardware and operating system. SQLite does not add "
    "any redundancy to the database file for the purpose of detecting corruption or I/O "
    "errors. SQLite assumes that the data it reads is exactly the same data that it "
    "previously wrote.' (atomic commit, Hardware Assumptions)"
)
_DHL_BITS = (
    "DHL pages and commit records carry no checksum (dhl/FORMAT.md): recovery and "
    "the read rule trust the slot headers and records they find"
)
_CKSUM = (
    "the checksum VFS 'will return an SQLITE_IOERR_DATA error if a page is encountered "
    "that contains an invalid checksum': every whole page read from the database or its "
    "WAL is verified (cksumvfs.h), so flipped bits are an error, never data"
)
_CKSUM_MIS = (
    "the checksum VFS's checksum covers only the page's own bytes, not its page "
    "number or version: a misdirected page is valid where it lands and the page "
    "meant to be overwritten stays valid and old (cksumvfs.h, what it cannot detect)"
)
_DETECTED = (
    "detection is an error opening or reading the database (DB-OPEN) or a failed "
    "structure check: the damaged database is not expected to open clean"
)
_PREFIX = (
    "a state fault changes where and whether issued writes persist, never adds one: "
    "nothing of an unissued transaction can appear"
)
_WRONG_PLACE = (
    "SQLite assumes the disk writes a sector where it was told ('We assume that "
    "disk is written in chunks which we call a sector'; atomic commit, Hardware "
    "Assumptions) and reads back what it wrote there"
)


DOC_WAL = (
    "https://www.sqlite.org/fileformat2.html#walformat; DHL thesis §3.3, §3.6; "
    "harness/paper/walframes.py"
)
_WAL_STOPS = (
    "WAL recovery: 'A frame is considered valid if and only if the following "
    "conditions are true: the salt-1 and salt-2 values in the frame-header match "
    "salt values in the wal-header; the checksum values in the final 8 bytes of the "
    "frame-header exactly match the checksum computed consecutively on the first 24 "
    "bytes of the WAL header and the first 8 bytes and the content of all frames up "
    "to and including the current frame' and 'only the valid frames up to the last "
    "commit frame' are used: a damaged frame ends the WAL, so its transaction is "
    "dropped whole"
)
_WAL_LOST = (
    "the frames from the damaged one on are dropped silently, acknowledged "
    "transactions among them (fileformat2, WAL format); and a checkpoint writes the "
    "database in place while the WAL still holds the pages it has not finished: a "
    "crash during it with a damaged frame leaves a database that need not open"
)
_NO_WAL = "the SUT writes no WAL: a fault aimed at one has nowhere to go"


def _durable(sut: Sut) -> bool:
    return "DB-DURABLE" in sut.promises


def _wal_guarantee(sut: Sut, inv: str) -> Guarantee:
    """``inv`` under a misdirect or corrupt fault aimed at the WAL."""
    if sut.config is None or sut.config.journal != "wal":
        return Guarantee(inv, False, _NO_WAL, DOC_WAL)
    if inv in ("DB-INTEGRITY", "DB-ATOMIC"):
        return Guarantee(inv, inv in sut.promises, _WAL_STOPS, DOC_WAL)
    return Guarantee(inv, False, _WAL_LOST, DOC_WAL)


def fault_guarantees(sut: Sut, kind: str, aim: str = "db") -> tuple[Guarantee, ...]:
    """One guarantee per invariant of :data:`INVARIANTS` under the state
    fault ``kind`` ("lost-flush", "misdirect" or "corrupt"), aimed at the
    file ``aim`` ("db", or "wal": harness/faults.py's ``file=``)."""
    dhl = sut.engine == "dhl"
    cksum = bool(sut.config and sut.config.cksum)
    src = DOC_DHL if dhl else DOC_HW
    out: list[Guarantee] = []
    for inv in INVARIANTS:
        if inv == "DB-PREFIX":
            out.append(Guarantee(inv, True, _PREFIX, "crashlab, harness/states/README.md"))
        elif kind == "lost-flush":
            out.append(Guarantee(inv, False, _DHL_FSYNC if dhl else _FSYNC, src))
        elif aim == "wal" and kind in ("misdirect", "corrupt"):
            out.append(_wal_guarantee(sut, inv))
        elif kind == "misdirect":
            if inv == DETECT and cksum:
                out.append(Guarantee(inv, False, _CKSUM_MIS, DOC_CKSUM))
            else:
                out.append(Guarantee(inv, False, _DHL_BITS if dhl else _WRONG_PLACE, src))
        elif kind == "corrupt":
            if inv == DETECT and cksum:
                out.append(Guarantee(inv, _durable(sut), _CKSUM, DOC_CKSUM))
            elif cksum:
                out.append(Guarantee(inv, False, _DETECTED, DOC_CKSUM))
            else:
                out.append(Guarantee(inv, False, _DHL_BITS if dhl else _BITS, src))
        else:
            raise ValueError(f"not a state fault: {kind!r}")
    return tuple(out)


def promised_under(
    sut: Sut, kinds: tuple[str, ...], aim: str = "db"
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Under every state fault of ``kinds`` at once, misdirect and corrupt
    aimed at ``aim``: (the SUT's database promises it no longer makes, the
    promises the faults add)."""
    waived: set[str] = set()
    added: set[str] = set()
    for kind in kinds:
        for g in fault_guarantees(sut, kind, aim):
            if g.invariant == DETECT:
                if g.promised:
                    added.add(DETECT)
            elif not g.promised:
                waived.add(g.invariant)
    if "misdirect" in kinds or "lost-flush" in kinds:
        added.discard(DETECT)  # a misdirected or lost page is not detected
    return (
        tuple(i for i in DB_INVARIANTS if i in waived and i in sut.promises),
        tuple(sorted(added)),
    )


def fault_weaknesses(sut: Sut, kind: str, aim: str = "db") -> tuple[str, ...]:
    """What a sweep with the state fault ``kind`` must keep finding on
    ``sut`` (one of them failing), for the SQLite grammar's and DHL's SUTs
    (measured on MULTI on ext4 and DHL_INSERT raw, prefix states; counts of
    failing states):

    * ``lost-flush``: an acknowledged transaction lost (DB-DURABLE) where
      one is promised — sqlite-delete-extra 10/220, sqlite-wal-full 10/97,
      dhl-tc-raw 10/52, dhl-cc-raw 52/52 (reorder adds DB-ATOMIC,
      FS-RECOVER and, on DHL, DB-OPEN);
    * ``misdirect``: damage returned as data (CORRUPT-DETECT), with and
      without the checksum VFS alike — 12/231 on the rollback journal
      either way, DHL 8/63; WAL writes the database only at its
      checkpoints (3-4 of 28 states): reported, not required;
    * ``corrupt``: flipped bits returned as data (CORRUPT-DETECT) by plain
      SQLite and DHL — sqlite-delete-extra 80/231, dhl-cc-raw 19/63,
      dhl-tc-raw 25/63; plain WAL 2/110, reported; never by the checksum
      VFS (there CORRUPT-DETECT is promised);
    * either aimed at the WAL (``aim`` "wal"): acknowledged transactions
      dropped with the damaged frame (DB-DURABLE) where one is promised —
      sqlite-wal-full, MULTI: corrupt 41/110 prefix, 447/1,040 reorder;
      misdirect 89/110, 884/1,040."""
    config = sut.config
    if sut.engine != "dhl" and config is None:
        return ()
    if aim == "wal" and kind in ("misdirect", "corrupt"):
        wal = config is not None and config.journal == "wal"
        return ("DB-DURABLE",) if wal and "DB-DURABLE" in sut.promises else ()
    if kind == "lost-flush":
        return ("DB-DURABLE",) if "DB-DURABLE" in sut.promises else ()
    every_commit = config is None or config.journal != "wal"  # writes the database per commit
    if kind == "misdirect":
        return (DETECT,) if every_commit else ()
    if kind == "corrupt":
        return (DETECT,) if every_commit and not (config and config.cksum) else ()
    raise ValueError(f"not a state fault: {kind!r}")
