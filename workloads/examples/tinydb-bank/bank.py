"""A bank on TinyDB (tinydb on PyPI, its default JSONStorage): five accounts
of 100 (each with a 1 KiB memo, so the file spans several blocks) and a
`seq` document, then seeded random transfers, each ONE update of the table
(one write of the storage: the source, the destination and `seq` at once).
Marked for crashlab: `txn-begin:K;from=A;to=B;amount=N` before it,
`txn-ack:K` once it returned.

    bank.py [--transfers N]

TinyDB promises no crash safety: JSONStorage.write (tinydb 4.9.0,
storages.py) rewrites the whole JSON file in place (seek 0, write, flush,
fsync, then truncate, the truncation never synced), so a power loss during
a write can leave a mix of the old and new file, or the old tail after a
shorter new one."""

import argparse
import functools
import os
import random

from tinydb import TinyDB

ACCOUNTS = ["alice", "bob", "carol", "dave", "erin"]


def mark(label: str) -> None:
    with open(os.environ["CRASHLAB_MARK"], "a") as f:
        f.write(label + "\n")


def transfer(doc: dict, k: int, src: str, dst: str, amount: int) -> None:
    """Transfer ``k`` on one of the documents it changes."""
    if doc["name"] == "seq":
        doc["value"] = k
    else:
        doc["balance"] += -amount if doc["name"] == src else amount


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfers", type=int, default=4)
    args = ap.parse_args()
    db = TinyDB("bank.json")
    ids = {a: db.insert({"name": a, "balance": 100, "memo": a[0] * 1024}) for a in ACCOUNTS}
    ids["seq"] = db.insert({"name": "seq", "value": 0})
    mark("setup-done")
    rng = random.Random(7)
    for k in range(1, args.transfers + 1):
        src, dst = rng.sample(ACCOUNTS, 2)
        amount = rng.randint(1, 40)
        mark(f"txn-begin:{k};from={src};to={dst};amount={amount}")
        update = functools.partial(transfer, k=k, src=src, dst=dst, amount=amount)
        db.update(update, doc_ids=[ids[src], ids[dst], ids["seq"]])
        mark(f"txn-ack:{k}")
    db.close()


if __name__ == "__main__":
    main()
