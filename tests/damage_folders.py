"""Damaged inputs (tests/damage.py) of a run folder the command reads: its
``writes.log`` and its ``meta.json`` (a shard folder's are in
damage_shards.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

from damage_run import ANY, REFUSE, Damage, _copy_run, _run_command

from harness.logformat import DISCARD, ENTRY, FLUSH, FUA, MARK, METADATA, SUPER, LogReader

# --- writes.log -------------------------------------------------------------


def _entries(log: Path) -> tuple[int, list[tuple[int, int, int, int, int]]]:
    """The log's sector size and its entries as (offset, end, sector,
    nr_sectors, flags)."""
    with LogReader(log) as r:
        s = r.sectorsize
        return s, [
            (e.offset, e.end_offset(s), e.sector, e.nr_sectors, e.flags) for e in r.entries()
        ]


def _set_u64(data: bytearray, at: int, value: int) -> None:
    struct.pack_into("<Q", data, at, value % (1 << 64))


# long: one branch per kind of damage, picked by one seeded draw (the draws' order is the seed's)
def _log_damages(rng: random.Random, run: Path, device: int) -> Damage:
    """One damage of ``run``'s writes.log (the rest of the folder intact)."""
    s, ents = _entries(run / "writes.log")
    raw = (run / "writes.log").read_bytes()
    writes = [e for e in ents if e[3] and not e[4] & (MARK | DISCARD)]
    marks = [e for e in ents if e[4] & MARK]
    pick = rng.randrange(16)

    def edit(what: str, expect: str, fn: Callable[[bytearray], bytes | bytearray]) -> Damage:
        def make(folder: Path) -> list[str]:
            dst = _copy_run(run, folder)
            (dst / "writes.log").write_bytes(bytes(fn(bytearray(raw))))
            return _run_command(rng_cmd, dst, folder)

        rng_cmd = rng.randrange(1 << 30)
        return Damage("log", what, expect, make)

    if pick == 0:
        cut = rng.randrange(0, len(raw))
        return edit(f"truncated at byte {cut}", REFUSE, lambda d: d[:cut])
    if pick == 1:
        field_at, name = rng.choice(
            [(0, "magic"), (8, "version"), (16, "nr_entries"), (24, "sectorsize")]
        )
        bit = rng.randrange(64 if field_at < 24 else 32)
        return edit(
            f"bit {bit} of the super block's {name} flipped",
            REFUSE,
            lambda d: _flip(d, field_at * 8 + bit),
        )
    if pick == 2:  # a header field of an entry: all but sector change the counts
        off, _, _, _, flags = rng.choice(ents)
        idx, name = rng.choice([(8, "nr_sectors"), (16, "flags"), (24, "data_len")])
        bit = rng.randrange(64)
        if name == "nr_sectors" and flags & MARK:
            expect = ANY  # a mark's count is not read
        else:
            expect = REFUSE
        return edit(
            f"bit {bit} of {name} of the entry at {off} flipped",
            expect,
            lambda d: _flip(d, (off + idx) * 8 + bit),
        )
    if pick == 3:  # sector field: moves a write; maybe past the device
        off, *_ = rng.choice(writes)
        bit = rng.randrange(64)
        return edit(
            f"bit {bit} of the sector of the write at {off} flipped",
            ANY,
            lambda d: _flip(d, off * 8 + bit),
        )
    if pick == 4:
        off, end, *_ = rng.choice(writes)
        at = rng.randrange(off + s, end)
        return edit(f"payload byte {at} flipped", ANY, lambda d: _flip(d, at * 8 + rng_bit(at)))
    if pick == 5:
        n = rng.choice([0, 1, len(ents) // 2, len(ents) - 1, len(ents) + 1, 1 << 40, 2**64 - 1])
        return edit(
            f"nr_entries set to {n}",
            REFUSE if n != len(ents) else ANY,
            lambda d: (_set_u64(d, 16, n), d)[1],
        )
    if pick == 6:  # huge DISCARD (or write) count
        off, _, sector, _, _ = rng.choice([e for e in ents if not e[4] & MARK])
        n = rng.choice([1 << 20, 1 << 32, 1 << 50, 2**64 - 1 - sector])
        return edit(
            f"entry at {off} made a DISCARD of {n} sectors",
            REFUSE,
            lambda d: (_set_u64(d, off + 8, n), _set_u64(d, off + 16, DISCARD), d)[2],
        )
    if pick == 7:  # a write moved past the device end
        off, _, _, nr, _ = rng.choice(writes)
        sector = device // s - rng.randrange(0, nr) + rng.randrange(0, 1 << 20)
        return edit(
            f"write at {off} moved to sector {sector}",
            REFUSE,
            lambda d: (_set_u64(d, off, sector), d)[1],
        )
    if pick == 8:  # every mark removed, nr_entries rewritten
        keep = [e for e in ents if not e[4] & MARK]
        return edit(
            "every mark removed, the count rewritten",
            REFUSE if marks else ANY,
            lambda d: _rebuild(d, s, keep),
        )
    if pick == 9:  # cut short at an entry, the count rewritten (a consistent prefix)
        k = rng.randrange(1, len(ents))
        return edit(
            f"cut after entry {k - 1}, nr_entries rewritten",
            REFUSE,
            lambda d: _rebuild(d, s, ents[:k]),
        )
    if pick == 10:  # two entries swapped: the counts stay
        i, j = sorted(rng.sample(range(len(ents)), 2))
        order = list(ents)
        order[i], order[j] = order[j], order[i]
        same_marks = [_label(raw, e, s) for e in order if e[4] & MARK] == [
            _label(raw, e, s) for e in ents if e[4] & MARK
        ]
        return edit(
            f"entries {i} and {j} swapped",
            ANY if same_marks else REFUSE,
            lambda d: _rebuild(d, s, order),
        )
    if pick == 11:  # a flag bit set or cleared
        off, _, _, nr, flags = rng.choice(ents)
        bit = rng.choice([FLUSH, FUA, METADATA, MARK, DISCARD, 1 << rng.randrange(5, 64)])
        return edit(
            f"flag {bit:#x} of the entry at {off} toggled",
            REFUSE,
            lambda d: (_set_u64(d, off + 16, flags ^ bit), d)[1],
        )
    if pick == 12:
        label_off = rng.choice(marks)[0] if marks else ents[0][0]
        at = label_off + ENTRY.size + rng.randrange(4)
        return edit(
            f"mark label byte {at} flipped",
            REFUSE if marks else ANY,
            lambda d: _flip(d, at * 8 + rng_bit(at)),
        )
    if pick == 13:
        return edit("emptied", REFUSE, lambda d: b"")
    if pick == 14:  # a flipped byte anywhere (class by where it fell)
        at = rng.randrange(len(raw))
        expect = _where_class(at, raw, ents, s)
        return edit(f"byte {at} flipped", expect, lambda d: _flip(d, at * 8 + rng_bit(at)))
    return _log_special(rng, run)


def rng_bit(at: int) -> int:
    """A bit of a byte, fixed by its offset (deterministic)."""
    return at % 8


def _where_class(
    at: int, raw: bytes | bytearray, ents: list[tuple[int, int, int, int, int]], s: int
) -> str:
    """ANY where a flipped byte ``at`` leaves the log consistent with its
    summary: a payload, an entry's sector field, a mark's count and unused
    bytes, the super block past its checked fields; REFUSE elsewhere."""
    if at < s:
        return ANY if at >= SUPER.size else REFUSE
    for off, end, _, _, flags in ents:
        if off <= at < end:
            label_end = off + ENTRY.size + struct.unpack_from("<Q", raw, off + 24)[0]
            unread = at < off + 8 or (flags & MARK and (8 <= at - off < 16 or at >= label_end))
            return ANY if at >= off + s or unread else REFUSE
    return REFUSE  # past the last entry: trailing bytes the summary does not count


def _label(raw: bytes | bytearray, e: tuple[int, int, int, int, int], s: int) -> bytes:
    return bytes(raw[e[0] : e[0] + s])


def _flip(d: bytearray, bit: int) -> bytearray:
    if d:
        d[(bit // 8) % len(d)] ^= 1 << (bit % 8)
    return d


def _rebuild(d: bytearray, s: int, ents: list[tuple[int, int, int, int, int]]) -> bytes:
    """The log of these entries (their bytes as they are), the count set."""
    body = b"".join(bytes(d[off:end]) for off, end, *_ in ents)
    sup = bytearray(d[:s])
    _set_u64(sup, 16, len(ents))
    return bytes(sup) + body


def _log_special(rng: random.Random, run: Path) -> Damage:
    """writes.log replaced by a directory, a FIFO or a symbolic link."""
    what = rng.choice(
        ["directory", "fifo", "symlink-out", "symlink-dev", "symlink-in", "symlink-loop"]
    )

    def make(folder: Path) -> list[str]:
        dst = _copy_run(run, folder)
        log = dst / "writes.log"
        if what == "symlink-in":
            os.rename(log, dst / "real.log")
        else:
            log.unlink()
        if what == "directory":
            log.mkdir()
        elif what == "fifo":
            os.mkfifo(log)
        elif what == "symlink-out":
            shutil.copyfile(run / "writes.log", folder / "outside.log")
            log.symlink_to(folder / "outside.log")
        elif what == "symlink-dev":
            log.symlink_to("/dev/zero")
        elif what == "symlink-in":
            log.symlink_to("real.log")
        else:
            log.symlink_to("writes.log")
        return _run_command(seed, dst, folder)

    seed = rng.randrange(1 << 30)
    return Damage("log", f"writes.log a {what}", ANY if what == "symlink-in" else REFUSE, make)


# --- meta.json --------------------------------------------------------------

# keys whose loss changes nothing a check reads or that have a safe default
HARMLESS_LOSS = {
    "backend",
    "backend_choice",
    "kernel",
    "command",
    "interrupted",
    "signal",
    "versions",
    "wall_time_s",
    "started",
    "guest",
    "mount_options",
    "seed",
    "runner",
    "log_order",
    "faults",
    "continues_at",
    "continues",
}
# what only the commands that judge a workload read (check, repro): the
# others (log, states, replay) may accept a folder damaged there
WORKLOAD_KEYS = {"sut", "workload", "db", "exit_status", "faults", "continues_at"}
WRONG = [None, True, 0, -1, 1.5, "x", "", [], [1], {}, {"a": 1}, 10**30, "../../etc/passwd"]


# long: one branch per kind of damage, picked by one seeded draw (the draws' order is the seed's)
def _meta_damages(rng: random.Random, run: Path) -> Damage:
    """One damage of ``run``'s meta.json (the log intact)."""
    text = (run / "meta.json").read_text()
    meta = json.loads(text)
    pick = rng.randrange(10)

    def put(what: str, expect: str, data: bytes, key: str = "") -> Damage:
        def make(folder: Path) -> list[str]:
            dst = _copy_run(run, folder)
            (dst / "meta.json").write_bytes(data)
            return _run_command(seed, dst, folder, check_only=key in WORKLOAD_KEYS)

        seed = rng.randrange(1 << 30)
        return Damage("meta", what, expect, make)

    def as_json(m: object) -> bytes:
        return json.dumps(m).encode()

    if pick == 0:
        cut = rng.randrange(len(text))
        return put(f"cut at character {cut}", REFUSE, text[:cut].encode())
    if pick == 1:
        at = rng.randrange(len(text))
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])
        return put(
            f"byte {at} made {bad!r}", REFUSE, text.encode()[:at] + bad + text.encode()[at + 1 :]
        )
    if pick == 2:
        v = rng.choice([[], [meta], 0, "meta", None, True, 1e309])
        return put(f"not an object: {json.dumps(v)[:20]}", REFUSE, as_json(v))
    if pick == 3:  # a key of the wrong type
        key = rng.choice(sorted(meta))
        v = rng.choice([w for w in WRONG if type(w) is not type(meta[key])])
        allowed = _type_ok(key, v)
        m = {**meta, key: v}
        return put(f"{key} = {json.dumps(v)[:30]}", ANY if allowed else REFUSE, as_json(m), key)
    if pick == 4:  # a key removed
        key = rng.choice(sorted(meta))
        m = {k: v for k, v in meta.items() if k != key}
        return put(f"{key} removed", ANY if key in HARMLESS_LOSS else REFUSE, as_json(m), key)
    if pick == 5:  # a count in the log summary or a mark changed
        m = json.loads(text)
        key = rng.choice(
            [
                "entries",
                "writes",
                "bytes_written",
                "flushes",
                "fua",
                "discards",
                "epochs",
                "nr_entries_super",
                "sectorsize",
                "salvaged",
                "metadata",
                "marks",
                "top-marks",
            ]
        )
        if key == "top-marks":
            m["marks"] = m["marks"][:-1] if rng.random() < 0.5 else m["marks"] + ["txn-ack:99"]
        elif key == "marks":
            m["log"]["marks"] = m["log"]["marks"][1:]
        else:
            m["log"][key] += rng.choice([-1, 1, 1000])
        return put(f"log summary {key} changed", REFUSE, as_json(m))
    if pick == 6:  # paths that escape
        key, v = rng.choice(
            [
                ("db", "/etc/passwd"),
                ("db", "../../../etc/shadow"),
                ("db", "a/../../b"),
                ("db", ""),
                ("db", "/"),
                ("db", "x\u0000y"),
                ("image.path", "/dev/zero"),
                ("image.path", "/etc/passwd"),
                ("image.path", "../../x"),
                ("continues.run", "/etc"),
                ("image.path", "/proc/self/mem"),
            ]
        )
        m = json.loads(text)
        if key == "db":
            m["db"] = v
            expect = REFUSE
        elif key == "image.path":
            m["image"]["path"] = v
            expect = ANY  # never read there: the project's image, by digest
        else:
            m["continues"] = {"run": v, "state": "e1.p0", "kind": "multicrash"}
            expect = ANY
        return put(f"{key} = {v!r}", expect, as_json(m))
    if pick == 7:  # absurd values
        key, v, expect = rng.choice(
            [
                ("fs", "zfs", REFUSE),
                ("log_order", "sideways", REFUSE),
                ("sut", "nope", REFUSE),
                ("workload", "insert:txns=-1", REFUSE),
                ("workload", "garbage", REFUSE),
                ("exit_status", 255, ANY),
                ("seed", -1, ANY),
                ("continues_at", 10**30, ANY),
                ("faults", ["bogus"], REFUSE),
                ("faults", ["corrupt,seed=1"], ANY),
                ("wall_time_s", 1e308, ANY),
                ("image", {"fs": "ext4", "path": "x", "sha256": "0" * 64}, REFUSE),
                ("nvram", {"offset": -1, "bytes": 1 << 40}, REFUSE),
                ("nvram", {"offset": 0}, REFUSE),
                ("workload", "insert:txns=100000000", ANY),
                ("workload", "insert:txns=10**9", REFUSE),
            ]
        )
        m = {**meta, key: v}
        return put(f"{key} = {json.dumps(v)[:30]}", expect, as_json(m), key)
    if pick == 8:  # nested wrong types
        m = json.loads(text)
        where, v = rng.choice(
            [
                ("image", {"fs": 1, "path": "x", "sha256": "y"}),
                ("image", {"fs": "ext4"}),
                ("image", {"extra": 1}),
                ("log", {"entries": "many"}),
                ("log", {"error": "x"}),
                ("continues", {"run": "r"}),
                ("versions", {"a": 1}),
                ("marks", [1, 2]),
                ("command", "ls"),
            ]
        )
        m[where] = v
        return put(f"{where} = {json.dumps(v)[:30]}", REFUSE, as_json(m))
    # deep nesting / huge
    v = rng.choice(["[" * 100000 + "]" * 100000, '{"a":' * 50000 + "1" + "}" * 50000])
    return put("deeply nested JSON", REFUSE, v.encode())


# meta.json's keys and their JSON types (as the recorder writes them)
META_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(
        ("fs", "backend", "backend_choice", "log_order", "kernel", "started", "mount_options"),
        (str,),
    ),
    **dict.fromkeys(("signal", "interrupted", "sut", "workload", "db"), (str, type(None))),
    **dict.fromkeys(("exit_status", "seed", "continues_at"), (int, type(None))),
    "wall_time_s": (int, float),
    "command": (list,),
    "marks": (list,),
    "faults": (list,),
    "versions": (dict,),
    "log": (dict,),
    "image": (dict,),
    **dict.fromkeys(("guest", "runner", "continues"), (dict, type(None))),
}


def _type_ok(key: str, v: object) -> bool:
    """Whether ``v`` has the JSON type of meta.json's ``key`` (a value of
    another type must be refused; one of the type may be checked)."""
    types = META_TYPES.get(key)
    if types is None:
        return True  # a key of someone else's: kept, never read
    if isinstance(v, bool) and bool not in types:
        return False
    if isinstance(v, list) and v:
        return False  # lists of strings only; WRONG's lists hold a number
    if isinstance(v, dict) and key in ("versions", "log", "image", "continues"):
        return not v and key == "versions"
    return isinstance(v, types)
