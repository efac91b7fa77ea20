"""btrfs: recovered by a kernel mount; its writes are shown as byte ranges
(no block map: data is written copy-on-write, so a file's blocks move with
every write and one map could not describe a run)."""

from __future__ import annotations

from harness.fs.base import MountedFileSystem


class Btrfs(MountedFileSystem):
    name = "btrfs"
    guest_modules = ("btrfs",)
    version_tool = ("btrfs-progs", ["btrfs", "--version"])
    # measured (nightly, MULTI, prefix): sqlite-off shows no violation in 119
    # prefix and 2,724 reorder states, dhl-nolog fails only DHL-T1, and no
    # prefix state of dhl-cc or dhl-cc-opt needs recovery (111, 102 states):
    # btrfs's copy-on-write fsync never leaves their transaction partly on disk
    cow_fsync = True
