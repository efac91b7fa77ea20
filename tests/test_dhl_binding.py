"""DHL engine through the Python binding: a Hypothesis state machine against
a dict model in every mode, the digest cross-checked with xxhash, measured
I/O per transaction, page introspection, bad input and the dhl command."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dhl import MODES, Database, DhlError, valid_slot
from dhl.binding import library_path

pytestmark = pytest.mark.skipif(
    not library_path().exists(), reason="libdhl.so not built (make build)"
)

REPO = Path(__file__).resolve().parent.parent


def oracle_digest(records: dict[tuple[int, int], bytes]) -> str:
    total = 0
    for (t, k), v in records.items():
        data = t.to_bytes(4, "little") + k.to_bytes(8, "little", signed=True) + v
        total = (total + xxhash.xxh3_128_intdigest(data)) % (1 << 128)
    return f"{total:032x}"


def test_digest_matches_xxhash_on_random_records(tmp_path):
    rng = random.Random(4)
    model: dict[tuple[int, int], bytes] = {}
    with Database(tmp_path / "d.dhl", "cc", create=True, ntrees=3) as db:
        assert db.digest() == "0" * 32
        for _ in range(500):
            t, k = rng.randrange(3), rng.randrange(-(2**63), 2**63)
            v = rng.randbytes(rng.randrange(0, 1000))
            if (t, k) not in model:
                db.insert(t, k, v)
                model[(t, k)] = v
        assert db.digest() == oracle_digest(model)


KEYS = st.integers(min_value=-50, max_value=200)
VALUES = st.binary(min_size=0, max_size=300)


# long: the state machine class, one rule per operation of the engine
def machine_for(mode: str, page_size: int) -> type[RuleBasedStateMachine]:
    class DhlVsDict(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"dhl-hyp-{os.getpid()}"
            self.dir.mkdir(exist_ok=True)
            self.path = self.dir / f"{mode}-{page_size}.dhl"
            self.db = Database(
                self.path, mode, create=True, truncate=True, ntrees=3, page_size=page_size
            )
            self.model: dict[tuple[int, int], bytes] = {}
            self.pending: dict[tuple[int, int], bytes] | None = None

        def cur(self) -> dict[tuple[int, int], bytes]:
            return self.pending if self.pending is not None else self.model

        @rule(t=st.integers(0, 2), k=KEYS, v=VALUES)
        def insert(self, t, k, v):
            if (t, k) in self.cur():
                with pytest.raises(DhlError, match="DHL_EEXISTS"):
                    self.db.insert(t, k, v)
            else:
                self.db.insert(t, k, v)
                self.cur()[(t, k)] = v

        @rule(t=st.integers(0, 2), k=KEYS, v=VALUES)
        def update(self, t, k, v):
            if (t, k) in self.cur():
                self.db.update(t, k, v)
                self.cur()[(t, k)] = v
            else:
                with pytest.raises(DhlError, match="DHL_ENOTFOUND"):
                    self.db.update(t, k, v)

        @rule(t=st.integers(0, 2), k=KEYS)
        def delete(self, t, k):
            if (t, k) in self.cur():
                self.db.delete(t, k)
                del self.cur()[(t, k)]
            else:
                with pytest.raises(DhlError, match="DHL_ENOTFOUND"):
                    self.db.delete(t, k)

        @precondition(lambda self: self.pending is None)
        @rule()
        def begin(self):
            self.db.begin()
            self.pending = dict(self.model)

        @precondition(lambda self: self.pending is not None)
        @rule()
        def commit(self):
            self.db.commit()
            self.model, self.pending = self.pending, None

        @precondition(lambda self: self.pending is not None)
        @rule()
        def rollback(self):
            self.db.rollback()
            self.pending = None

        @precondition(lambda self: self.pending is None)
        @rule()
        def reopen(self):
            self.db.close()
            self.db = Database(self.path, mode)
            self.db.check()

        @invariant()
        def same_content(self):
            cur = self.cur()
            for t in range(3):
                got = self.db.scan(t)
                assert got == sorted((k, v) for (tt, k), v in cur.items() if tt == t)
            if self.pending is None:
                assert self.db.digest() == oracle_digest(cur)

        def teardown(self):
            self.db.close()
            self.path.unlink(missing_ok=True)

    DhlVsDict.__name__ = f"DhlVsDict_{mode}_{page_size}"
    return DhlVsDict


@pytest.mark.parametrize("mode", sorted(MODES))
def test_property_vs_dict_model(mode):
    for ps in (512, 4096):
        m = machine_for(mode, ps)
        m.TestCase.settings = settings(
            max_examples=12,
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        m.TestCase().runTest()


def one_insert_io(tmp_path, mode: str) -> tuple[int, int]:
    with Database(tmp_path / f"{mode}.dhl", mode, create=True) as db:
        db.insert(0, 1, b"x" * 100)
        db.reset_counters()
        db.insert(0, 2, b"y" * 100)
        c = db.counters()
        return c.syncs, c.pages_written


def test_syncs_and_pages_per_one_record_insert(tmp_path):
    got = {m: one_insert_io(tmp_path, m) for m in ("tc", "cc", "tc_opt", "cc_opt", "nolog")}
    assert got["cc"][0] == 1 and got["tc"][0] == 2
    assert got["cc_opt"][1] == 1 and got["cc"][1] == 2
    assert got["tc_opt"] == (1, 1) and got["nolog"] == (1, 1)


def test_page_introspection_and_read_rule(tmp_path):
    p = tmp_path / "i.dhl"
    with Database(p, "cc", create=True) as db:
        db.insert(0, 1, b"a" * 10)  # txn 2 creates the leaf (slot 0)
        db.insert(0, 2, b"b" * 10)  # txn 3 writes slot 1
        db.update(0, 1, b"c" * 10)  # txn 4 overwrites slot 0 (TID 2 < 3)
        info = db.info()
        root = info.roots[0]
        pg = db.page(root)
        assert pg.is_data and info.fcc == 4 and info.txn_size == 2
        assert [s.tid for s in pg.slots] == [4, 3] and pg.valid_slot == 0
        assert pg.slots[0].nrec == 2 and len(pg.slots[0].offsets) == 2
        assert min(pg.slots[0].offsets) == pg.slots[0].free_off
        # the committed slot of TID 3 still points at the old version of key 1
        raw = db.read_page(root)
        old = pg.slots[1].offsets[0]
        assert raw[old + 10 : old + 20] == b"a" * 10
        hdr = db.page(0)
        assert not hdr.is_data and hdr.slots[hdr.valid_slot].commit == 2
    assert valid_slot(3, 4, 3) == 0 and valid_slot(3, 4, 4) == 1
    assert valid_slot(0, 4, 3) == -1 and valid_slot(0, 2, 3) == 1


def test_bad_input_gives_clear_errors(tmp_path):
    p = tmp_path / "not.dhl"
    p.write_bytes(b"SQLite format 3\0" + bytes(4080))
    with pytest.raises(DhlError, match="DHL_ENOTDHL.*not a DHL database"):
        Database(p)
    good = tmp_path / "good.dhl"
    with Database(good, "tc", create=True, page_size=1024) as db:
        for k in range(100):
            db.insert(0, k, b"v" * 60)
        with pytest.raises(DhlError, match="DHL_EINVAL.*larger"):
            db.insert(0, 1000, bytes(2000))
    with pytest.raises(DhlError, match="DHL_EPAGESIZE"):
        Database(good, "tc", page_size=4096)
    with pytest.raises(DhlError, match="DHL_EMODE"):
        Database(good, "nolog")
    data = good.read_bytes()
    trunc = tmp_path / "trunc.dhl"
    trunc.write_bytes(data[: 2 * 1024])
    with pytest.raises(DhlError, match="DHL_ETRUNC"):
        Database(trunc)
    bad = bytearray(data)
    for pg in range(1, len(data) // 1024):  # every offset of every page: past the end
        for i in range(8):
            o = pg * 1024 + 24 + 4 * i
            bad[o : o + 4] = (1020).to_bytes(2, "little") * 2
    (tmp_path / "bad.dhl").write_bytes(bytes(bad))
    with pytest.raises(DhlError, match="DHL_ECORRUPT.*page"):
        with Database(tmp_path / "bad.dhl") as db:
            db.check()
    with pytest.raises(DhlError, match="DHL_EIO.*cannot open"):
        Database(tmp_path / "absent.dhl")


def test_fuzz_random_page_bytes_bounded(tmp_path):
    """Random bytes over pages of a real database: open/check/digest either
    work or raise DhlError with a code; never crash the interpreter."""
    rng = random.Random(7)
    base = tmp_path / "base.dhl"
    with Database(base, "cc_opt", create=True, page_size=512, ntrees=2) as db:
        for k in range(300):
            db.insert(k % 2, rng.randrange(10**6), rng.randbytes(rng.randrange(100)))
    data = base.read_bytes()
    codes: dict[str, int] = {}
    target = tmp_path / "f.dhl"
    for _ in range(300):
        b = bytearray(data)
        pg = rng.randrange(len(b) // 512)
        for _ in range(rng.randrange(1, 20)):
            b[pg * 512 + rng.randrange(512)] = rng.randrange(256)
        target.write_bytes(bytes(b))
        try:
            with Database(target, "cc_opt") as db:
                db.check()
                db.digest()
            codes["ok"] = codes.get("ok", 0) + 1
        except DhlError as e:
            assert str(e).split(":", 1)[1].strip(), "an error must say why"
            codes[e.code] = codes.get(e.code, 0) + 1
    assert codes.get("ok", 0) > 0 and len(codes) > 1


def test_dhl_command(tmp_path):
    p = tmp_path / "c.dhl"
    with Database(p, "cc", create=True, ntrees=2) as db:
        for k in range(50):
            db.insert(k % 2, k, b"z" * 100)
        want = db.digest()
    exe = [sys.executable, "-c", "from dhl.cli import main; main()"]
    run = lambda *a: subprocess.run(exe + list(a), capture_output=True, text=True)  # noqa: E731
    r = run("digest", str(p))
    assert r.returncode == 0 and r.stdout.strip() == want
    r = run("dump", str(p))
    assert r.returncode == 0 and "FCC 51" in r.stdout and "page     1:" in r.stdout
    r = run("check", str(p))
    assert r.returncode == 0 and "tree 1: 25 records" in r.stdout
    r = run("recover", str(p))
    assert r.returncode == 0 and "invalidated 0" in r.stdout
    (tmp_path / "x").write_bytes(b"hello" * 1000)
    r = run("check", str(tmp_path / "x"))
    assert r.returncode == 2 and r.stderr.startswith("dhl: error: DHL_ENOTDHL")
