"""No file system: the database is the recorded block device itself (DHL's
fast tier).  Recovery is the identity — the crash image *is* the database
file — every device byte maps to the same file byte, and a write is
explained as DHL pages and slot headers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from harness.fs.base import BlockMap, FileSystem, FsRecovery

if TYPE_CHECKING:
    from harness.explain.context import ExplainContext, Explainer


# the recovered device's name among the extracted files, when the run does
# not name its database (a user's run: `crashlab record --fs raw -- COMMAND`)
DEVICE_NAME = "device.img"


class Raw(FileSystem):
    name = "raw"
    has_files = False
    recovery_moves_image = True

    def recover(
        self,
        image: Path,
        out_dir: Path,
        *,
        workdir: Path,
        db_name: str,
        fsck: bool = True,
        skip: tuple[str, ...] = (),
    ) -> FsRecovery:
        """The image is moved into ``out_dir`` under ``db_name`` (no files:
        nothing to skip)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.move(image, out_dir / db_name)
        return FsRecovery(
            "raw",
            ok=True,
            journal_replayed=False,
            needed_repair=False,
            files=out_dir,
            steps=["raw device: no file-system recovery"],
        )

    def block_map(self, image: Path, path: str) -> BlockMap:
        return BlockMap.identity(os.path.getsize(image))

    def explainer(self, ctx: ExplainContext) -> tuple[Explainer, list[str]]:
        if not ctx.mode:  # not a DHL SUT's device (a user's command): bytes only
            return super().explainer(ctx)
        from harness.explain.dhl import DhlExplainer

        dx = DhlExplainer(ctx.crash_image, ctx.workdir, ctx.mode)
        return dx, [dx.header()]
