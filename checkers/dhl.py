"""Database and image-level checkers for DHL SUTs (engine "dhl"): the
protocol of :mod:`checkers.engines` (``content_key``, ``examine``,
``judge`` ...) assembled from its parts:

* checkers/dhl_examine.py takes the facts of a crash image, before and
  after DHL recovery, on in-memory copies (checkers/dhl_native.py: the
  same facts from C, for the raw tier);
* checkers/dhl_judge.py judges them, one verdict per invariant of ``IDS``;
* checkers/dhl_trace.py judges the run's write trace, and
  checkers/recovery.py its recovery under a crash (REC-CRASHSAFE) and
  what that recovery writes (REC-MINIMAL).
"""

from __future__ import annotations

from pathlib import Path

from checkers import dhl_trace
from checkers.dhl_examine import content_key, examine, examine_image, native_examiner, refused
from checkers.dhl_facts import DhlFacts, RunFacts
from checkers.dhl_judge import IDS, judge
from checkers.protocol import EngineChecker, KeyOfPieces
from checkers.recovery import recovery_verdicts
from checkers.verdict import Verdict


class DhlRunChecks:
    """DHL's checks of a whole run: the write trace's DHL-T2, CC-NEXT and
    CC-MONO and its :class:`RunFacts` (``checkers/dhl_trace.py``), and
    REC-CRASHSAFE and REC-MINIMAL (``checkers/recovery.py``)."""

    judge_run = staticmethod(dhl_trace.judge_run)

    def recovery_checks(self, db: Path, work: Path, *, blockdev: bool) -> list[Verdict]:
        return recovery_verdicts(db, work, blockdev=blockdev)


class DhlChecker:
    """DHL's checker as the engine protocol (checkers/engines.py) has it:
    the examination (dhl_examine.py) in memory and its native twin, the
    verdicts (dhl_judge.py), and the run-level checks."""

    IDS = IDS
    content_key = staticmethod(content_key)
    content_key_of: KeyOfPieces | None = None
    examine = staticmethod(examine)
    examine_image = staticmethod(examine_image)
    refused = staticmethod(refused)
    judge = staticmethod(judge)
    native_examiner = staticmethod(native_examiner)
    run_checks = DhlRunChecks()


CHECKER: EngineChecker[DhlFacts, RunFacts] = DhlChecker()
