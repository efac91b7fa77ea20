"""FUA in the kernel's dm-log-writes order: non-FUA writes are logged when
the next flush completes, FUA writes when they complete, so a non-FUA write
logged after a FUA write may have persisted while the FUA write was lost.
The fuse recorder logs in completion order, where that state is impossible.
The run's ``log_order`` (meta.json, from the backend) decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.logformat import FUA, LogReader, LogWriter
from harness.record.dm import DmBackend
from harness.record.fuse import FuseBackend
from harness.states import Enumeration, Options, state_from_id
from harness.states.coverage import summary
from harness.states.synth import page_bytes

SECTORS = 8  # 4 KiB writes


@pytest.fixture
def dm_log(tmp_path: Path) -> Path:
    """The kernel's example, after its first flush: ``c, a, FLUSH, fuad, b``
    (a and c flushed; fuad completed; b completed too but is logged at the
    next flush, after fuad)."""
    p = tmp_path / "dm.log"
    with LogWriter(p) as w:
        w.write(1 * SECTORS, page_bytes(1))  # c
        w.write(2 * SECTORS, page_bytes(2))  # a
        w.flush()
        w.write(3 * SECTORS, page_bytes(3), FUA)  # fuad: write 0 of epoch 1
        w.write(4 * SECTORS, page_bytes(4))  # b: write 1 of epoch 1
        w.flush()
    return p


def _ids(log: Path, order: str) -> set[str]:
    with LogReader(log) as r:
        return {
            s.id for s in Enumeration(r, Options(strategy="reorder", dedup=False, log_order=order))
        }


def test_b_without_fuad_is_a_state_only_in_dm_order(dm_log: Path) -> None:
    assert "e1.k1" in _ids(dm_log, "dm-log-writes")  # b persisted, fuad lost
    assert "e1.k1" not in _ids(dm_log, "completion")
    with LogReader(dm_log) as r:
        with pytest.raises(CrashlabError, match="FUA write 0"):
            state_from_id(r, "e1.k1")
        s = state_from_id(r, "e1.k1", "dm-log-writes")
        fuad = s.epoch.writes[0].index
        assert s.cut.lo == s.cut.hi == fuad  # the crash came before fuad completed


def test_fua_writes_stay_ordered_among_themselves(tmp_path: Path) -> None:
    p = tmp_path / "two.log"
    with LogWriter(p) as w:
        w.write(1 * SECTORS, page_bytes(1), FUA)
        w.write(2 * SECTORS, page_bytes(2), FUA)
        w.write(3 * SECTORS, page_bytes(3))
        w.flush()
    dm = _ids(p, "dm-log-writes")
    assert {"e0.p1", "e0.k0,2", "e0.k2"} <= dm  # f1 only; f1 and b; b alone
    assert not {"e0.k1", "e0.k1-2"} & dm  # f2 durable but f1 (completed before it) lost
    with LogReader(p) as r:
        e = Enumeration(r, Options(strategy="reorder", log_order="dm-log-writes"))
        list(e)
    first = summary(e.stats.coverage)["epochs"][0]
    assert first["kept_possible"] == 3 * 2 == first["kept_checked"]  # FUA prefixes x b


def test_backends_record_their_order() -> None:
    assert FuseBackend.log_order == "completion"
    assert DmBackend.log_order == "dm-log-writes"


def test_bad_log_order_is_one_line() -> None:
    with pytest.raises(CrashlabError, match="unknown log order"):
        Options(log_order="elevator").validate()
