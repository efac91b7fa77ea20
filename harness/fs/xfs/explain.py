"""What a byte range of an xfs device holds, from ``xfs_db`` on the
recovered image (read-only, no root): ``blockget -n`` then ``blockuse -n``
per block gives its type (sb, agf, btree, inode, log, data, free...) and,
for file blocks, the inode and its name; ``bmap`` of that inode gives the
block's offset in the file, and the SQLite explainer names the page,
journal record or WAL frame.  Only the state's recovered image is asked
(no later views as for ext4): blocks allocated later show as free."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.errors import CrashlabError
from harness.explain.sqlitefile import explain_file_bytes, file_kind

BLOCK = 4096
SECTOR = 512
AG_HEADERS = ("superblock", "AGF (free space header)", "AGI (inode header)", "AGFL")


def _merge_runs(phrases: list[str]) -> list[str]:
    """``block 8: xfs log``, ``block 9: xfs log`` → ``blocks 8-9: xfs log``."""
    out: list[tuple[int, int, str]] = []
    for ph in phrases:
        m = re.match(r"block (\d+): (xfs .*)$", ph)
        if m and out and out[-1][2] == m.group(2) and out[-1][1] == int(m.group(1)) - 1:
            out[-1] = (out[-1][0], int(m.group(1)), m.group(2))
        elif m:
            out.append((int(m.group(1)), int(m.group(1)), m.group(2)))
        else:
            out.append((-1, -1, ph))
    return [
        w if a < 0 else f"block {a}: {w}" if a == b else f"blocks {a}-{b}: {w}" for a, b, w in out
    ]


def _xfs_db(image: Path, commands: Sequence[str]) -> str:
    argv = ["xfs_db", "-r"]
    for c in commands:
        argv += ["-c", c]
    try:
        p = subprocess.run([*argv, str(image)], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise CrashlabError("xfs_db not found: run `make setup`") from None
    return p.stdout


class XfsExplainer:
    def __init__(self, recovered: Path, db_name: str, page_size: int = 4096) -> None:
        self.image = recovered
        self.db_name = db_name
        self.page_size = page_size

    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        blocks = sorted(
            {
                b
                for off, data in writes
                for b in range(off // BLOCK, (off + max(len(data), 1) - 1) // BLOCK + 1)
            }
        )
        cmds = ["blockget -n"]
        for b in blocks:
            cmds += [f"daddr {b * BLOCK // SECTOR}", "blockuse -n"]
        use: dict[int, tuple[str, int | None, str | None]] = {}
        fsb: dict[int, int] = {}
        lines = iter(_xfs_db(self.image, cmds).splitlines())
        for b, line in zip(blocks, lines, strict=False):
            m = re.match(r"block (\d+) \(\S+\) type (\S+)(?: inode (\d+))?(?: (\S.*))?", line)
            if m:
                fsb[b] = int(m.group(1))
                use[b] = (m.group(2), int(m.group(3)) if m.group(3) else None, m.group(4))
        inodes = sorted({i for _, i, _ in use.values() if i is not None})
        bmaps: dict[int, list[tuple[int, int, int]]] = {}
        if inodes:
            cmds = [c for i in inodes for c in (f"echo inode {i}", f"inode {i}", "bmap")]
            cur = None
            for line in _xfs_db(self.image, cmds).splitlines():
                m = re.match(r"inode (\d+)\s*$", line)
                if m:
                    cur = int(m.group(1))
                    continue
                m = re.match(r"data offset (\d+) startblock (\d+) \(\S+\) count (\d+)", line)
                if m and cur is not None:
                    bmaps.setdefault(cur, []).append(
                        (int(m.group(1)), int(m.group(2)), int(m.group(3)))
                    )
        out: list[list[str]] = []
        for off, data in writes:
            phrases: list[str] = []
            for b in range(off // BLOCK, (off + max(len(data), 1) - 1) // BLOCK + 1):
                lo, hi = max(off, b * BLOCK), min(off + len(data), (b + 1) * BLOCK)
                phrases.append(
                    self._phrase(
                        b, use.get(b), fsb.get(b), bmaps, data[lo - off : hi - off], lo - b * BLOCK
                    )
                )
            out.append(_merge_runs(phrases))
        return out

    def _phrase(
        self,
        b: int,
        use: tuple[str, int | None, str | None] | None,
        fsblock: int | None,
        bmaps: dict[int, list[tuple[int, int, int]]],
        data: bytes,
        within: int,
    ) -> str:
        if use is None:
            return f"block {b}: (xfs_db gave no answer)"
        kind, ino, name = use
        if kind == "sb" and within < len(AG_HEADERS) * SECTOR:
            # block 0 of an AG holds four sector-sized headers
            kind = AG_HEADERS[within // SECTOR]
        if ino is None:
            return f"block {b}: xfs {kind}"
        head = f"block {b}: {name or '?'} (inode {ino}) {kind}"
        for foff, start, count in bmaps.get(ino, []):
            if fsblock is not None and start <= fsblock < start + count:
                fo = (foff + fsblock - start) * BLOCK + within
                fk = file_kind(name or "", self.db_name)
                if fk is not None:
                    return f"{head} {explain_file_bytes(fk, fo, data, self.page_size)}"
                return f"{head} bytes {fo}..{fo + len(data)}"
        return head
