"""What a byte range of an ext4 device holds, read from images without
root: ``dumpe2fs`` for the static layout (superblocks, group descriptors,
bitmaps, inode tables), the journal inode's extents for the journal, jbd2
block headers and descriptor tags for what is inside the journal, and
``debugfs`` (one process per batch of questions) for which inode owns a data
block, its path, and the block's place in the file.

Ownership is asked of a list of *views* (images after journal replay) in
order: the crash state's recovered image first, then later images of the
run, because a state can hold data written to blocks whose allocation was
committed only later (ext4 data=ordered writes file data before the
metadata that maps it).  The explanation names the view that answered when
it is not the first.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import CrashlabError
from harness.explain.context import DB_PAGE_SIZE, ExplainContext, write_data
from harness.explain.sqlitefile import explain_file_bytes, file_kind
from harness.fs.ext4 import jbd2
from harness.fs.ext4.debugfs import debugfs, extents
from harness.fs.ext4.recover import recover_ext4
from harness.materialize import DurableImage, sparse_copy
from harness.sysops import run

RESERVED_INODES = {
    1: "bad blocks",
    2: "/",
    5: "boot loader",
    6: "undelete dir",
    7: "resize inode",
    8: "journal",
    9: "exclude",
    10: "replica",
}
JOURNAL_INODE = 8


# --- static layout -------------------------------------------------------


@dataclass
class Layout:
    """Where ext4 keeps its fixed metadata, and the journal's blocks."""

    block_size: int
    inodes_per_group: int
    inode_size: int
    regions: list[tuple[int, int, str]] = field(default_factory=list)  # first, last, what
    itables: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, group
    journal: list[tuple[int, int, int]] = field(default_factory=list)  # lblk, pblk, count

    def static(self, block: int) -> str | None:
        for first, last, what in self.regions:
            if first <= block <= last:
                return what
        return None

    def itable_inodes(self, block: int) -> tuple[int, int, int] | None:
        """(group, first inode, last inode) of an inode-table block."""
        for first, last, group in self.itables:
            if first <= block <= last:
                per = self.block_size // self.inode_size
                lo = group * self.inodes_per_group + (block - first) * per + 1
                return group, lo, lo + per - 1
        return None

    def journal_block(self, block: int) -> int | None:
        """The journal-relative number of file-system block ``block``."""
        for lblk, pblk, count in self.journal:
            if pblk <= block < pblk + count:
                return lblk + block - pblk
        return None

    def journal_fs_block(self, jblock: int) -> int | None:
        for lblk, pblk, count in self.journal:
            if lblk <= jblock < lblk + count:
                return pblk + jblock - lblk
        return None


_NUM = r"(\d+)(?:-(\d+))?"


def _span(m: re.Match[str]) -> tuple[int, int]:
    a = int(m.group(1))
    return a, int(m.group(2)) if m.group(2) else a


def read_layout(image: Path) -> Layout:
    """The layout of the ext4 file system in ``image`` (no root needed)."""
    out = run(["dumpe2fs", str(image)], f"dumpe2fs {image}")

    def field_int(name: str) -> int:
        m = re.search(rf"^{name}:\s+(\d+)", out, re.M)
        if not m:
            raise CrashlabError(f"dumpe2fs {image}: no {name!r}")
        return int(m.group(1))

    lay = Layout(field_int("Block size"), field_int("Inodes per group"), field_int("Inode size"))
    group = -1
    for line in out.splitlines():
        m = re.match(r"Group (\d+):", line)
        if m:
            group = int(m.group(1))
            continue
        for pat, what in (
            (rf"(?:Primary|Backup) superblock at {_NUM}", "superblock"),
            (rf"Group descriptors at {_NUM}", "group descriptors"),
            (rf"Reserved GDT blocks at {_NUM}", "reserved GDT blocks"),
            (rf"Block bitmap at {_NUM}", "block bitmap"),
            (rf"Inode bitmap at {_NUM}", "inode bitmap"),
        ):
            m = re.search(pat, line)
            if m and group >= 0:
                kind = what
                if what == "superblock" and "Primary" not in line:
                    kind = "backup superblock"
                a, b = _span(m)
                lay.regions.append((a, b, f"{kind} (group {group})"))
        m = re.search(rf"Inode table at {_NUM}", line)
        if m and group >= 0:
            a, b = _span(m)
            lay.itables.append((a, b, group))
    stat = debugfs(image, [f"stat <{JOURNAL_INODE}>"])
    lay.journal = extents(stat)[0]
    return lay


# --- ownership (debugfs, batched) -----------------------------------------


@dataclass(frozen=True)
class Owner:
    inode: int
    path: str | None
    kind: str  # "regular", "directory", ...
    lblk: int | None  # block number within the file; None for an extent-tree block
    view: str  # which image answered
    size: int = 0  # the file's size in that view


@dataclass
class InodeInfo:
    path: str | None
    kind: str
    size: int
    extents: list[tuple[int, int, int]]
    tree: list[int]


def _blocks_owned(image: Path, blocks: Sequence[int]) -> dict[int, int]:
    """``icheck`` of many blocks: block → inode, for the owned ones."""
    cmds = [f"icheck {' '.join(map(str, blocks[i : i + 256]))}" for i in range(0, len(blocks), 256)]
    found: dict[int, int] = {}
    for line in debugfs(image, cmds).splitlines():
        m = re.match(r"(\d+)\s+(\d+)$", line.strip())
        if m:
            found[int(m.group(1))] = int(m.group(2))
    return found


def _inode_info(image: Path, inodes: Iterable[int]) -> dict[int, InodeInfo]:
    """Path (``ncheck``), type and extents (``stat``) of each inode."""
    inodes = sorted(set(inodes))
    if not inodes:
        return {}
    cmds = [f"ncheck {' '.join(map(str, inodes))}"] + [f"stat <{i}>" for i in inodes]
    out = debugfs(image, cmds)
    chunks = out.split("debugfs: ")
    paths: dict[int, str] = {}
    info: dict[int, InodeInfo] = {}
    for chunk in chunks:
        if chunk.startswith("ncheck"):
            for line in chunk.splitlines()[1:]:
                m = re.match(r"(\d+)\s+(\S.*)$", line)
                if m and m.group(1) != "Inode":
                    paths.setdefault(int(m.group(1)), re.sub("/+", "/", m.group(2)))
        elif chunk.startswith("stat <"):
            ino = int(chunk[6 : chunk.index(">")])
            m = re.search(r"Type: (\S+)", chunk)
            if not m:
                continue
            ext, tree = extents(chunk)
            size = re.search(r"Size: (\d+)", chunk)
            info[ino] = InodeInfo(None, m.group(1), int(size.group(1)) if size else 0, ext, tree)
    for ino, ii in info.items():
        ii.path = paths.get(ino) or RESERVED_INODES.get(ino)
    return info


def _names(image: Path, inodes: Iterable[int]) -> dict[int, str]:
    inodes = sorted(set(inodes))
    if not inodes:
        return {}
    out = debugfs(image, [f"ncheck {' '.join(map(str, inodes))}"])
    names: dict[int, str] = {}
    for line in out.splitlines():
        m = re.match(r"(\d+)\s+(\S.*)$", line)
        if m:
            names.setdefault(int(m.group(1)), re.sub("/+", "/", m.group(2)))
    return names


def attribute(views: Sequence[tuple[str, Path]], blocks: Iterable[int]) -> dict[int, Owner]:
    """Owner of each block, asking each view in turn for those still
    unattributed.  Two debugfs processes per view that is asked."""
    todo = sorted(set(blocks))
    owners: dict[int, Owner] = {}
    for label, image in views:
        if not todo:
            break
        found = _blocks_owned(image, todo)
        info = _inode_info(image, found.values())
        for block, ino in found.items():
            ii = info.get(ino)
            if ii is None:
                continue
            lblk = None
            for lo, p0, n in ii.extents:
                if p0 <= block < p0 + n:
                    lblk = lo + block - p0
            owners[block] = Owner(ino, ii.path, ii.kind, lblk, label, ii.size)
        todo = [b for b in todo if b not in owners]
    return owners


# --- the explainer ----------------------------------------------------------


@dataclass
class Ext4Explainer:
    """Explains writes to an ext4 device.  ``views`` are ``(label, image)``
    pairs, journal already replayed, asked in order (see the module
    comment); ``journal_map`` maps journal blocks to ``(fs block, txn)``
    from the descriptor blocks in the log (:func:`journal_map`)."""

    layout: Layout
    views: list[tuple[str, Path]]
    db_name: str
    page_size: int = 4096
    jsb: jbd2.JournalSuper | None = None
    jmap: dict[int, tuple[int, int]] = field(default_factory=dict)

    def explain(self, writes: Sequence[tuple[int, bytes]]) -> list[list[str]]:
        """For each ``(device byte offset, data)`` write, phrases that say
        what its bytes hit, in block order."""
        bs = self.layout.block_size
        wanted: set[int] = set()
        for off, data in writes:
            for b in range(off // bs, (off + max(len(data), 1) - 1) // bs + 1):
                wanted.add(b)
                j = self.layout.journal_block(b)
                if j is not None and j in self.jmap:
                    wanted.add(self.jmap[j][0])
        unknown = [
            b
            for b in wanted
            if self.layout.static(b) is None
            and self.layout.journal_block(b) is None
            and self.layout.itable_inodes(b) is None
        ]
        self.owners = attribute(self.views, unknown)
        inodes: set[int] = set()
        for b in wanted:
            it = self.layout.itable_inodes(b)
            if it:
                inodes.update(range(it[1], it[2] + 1))
        self.inode_names: dict[int, str] = {}
        for _, image in self.views:
            missing = inodes - set(self.inode_names)
            if not missing:
                break
            for ino, name in _names(image, missing).items():
                self.inode_names.setdefault(ino, name)
        return [self._explain_one(off, data) for off, data in writes]

    def _explain_one(self, off: int, data: bytes) -> list[str]:
        bs = self.layout.block_size
        phrases: list[str] = []
        b = off // bs
        end = off + len(data)
        while b * bs < end:
            owner = self.owners.get(b)
            if owner is not None and owner.lblk is not None:
                # a run of blocks of the same file, contiguous in the file
                b2 = b + 1
                while b2 * bs < end:
                    o2 = self.owners.get(b2)
                    if not (
                        o2
                        and o2.inode == owner.inode
                        and o2.lblk is not None
                        and o2.lblk == owner.lblk + (b2 - b)
                    ):
                        break
                    b2 += 1
                lo, hi = max(off, b * bs), min(end, b2 * bs)
                phrases.append(self._file_phrase(owner, b, lo, data[lo - off : hi - off]))
                b = b2
                continue
            lo, hi = max(off, b * bs), min(end, (b + 1) * bs)
            phrases.append(self._block_phrase(b, data[lo - off : hi - off], lo - b * bs))
            b += 1
        return _merge(phrases)

    def _file_phrase(self, owner: Owner, block: int, lo: int, data: bytes) -> str:
        bs = self.layout.block_size
        foff = owner.lblk * bs + (lo - block * bs) if owner.lblk is not None else 0
        name = (owner.path or f"<{owner.inode}>").lstrip("/") or "/"
        where = f" [per {owner.view}]" if owner.view != self.views[0][0] else ""
        nblocks = (len(data) + bs - 1) // bs
        blocks = f"block {block}" if nblocks == 1 else f"blocks {block}-{block + nblocks - 1}"
        head = f"{blocks}: {name} (inode {owner.inode})"
        if owner.kind == "directory":
            return f"{head} directory block {owner.lblk}{where}"
        kind = file_kind(os.path.basename(owner.path or ""), self.db_name)
        if owner.size and foff + len(data) > owner.size:
            # the tail of the last block lies past the end of the file
            if foff >= owner.size:
                return f"{head} past the end of the file ({owner.size} bytes){where}"
            data = data[: owner.size - foff]
        if kind is not None:
            return f"{head} {explain_file_bytes(kind, foff, data, self.page_size)}{where}"
        return f"{head} bytes {foff}..{foff + len(data)}{where}"

    def _block_phrase(self, block: int, data: bytes, within: int) -> str:
        """One fs block that is not file data: fixed metadata, the journal,
        an extent-tree or directory block, or a free block."""
        j = self.layout.journal_block(block)
        if j is not None:
            return f"block {block}: {self._journal_phrase(j, data if within == 0 else b'')}"
        return f"block {block}: {self.describe_block(block)}"

    def describe_block(self, block: int) -> str:
        """What a file-system block is, from the layout and the views."""
        it = self.layout.itable_inodes(block)
        if it is not None:
            group, lo, hi = it
            named = [
                f"<{i}> {self.inode_names.get(i) or RESERVED_INODES.get(i)}"
                for i in range(lo, hi + 1)
                if i in self.inode_names or i == 2
            ]
            shown = ", ".join(named[:6]) + (f", +{len(named) - 6}" if len(named) > 6 else "")
            return f"inode table (group {group}) inodes {lo}-{hi}" + (f": {shown}" if shown else "")
        what = self.layout.static(block)
        if what is not None:
            return what
        j = self.layout.journal_block(block)
        if j is not None:
            return f"journal block {j}"
        owner = getattr(self, "owners", {}).get(block)
        if owner is not None:
            name = owner.path or f"<{owner.inode}>"
            where = f" [per {owner.view}]" if owner.view != self.views[0][0] else ""
            if owner.lblk is None:
                return f"extent-tree block of {name} (inode {owner.inode}){where}"
            if owner.kind == "directory":
                return f"directory {name} block {owner.lblk}{where}"
            return f"{name} (inode {owner.inode}) block {owner.lblk}{where}"
        return "unowned block (free in every view)"

    def _journal_phrase(self, j: int, data: bytes) -> str:
        desc = jbd2.describe(data, self.jsb) if data else None
        if desc is not None:
            return f"journal block {j}: {desc}"
        if j in self.jmap:
            target, seq = self.jmap[j]
            return (
                f"journal block {j}: jbd2 txn {seq} copy of block {target} "
                f"({self.describe_block(target)})"
            )
        return f"journal block {j}: journal data (no descriptor for it in the log)"


def _merge(phrases: list[str], limit: int = 8) -> list[str]:
    if len(phrases) <= limit:
        return phrases
    return phrases[: limit - 1] + [f"... {len(phrases) - limit + 1} more blocks"]


def journal_map(
    layout: Layout, jsb: jbd2.JournalSuper | None, writes: Iterable[tuple[int, bytes]]
) -> dict[int, tuple[int, int]]:
    """Journal block → (fs block it logs, jbd2 txn) from the descriptor
    blocks among ``writes`` (device offset, data), later ones winning."""
    out: dict[int, tuple[int, int]] = {}
    if jsb is None or not layout.journal:
        return out
    bs = layout.block_size
    last_j = jsb.maxlen - 1
    for off, data in writes:
        if off % bs:
            continue
        for i in range(0, len(data) - bs + 1, bs):
            j = layout.journal_block(off // bs + i // bs)
            if j is None:
                continue
            block = data[i : i + bs]
            h = jbd2.header(block)
            if h is None or h.blocktype != jbd2.DESCRIPTOR:
                continue
            k = j
            for tag in jbd2.descriptor_tags(block, jsb):
                k = k + 1 if k < last_j else jsb.first
                out[k] = (tag.fs_block, h.sequence)
    return out


def journal_superblock(layout: Layout, image: Path) -> jbd2.JournalSuper | None:
    """The jbd2 superblock (journal block 0) as stored in ``image``."""
    b0 = layout.journal_fs_block(0)
    if b0 is None:
        return None
    with open(image, "rb") as f:
        f.seek(b0 * layout.block_size)
        return jbd2.journal_super(f.read(layout.block_size))


# --- a crash state ---------------------------------------------------------


def ext4_explainer(ctx: ExplainContext) -> Ext4Explainer:
    """Views: the state's recovered image, the run two flushes after the
    state's epoch, and the end of the run (each journal-replayed)."""
    reader, base, recovered, state = ctx.reader, ctx.base, ctx.recovered, ctx.state
    flushes, db_name, workdir = ctx.flushes, ctx.db_name, ctx.workdir
    layout = read_layout(base)
    views: list[tuple[str, Path]] = []
    if recovered is not None and recovered.exists():
        views.append(("this state", recovered))
    later = [f for f in flushes if f > state.epoch.end]
    positions = [
        (later[1] + 1 if len(later) > 1 else reader.nr_entries, "a later flush"),
        (reader.nr_entries, "the end of the run"),
    ]
    (workdir / "views").mkdir(parents=True, exist_ok=True)
    img = DurableImage(base, reader.path, workdir / "views")
    try:
        for pos, what in positions:
            if any(label.endswith(f"entry {pos}") for label, _ in views):
                continue
            img.advance(pos)
            path = workdir / f"view-{pos}.img"
            sparse_copy(img.path, path)
            recover_ext4(path, workdir / f"view-{pos}-files", check=False)
            shutil.rmtree(workdir / f"view-{pos}-files", ignore_errors=True)
            views.append((f"{what}, entry {pos}", path))
    finally:
        img.close()
    jsb = None
    for _, v in views:
        jsb = journal_superblock(layout, v)
        if jsb is not None:
            break
    bs = layout.block_size
    jwrites = (
        (e.sector * reader.sectorsize, write_data(reader, e))
        for e in reader.entries()
        if e.index <= state.epoch.end
        and e.is_write
        and e.has_payload
        and layout.journal_block(e.sector * reader.sectorsize // bs) is not None
    )
    jmap = journal_map(layout, jsb, jwrites)
    return Ext4Explainer(layout, views, db_name, DB_PAGE_SIZE, jsb, jmap)
