"""crashlab checker for bank.py: the recovered database opens, holds the
balances after exactly its `seq` transfers (replayed from the txn-begin
marks' payloads: no partial transfer, money neither made nor lost), and
`seq` is no older than the state's `acked` (the last transfer
acknowledged before the crash).  Exit 0 holds, 1 violated (stdout says
why)."""

import json
import os
import sys

import lmdb

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]

state = json.load(open(os.environ["CRASHLAB_STATE_JSON"]))
marks = state["marks"]["before"] + state["marks"]["maybe"]
transfers = {
    int(m["name"].split(":")[1]): m["payload"] for m in marks if m["name"].startswith("txn-begin:")
}
acked = state["acked"]  # the last transfer acknowledged before the crash
set_up = any(m["name"] == "setup-done" for m in state["marks"]["before"])


def fail(why: str) -> None:
    print(why)
    sys.exit(1)


if not os.path.exists("bank.lmdb"):
    if not set_up:  # the creation window: nothing was promised yet
        print("not set up yet")
        sys.exit(0)
    fail("the database is gone")
try:
    env = lmdb.open("bank.lmdb", map_size=1 << 20)
    with env.begin() as txn:
        got = {a: int(txn.get(a.encode())) for a in ACCOUNTS}
        seq = int(txn.get(b"seq"))
except (lmdb.Error, TypeError, ValueError) as e:
    if not set_up:  # accounts not all written before the set-up's end
        print("not set up yet")
        sys.exit(0)
    fail(f"the database does not open or read: {type(e).__name__}: {e}")
want = dict.fromkeys(ACCOUNTS, 100)
for k in range(1, seq + 1):
    if k not in transfers:
        fail(f"seq is {seq} but transfer {k} was never begun")
    t = transfers[k]
    want[t["from"]] -= int(t["amount"])
    want[t["to"]] += int(t["amount"])
if got != want:
    fail(f"after {seq} transfers the balances are {got}, expected {want} (sum {sum(got.values())})")
if seq < acked:
    fail(f"the database holds {seq} transfers, but transfer {acked} was acknowledged")
print(f"{seq} transfers, balances consistent (acknowledged: {acked})")
