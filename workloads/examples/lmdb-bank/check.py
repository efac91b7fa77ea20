"""crashlab checker for bank.py: the recovered database opens, holds the
balances after exactly its `seq` transfers (replayed from the txn-begin
marks' payloads: no partial transfer, money neither made nor lost), and
`seq` is no older than the state's `acked` (the last transfer
acknowledged before the crash).

`check(files, state)` is what crashlab.toml names (`py:check.py:check`:
loaded once per worker); run as a script it is the per-state command form
(exit 0 holds, 1 violated, stdout says why)."""

import json
import os
import sys
from pathlib import Path
from typing import Any

import lmdb

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]


def _read(path: Path) -> tuple[dict[str, int], int]:
    """The balances and `seq`; the environment closed again (LMDB allows
    one open environment per file in a process)."""
    env = lmdb.open(str(path), map_size=1 << 20)
    try:
        with env.begin() as txn:
            return {a: int(txn.get(a.encode())) for a in ACCOUNTS}, int(txn.get(b"seq"))
    finally:
        env.close()


def check(files: Path, state: dict[str, Any]) -> str | None:
    """None: the state holds; else why it is violated."""
    marks = state["marks"]["before"] + state["marks"]["maybe"]
    transfers = {
        int(m["name"].split(":")[1]): m["payload"]
        for m in marks
        if m["name"].startswith("txn-begin:")
    }
    acked = state["acked"]  # the last transfer acknowledged before the crash
    set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])
    if not (files / "bank.lmdb").exists():
        # the creation window: nothing was promised yet
        return None if not set_up else "the database is gone"
    try:
        got, seq = _read(files / "bank.lmdb")
    except (lmdb.Error, TypeError, ValueError) as e:
        if not set_up:  # accounts not all written before the set-up's end
            return None
        return f"the database does not open or read: {type(e).__name__}: {e}"
    want = dict.fromkeys(ACCOUNTS, 100)
    for k in range(1, seq + 1):
        if k not in transfers:
            return f"seq is {seq} but transfer {k} was never begun"
        t = transfers[k]
        want[t["from"]] -= int(t["amount"])
        want[t["to"]] += int(t["amount"])
    if got != want:
        total = sum(got.values())
        return f"after {seq} transfers the balances are {got}, expected {want} (sum {total})"
    if seq < acked:
        return f"the database holds {seq} transfers, but transfer {acked} was acknowledged"
    return None


if __name__ == "__main__":
    with open(os.environ["CRASHLAB_STATE_JSON"]) as f:
        why = check(Path.cwd(), json.load(f))
    print(why or "balances consistent")
    sys.exit(1 if why else 0)
