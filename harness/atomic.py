"""Atomic file output: results are either whole or absent, never half-written."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import writing


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then
    rename it over ``path``.  A full, read-only or forbidden place is a
    one-line error naming ``path`` (:func:`harness.errors.writing`); the
    temporary file is gone either way."""
    path = Path(path)
    with writing(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_text_atomic(path: Path | str, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path | str, obj: Any) -> None:  # noqa: ANN401
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
