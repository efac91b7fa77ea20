"""Base images: where they are, building them on demand, verifying digests."""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
from pathlib import Path
from typing import Protocol, TypeVar

from harness.confine import resolved
from harness.env import ROOT, cache_root
from harness.errors import CrashlabError, cause
from harness.fs import FILESYSTEMS, get_fs
from harness.rundir import RunDir

H = TypeVar("H", bound="Hasher")


def _images_dir() -> tuple[Path, Path]:
    """Where base images are kept and the recipe that builds them: a
    checkout's ``images/``; an installed crashlab (no ``images/`` beside
    its packages) builds them on first use into ``$CRASHLAB_CACHE/images``
    with the recipe its wheel carries (setup.py)."""
    repo = ROOT / "images"
    if (repo / "build-image.sh").is_file():
        return repo, repo / "build-image.sh"
    return cache_root() / "images", ROOT / "harness" / "build" / "build-image.sh"


IMAGES_DIR, IMAGE_RECIPE = _images_dir()


def image_path(fs: str) -> Path:
    """Where the base image of ``fs`` is kept ("raw": a zero-filled image for
    SUTs on the recorded block device itself; images/build-image.sh says why
    1 MiB)."""
    return IMAGES_DIR / f"{get_fs(fs).name}.img"


class Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...


def file_digest(path: Path, h: H) -> H:
    """``h`` fed with the bytes of ``path`` (in 1 MiB chunks)."""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h


def file_sha256(path: Path) -> str:
    return file_digest(path, hashlib.sha256()).hexdigest()


def _make_folder(folder: Path) -> None:
    """``folder`` made if missing; a one-line error naming it if it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CrashlabError(f"{folder}: cannot keep base images there ({cause(e)})") from None


def ensure_image(fs: str) -> tuple[Path, str]:
    """The base image for ``fs`` and its recorded digest, built if missing."""
    img = image_path(fs)
    digest_file = img.with_name(img.name + ".sha256")
    if not img.exists() or not digest_file.exists():
        # One builder at a time (parallel recordings, test workers): the
        # build script writes one IMG.partial, and a btrfs image is known
        # only by the digest its own build recorded.
        _make_folder(img.parent)
        with open(img.with_name(img.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not img.exists() or not digest_file.exists():
                proc = subprocess.run(
                    [str(IMAGE_RECIPE), fs, str(img)],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    raise CrashlabError(f"building the {fs} image failed: {proc.stderr.strip()}")
    return img, digest_file.read_text().strip()


# Base images this process (or, through fork, its parent) has digested, by
# path and the file's identity and change stamps: a check verifies its base
# once, not once in each of its stages and workers (64 MiB: about 55 ms).
_BASE_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}


def _base_sha256(path: Path) -> str:
    """``file_sha256(path)``, read once per process while the file's
    inode, size, mtime and ctime stay the same."""
    st = os.stat(path)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    digest = _BASE_DIGESTS.get(key)
    if digest is None:
        digest = _BASE_DIGESTS[key] = file_sha256(path)
    return digest


def _base_path(run: RunDir, named: str) -> Path | None:
    """meta.json's base image path where it may be taken (see
    :func:`verified_base_for_run`) and exists; else a file of its name in
    the run's own folder (a continuation's crash state travels with its run
    folder when the sweep is copied or moved); None otherwise."""
    path = Path(named)
    top = run.path.resolve()
    if path.is_absolute():
        real = resolved(path)
        if (real.parent == IMAGES_DIR.resolve() or real.is_relative_to(top)) and real.exists():
            return real
    if path.name in ("", ".", ".."):
        return None
    carried = resolved(top / path.name)
    return carried if carried.is_relative_to(top) and carried.exists() else None


def verified_base_for_run(run: RunDir) -> Path:
    """The base image a run was recorded on, checked against its digest.
    meta.json's path is taken only where a base image may be: in
    ``images/`` or inside the run's folder (a continuation's crash state,
    also when the folder was copied: :func:`_base_path`); elsewhere
    (another machine's checkout, or a hostile path) the image of its file
    system is used, and its digest must match all the same."""
    image = run.meta().image
    if image is None:
        raise CrashlabError(f"{run.path}: meta.json names no base image: pass --base")
    path = _base_path(run, image.path)
    if path is None and image.fs in FILESYSTEMS:
        path, _ = ensure_image(image.fs)
    if path is None or not path.exists():
        raise CrashlabError(f"{image.path}: the run's base image is missing: pass --base")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise CrashlabError(f"{path}: the run's base image is not a regular file")
    actual = _base_sha256(path)
    if actual != image.sha256:
        raise CrashlabError(
            f"{path}: digest {actual[:12]} differs from the run's {image.sha256[:12]} "
            "(rebuilt image?): pass --base with the original"
        )
    return path
