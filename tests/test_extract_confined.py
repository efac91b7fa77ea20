"""Extraction of a recovered file system never writes (or reads) outside
its scratch folder, whatever the file system holds (harness/fs/confined.py,
harness/fs/ext4/tree.py; harness/fs/README.md "What an extraction writes").

Each ext4 case is a small image crafted (tests/ext4_craft.py): the
project's base image, written with ``debugfs -w`` (``symlink``, ``write``,
``mknod``, ``ln``) and, where no tool writes such an entry (a second entry
of one name, a name with ``/``), a directory entry renamed in place with
its block's checksum made again.  The three extraction paths run on it: the in-process path
first (``FastExt4``), the debugfs session (``inproc=False``) and the
reference (``recover_ext4``).  A canary folder outside the scratch folder,
with the files the links point at, is snapshotted before and compared
after.  xfs and btrfs are mounted by the kernel (root and loop devices);
F2FS's tar archive is unpacked by its function.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import struct
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from ext4_craft import (
    PAYLOAD,
    append_image,
    crafted,
    debugfs_w,
    host_disk,
    ino_of,
    rename_entry,
    root_names,
    shorten_last_record,
)
from support import crashlab, record_runs

from checkers import sqlite
from harness.fs import get_fs
from harness.fs.base import FsRecovery
from harness.fs.confined import links_on_way, unpack_tar
from harness.fs.ext4 import inproc
from harness.fs.ext4.fast import FastExt4
from harness.fs.ext4.ondisk import Unsupported, dir_entries
from harness.fs.ext4.recover import recover_ext4
from harness.fs.ext4.tree import list_tree
from harness.images import verified_base_for_run
from harness.materialize.replay import replay
from harness.sysops import loop_attach, loop_detach

SMALL = "insert:txns=4,ops=3,tables=2,warmup=50,seed=1"
ORIGINAL = b"the canary's own bytes\n"


# --- a canary outside the scratch folder ------------------------------------------------


def snapshot(top: Path, but: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``top`` but ``but`` (the scratch folder): its kind,
    bytes or link target, mode, owner and modification time."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        d = Path(dirpath)
        if d == but or but in d.parents:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = d / name
            if p == but:
                continue
            st = p.lstat()
            what: object = None
            if stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                what = p.read_bytes()
            out[str(p.relative_to(top))] = (
                stat.S_IFMT(st.st_mode),
                what,
                st.st_mode,
                st.st_uid,
                st.st_gid,
                st.st_mtime_ns,
            )
    return out


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """``tmp_path/canary``: a file and a folder the crafted links point at."""
    c = tmp_path / "canary"
    (c / "dir").mkdir(parents=True)
    (c / "target").write_bytes(ORIGINAL)
    (c / "dir" / "inside").write_bytes(ORIGINAL)
    os.utime(c / "target", (1_000_000, 1_000_000))
    return c


# --- the three ext4 extraction paths --------------------------------------------------------


def _fast(inproc_first: bool) -> Callable[[Path, Path, Path], FsRecovery]:
    def run(img: Path, out: Path, work: Path) -> FsRecovery:
        fast = FastExt4(work, inproc=inproc_first, fsck=False)
        copy = work / "fresh.img"

        def rebuild() -> Path:
            shutil.copyfile(img, copy)
            return copy

        try:
            return fast.recover(rebuild(), out, overlay=[], base=None, rebuild=rebuild)[0]
        finally:
            fast.close()

    return run


def _reference(img: Path, out: Path, work: Path) -> FsRecovery:
    copy = work / "fresh.img"
    shutil.copyfile(img, copy)
    return recover_ext4(copy, out, check=False)


PATHS = {"in-process": _fast(True), "debugfs": _fast(False), "reference": _reference}


def extract_everywhere(img: Path, tmp_path: Path, canary: Path) -> dict[str, Path]:
    """Run each path on ``img`` in its own scratch folder; the canary (all of
    ``tmp_path`` but the scratch folders) must not change.  Returns each
    path's extracted folder."""
    work = tmp_path / "work"
    before = snapshot(tmp_path, work)
    out = {}
    for name, run in PATHS.items():
        w = work / name
        w.mkdir(parents=True)
        rec = run(img, w / "files", w)
        assert rec.ok, (name, rec.detail)
        assert snapshot(tmp_path, work) == before, f"{name} wrote outside its folder"
        out[name] = w / "files"
        assert_only_files_dirs_links(out[name])
    return out


def assert_only_files_dirs_links(files: Path) -> None:
    for p in files.rglob("*"):
        mode = p.lstat().st_mode
        assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode), p
        assert not mode & (stat.S_ISUID | stat.S_ISGID), p


# --- ext4: one case per class ------------------------------------------------------------


def test_symlink_then_file_of_the_same_name(tmp_path: Path, canary: Path) -> None:
    """The reported case: a symbolic link to a host file, then a regular
    file of the same name.  rdump wrote the file's bytes through the link;
    now the link is made (the first entry wins) and never followed."""
    img = crafted(
        tmp_path,
        [f"symlink evil {canary / 'target'}", "write PAYLOAD evim"],
        ((b"", b"evim", b"evil"),),
    )
    assert root_names(img)[-2:] == ["evil", "evil"]
    for files in extract_everywhere(img, tmp_path, canary).values():
        assert os.readlink(files / "evil") == str(canary / "target")


def test_symlink_to_a_folder_then_files_under_its_name(tmp_path: Path, canary: Path) -> None:
    """A link to a host folder, then a file named ``d/x`` and a folder of
    the same name as the link with a file in it: nothing lands in the
    host folder."""
    img = crafted(
        tmp_path,
        [f"symlink d {canary / 'dir'}", "write PAYLOAD dqx", "mkdir e", "write PAYLOAD e/inside"],
        ((b"", b"dqx", b"d/x"), (b"", b"e", b"d")),
    )
    for files in extract_everywhere(img, tmp_path, canary).values():
        assert os.readlink(files / "d") == str(canary / "dir")
    assert not (canary / "dir" / "x").exists()


def test_names_with_dotdot_and_absolute_names(tmp_path: Path, canary: Path) -> None:
    """Names that are paths: ``../../..`` up to the canary, an absolute
    name, a regular file called ``..``: none is written anywhere."""
    up = b"../" * 24 + os.fsencode(os.path.relpath(canary, "/")) + b"/escaped"
    absolute = os.fsencode(canary / "absolute")
    img = crafted(
        tmp_path,
        [
            "write PAYLOAD " + "u" * len(up),
            "write PAYLOAD " + "a" * len(absolute),
            "write PAYLOAD zz",
            "write PAYLOAD kept",
        ],
        ((b"", b"u" * len(up), up), (b"", b"a" * len(absolute), absolute), (b"", b"zz", b"..")),
    )
    for files in extract_everywhere(img, tmp_path, canary).values():
        assert (files / "kept").read_bytes() == PAYLOAD
    assert not (canary / "escaped").exists() and not (canary / "absolute").exists()


def test_hard_links_stay_links(tmp_path: Path, canary: Path) -> None:
    """Two names of one inode: one file with two names in the extraction
    (rdump wrote two copies: a big file linked many times filled the
    scratch folder), on every path."""
    img = crafted(
        tmp_path, ["write PAYLOAD a", "mkdir d", "ln a b", "ln a d/c", "sif a links_count 3"]
    )
    for name, files in extract_everywhere(img, tmp_path, canary).items():
        a, b, c = (files / "a").stat(), (files / "b").stat(), (files / "d" / "c").stat()
        assert (files / "b").read_bytes() == PAYLOAD, name
        assert a.st_ino == b.st_ino == c.st_ino and a.st_nlink == 3, name


def test_directory_loop_and_second_entries(tmp_path: Path, canary: Path) -> None:
    """A folder linked into itself and two regular files of one name: the
    in-process path recursed without end (RecursionError, a crashed
    check); each folder is now written once and the first file wins."""
    img = crafted(
        tmp_path,
        [
            "mkdir sub",
            "ln sub sub/loop",
            "write PAYLOAD sub/f",
            "write PAYLOAD dup",
            f"write {canary / 'target'} duq",
        ],
        ((b"", b"duq", b"dup"),),
    )
    for name, files in extract_everywhere(img, tmp_path, canary).items():
        assert (files / "sub" / "f").read_bytes() == PAYLOAD, name
        assert not (files / "sub" / "loop").exists(), name
        assert (files / "dup").read_bytes() == PAYLOAD, name


def test_device_nodes_fifos_and_set_uid_bits(tmp_path: Path, canary: Path) -> None:
    """Block and character devices (the host's disk, /dev/mem), a FIFO,
    and a set-user-ID root file: no node is made, no mode bit beyond
    the permissions."""
    major, minor = host_disk()
    img = crafted(
        tmp_path,
        [
            f"mknod disk b {major} {minor}",
            "mknod mem c 1 1",
            "mknod fifo p",
            "write PAYLOAD suid",
            "sif suid mode 0104755",
            f"mknod crashlab.db b {major} {minor}",
        ],
    )
    for files in extract_everywhere(img, tmp_path, canary).values():
        assert sorted(p.name for p in files.iterdir()) == ["lost+found", "suid"]
        assert stat.S_IMODE((files / "suid").stat().st_mode) == 0o755


def test_a_link_left_in_the_folder_is_not_followed(tmp_path: Path, canary: Path) -> None:
    """A fallback extracts into the folder an earlier try wrote (the fast
    path's placement, then the reference after e2fsck): rdump followed a
    link left there; the folder is now emptied first."""
    img = crafted(tmp_path, ["write PAYLOAD evil"])
    work = tmp_path / "work"
    before = snapshot(tmp_path, work)
    for name, run in PATHS.items():
        files = work / name / "files"
        files.mkdir(parents=True)
        (files / "evil").symlink_to(canary / "target")
        assert run(img, files, work / name).ok
        assert (files / "evil").read_bytes() == PAYLOAD, name
        assert snapshot(tmp_path, work) == before, name


def test_in_process_path_declines_what_it_does_not_write(tmp_path: Path) -> None:
    """The in-process extraction declines (the state goes to debugfs)
    before writing anything: a second entry of a name, a directory reached
    twice."""
    for n, (commands, renames) in enumerate(
        [
            (["write /dev/null dup", "write /dev/null duq"], ((b"", b"duq", b"dup"),)),
            (["mkdir sub", "ln sub sub/loop"], ()),
        ]
    ):
        d = tmp_path / str(n)
        d.mkdir()
        img = crafted(d, commands, renames)
        with pytest.raises(Unsupported):
            inproc.replay_and_extract(img, d / "files")
        assert not (d / "files").exists()


def test_a_record_short_of_its_block_is_declined_not_a_crash(tmp_path: Path, canary: Path) -> None:
    """A directory block whose records stop 4 bytes before its end (a
    record header there would run past the block): the in-process path and
    the tree reader decline (Unsupported), never a struct.error that ends
    the worker; every path still recovers or fails FS-RECOVER in one line,
    and nothing outside the scratch folder changes."""
    bs = 4096
    block = bytearray(bs)
    struct.pack_into("<IHBB", block, 0, 2, bs - 4, 1, 2)  # "." ending 4 bytes short
    block[8:9] = b"."
    with pytest.raises(Unsupported):
        dir_entries(bytes(block), bs)
    img = crafted(tmp_path, ["write PAYLOAD a"])
    shorten_last_record(img, ino_of(img, b""), 4)
    with pytest.raises(Unsupported):
        inproc.replay_and_extract(img, tmp_path / "files")
    with pytest.raises(Unsupported):
        list_tree(img)
    work = tmp_path / "work"
    before = snapshot(tmp_path, work)
    for name, run in PATHS.items():
        w = work / name
        w.mkdir(parents=True)
        rec = run(img, w / "files", w)
        assert rec.ok or rec.detail, name
        assert snapshot(tmp_path, work) == before, f"{name} wrote outside its folder"


# --- the database is never opened through a link ---------------------------------------------


def test_database_or_sidecar_link_fails_db_open(tmp_path: Path, canary: Path) -> None:
    """A database, WAL or shared-memory file of the recovered tree that is a
    symbolic link: DB-OPEN fails saying so, and nothing is opened."""
    files = tmp_path / "files"
    files.mkdir()
    assert links_on_way(files, "crashlab.db") is None
    (files / "crashlab.db").write_bytes(b"")
    for name in ("crashlab.db-wal", "crashlab.db-shm", "crashlab.db"):
        (files / name).unlink(missing_ok=True)
        (files / name).symlink_to(canary / "target")
        why = links_on_way(files, "crashlab.db")
        assert why is not None and name in why and "symbolic link" in why
        (files / name).unlink()
        (files / name).write_bytes(b"")
    (files / "sub").symlink_to(canary / "dir")
    assert "sub is a symbolic link" in (links_on_way(files, "sub/inside") or "")
    verdicts = sqlite.judge(
        sqlite.refused("crashlab.db-wal is a symbolic link"),
        None,  # type: ignore[arg-type]  # a refusal in place of facts
        0,
        0,
    )
    assert verdicts[0].invariant == "DB-OPEN" and verdicts[0].status == "fail"
    assert "symbolic link" in verdicts[0].explanation


# --- kernel-mounted file systems ---------------------------------------------------------------


def _mkfs(fs: str, img: Path) -> None:
    with open(img, "wb") as f:
        f.truncate(300 << 20 if fs == "xfs" else 128 << 20)
    cmd = {"xfs": ["mkfs.xfs", "-q", "-f"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}[fs]
    subprocess.run([*cmd, str(img)], check=True, capture_output=True)


@pytest.mark.needs_root
@pytest.mark.parametrize("fs", ["xfs", "btrfs"])
def test_mounted_file_system_with_links_and_devices(fs: str, tmp_path: Path, canary: Path) -> None:
    """A recovered xfs/btrfs holding a link to a host file and a block device
    node of a loop device holding a secret: the copy reads no device
    (mounted nodev; special files skipped) and the link stays a link."""
    if shutil.which(f"mkfs.{fs}") is None:
        pytest.skip(f"mkfs.{fs} not installed")
    secret_img = tmp_path / "secret.img"
    secret = b"SECRET of a host block device\n" * 64
    secret_img.write_bytes(secret.ljust(1 << 20, b"\0"))
    work = tmp_path / "work"  # the scratch folder: the recovered image too
    work.mkdir()
    img = work / f"{fs}.img"
    _mkfs(fs, img)
    dev = loop_attach(secret_img, direct_io=False)
    try:
        rdev = os.stat(dev).st_rdev
        mnt = tmp_path / "craft"
        mnt.mkdir()
        subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
        try:
            (mnt / "evil").symlink_to(canary / "target")
            os.mknod(mnt / "disk", 0o600 | stat.S_IFBLK, rdev)
            os.mkfifo(mnt / "fifo")
            (mnt / "crashlab.db").write_bytes(PAYLOAD)
        finally:
            subprocess.run(["umount", str(mnt)], check=True)
        before = snapshot(tmp_path, work)
        rec = get_fs(fs).recover(img, work / "files", workdir=work, db_name="crashlab.db")
    finally:
        loop_detach(dev)
    assert rec.ok, rec.detail
    assert snapshot(tmp_path, work) == before
    files = work / "files"
    assert os.readlink(files / "evil") == str(canary / "target")
    assert not (files / "disk").exists() and not (files / "fifo").is_fifo()
    for p in files.rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert b"SECRET" not in p.read_bytes(), p
    assert any("disk" in s for s in rec.steps), rec.steps


# --- F2FS's archive --------------------------------------------------------------------------


def _member(
    tar: tarfile.TarFile,
    name: str,
    kind: bytes = tarfile.REGTYPE,
    data: bytes = b"",
    link: str = "",
) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size, info.mode = kind, link, len(data), 0o4755
    tar.addfile(info, io.BytesIO(data) if data else None)


def test_f2fs_archive_unpacks_inside_its_folder(tmp_path: Path, canary: Path) -> None:
    """A crafted archive of the recovery guest: ``..`` and absolute names, a
    link to a host folder and then a file through it, a link to a host
    file and then a file of its name, a hard link (a link to the file
    written), devices and a FIFO.
    Nothing is written outside the folder (tarfile's data filter raised on
    the first link out of it: a crashed check)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _member(tar, "./", tarfile.DIRTYPE)
        _member(tar, "./crashlab.db", data=PAYLOAD)
        _member(tar, "../../escaped", data=PAYLOAD)
        _member(tar, str(canary / "absolute"), data=PAYLOAD)
        _member(tar, "./d", tarfile.SYMTYPE, link=str(canary / "dir"))
        _member(tar, "./d/x", data=PAYLOAD)
        _member(tar, "./evil", tarfile.SYMTYPE, link=str(canary / "target"))
        _member(tar, "./evil", data=PAYLOAD)
        _member(tar, "./hard", tarfile.LNKTYPE, link="./crashlab.db")
        _member(tar, "./disk", tarfile.BLKTYPE)
        _member(tar, "./fifo", tarfile.FIFOTYPE)
        _member(tar, "./sub/deep/file", data=PAYLOAD)
    buf.seek(0)
    work = tmp_path / "work"
    before = snapshot(tmp_path, work)
    skipped = unpack_tar(buf, work / "files")
    assert snapshot(tmp_path, work) == before
    files = work / "files"
    assert (files / "crashlab.db").read_bytes() == PAYLOAD
    assert (files / "hard").read_bytes() == PAYLOAD
    assert (files / "hard").stat().st_ino == (files / "crashlab.db").stat().st_ino
    assert os.readlink(files / "evil") == str(canary / "target")
    assert (files / "sub" / "deep" / "file").read_bytes() == PAYLOAD
    assert not (files / "disk").exists() and not (files / "fifo").exists()
    assert_only_files_dirs_links(files)
    assert len(skipped) == 6, skipped  # .., absolute, d/x, the second evil, disk, fifo


# --- end to end: `crashlab check` of a run whose recovered ext4 holds the case ---------------


@pytest.mark.needs_fuse
def test_crashlab_check_of_a_run_with_the_reported_case(tmp_path: Path, canary: Path) -> None:
    """``crashlab check RUN`` of a run whose recovered ext4 holds a symbolic
    link to a host file and then a regular file of the same name (and a
    WAL file that is a link to a host file) leaves the canary untouched,
    and DB-OPEN fails on that state saying why.

    The run: a real fuse recording of SQLite (WAL), its log then extended
    with writes that turn its final image into the crafted one (debugfs
    ``symlink`` and ``write`` on the final image, the second name renamed
    in place; no kernel writes a second entry of a name) and a FLUSH, its
    meta.json's log summary made again.  The last crash state recovers to
    the crafted tree: the old code wrote the payload into the canary."""
    run = record_runs(tmp_path / "runs", {"sqlite-wal-full": SMALL})["sqlite-wal-full"]
    base = verified_base_for_run(run)
    final = tmp_path / "final.img"
    replay(base, run.log, final)
    img = tmp_path / "crafted.img"
    shutil.copyfile(final, img)
    payload = tmp_path / "payload"
    payload.write_bytes(PAYLOAD)
    debugfs_w(
        img,
        [
            f"symlink evil {canary / 'target'}",
            f"write {payload} evim",
            f"symlink crashlab.db-wal {canary / 'dir' / 'inside'}",
        ],
    )
    rename_entry(img, 2, b"evim", b"evil")
    assert root_names(img).count("evil") == 2
    assert append_image(run, img, final) > 0
    before = snapshot(tmp_path, tmp_path / "runs")
    out = tmp_path / "runs" / "check"
    p = crashlab("check", str(run.path), "--strategy", "prefix", "--no-progress", "--out", str(out))
    assert p.returncode in (0, 1), p.stderr
    assert snapshot(tmp_path, tmp_path / "runs") == before
    last = [json.loads(ln) for ln in (out / "states.jsonl").read_text().splitlines()][-1]
    assert any(
        f["invariant"] == "DB-OPEN" and "crashlab.db-wal is a symbolic link" in f["explanation"]
        for f in last.get("fail", [])
    ), last
