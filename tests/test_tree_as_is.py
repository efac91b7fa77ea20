"""The recovered tree as it is in the image (harness/fs/README.md, "What an
extraction writes"): hard links stay links (one inode, its link count),
extended attributes are written (``user.``, ``trusted.``, ``security.``;
a file capability and ``system.`` names noted, not written), on the three
ext4 paths, a kernel-mounted xfs and btrfs, F2FS's archive, and in the copy
a user's checker gets.  Each write goes through ConfinedTree: a hard link
is made only to a file the tree wrote, through folders it made.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from ext4_craft import PAYLOAD, crafted
from test_extract_confined import PATHS, _mkfs, canary, snapshot  # noqa: F401  (a fixture)

from harness.check.usercheck import UserChecker, run_checker
from harness.fs import get_fs
from harness.fs.confined import (
    XATTR_SIZE_MAX,
    ConfinedTree,
    copy_tree,
    unpack_tar,
    xattr_refusal,
)

BIG = b"v" * 3000  # beyond the inode's room: the attribute block
CAP = b"\x01\x00\x00\x02" + bytes(16)  # a file capability's bytes (never written)


def _xattrs(p: Path) -> dict[str, bytes]:
    return {n: os.getxattr(p, n, follow_symlinks=False) for n in os.listxattr(p)}


def test_ext4_hard_links_and_xattrs_on_every_path(tmp_path: Path, canary: Path) -> None:  # noqa: F811
    """A file with two names, in-inode and block attributes of the three
    kept namespaces and a capability; a folder's and the root's
    attributes: every path writes the same tree (one inode, nlink 2, the
    attributes), notes the capability, and writes nothing outside; the
    in-process path takes it (no decline)."""
    big = tmp_path / "big"
    big.write_bytes(BIG)
    img = crafted(
        tmp_path,
        [
            "write PAYLOAD a",
            "mkdir d",
            "ln a d/b",
            "sif a links_count 2",
            "ea_set a user.small hi",
            "ea_set a trusted.t tval",
            "ea_set a security.label sval",
            f"ea_set -f {big} a user.big",
            "ea_set a security.capability xx",
            "ea_set d user.dirattr dv",
            "ea_set / user.root rv",
        ],
    )
    work = tmp_path / "work"
    before = snapshot(tmp_path, work)
    want = {
        "user.small": b"hi",
        "trusted.t": b"tval",
        "security.label": b"sval",
        "user.big": BIG,
    }
    for name, run in PATHS.items():
        w = work / name
        w.mkdir(parents=True)
        rec = run(img, w / "files", w)
        assert rec.ok, (name, rec.detail)
        files = w / "files"
        a, b = (files / "a").stat(), (files / "d" / "b").stat()
        assert a.st_ino == b.st_ino and a.st_nlink == 2, name
        assert _xattrs(files / "a") == want, name
        assert _xattrs(files / "d") == {"user.dirattr": b"dv"}, name
        assert _xattrs(files) == {"user.root": b"rv"}, name
        assert any("security.capability" in s for s in rec.steps), (name, rec.steps)
        assert snapshot(tmp_path, work) == before, name
        if name == "in-process":
            assert "in process" in rec.steps[0], rec.steps


def test_ext4_in_process_equals_debugfs_on_links_and_xattrs(
    tmp_path: Path,
    canary: Path,  # noqa: F811
) -> None:
    """The in-process path takes a tree with hard links and attributes (no
    decline) and writes what the debugfs path writes."""
    img = crafted(tmp_path, ["write PAYLOAD a", "ln a b", "ea_set a user.x 1"])
    got = {}
    for name in ("in-process", "debugfs"):
        w = tmp_path / name
        w.mkdir()
        rec = PATHS[name](img, w / "files", w)
        assert rec.ok
        files = w / "files"
        got[name] = sorted(
            (p.name, p.stat().st_nlink, p.read_bytes(), tuple(_xattrs(p).items()))
            for p in files.iterdir()
            if p.is_file()
        )
        if name == "in-process":
            assert "in process" in rec.steps[0], rec.steps
    assert got["in-process"] == got["debugfs"]
    assert got["debugfs"][0][1] == 2


def test_confined_link_only_to_what_it_wrote(tmp_path: Path, canary: Path) -> None:  # noqa: F811
    """A link to a name the tree never wrote, or whose folder was swapped
    for a link out of the tree after it wrote it, is not made (noted); a
    link to what it wrote is the same inode."""
    with ConfinedTree(tmp_path / "out") as tree:
        sub = tree.mkdir(tree.root, b"s", b"s")
        assert sub is not None
        fd = tree.create(sub, b"f", b"s/f")
        assert fd is not None
        os.close(fd)
        os.close(sub)
        assert tree.link(tree.root, b"g", b"g", b"s/f")
        assert not tree.link(tree.root, b"h", b"h", b"nowhere")
        os.rename(tmp_path / "out" / "s", tmp_path / "out" / "s.old")
        (tmp_path / "out" / "s").symlink_to(canary / "dir")
        (canary / "dir" / "f").write_bytes(b"host")
        assert not tree.link(tree.root, b"k", b"k", b"s/f")
        skipped = tree.skipped
    out = tmp_path / "out"
    assert (out / "g").stat().st_ino == (out / "s.old" / "f").stat().st_ino
    assert not (out / "h").exists() and not (out / "k").exists()
    assert (canary / "dir" / "f").stat().st_nlink == 1
    assert len(skipped) == 2, skipped


def test_xattr_rule() -> None:
    """Which attributes an extraction writes."""
    assert xattr_refusal(b"user.a", b"v") is None
    assert xattr_refusal(b"trusted.a", b"v") is None
    assert xattr_refusal(b"security.selinux", b"v") is None
    for name in (b"system.posix_acl_access", b"user.", b"(name index 9) x", b"other.a"):
        assert xattr_refusal(name, b"v") is not None, name
    assert xattr_refusal(b"security.capability", b"v") is not None
    assert xattr_refusal(b"user.a", None) is not None  # an ea_inode value, not read
    assert xattr_refusal(b"user.a", bytes(XATTR_SIZE_MAX + 1)) is not None
    assert xattr_refusal(b"user." + b"a" * 251, b"v") is not None


def test_copy_tree_keeps_links_and_xattrs(tmp_path: Path) -> None:
    """The copy a user's checker gets (and a mounted file system's copy):
    a file's names one inode, its attributes, a symbolic link a link."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a").write_bytes(PAYLOAD)
    os.link(src / "a", src / "d" / "b")
    os.setxattr(src / "a", "user.k", b"v")
    os.setxattr(src / "d", "trusted.t", b"w")
    (src / "l").symlink_to("a")
    skipped = copy_tree(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert skipped == []
    assert (dst / "a").stat().st_ino == (dst / "d" / "b").stat().st_ino
    assert (dst / "a").stat().st_nlink == 2
    assert _xattrs(dst / "a") == {"user.k": b"v"}
    assert _xattrs(dst / "d") == {"trusted.t": b"w"}
    assert os.readlink(dst / "l") == "a"


def test_user_checker_sees_links_and_xattrs(tmp_path: Path) -> None:
    """A user's checker judging link counts and attributes: it holds on
    the copy it gets (shutil.copytree's copy gave two inodes)."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "a").write_bytes(PAYLOAD)
    os.link(files / "a", files / "b")
    os.setxattr(files / "a", "user.k", b"v")
    script = (
        "import os,sys; a=os.stat('a'); b=os.stat('b'); "
        "sys.exit(0 if a.st_ino==b.st_ino and a.st_nlink==2 "
        "and os.getxattr('b','user.k')==b'v' else 1)"
    )
    uc = UserChecker("links", f"python3 -c {shlex.quote(script)}")
    facts = {"state": "s", "run": str(tmp_path)}
    v = run_checker(uc, files, facts, tmp_path / "work", dict(os.environ))
    assert v.status == "pass", v.explanation


@pytest.mark.needs_root
@pytest.mark.parametrize("fs", ["xfs", "btrfs"])
def test_mounted_file_system_links_and_xattrs(fs: str, tmp_path: Path) -> None:
    """A recovered xfs/btrfs with a file of two names and attributes: the
    copy keeps one inode, the kept attributes, and notes a capability."""
    if shutil.which(f"mkfs.{fs}") is None:
        pytest.skip(f"mkfs.{fs} not installed")
    work = tmp_path / "work"
    work.mkdir()
    img = work / f"{fs}.img"
    _mkfs(fs, img)
    mnt = tmp_path / "craft"
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
    try:
        (mnt / "d").mkdir()
        (mnt / "a").write_bytes(PAYLOAD)
        os.link(mnt / "a", mnt / "d" / "b")
        os.setxattr(mnt / "a", "user.k", b"v")
        os.setxattr(mnt / "a", "trusted.t", b"w")
        os.setxattr(mnt / "a", "security.capability", CAP)
        os.setxattr(mnt / "d", "user.dir", b"x")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    rec = get_fs(fs).recover(img, work / "files", workdir=work, db_name="crashlab.db")
    assert rec.ok, rec.detail
    files = work / "files"
    assert (files / "a").stat().st_ino == (files / "d" / "b").stat().st_ino
    assert (files / "a").stat().st_nlink == 2
    assert _xattrs(files / "a") == {"user.k": b"v", "trusted.t": b"w"}
    assert _xattrs(files / "d") == {"user.dir": b"x"}
    assert any("security.capability" in s for s in rec.steps), rec.steps


def test_f2fs_archive_xattrs_and_links(tmp_path: Path) -> None:
    """An archive with pax attribute records (as GNU tar writes them) and a
    hard link: the attributes set, the link a link, a capability noted."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("./a")
        info.size = len(PAYLOAD)
        info.pax_headers = {
            "SCHILY.xattr.user.k": "v",
            "SCHILY.xattr.security.capability": "x",
            "SCHILY.xattr.system.posix_acl_access": "y",
        }
        tar.addfile(info, io.BytesIO(PAYLOAD))
        link = tarfile.TarInfo("./b")
        link.type, link.linkname = tarfile.LNKTYPE, "./a"
        tar.addfile(link)
    buf.seek(0)
    skipped = unpack_tar(buf, tmp_path / "files")
    files = tmp_path / "files"
    assert (files / "a").stat().st_ino == (files / "b").stat().st_ino
    assert _xattrs(files / "a") == {"user.k": b"v"}
    assert len(skipped) == 2 and all("not written" in s for s in skipped), skipped


def test_busybox_tar_hard_links_unpack_as_links(tmp_path: Path) -> None:
    """The F2FS guest's archiver (busybox tar, the same static binary the
    guest gets) writes a second name as a hard-link member: unpacked, one
    inode of two names (its attributes it does not archive)."""
    busybox = "/bin/busybox"
    if not os.access(busybox, os.X_OK):
        pytest.skip("busybox not installed")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(PAYLOAD)
    os.link(src / "a", src / "b")
    archive = tmp_path / "x.tar"
    subprocess.run([busybox, "tar", "-cf", str(archive), "."], cwd=src, check=True)
    assert unpack_tar(archive, tmp_path / "files") == []
    files = tmp_path / "files"
    assert (files / "a").stat().st_ino == (files / "b").stat().st_ino
    assert (files / "a").stat().st_nlink == 2 and (files / "a").read_bytes() == PAYLOAD
