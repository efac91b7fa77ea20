"""Durable image advancing through a log, scratch copies with overlays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import CrashlabError
from harness.logformat import LogWriter
from harness.materialize import DurableImage, replay, sparse_copy


def test_sparse_copy_keeps_content_and_holes(tmp_path: Path) -> None:
    src = tmp_path / "src.img"
    with open(src, "wb") as f:
        f.truncate(8 << 20)
        f.seek(1 << 20)
        f.write(b"x" * 4096)
        f.seek((8 << 20) - 4096)
        f.write(b"y" * 4096)
    dst = tmp_path / "dst.img"
    dst.write_bytes(b"old content that must vanish" * 1000)
    sparse_copy(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert os.stat(dst).st_blocks * 512 < 1 << 20  # holes stayed holes


def test_durable_image_matches_replay_at_every_position(tmp_path: Path) -> None:
    base = tmp_path / "base.img"
    base.write_bytes(bytes(16 * 512))
    log = tmp_path / "w.log"
    with LogWriter(log) as w:
        for i in range(6):
            w.write(i % 4, bytes([65 + i]) * 512)
            if i % 2:
                w.flush()
        w.discard(0, 2)
    n = 10
    work = tmp_path / "work"
    work.mkdir()
    img = DurableImage(base, log, work)
    try:
        for pos in [0, 3, 3, 7, n, 2, 5]:  # forward, same, and backward (rebuild)
            img.advance(pos)
            replay(base, log, tmp_path / "ref.img", limit=pos)
            assert img.path.read_bytes() == (tmp_path / "ref.img").read_bytes(), pos
        with pytest.raises(CrashlabError, match="log ends at entry 10"):
            img.advance(n + 1)
        scratch = img.scratch([(0, b"Z" * 512), (256, b"W" * 512)])
        data = scratch.read_bytes()
        assert data[:256] == b"Z" * 256 and data[256:768] == b"W" * 512
        assert img.path.read_bytes()[:512] != data[:512]  # the durable image is untouched
    finally:
        img.close()
