"""j-lang workloads without a recording: the parser (ACE's files and
crashlab's canonical form), the model, the oracle both ways on hand-made
recovered trees, and the seq-1 generator's bounds and count."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support import JLANG_DIR_FSYNC
from support import JLANG_REPLACE as REPLACE

from checkers.fssemantics import Node, TreeFacts, judge_tree, read_tree
from checkers.invariants import FS_LEVEL, INVARIANTS
from harness.errors import CrashlabError
from workloads.jlang.lang import canonical, parse, parse_canonical
from workloads.jlang.model import execute, pattern
from workloads.jlang.oracle import JlangOracle
from workloads.jlang.rules import FS_INVARIANTS, RULES
from workloads.jlang.spec import parse_jlang_spec
from workloads.jlang.suite import CORE, seq1
from workloads.suts import SUTS

# ACE's seq-1 file j-lang100 as its generator wrote it
ACE_FILE = """# define
test
A
A/C
B
foo
bar
A/foo
A/bar
B/foo
B/bar
A/C/foo
A/C/bar

# declare
local_checkpoint

# setup


# run
mkdir A 0777
open Afoo O_RDWR|O_CREAT 0777
write Afoo 0 32768
falloc Afoo FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE 32768 32768
sync
checkpoint 1
close Afoo
"""

# the answer known both ways: a file created in A, A fsynced (or not)
DIR_FSYNC = JLANG_DIR_FSYNC.format(fsync="fsync A")


def test_ace_file_parses_to_canonical_form_and_back() -> None:
    program = parse(ACE_FILE)
    text = canonical(program)
    assert text.splitlines()[:3] == ["setup", "mkdir A 0777", "open A/foo O_CREAT|O_RDWR 0777"]
    assert "falloc A/foo FALLOC_FL_KEEP_SIZE|FALLOC_FL_PUNCH_HOLE 32768 32768" in text
    assert parse_canonical(text) == program
    assert program.checkpoints == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# run\nwrite Zfoo 0 10\n", "not in the file set"),
        ("# run\nfrobnicate foo\n", "unknown op"),
        ("# run\nmknod foo 0 0\n", "no device nodes"),
        ("# run\nwrite foo 0\n", "takes 3 arguments"),
        ("# run\nwrite foo x 10\n", "not a number"),
        ("# run\nopen foo O_BOGUS 0777\n", "bad flags"),
        ("# run\nmkdir A 0999\n", "bad mode"),
        ("# define\n../x\n# run\nsync\n", "bad path"),
        ("# run\nwrite foo 0 10\n", "'foo' is not open"),
        ("# run\nmkdir A 0777\nmkdir A 0777\n", "'A' exists"),
        ("# run\nopen Afoo O_RDWR|O_CREAT 0777\n", "'A' does not exist"),
    ],
)
def test_bad_programs_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(CrashlabError, match=says) as e:
        execute(parse(text))
    assert "\n" not in str(e.value)


def test_a_tampered_canonical_text_is_refused() -> None:
    text = canonical(parse(DIR_FSYNC))
    with pytest.raises(CrashlabError):
        parse_canonical(text.replace("mkdir A 0777", "mkdir ../A 0777"))
    with pytest.raises(CrashlabError, match="canonical"):
        parse_canonical(text.replace("0777", "777", 1))


def test_the_model_writes_what_the_runner_writes() -> None:
    run = execute(parse(DIR_FSYNC))
    last = run.snapshots[-1]
    data = last.data[last.paths["A/foo"]]
    # "write" is the run's 5th op: flat position setup sync (0) + 4
    assert data == pattern(5, 5000) and data[:3] == b"fgh"


def _tree(files: dict[str, bytes], dirs: tuple[str, ...] = ("A",)) -> TreeFacts:
    nodes = {".": Node("dir")} | {d: Node("dir") for d in dirs}
    nodes |= {
        p: Node("file", data=d, ino=i + 10, nlink=1) for i, (p, d) in enumerate(files.items())
    }
    return TreeFacts(nodes, links_kept=False, xattrs_kept=False)


def _verdicts(tree: TreeFacts, acked: int, begun: int, fs: str = "ext4") -> dict[str, str]:
    oracle = JlangOracle(parse(DIR_FSYNC), fs)
    return {v.invariant: v.status for v in judge_tree(tree, oracle, acked, begun)}


def test_a_missing_entry_after_the_directory_fsync_fails() -> None:
    assert _verdicts(_tree({}), 2, 2)["FS-DIR-ENTRIES"] == "fail"


def test_the_entry_after_the_directory_fsync_holds() -> None:
    data = execute(parse(DIR_FSYNC)).snapshots[-1]
    file = data.data[data.paths["A/foo"]]
    got = _verdicts(_tree({"A/foo": file}), 2, 2)
    assert got["FS-DIR-ENTRIES"] == "pass" and got["FS-SYNC"] == "pass"


def test_before_the_ack_the_entry_may_be_missing() -> None:
    # acked 1 (only the sync), the creation in flight: absent is allowed
    assert _verdicts(_tree({}), 1, 2)["FS-DIR-ENTRIES"] == "pass"
    # A itself was synced: its absence fails FS-SYNC
    assert _verdicts(_tree({}, dirs=()), 1, 2)["FS-SYNC"] == "fail"


def test_content_is_judged_per_block_within_the_window() -> None:
    prog = parse(
        "# run\nopen foo O_RDWR|O_CREAT 0777\nwrite foo 0 8192\nfsync foo\ncheckpoint 1\n"
        "write foo 0 8192\nfsync foo\ncheckpoint 2\nclose foo\n"
    )
    run = execute(prog)
    old, new = (run.snapshots[i + 1].data[run.snapshots[i + 1].paths["foo"]] for i in (2, 5))
    oracle = JlangOracle(prog, "ext4")

    def status(data: bytes, acked: int) -> str:
        verdicts = judge_tree(_tree({"foo": data}, dirs=()), oracle, acked, 2)
        return {v.invariant: v.status for v in verdicts}["FS-FSYNC-DATA"]

    mixed = new[:4096] + old[4096:]  # the second write landed in part
    assert status(mixed, 1) == "pass" and status(mixed, 2) == "fail"
    assert status(new, 2) == "pass" and status(old[:5000], 1) == "fail"
    links = judge_tree(_tree({"foo": new}, dirs=()), oracle, 2, 2)
    # the extraction copies hard links (the control says so): not judged
    assert {v.invariant: v.status for v in links}["FS-LINK"] == "skip"


def test_a_file_renamed_over_an_fsynced_one_is_judged_by_its_own_promises() -> None:
    """With the rename in flight (acked 1), the name may hold the newcomer as
    a crash leaves an unsynced file (zeros: unwritten extents; short), not
    the fsynced file's promise; after the root's fsync (acked 2) ext4's
    FS-REPLACE promises the newcomer's bytes, so zeros fail it there."""
    prog = parse(REPLACE.format(fsync="fsync ."))
    run = execute(prog)
    last = run.snapshots[-1]
    new = last.data[last.paths["foo"]]
    oracle = JlangOracle(prog, "ext4")

    def status(data: bytes, acked: int, inv: str) -> str:
        verdicts = judge_tree(_tree({"foo": data}, dirs=()), oracle, acked, 2)
        return {v.invariant: v.status for v in verdicts}[inv]

    for data in (bytes(9000), b"", new[:4096] + bytes(4904), new):
        assert status(data, 1, "FS-FSYNC-DATA") == "pass", len(data)
    garbage = b"x" * 4096  # neither file's: still a violation
    assert status(garbage, 1, "FS-FSYNC-DATA") == "fail"
    assert status(bytes(9000), 2, "FS-REPLACE") == "fail"
    assert status(new, 2, "FS-REPLACE") == "pass"


def test_read_tree_does_not_follow_links(tmp_path: Path) -> None:
    root = tmp_path / "jlang"
    (root / "A").mkdir(parents=True)
    (root / "A" / "foo").write_bytes(b"x")
    (root / "l").symlink_to("/etc/passwd")
    tree = read_tree(root)
    assert tree.entry("l") == ("symlink", "/etc/passwd") and tree.nodes["A/foo"].data == b"x"
    assert tree.links_kept is None  # no control beside it
    assert read_tree(tmp_path / "nothing").error


def test_rules_cover_the_fs_invariants_with_sources() -> None:
    assert set(FS_LEVEL) <= set(INVARIANTS)  # each described
    assert {r.invariant for r in RULES} == set(FS_INVARIANTS)
    assert all(r.text and r.source for r in RULES)
    for name in ("fs-ext4", "fs-xfs", "fs-btrfs", "fs-f2fs"):
        sut = SUTS[name]
        assert tuple(g.invariant for g in sut.guarantees) == FS_INVARIANTS
        assert "FS-FSYNC-DATA" in sut.promises
        # judged by a whole seq-1 run on the faithful extraction: ext4 only
        assert ("FS-LINK" in sut.promises) == (name == "fs-ext4")
        assert ("FS-XATTR" in sut.promises) == (name == "fs-ext4")
    # judged on ext4 (its rule), promised nowhere: this kernel does not keep it
    ext4 = {g.invariant: g for g in SUTS["fs-ext4"].guarantees}["FS-REPLACE"]
    assert "auto_da_alloc" in ext4.rule and "not held" in ext4.rule
    assert not any("FS-REPLACE" in SUTS[n].promises for n in ("fs-ext4", "fs-xfs"))


def test_seq1_bounds_and_count() -> None:
    suite = seq1()
    # 84 core ops (ACE's parameters) x the persistence choices of each
    assert len(CORE) == 84 and len(suite) == 348
    assert len({canonical(p) for p in suite}) == len(suite)
    per_op = Counter(o.name for p in suite for o in p.run)
    assert per_op["falloc"] == 120 and per_op["fdatasync"] == 2 and per_op["checkpoint"] == 348
    assert parse_jlang_spec("jlang:seq1/1").program == suite[0]
    with pytest.raises(CrashlabError, match="1..348"):
        parse_jlang_spec("jlang:seq1/349")


def test_an_ace_file_is_a_seq1_workload() -> None:
    # ACE's j-lang100, closes aside, is one of crashlab's own seq-1 workloads
    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("close")]

    ours = {tuple(body(canonical(p))) for p in seq1()}
    assert tuple(body(canonical(parse(ACE_FILE)))) in ours


def test_the_matrices_run_seq1() -> None:
    from harness.sweep.matrix import matrix

    nightly = [c for c in matrix("nightly") if c.sut.startswith("fs-")]
    assert {(c.sut, c.fs) for c in nightly} == {
        ("fs-ext4", "ext4"),
        ("fs-xfs", "xfs"),
        ("fs-btrfs", "btrfs"),
    }
    assert len(nightly) == 3 * len(seq1()) and all(
        c.strategies == ("prefix", "reorder") for c in nightly
    )
    qemu = [c for c in matrix("qemu") if c.sut == "fs-f2fs"]
    assert len(qemu) == len(seq1()) and {c.backend for c in qemu} == {"qemu"}
    default = [c for c in matrix("default") if c.sut.startswith("fs-")]
    assert 1 <= len(default) <= 6 and {c.fs for c in default} == {"ext4"}


def test_a_jlang_workload_runs_only_on_a_file_system_sut(tmp_path: Path) -> None:
    from workloads.run import workload_command

    with pytest.raises(CrashlabError, match="file-system SUT"):
        workload_command("sqlite-wal-full", "jlang:seq1/1", tmp_path)
    with pytest.raises(CrashlabError, match="file-system SUT"):
        workload_command("fs-ext4", "insert:txns=2", tmp_path)
    with pytest.raises(CrashlabError, match="runs only on xfs"):
        workload_command("fs-xfs", "jlang:seq1/1", tmp_path, "ext4")
    cmd, meta, _ = workload_command("fs-ext4", "jlang:seq1/2", tmp_path, "ext4")
    assert cmd[-4:] == ["--program", str(tmp_path / "workload.jlang"), "--root", "jlang"]
    assert parse_canonical(meta["jlang"]) == seq1()[1] and meta["db"] == "jlang"


def _model_tree(
    program_index: int,
) -> dict[str, tuple[str, str, bytes, tuple[tuple[str, bytes], ...]]]:
    snap = execute(seq1()[program_index]).snapshots[-1]
    return {
        path: (snap.kinds[i], snap.targets.get(i, ""), snap.data.get(i, b""), snap.xattrs[i])
        for path, i in snap.paths.items()
    }


def test_the_runner_does_what_the_model_says(tmp_path: Path) -> None:
    """Every seq-1 workload run by crashlab-jlang in a plain folder leaves
    the model's final tree (kinds, link targets, bytes, attributes, hard
    links) and writes the marks the oracle reads."""
    import subprocess

    from workloads.run import runner_path

    runner = runner_path(name="crashlab-jlang")
    for n, program in enumerate(seq1()):
        here = tmp_path / str(n)
        here.mkdir()
        (tmp_path / "p").write_text(canonical(program))
        marks = tmp_path / f"marks{n}"
        subprocess.run(
            [runner, "--program", tmp_path / "p", "--root", "jlang", "--marks", marks],
            cwd=here,
            check=True,
        )
        tree = read_tree(here / "jlang")
        got = {
            p: (node.kind, node.target, node.data or b"", node.xattrs)
            for p, node in tree.nodes.items()
        }
        assert got == _model_tree(n), canonical(program)
        assert tree.links_kept and tree.xattrs_kept  # the control, on a real file system
        labels = marks.read_text().split()
        assert labels[:2] == ["setup-done", "txn-begin:1"] and labels[-1] == "workload-end"
        assert labels[2].startswith("txn-ack:1;op=")


def test_a_hostile_stored_program_is_one_line() -> None:
    from harness.rundir import RunMeta
    from workloads.run import oracle_from_meta

    meta = RunMeta(
        sut="fs-ext4", workload="jlang:seq1/1", db="jlang", extra={"jlang": "setup\nrm -rf /\n"}
    )
    with pytest.raises(CrashlabError, match="meta.json: its j-lang program: .*unknown op 'rm'"):
        oracle_from_meta(meta)
    with pytest.raises(CrashlabError, match="needs a j-lang workload and its program"):
        oracle_from_meta(RunMeta(sut="fs-ext4", workload="jlang:seq1/1", db="jlang"))
