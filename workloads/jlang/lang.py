"""j-lang, the workload language of CrashMonkey's ACE generator, as
crashlab reads it: the one parser (:func:`parse`) and the canonical text
(:func:`canonical`) the runner executes and meta.json keeps.

A program is sections of lines::

    # define        the file set: one path per line ("A/foo"); an op names
                    a path by it with the slashes left out ("Afoo"), as ACE
                    writes it, or by the path itself; "test" is the
                    workload's root folder.  Without it: ACE's default set.
    # declare       ignored (ACE's C++ variables)
    # setup         ops run, then synced, before the ``setup-done`` mark
    # run           the workload's ops

An op is one line of words (ACE's spellings; ``NAME`` a name of the file
set, ``OFF``/``LEN`` byte counts)::

    open NAME FLAGS MODE      FLAGS: O_* joined by "|" (O_CREAT creates)
    opendir NAME MODE         close NAME          creat NAME [MODE]
    mkdir NAME MODE           rmdir NAME
    write NAME OFF LEN        dwrite NAME OFF LEN (O_DIRECT|O_SYNC)
    mmapwrite NAME OFF LEN    (written through a shared mapping, msync'd)
    falloc NAME MODE OFF LEN  MODE: 0 or FALLOC_FL_* joined by "|"
    link OLD NEW    symlink TARGET NEW    rename OLD NEW
    unlink NAME     remove NAME           truncate NAME LEN
    fsetxattr NAME  removexattr NAME      (ACE's "user.xattr1" = "val1")
    fsync NAME      fdatasync NAME        sync
    checkpoint N    a persistence point: every persistence op before it is
                    acknowledged (crashlab's marks ``txn-ack:K``)
    mark LABEL      a mark of the user's own (harness/marks.py); none

Anything else — an unknown op or section, a name outside the file set, a
bad number, ``mknod`` (no device nodes here) — is a CrashlabError naming
the line.  Whether the ops can run in their order (a file written before
it exists, say) is the model's to say (workloads/jlang/model.py).

The canonical text is the ``# run`` form crashlab's runner executes: one
op per line, every name a path relative to the root ("." for the root),
flags and modes in a fixed spelling, checkpoints numbered 1, 2, ... in
order, the setup's ops first and then the line ``setup``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.errors import CrashlabError
from harness.marks import check_label

MAX_TEXT = 64 * 1024  # bytes of a program
MAX_OPS = 4096
MAX_BYTES = 1 << 20  # an op's offset + length, and a truncate's length
ROOT = "test"  # ACE's name of the workload's root folder

# ACE's default file set (its ace/common.py): the root, A, A/C, B and two
# files in each.
DEFAULT_FILES = (
    "A",
    "A/C",
    "B",
    "foo",
    "bar",
    "A/foo",
    "A/bar",
    "B/foo",
    "B/bar",
    "A/C/foo",
    "A/C/bar",
)
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_FLAGS = {"O_RDONLY", "O_WRONLY", "O_RDWR", "O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND"}
FALLOC_FLAGS = ("FALLOC_FL_KEEP_SIZE", "FALLOC_FL_PUNCH_HOLE", "FALLOC_FL_ZERO_RANGE")
SECTIONS = ("define", "declare", "setup", "run")

# op -> the kinds of its arguments: n a name, i a number, f open flags,
# m a mode (octal), F falloc flags, w one word (a label)
SIGNATURES: dict[str, str] = {
    "open": "nfm",
    "opendir": "nm",
    "close": "n",
    "creat": "n",
    "mkdir": "nm",
    "rmdir": "n",
    "write": "nii",
    "dwrite": "nii",
    "mmapwrite": "nii",
    "falloc": "nFii",
    "link": "nn",
    "symlink": "nn",
    "rename": "nn",
    "unlink": "n",
    "remove": "n",
    "truncate": "ni",
    "fsetxattr": "n",
    "removexattr": "n",
    "fsync": "n",
    "fdatasync": "n",
    "sync": "",
    "checkpoint": "i",
    "mark": "w",
    "none": "",
}
PERSIST_OPS = ("fsync", "fdatasync", "sync")


@dataclass(frozen=True)
class Op:
    """One op: its name and arguments in canonical spelling (paths relative
    to the root, "." for the root; numbers as ints)."""

    name: str
    args: tuple[str | int, ...] = ()
    line: int = field(default=0, compare=False)  # in the source (0: a generator's)

    def text(self) -> str:
        return " ".join([self.name, *(str(a) for a in self.args)])

    def path(self, i: int = 0) -> str:
        arg = self.args[i]
        assert isinstance(arg, str)
        return arg

    def num(self, i: int) -> int:
        arg = self.args[i]
        assert isinstance(arg, int)
        return arg


@dataclass(frozen=True)
class Program:
    """A parsed program: the setup's ops and the run's."""

    setup: tuple[Op, ...]
    run: tuple[Op, ...]

    @property
    def checkpoints(self) -> int:
        return sum(1 for op in self.run if op.name == "checkpoint")


def _names(files: tuple[str, ...]) -> dict[str, str]:
    """ACE's names of a file set (path without slashes) and the paths
    themselves -> the path; the root is "test" and "."."""
    out = {ROOT: ".", ".": "."}
    for path in files:
        for name in (path.replace("/", ""), path):
            if out.get(name, path) != path:
                raise CrashlabError(f"j-lang: {name!r} names both {out[name]!r} and {path!r}")
            out[name] = path
    return out


def _path(word: str, where: str) -> str:
    """A define line: a relative path of plain components."""
    parts = word.split("/")
    if not all(_COMPONENT.fullmatch(p) for p in parts) or len(parts) > 8:
        raise CrashlabError(f"j-lang {where}: bad path {word!r} (relative, plain names)")
    return word


def _number(word: str, where: str) -> int:
    if not word.isdigit() or len(word) > 9:
        raise CrashlabError(f"j-lang {where}: {word!r} is not a number")
    return int(word)


def _flags(word: str, allowed: tuple[str, ...] | set[str], where: str) -> str:
    """``A|B`` of allowed names, canonically ordered ("0": none)."""
    if word == "0":
        return "0"
    parts = word.split("|")
    bad = [p for p in parts if p not in allowed]
    if bad or len(set(parts)) != len(parts):
        raise CrashlabError(
            f"j-lang {where}: bad flags {word!r} (choose from {', '.join(sorted(allowed))})"
        )
    return "|".join(sorted(parts))


def _mode(word: str, where: str) -> int:
    if not re.fullmatch(r"0?[0-7]{3,4}", word):
        raise CrashlabError(f"j-lang {where}: bad mode {word!r} (octal, e.g. 0777)")
    return int(word, 8)


def _arg(kind: str, word: str, names: dict[str, str], where: str) -> str | int:
    if kind == "n":
        if word not in names:
            raise CrashlabError(f"j-lang {where}: {word!r} is not in the file set")
        return names[word]
    if kind == "i":
        return _number(word, where)
    if kind == "f":
        return _flags(word, _FLAGS, where)
    if kind == "F":
        return _flags(word, FALLOC_FLAGS, where)
    if kind == "m":
        return f"0{_mode(word, where):o}"
    check_label(word)
    return word


def parse_op(words: list[str], names: dict[str, str], where: str) -> Op:
    """One op line's words; CrashlabError names ``where``."""
    name, args = words[0], words[1:]
    if name == "mknod":
        raise CrashlabError(f"j-lang {where}: mknod is not supported (no device nodes)")
    sig = SIGNATURES.get(name)
    if sig is None:
        raise CrashlabError(
            f"j-lang {where}: unknown op {name!r} (choose from {', '.join(SIGNATURES)})"
        )
    if name == "creat" and len(args) == 2:  # creat NAME MODE: the mode is 0777 anyway
        args = args[:1]
    if len(args) != len(sig):
        raise CrashlabError(f"j-lang {where}: {name} takes {len(sig)} arguments, not {len(args)}")
    op = Op(name, tuple(_arg(k, w, names, where) for k, w in zip(sig, args, strict=True)))
    if name in ("write", "dwrite", "mmapwrite", "falloc") and op.num(-2) + op.num(-1) > MAX_BYTES:
        raise CrashlabError(f"j-lang {where}: offset + length is over {MAX_BYTES} bytes")
    if name in ("write", "dwrite", "mmapwrite", "falloc") and op.num(-1) == 0:
        raise CrashlabError(f"j-lang {where}: a length of 0")
    if name == "truncate" and op.num(1) > MAX_BYTES:
        raise CrashlabError(f"j-lang {where}: a length over {MAX_BYTES} bytes")
    return op


def _sections(text: str) -> dict[str, list[tuple[int, list[str]]]]:
    """The lines of each section, as (line number, words)."""
    out: dict[str, list[tuple[int, list[str]]]] = {s: [] for s in SECTIONS}
    current = "run"
    seen: set[str] = set()
    for no, raw in enumerate(text.splitlines(), 1):
        words = raw.split()
        if not words:
            continue
        if words[0].startswith("#"):
            head = " ".join(words).lstrip("#").strip().lower()
            if head in SECTIONS:
                if head in seen:
                    raise CrashlabError(f"j-lang line {no}: a second '# {head}' section")
                seen.add(head)
                current = head
            continue  # any other '#' line is a comment
        out[current].append((no, words))
    return out


def parse(text: str) -> Program:
    """The program of a j-lang text (see the module's comment)."""
    if len(text.encode("utf-8", "replace")) > MAX_TEXT:
        raise CrashlabError(f"j-lang: the program is over {MAX_TEXT} bytes")
    if not text.isprintable() and any(c not in "\n\t\r" and not c.isprintable() for c in text):
        raise CrashlabError("j-lang: the program holds control characters")
    sections = _sections(text)
    defined = []
    for no, words in sections["define"]:
        if len(words) != 1:
            raise CrashlabError(f"j-lang line {no}: a define line is one path")
        if words[0] != ROOT:
            defined.append(_path(words[0], f"line {no}"))
    names = _names(tuple(defined) if sections["define"] else DEFAULT_FILES)
    setup = tuple(
        _at(parse_op(w, names, f"line {no}"), no) for no, w in sections["setup"] if w != ["none"]
    )
    run = tuple(
        _at(parse_op(w, names, f"line {no}"), no) for no, w in sections["run"] if w != ["none"]
    )
    if len(setup) + len(run) > MAX_OPS:
        raise CrashlabError(f"j-lang: more than {MAX_OPS} ops")
    for op in setup:
        if op.name in ("checkpoint", "mark"):
            raise CrashlabError(f"j-lang line {op.line}: no {op.name} in the setup")
    return Program(setup, _numbered(run))


def _at(op: Op, line: int) -> Op:
    return Op(op.name, op.args, line)


def _numbered(run: tuple[Op, ...]) -> tuple[Op, ...]:
    """The checkpoints numbered 1, 2, ... in order (ACE numbers them so;
    crashlab's marks need them so)."""
    out, k = [], 0
    for op in run:
        if op.name == "checkpoint":
            k += 1
            op = Op("checkpoint", (k,), op.line)
        out.append(op)
    return tuple(out)


def canonical(program: Program) -> str:
    """The canonical text: the setup's ops, the line ``setup``, the run's."""
    lines = [op.text() for op in program.setup] + ["setup"] + [op.text() for op in program.run]
    return "\n".join(lines) + "\n"


def parse_canonical(text: str) -> Program:
    """A canonical text back (meta.json's copy: hostile, parsed strictly):
    its names are paths, each checked as a define line is."""
    head, sep, tail = text.partition("setup\n")
    if not sep or (head and not head.endswith("\n")):
        raise CrashlabError("j-lang: a canonical program needs its 'setup' line")
    names = {".": "."}
    for no, line in enumerate(text.splitlines(), 1):
        words = line.split()
        sig = SIGNATURES.get(words[0], "") if words else ""
        for kind, word in zip(sig, words[1:], strict=False):
            if kind == "n" and word != ".":
                names[word] = _path(word, f"line {no}")
    sections: dict[str, list[Op]] = {"setup": [], "run": []}
    part = "setup"
    for no, line in enumerate(text.splitlines(), 1):
        if line == "setup" and part == "setup":
            part = "run"
            continue
        sections[part].append(_at(parse_op(line.split() or ["?"], names, f"line {no}"), no))
    program = Program(tuple(sections["setup"]), _numbered(tuple(sections["run"])))
    if canonical(program) != text:
        raise CrashlabError("j-lang: the stored program is not in canonical form")
    return program
