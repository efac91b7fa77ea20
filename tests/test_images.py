"""Base images are reproducible (ext4, xfs) and carry their digest."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.images import IMAGES_DIR, file_sha256


def build(fs: str, out: Path) -> str:
    subprocess.run([str(IMAGES_DIR / "build-image.sh"), fs, str(out)], check=True)
    digest = (out.parent / (out.name + ".sha256")).read_text().strip()
    assert digest == file_sha256(out)
    return digest


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_image_is_reproducible(fs: str, tmp_path: Path) -> None:
    a = build(fs, tmp_path / "a.img")
    b = build(fs, tmp_path / "b.img")
    assert a == b
    assert (tmp_path / "a.img").stat().st_size == 64 << 20


def test_ext4_image_settings(tmp_path: Path) -> None:
    img = tmp_path / "e.img"
    build("ext4", img)
    out = subprocess.run(["dumpe2fs", "-h", str(img)], capture_output=True, text=True).stdout
    assert "Block size:               4096" in out
    assert "Filesystem UUID:          5eed0000-c0de-4a11-8c4a-000000000001" in out
    assert "has_journal" in out


def test_btrfs_image_builds_with_digest(tmp_path: Path) -> None:
    """Also while a copy of the base image is on a loop device (a btrfs
    run being recorded): mkfs.btrfs would refuse a fixed UUID it holds."""
    if os.geteuid() != 0:
        build("btrfs", tmp_path / "b.img")
        return
    held = tmp_path / "held.img"
    build("btrfs", held)
    dev = subprocess.run(
        ["losetup", "-f", "--show", "-r", str(held)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        build("btrfs", tmp_path / "b.img")
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)


def test_unknown_fs_rejected(tmp_path: Path) -> None:
    p = subprocess.run(
        [str(IMAGES_DIR / "build-image.sh"), "zfs", str(tmp_path / "z.img")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "unknown file system 'zfs'" in p.stderr
    assert not (tmp_path / "z.img").exists()
