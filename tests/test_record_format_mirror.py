"""harness/fuse/logwrites.h mirrors harness/logformat.py: same magic,
version, flag bits and super block/entry layouts."""

from __future__ import annotations

import re
from pathlib import Path

from harness import logformat as lf

HEADER = Path(__file__).resolve().parent.parent / "harness" / "fuse" / "logwrites.h"


def _defines() -> dict[str, int]:
    text = HEADER.read_text()
    out = {}
    for name, value in re.findall(r"^#define\s+(\w+)\s+(.+?)\s*$", text, re.M):
        expr = re.sub(r"(?<=[0-9a-fA-F])U?L*L?\b", "", value)  # drop C suffixes
        expr = expr.replace("sizeof(struct log_write_entry)", str(lf.ENTRY.size))
        try:
            out[name] = int(eval(expr, {}, dict(out)))  # noqa: S307 - our own header
        except (NameError, SyntaxError):
            continue
    return out


def _struct_fields(name: str) -> list[tuple[str, str]]:
    m = re.search(r"struct\s+" + name + r"\s*\{(.*?)\};", HEADER.read_text(), re.S)
    assert m, f"struct {name} missing from {HEADER}"
    return re.findall(r"(uint\d+_t)\s+(\w+);", m.group(1))


def test_constants_match():
    d = _defines()
    assert d["WRITE_LOG_MAGIC"] == lf.MAGIC
    assert d["WRITE_LOG_VERSION"] == lf.VERSION
    assert d["LOG_FLUSH_FLAG"] == lf.FLUSH
    assert d["LOG_FUA_FLAG"] == lf.FUA
    assert d["LOG_DISCARD_FLAG"] == lf.DISCARD
    assert d["LOG_MARK_FLAG"] == lf.MARK
    assert d["LOG_METADATA_FLAG"] == lf.METADATA
    assert d["LOG_SECTOR_SIZE"] in lf.VALID_SECTOR_SIZES
    assert d["LOG_MARK_MAX"] == d["LOG_SECTOR_SIZE"] - lf.ENTRY.size


def test_struct_layouts_match():
    codes = {"uint64_t": "Q", "uint32_t": "I"}
    sup = _struct_fields("log_write_super")
    assert [n for _, n in sup] == ["magic", "version", "nr_entries", "sectorsize"]
    assert "<" + "".join(codes[t] for t, _ in sup) == lf.SUPER.format
    ent = _struct_fields("log_write_entry")
    assert [n for _, n in ent] == ["sector", "nr_sectors", "flags", "data_len"]
    assert "<" + "".join(codes[t] for t, _ in ent) == lf.ENTRY.format
