"""A run directory: the one definition of what a recorded run leaves on disk.

    RUN/writes.log   the dm-log-writes log of every block write
    RUN/meta.json    backend, fs, kernel, base image and its digest, command,
                     tool versions, marks, and (for workload runs) the SUT,
                     workload spec and seed from which the oracle is rebuilt

A run never holds a copy of its base image: ``meta.json`` names the image and
its digest, and replay refuses an image whose digest differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import write_json_atomic
from harness.errors import CrashlabError

LOG_NAME = "writes.log"
META_NAME = "meta.json"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def log(self) -> Path:
        return self.path / LOG_NAME

    @property
    def meta_path(self) -> Path:
        return self.path / META_NAME

    def meta(self) -> dict[str, Any]:
        try:
            return json.loads(self.meta_path.read_text())
        except FileNotFoundError:
            raise CrashlabError(f"{self.path}: not a run directory (no {META_NAME})") from None
        except json.JSONDecodeError as e:
            raise CrashlabError(f"{self.meta_path}: corrupt JSON ({e})") from None

    @property
    def log_order(self) -> str:
        """What log order means for this run's crash states (the recording
        backend's; runs from before it was recorded: the fuse backend's)."""
        return str(self.meta().get("log_order", "completion"))

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.meta_path, meta)


def resolve_log(target: Path | str) -> Path:
    """A log path from either a run directory or a log file."""
    p = Path(target)
    if p.is_dir():
        p = RunDir(p).log
    if not p.exists():
        raise CrashlabError(f"{target}: no such run directory or log")
    return p
