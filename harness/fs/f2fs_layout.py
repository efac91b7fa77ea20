"""Which F2FS area a device block belongs to: metadata (super block,
checkpoint, SIT, NAT, SSA), a node log or a data log, read from an image's
super block and its newer checkpoint pack.

F2FS writes its main area as logs, one open segment per log (hot, warm and
cold node; hot, warm and cold data), and the checkpoint names each log's
current segment (``cur_node_segno``, ``cur_data_segno``).  A write into one
of those segments is a node or a data block; a write into another main-area
segment is ``other`` (a log that moved on to a new segment after the
checkpoint read, or garbage collection).  Offsets are those of
``struct f2fs_super_block`` and ``struct f2fs_checkpoint``
(include/linux/f2fs_fs.h)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from harness.errors import CrashlabError

F2FS_MAGIC = 0xF2F52010
SUPER_OFFSET = 1024
BLOCK = 4096
NO_SEGMENT = 0xFFFFFFFF
AREAS = ("data", "node", "metadata", "other")


@dataclass(frozen=True)
class F2fsLayout:
    main_blkaddr: int
    log_blocks_per_seg: int
    node_segments: frozenset[int]
    data_segments: frozenset[int]

    def area(self, block: int) -> str:
        """The area (one of AREAS) of 4 KiB device block ``block``."""
        if block < self.main_blkaddr:
            return "metadata"
        seg = (block - self.main_blkaddr) >> self.log_blocks_per_seg
        if seg in self.node_segments:
            return "node"
        if seg in self.data_segments:
            return "data"
        return "other"


def read_layout(image: Path) -> F2fsLayout:
    """The layout of the F2FS ``image`` (its checkpoint with the highest
    version); CrashlabError if it is not F2FS."""
    with open(image, "rb") as f:
        f.seek(SUPER_OFFSET)
        sb = f.read(128)
        if len(sb) < 96 or struct.unpack_from("<I", sb, 0)[0] != F2FS_MAGIC:
            raise CrashlabError(f"{image}: not an F2FS image (no super block magic)")
        log_bps = struct.unpack_from("<I", sb, 20)[0]
        cp_blkaddr = struct.unpack_from("<I", sb, 76)[0]
        main_blkaddr = struct.unpack_from("<I", sb, 92)[0]
        best: tuple[int, bytes] | None = None
        for pack in (cp_blkaddr, cp_blkaddr + (1 << log_bps)):
            f.seek(pack * BLOCK)
            cp = f.read(128)
            version = struct.unpack_from("<Q", cp, 0)[0]
            if best is None or version > best[0]:
                best = (version, cp)
    assert best is not None
    node = struct.unpack_from("<8I", best[1], 36)
    data = struct.unpack_from("<8I", best[1], 84)
    return F2fsLayout(
        main_blkaddr,
        log_bps,
        frozenset(s for s in node if s != NO_SEGMENT),
        frozenset(s for s in data if s != NO_SEGMENT),
    )
