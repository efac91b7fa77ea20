"""ext4: everything crashlab knows of it.

* ``recover.py`` — the reference recovery with e2fsprogs (journal replay,
  read-only ``e2fsck -fn``, repair, ``debugfs rdump``), no root;
* ``fast.py`` (with ``inproc.py``'s replay and extraction in process,
  ``debugfs.py``'s long-lived session and ``undo.py``) — the same recovery
  with byte-identical verdicts, several times faster;
* ``debugfs.py`` — talking to debugfs; ``superblock.py`` — the journal's
  place, read from the super block;
* ``explain.py`` and ``jbd2.py`` — what a block of the device holds
  (static metadata, the journal's blocks, files and their pages).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.fs.base import BlockMap, FileSystem, FsRecovery

if TYPE_CHECKING:
    from harness.explain.context import ExplainContext, Explainer
    from harness.fs.ext4.fast import FastExt4
    from harness.logformat import LogReader


class Ext4(FileSystem):
    name = "ext4"
    guest_modules = ("ext4",)
    version_tool = ("e2fsprogs", ["mke2fs", "-V"])

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
        from harness.fs.ext4.recover import recover_ext4

        return recover_ext4(image, out_dir, check=fsck, skip=skip)

    def fast_recovery(
        self, workdir: Path, fsck: bool, skip: tuple[str, ...] = (), shared: Path | None = None
    ) -> FastExt4:
        from harness.env import ext4_in_process
        from harness.fs.ext4.fast import FastExt4

        return FastExt4(workdir, fsck=fsck, skip=skip, inproc=ext4_in_process(), shared=shared)

    def block_map(self, image: Path, path: str) -> BlockMap:
        """The file's extents, from ``debugfs stat`` of the (journal-replayed)
        ``image``."""
        from harness.fs.ext4.debugfs import debugfs, extents

        out = debugfs(image, ["stats", f"stat {path}"])
        bs = next(
            (int(ln.split(":")[1]) for ln in out.splitlines() if ln.startswith("Block size:")), 4096
        )
        ext, _ = extents(out)
        return BlockMap(tuple(sorted((p * bs, (p + n) * bs, lb * bs) for lb, p, n in ext)))

    def explainer(self, ctx: ExplainContext) -> tuple[Explainer, list[str]]:
        from harness.fs.ext4.explain import ext4_explainer

        x = ext4_explainer(ctx)
        notes = ["jbd2 superblock unreadable: journal blocks not decoded"] if x.jsb is None else []
        return x, notes

    def journal_ranges(self, reader: LogReader, base: Path | None) -> list[tuple[int, int]] | None:
        from harness.fs.ext4.superblock import journal_ranges

        return journal_ranges(reader, base)

    @staticmethod
    def version(first_line: str) -> str | None:
        """``mke2fs 1.47.0 (5-Feb-2023)`` → ``1.47.0``."""
        words = first_line.split()
        return words[1] if len(words) > 1 else None
