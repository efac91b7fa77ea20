"""Writing a recovered file system's files on the host, never outside one
folder, whatever the file system holds (harness/fs/README.md, "What an
extraction writes").

A recovered file system is made by whoever made the log: its names, links
and special files are hostile input.  :class:`ConfinedTree` creates every
entry relative to its parent's directory file descriptor (``mkdir``,
``symlink`` and ``open(O_CREAT|O_EXCL|O_NOFOLLOW)`` at that descriptor),
so no path is resolved through anything it made, nothing is followed and
nothing existing is replaced: a second entry of a name is not written (the
first wins, as a lookup in a linear directory finds the first).  Names
with ``/`` or NUL, empty names, ``.`` and ``..`` are not written either.
Symbolic links are created as links, their targets verbatim and never
followed; a hard link is a link (``linkat`` at the directory descriptor)
to a file this tree already wrote, reached only through folders it made;
extended attributes are set on the open file (:meth:`ConfinedTree.set_xattrs`:
``user.``, ``trusted.`` and ``security.`` names, sizes within the kernel's
limits); device nodes, FIFOs and sockets are not created.

:func:`copy_tree` (a kernel-mounted file system) and :func:`unpack_tar`
(F2FS's archive from its recovery guest) write through it; the ext4
extractors use it directly.  :func:`links_on_way` is what a checker asks
before it opens a database file of the recovered tree.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import IO

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
PERM_BITS = 0o777  # rdump's mode_xlate: never set-user-ID, set-group-ID or sticky
CHUNK = 1 << 20
MAX_DEPTH = 200  # folders below the root an extraction descends (a recursion bound)
# extended attributes written: the namespaces an unprivileged or root
# process sets on a regular file; system.* (ACLs, inline data) is the
# file system's own and is not
XATTR_PREFIXES = (b"user.", b"trusted.", b"security.")
# a file capability grants privileges to whoever runs the file: dropped
# as the set-user-ID bit is (PERM_BITS)
XATTR_REFUSED = frozenset({b"security.capability"})
XATTR_NAME_MAX = 255  # the kernel's XATTR_NAME_MAX
XATTR_SIZE_MAX = 1 << 16  # the kernel's XATTR_SIZE_MAX: one value
XATTRS_MAX = 1 << 16  # names and values of one file together (XATTR_LIST_MAX's size)
# (full name, value) of one file, in order; a value None was not read (an
# ext4 value kept in an inode of its own)
Xattrs = list[tuple[bytes, bytes | None]]
PAX_XATTR = "SCHILY.xattr."  # a tar member's extended attribute, by its pax record


def bad_name(name: bytes) -> str | None:
    """Why ``name`` cannot be one directory entry on the host (None: it
    can)."""
    if not name:
        return "an empty name"
    if name in (b".", b".."):
        return f"the name {name.decode()!r}"
    if b"/" in name or b"\0" in name:
        return "a name with '/' or NUL"
    return None


def _show(rel: bytes) -> str:
    return repr(os.fsdecode(rel))


def xattr_refusal(name: bytes, value: bytes | None) -> str | None:
    """Why the extended attribute ``name`` is not written (None: it is)."""
    if not name.startswith(XATTR_PREFIXES) or not name.partition(b".")[2]:
        return "only user., trusted. and security. names are written"
    if name in XATTR_REFUSED:
        return "a file capability is never written (as set-user-ID is not)"
    if len(name) > XATTR_NAME_MAX or b"\0" in name:
        return f"a name longer than {XATTR_NAME_MAX} bytes or with a NUL"
    if value is None:
        return "its value is kept in an inode of its own (ea_inode), not read"
    if len(value) > XATTR_SIZE_MAX:
        return f"a value longer than {XATTR_SIZE_MAX} bytes"
    return None


class ConfinedTree:
    """Entries written under ``root`` (created), never outside it; what was
    not written is noted in :attr:`skipped`.  Use as a context manager or
    :meth:`close` it."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = os.open(root, DIR_FLAGS)
        self.skipped: list[str] = []  # "'a/b': why", in order
        self.made: dict[bytes, int] = {}  # each regular file written: its path -> inode

    def __enter__(self) -> ConfinedTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.root >= 0:
            os.close(self.root)
            self.root = -1

    def skip(self, rel: bytes, why: str) -> None:
        self.skipped.append(f"{_show(rel)}: {why}")

    def _name(self, rel: bytes, name: bytes) -> bool:
        why = bad_name(name)
        if why is not None:
            self.skip(rel, f"not written: {why}")
        return why is None

    def mkdir(self, parent: int, name: bytes, rel: bytes) -> int | None:
        """A new directory ``name`` in the directory open at ``parent``,
        open (the caller closes it); None when not made (noted)."""
        if not self._name(rel, name):
            return None
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            self.skip(rel, "not written: a second entry of this name")
            return None
        return os.open(name, DIR_FLAGS, dir_fd=parent)

    def create(self, parent: int, name: bytes, rel: bytes) -> int | None:
        """A new regular file ``name`` in ``parent``, open for writing (the
        caller closes it); None when not made (noted)."""
        if not self._name(rel, name):
            return None
        try:
            fd = os.open(name, NEW_FILE, 0o600, dir_fd=parent)
        except FileExistsError:
            self.skip(rel, "not written: a second entry of this name")
            return None
        self.made[rel] = os.fstat(fd).st_ino
        return fd

    def link(self, parent: int, name: bytes, rel: bytes, first: bytes) -> bool:
        """A hard link ``name`` in ``parent`` to the regular file this tree
        wrote as ``first`` (its path): reached from the root through the
        folders it made, nothing followed, and the new name checked to be
        that very inode (else removed).  False when not made (noted)."""
        if not self._name(rel, name):
            return False
        ino = self.made.get(first)
        if ino is None:
            self.skip(rel, f"not written: a hard link to {_show(first)}, which was not written")
            return False
        try:
            src_dir, src_name = self._parent_of(first)
        except OSError as e:
            self.skip(rel, f"not linked to {_show(first)}: {e.strerror}")
            return False
        try:
            os.link(src_name, name, src_dir_fd=src_dir, dst_dir_fd=parent, follow_symlinks=False)
        except FileExistsError:
            self.skip(rel, "not written: a second entry of this name")
            return False
        except OSError as e:  # EMLINK: more links than the host's file system holds
            self.skip(rel, f"not linked to {_show(first)}: {e.strerror}")
            return False
        finally:
            os.close(src_dir)
        if os.stat(name, dir_fd=parent, follow_symlinks=False).st_ino != ino:
            os.unlink(name, dir_fd=parent)  # not what this tree wrote: never kept
            self.skip(rel, f"not written: {_show(first)} is no longer the file written")
            return False
        return True

    def _parent_of(self, rel: bytes) -> tuple[int, bytes]:
        """The folder holding ``rel`` open (the caller closes it), reached
        from the root one folder at a time, no link followed; its name."""
        *folders, last = rel.split(b"/")
        fd = os.dup(self.root)
        for p in folders:
            sub = os.open(p, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
        return fd, last

    def set_xattrs(self, fd: int, rel: bytes, xattrs: Xattrs) -> None:
        """Set ``xattrs`` on the file or folder open at ``fd``; one refused
        (:func:`xattr_refusal`), beyond :data:`XATTRS_MAX` bytes in all or
        refused by the host's kernel is noted, not written."""
        total = 0
        for name, value in xattrs:
            why = xattr_refusal(name, value)
            total += len(name) + len(value or b"")
            if why is None and total > XATTRS_MAX:
                why = f"more than {XATTRS_MAX} bytes of extended attributes on one file"
            if why is None and value is not None:
                try:
                    os.setxattr(fd, name, value)
                except OSError as e:  # ENOTSUP, E2BIG, ENOSPC: the host's file system
                    why = f"the host refused it ({e.strerror})"
            if why is not None:
                self.skip(rel, f"extended attribute {os.fsdecode(name)!r} not written: {why}")

    def symlink(self, parent: int, name: bytes, target: bytes, rel: bytes) -> bool:
        """A symbolic link ``name`` -> ``target`` (verbatim, never followed)."""
        if not self._name(rel, name):
            return False
        if not target or b"\0" in target:
            self.skip(rel, "not written: a symbolic link with an empty target or a NUL")
            return False
        try:
            os.symlink(target, name, dir_fd=parent)
        except FileExistsError:
            self.skip(rel, "not written: a second entry of this name")
            return False
        return True


def set_perms(
    fd: int,
    mode: int,
    times: tuple[float, float] | tuple[int, int],
    *,
    owner: tuple[int, int] | None = None,
    ns: bool = False,
) -> None:
    """Mode (permission bits only), owner (if given) and access and
    modification times of the file or directory open at ``fd``."""
    os.fchmod(fd, mode & PERM_BITS)
    if owner is not None:
        os.fchown(fd, *owner)
    if ns:
        os.utime(fd, ns=(int(times[0]), int(times[1])))
    else:
        os.utime(fd, times)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def copy_fd(src: int, dst: int) -> None:
    """The rest of ``src``'s bytes appended to ``dst`` (by the kernel,
    ``sendfile``, where both files allow it)."""
    try:
        while os.sendfile(dst, src, None, CHUNK):
            pass
        return
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    while True:  # the offsets are where sendfile left them
        data = os.read(src, CHUNK)
        if not data:
            return
        write_all(dst, data)


def copy_tree(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Copy the tree of ``src`` (a recovered file system's mount point, or
    an extraction) into ``dst`` as :class:`ConfinedTree` writes: regular
    files with their mode bits, times and (as root) owner, a file's second
    name a hard link to its first (within the copy), extended attributes of
    files and folders, symbolic links as links; but the root entries named
    in ``skip``.  Nothing under ``src`` is followed: a device node, FIFO or
    socket is never opened.  Returns what was not copied."""
    with ConfinedTree(dst) as tree:
        top = os.open(src, DIR_FLAGS)
        try:
            copy = _Copy(tree, {os.fsencode(s) for s in skip})
            copy.dir(top, tree.root, b"", 0)
            copy.finish(top, tree.root, b"")
        finally:
            os.close(top)
        return tree.skipped


def read_xattrs(fd: int) -> Xattrs:
    """The extended attributes of the file open at ``fd``, in name order
    (none where the file system keeps none)."""
    try:
        names = sorted(os.fsencode(n) for n in os.listxattr(fd))
    except OSError:  # ENOTSUP
        return []
    out: Xattrs = []
    for n in names:
        try:
            out.append((n, os.getxattr(fd, n)))
        except OSError:  # gone since the listing, or not readable here
            continue
    return out


class _Copy:
    """One :func:`copy_tree`: the files it wrote by their source inode
    (for hard links)."""

    def __init__(self, tree: ConfinedTree, skip: set[bytes]) -> None:
        self.tree, self.skip = tree, skip
        self.first: dict[tuple[int, int], bytes] = {}  # (device, inode) -> its first path
        self.owner = os.geteuid() == 0  # only root gives a file away

    def finish(self, src: int, dst: int, rel: bytes) -> None:
        """Mode, owner, times and extended attributes of ``src`` on ``dst``."""
        st = os.fstat(src)
        owner = (st.st_uid, st.st_gid) if self.owner else None
        set_perms(dst, st.st_mode, (st.st_atime_ns, st.st_mtime_ns), owner=owner, ns=True)
        self.tree.set_xattrs(dst, rel, read_xattrs(src))

    def dir(self, src: int, dst: int, rel: bytes, depth: int) -> None:
        tree = self.tree
        if depth > MAX_DEPTH:
            tree.skip(rel, f"its entries not written: more than {MAX_DEPTH} folders deep")
            return
        for name in sorted(os.listdir(src)):
            raw = os.fsencode(name)
            if depth == 0 and raw in self.skip:
                continue
            crel = rel + b"/" + raw if rel else raw
            st = os.stat(raw, dir_fd=src, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                self._subdir(src, dst, raw, crel, depth)
            elif stat.S_ISLNK(st.st_mode):
                tree.symlink(dst, raw, os.readlink(raw, dir_fd=src), crel)
            elif stat.S_ISREG(st.st_mode):
                self._file(src, dst, raw, crel)
            else:
                tree.skip(crel, f"not written: a {_kind(st.st_mode)}")

    def _subdir(self, src: int, dst: int, name: bytes, rel: bytes, depth: int) -> None:
        fd = self.tree.mkdir(dst, name, rel)
        if fd is None:
            return
        try:
            sub = os.open(name, DIR_FLAGS, dir_fd=src)
            try:
                self.dir(sub, fd, rel, depth + 1)
                self.finish(sub, fd, rel)
            finally:
                os.close(sub)
        finally:
            os.close(fd)

    def _file(self, src: int, dst: int, name: bytes, rel: bytes) -> None:
        tree = self.tree
        # O_NOFOLLOW|O_NONBLOCK: what was a regular file at the lstat is still
        # one at the open (fstat below), and a FIFO swapped in cannot block
        fin = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src)
        try:
            st = os.fstat(fin)
            if not stat.S_ISREG(st.st_mode):
                tree.skip(rel, f"not written: a {_kind(st.st_mode)}")
                return
            first = self.first.get((st.st_dev, st.st_ino))
            if first is not None:
                tree.link(dst, name, rel, first)
                return
            fout = tree.create(dst, name, rel)
            if fout is None:
                return
            if st.st_nlink > 1:
                self.first[(st.st_dev, st.st_ino)] = rel
            try:
                copy_fd(fin, fout)
                self.finish(fin, fout, rel)
            finally:
                os.close(fout)
        finally:
            os.close(fin)


def _kind(mode: int) -> str:
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISLNK(mode):
        return "symbolic link"
    return f"file of mode {mode:#o}"


def unpack_tar(archive: Path | IO[bytes], dst: Path) -> list[str]:
    """Unpack a tar archive (F2FS's recovered files, from its guest) into
    ``dst`` as :class:`ConfinedTree` writes: members' names relative (a
    leading ``./`` dropped), each component a valid name (absolute names
    and ``..`` are not written); a directory a member names but the archive
    did not make is made; a hard link is a link to the file written for
    the member it names (a copy of that member where it was not written);
    a symbolic link is a link; devices and FIFOs are not made.  Files get
    their mode bits, modification time (as access time too) and extended
    attributes (pax records), directories their mode and time once
    everything is written.  Returns what was not written."""
    with (
        ConfinedTree(dst) as tree,
        tarfile.open(
            archive if isinstance(archive, Path) else None,
            mode="r:",
            fileobj=None if isinstance(archive, Path) else archive,
        ) as tar,
    ):
        dirs: dict[bytes, int] = {b"": os.dup(tree.root)}
        perms: list[tuple[bytes, int, int]] = []  # directories' (rel, mode, mtime)
        try:
            for m in tar:
                _unpack_member(tree, tar, m, dirs, perms)
            for rel, mode, mtime in reversed(perms):
                fd = dirs.get(rel)
                if fd is not None:
                    set_perms(fd, mode, (mtime, mtime))
        finally:
            for fd in dirs.values():
                os.close(fd)
        return tree.skipped


def _member_parts(tree: ConfinedTree, name: str) -> list[bytes] | None:
    raw = os.fsencode(name)
    parts = [p for p in raw.split(b"/") if p not in (b"", b".")]
    if raw.startswith(b"/") or not parts or any(bad_name(p) for p in parts):
        if parts or raw.startswith(b"/"):
            tree.skip(raw, "not written: an absolute name or one with '..'")
        return None
    return parts


def _parent(tree: ConfinedTree, dirs: dict[bytes, int], parts: list[bytes]) -> int | None:
    """The open directory holding ``parts``' last name, made where the
    archive did not make it; None where a component is not a directory we
    made."""
    rel = b""
    for p in parts[:-1]:
        crel = rel + b"/" + p if rel else p
        if crel not in dirs:
            try:  # (``parts`` are valid names: _member_parts)
                os.mkdir(p, 0o700, dir_fd=dirs[rel])
            except FileExistsError:
                return None
            dirs[crel] = os.open(p, DIR_FLAGS, dir_fd=dirs[rel])
        rel = crel
    return dirs[rel]


def _unpack_member(
    tree: ConfinedTree,
    tar: tarfile.TarFile,
    m: tarfile.TarInfo,
    dirs: dict[bytes, int],
    perms: list[tuple[bytes, int, int]],
) -> None:
    parts = _member_parts(tree, m.name)
    if parts is None:
        if (
            m.isdir()
            and not m.name.startswith("/")
            and all(p in ("", ".") for p in m.name.split("/"))
        ):
            perms.append((b"", m.mode, int(m.mtime)))  # "./": the root's
        return
    rel = b"/".join(parts)
    parent = _parent(tree, dirs, parts)
    if parent is None:
        tree.skip(rel, "not written: a folder on its way is not one the archive made")
        return
    if m.isdir():
        if rel not in dirs:
            fd = tree.mkdir(parent, parts[-1], rel)
            if fd is None:
                return
            dirs[rel] = fd
        perms.append((rel, m.mode, int(m.mtime)))
    elif m.issym():
        tree.symlink(parent, parts[-1], os.fsencode(m.linkname), rel)
    elif m.islnk() and (first := _link_target(tree, m)) is not None:
        tree.link(parent, parts[-1], rel, first)
    elif m.isreg() or m.islnk():
        _unpack_file(tree, tar, m, parent, parts[-1], rel)
    else:
        tree.skip(rel, "not written: a device node or FIFO")


def _link_target(tree: ConfinedTree, m: tarfile.TarInfo) -> bytes | None:
    """The path of the file this tree wrote that the hard link ``m`` names
    (None: none; its data is then the member's, as tarfile finds it)."""
    parts = [p for p in os.fsencode(m.linkname).split(b"/") if p not in (b"", b".")]
    rel = b"/".join(parts)
    return rel if rel in tree.made else None


def _unpack_file(
    tree: ConfinedTree,
    tar: tarfile.TarFile,
    m: tarfile.TarInfo,
    parent: int,
    name: bytes,
    rel: bytes,
) -> None:
    """A regular file (or a hard link to a member not written here: a copy
    of that member's data), with its mode, time and extended attributes."""
    try:
        data = tar.extractfile(m)  # a hard link: the member it names
    except (KeyError, tarfile.TarError):
        data = None
    if data is None:
        tree.skip(rel, "not written: a hard link to no earlier file")
        return
    fd = tree.create(parent, name, rel)
    if fd is None:
        return
    try:
        while chunk := data.read(CHUNK):
            write_all(fd, chunk)
        set_perms(fd, m.mode, (int(m.mtime), int(m.mtime)))
        tree.set_xattrs(fd, rel, pax_xattrs(m))
    finally:
        os.close(fd)


def pax_xattrs(m: tarfile.TarInfo) -> Xattrs:
    """A member's extended attributes as GNU tar and bsdtar write them
    (pax ``SCHILY.xattr.NAME`` records), in name order."""
    out: Xattrs = []
    for key, value in sorted(m.pax_headers.items()):
        if key.startswith(PAX_XATTR):
            raw = value.encode("utf-8", "surrogateescape")
            out.append((key[len(PAX_XATTR) :].encode("utf-8", "surrogateescape"), raw))
    return out


def links_on_way(root: Path, rel: str) -> str | None:
    """Why opening the database ``root/rel`` of a recovered tree, or a file
    beside it whose name begins with its name (its journal, WAL,
    shared-memory or NVRAM file), would follow a symbolic link of that
    tree: the first folder on the way or such file that is one, as a
    sentence; None when none is (the engine may open them)."""
    parts = rel.split("/")
    path = root
    for p in parts[:-1]:
        path = path / p
        if path.is_symlink():
            return f"{p} is a symbolic link in the recovered file system (not followed)"
        if not path.is_dir():
            return None  # nothing to open there
    try:
        with os.scandir(path) as entries:
            linked = sorted(
                e.name for e in entries if e.name.startswith(parts[-1]) and e.is_symlink()
            )
    except FileNotFoundError:
        return None
    if not linked:
        return None
    target = os.readlink(path / linked[0])
    return (
        f"{linked[0]} is a symbolic link in the recovered file system (to {target!r}, not followed)"
    )


def replace_file(root: Path, rel: str, data: bytes) -> None:
    """Write ``data`` as ``root/rel`` of a recovered tree (a file of the
    harness's own, e.g. the NVRAM beside the database), in place of any
    entry of that name, following no link of the tree on the way (OSError
    where a folder on the way is not one)."""
    parts = rel.split("/")
    fd = os.open(root, DIR_FLAGS)
    try:
        for p in parts[:-1]:
            sub = os.open(p, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
        name = parts[-1]
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(name, dir_fd=fd)
        out = os.open(name, NEW_FILE, 0o644, dir_fd=fd)
        try:
            write_all(out, data)
        finally:
            os.close(out)
    finally:
        os.close(fd)
