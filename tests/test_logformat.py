"""The dm-log-writes format: writer → reader round trips and bad logs."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import logformat as lf
from harness.logformat import LogFormatError, LogReader, LogWriter


def write_sample(path: Path, sectorsize: int = 512) -> None:
    with LogWriter(path, sectorsize) as w:
        w.write(8, b"a" * sectorsize)
        w.write(16, b"b" * 2 * sectorsize, lf.METADATA)
        w.mark("setup-done")
        w.flush()
        w.write(24, b"c" * sectorsize, lf.FUA)
        w.discard(100, 16)
        w.write(32, b"d" * sectorsize, lf.FLUSH | lf.FUA)  # FLUSH with data
        w.mark("txn-ack:1")


def test_round_trip_every_flag(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    with LogReader(log) as r:
        es = list(r.entries())
        assert r.nr_entries == 8 and r.sectorsize == 512
        assert [e.index for e in es] == list(range(8))
        assert [e.flags for e in es] == [
            0,
            lf.METADATA,
            lf.MARK,
            lf.FLUSH,
            lf.FUA,
            lf.DISCARD,
            lf.FLUSH | lf.FUA,
            lf.MARK,
        ]
        assert es[0].sector == 8 and r.payload(es[0]) == b"a" * 512
        assert es[1].nr_sectors == 2 and r.payload(es[1]) == b"b" * 1024
        assert es[2].label == "setup-done" and r.payload(es[2]) == b""
        assert es[5].is_discard and es[5].nr_sectors == 16 and not es[5].has_payload
        assert es[5].is_write
        assert es[6].is_flush and es[6].has_payload and r.payload(es[6]) == b"d" * 512
        assert es[7].label == "txn-ack:1"
        # Entry offsets follow the format's rule: header + payload except DISCARD.
        assert es[0].offset == 512 and es[1].offset == 512 + 1024
        assert es[6].offset == es[5].offset + 512


def test_summary_counts(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    with LogReader(log) as r:
        s = r.summary()
    assert (s.entries, s.writes, s.flushes, s.fua, s.discards, s.metadata) == (8, 4, 2, 2, 1, 1)
    assert s.bytes_written == 512 * 5
    assert s.marks == ["setup-done", "txn-ack:1"]
    assert s.epochs == 3


@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("w"),
                st.integers(0, 2**40),
                st.integers(1, 9),
                st.sampled_from([0, lf.FUA, lf.METADATA, lf.FLUSH | lf.FUA]),
            ),
            st.tuples(st.just("f")),
            st.tuples(st.just("d"), st.integers(0, 2**40), st.integers(1, 2**20)),
            st.tuples(
                st.just("m"),
                st.text(min_size=1, max_size=40).filter(lambda t: 0 < len(t.encode()) <= 480),
            ),
        ),
        max_size=30,
    ),
    st.sampled_from([512, 4096]),
)
@settings(max_examples=60, deadline=None)
def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory, ops: list, ss: int) -> None:
    log = tmp_path_factory.mktemp("rt") / "w.log"
    with LogWriter(log, ss) as w:
        for op in ops:
            if op[0] == "w":
                w.write(op[1], bytes([op[2]]) * (op[2] * ss), op[3])
            elif op[0] == "f":
                w.flush()
            elif op[0] == "d":
                w.discard(op[1], op[2])
            else:
                w.mark(op[1])
    with LogReader(log) as r:
        es = list(r.entries())
        assert len(es) == len(ops)
        for op, e in zip(ops, es, strict=True):
            if op[0] == "w":
                assert (e.sector, e.nr_sectors, e.flags) == (op[1], op[2], op[3])
                assert r.payload(e) == bytes([op[2]]) * (op[2] * ss)
            elif op[0] == "f":
                assert e.flags == lf.FLUSH and e.nr_sectors == 0
            elif op[0] == "d":
                assert (e.sector, e.nr_sectors, e.flags) == (op[1], op[2], lf.DISCARD)
            else:
                assert e.label == op[1]


def read_all(path: Path, salvage: bool = False) -> list[lf.Entry]:
    with LogReader(path, salvage=salvage) as r:
        return list(r.entries())


def test_truncated_payload_names_offset(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    size = log.stat().st_size
    # Cut into the payload of entry 0 (header at 512, payload from 1024).
    os.truncate(log, 1024 + 100)
    with pytest.raises(LogFormatError, match=r"byte 1024: entry 0: truncated payload"):
        read_all(log)
    assert size > 1124


def test_truncated_header(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    os.truncate(log, 512 + 200)
    with pytest.raises(LogFormatError, match=r"byte 512: entry 0: truncated header"):
        read_all(log)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ((0, struct.pack("<Q", 0x1234)), "byte 0: bad magic 0x1234"),
        ((8, struct.pack("<Q", 2)), "byte 8: unsupported log version 2"),
        ((24, struct.pack("<I", 777)), "byte 24: bad sector size 777"),
        ((512 + 16, struct.pack("<Q", 1 << 9)), "byte 512: entry 0: unknown flags 0x200"),
        ((512 + 40, b"\x01"), "byte 512: entry 0: header padding not zero"),
        ((512, bytes(32)), "byte 512: entry 0: empty entry"),
    ],
)
def test_corrupt_logs_rejected(tmp_path: Path, patch: tuple[int, bytes], message: str) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    with open(log, "r+b") as f:
        f.seek(patch[0])
        f.write(patch[1])
    with pytest.raises(LogFormatError, match=message):
        read_all(log)


def test_foreign_and_empty_files(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.write_bytes(b"SQLite format 3\0" + bytes(600))
    with pytest.raises(LogFormatError, match="bad magic"):
        read_all(foreign)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(LogFormatError, match="truncated super block"):
        read_all(empty)


def test_garbage_in_super_padding_is_accepted(tmp_path: Path) -> None:
    """The kernel copies an uninitialised struct: bytes 28..31 are garbage."""
    log = tmp_path / "w.log"
    write_sample(log)
    with open(log, "r+b") as f:
        f.seek(28)
        f.write(b"\xde\xad\xbe\xef")
    assert len(read_all(log)) == 8


def test_stale_nr_entries_needs_salvage(tmp_path: Path) -> None:
    """A writer killed before rewriting the super block leaves entries past
    nr_entries: read only when asked, and counted."""
    log = tmp_path / "w.log"
    with LogWriter(log) as w:
        w.write(0, b"x" * 512)
        w.flush()  # super rewritten: nr_entries = 2
        w.write(8, b"y" * 512)
        w.write(16, b"z" * 512)
        w._fd, fd = -1, w._fd  # "killed": no rewrite on close
    os.close(fd)
    with open(log, "ab") as f:
        f.write(b"\x07" * 100)  # a torn tail
    assert len(read_all(log)) == 2
    with LogReader(log, salvage=True) as r:
        es = list(r.entries())
        assert len(es) == 4 and r.salvaged == 2
        assert r.payload(es[3]) == b"z" * 512


def test_nr_entries_beyond_file_is_truncation(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    with open(log, "r+b") as f:
        f.seek(16)
        f.write(struct.pack("<Q", 9))
    with pytest.raises(LogFormatError, match="entry 8: truncated header"):
        read_all(log)


def test_writer_rejects_bad_input(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "w.log") as w:
        with pytest.raises(ValueError):
            w.write(0, b"short")
        with pytest.raises(ValueError):
            w.mark("")
        with pytest.raises(ValueError):
            w.mark("x" * 481)
        with pytest.raises(ValueError):
            w.write(0, b"x" * 512, lf.DISCARD)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "crashlab"), *args], capture_output=True, text=True
    )


def test_cli_bad_log_one_line_error(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    os.truncate(log, 1024 + 100)
    p = run_cli("log", "stat", str(log))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert "byte 1024" in p.stderr and p.stderr.startswith("crashlab: error:")
    p = run_cli("log", "show", str(tmp_path / "missing"))
    assert p.returncode == 2 and "no such run directory or log" in p.stderr


def test_cli_show_and_stat(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    write_sample(log)
    p = run_cli("log", "show", str(log))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 8 and "mark setup-done" in lines[2] and "FLUSH|FUA" in lines[6]
    p = run_cli("log", "stat", "--json", str(log))
    assert p.returncode == 0 and '"flushes": 2' in p.stdout
