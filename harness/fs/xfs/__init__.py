"""xfs: recovered by a kernel mount (its log replay is in the kernel);
``explain.py`` asks ``xfs_db`` of the recovered image what a block holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from harness.fs.base import MountedFileSystem

if TYPE_CHECKING:
    from harness.explain.context import ExplainContext, Explainer


class Xfs(MountedFileSystem):
    name = "xfs"
    guest_modules = ("xfs",)
    version_tool = ("xfsprogs", ["mkfs.xfs", "-V"])
    # workers mount clones of one image at once: xfs refuses a duplicate
    # UUID unless told (btrfs handles single-device clones itself since
    # Linux 6.7)
    clone_mount_options: ClassVar[str | None] = "nouuid"

    def explainer(self, ctx: ExplainContext) -> tuple[Explainer, list[str]]:
        if ctx.recovered is None or not ctx.recovered.exists():
            return super().explainer(ctx)
        from harness.explain.context import DB_PAGE_SIZE
        from harness.fs.xfs.explain import XfsExplainer

        return XfsExplainer(ctx.recovered, ctx.db_name, DB_PAGE_SIZE), [
            "xfs: blocks as xfs_db sees them in this state's recovered image"
        ]
