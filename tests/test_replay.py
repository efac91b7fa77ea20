"""Replay: base image + log up to an entry count or a mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.logformat import LogWriter
from harness.materialize import replay


@pytest.fixture
def base_and_log(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "base.img"
    base.write_bytes(b"\xee" * 8192)
    log = tmp_path / "w.log"
    with LogWriter(log) as w:
        w.write(0, b"A" * 512)  # entry 0
        w.mark("one")  # 1
        w.flush()  # 2
        w.write(2, b"B" * 1024)  # 3
        w.discard(4, 2)  # 4
        w.mark("two")  # 5
        w.write(0, b"C" * 512)  # 6
    return base, log


def image(path: Path) -> bytes:
    return path.read_bytes()


def test_limit_matches_replay_log(base_and_log: tuple[Path, Path], tmp_path: Path) -> None:
    base, log = base_and_log
    out = tmp_path / "out.img"
    assert replay(base, log, out, limit=0) == 0
    assert image(out) == image(base)
    assert replay(base, log, out, limit=1) == 1
    assert image(out)[:512] == b"A" * 512 and image(out)[512:] == b"\xee" * 7680
    replay(base, log, out, limit=5)
    img = image(out)
    assert img[1024:2048] == b"B" * 1024 and img[2048:3072] == bytes(1024)
    assert img[3072:] == b"\xee" * 5120
    replay(base, log, out)
    assert image(out)[:512] == b"C" * 512


def test_end_mark_is_inclusive_first_match(base_and_log: tuple[Path, Path], tmp_path: Path) -> None:
    base, log = base_and_log
    out = tmp_path / "out.img"
    assert replay(base, log, out, end_mark="one") == 2
    assert replay(base, log, out, end_mark="two") == 6
    assert image(out)[:512] == b"A" * 512


def test_bad_requests_leave_nothing(base_and_log: tuple[Path, Path], tmp_path: Path) -> None:
    base, log = base_and_log
    out = tmp_path / "out.img"
    with pytest.raises(CrashlabError, match="no mark named 'nope'"):
        replay(base, log, out, end_mark="nope")
    with pytest.raises(CrashlabError, match="has 7 entries"):
        replay(base, log, out, limit=99)
    with pytest.raises(CrashlabError, match="not both"):
        replay(base, log, out, limit=1, end_mark="one")
    with pytest.raises(CrashlabError, match="no such base image"):
        replay(tmp_path / "missing.img", log, out)
    assert list(tmp_path.iterdir()) == [base, log] or not out.exists()
    assert not out.exists() and not (tmp_path / ".out.img.partial").exists()
