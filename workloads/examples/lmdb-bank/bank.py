"""A bank on LMDB (the `lmdb` binding bundles the C library): five accounts
of 100, then seeded random transfers, one write transaction each.  Every
transaction also stores its number (`seq`), and is marked for crashlab:
`txn-begin:K;from=A;to=B;amount=N` before it, `txn-ack:K` once commit()
returned.

    bank.py [--nosync | --nometasync] [--transfers N]

--nosync and --nometasync open the environment with LMDB's sync=False /
metasync=False, which its documentation says may lose the last committed
transactions (and, for sync=False, the database's integrity) after a system
crash."""

import argparse
import os
import random

import lmdb

ACCOUNTS = [b"alice", b"bob", b"carol", b"dave", b"erin"]


def mark(label: str) -> None:
    with open(os.environ["CRASHLAB_MARK"], "a") as f:
        f.write(label + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nosync", action="store_true")
    ap.add_argument("--nometasync", action="store_true")
    ap.add_argument("--transfers", type=int, default=8)
    args = ap.parse_args()
    env = lmdb.open(
        "bank.lmdb", map_size=1 << 20, sync=not args.nosync, metasync=not args.nometasync
    )
    with env.begin(write=True) as txn:
        for a in ACCOUNTS:
            txn.put(a, b"100")
        txn.put(b"seq", b"0")
    env.sync(True)
    mark("setup-done")
    rng = random.Random(7)
    for k in range(1, args.transfers + 1):
        src, dst = rng.sample(ACCOUNTS, 2)
        amount = rng.randint(1, 40)
        mark(f"txn-begin:{k};from={src.decode()};to={dst.decode()};amount={amount}")
        with env.begin(write=True) as txn:
            txn.put(src, str(int(txn.get(src)) - amount).encode())
            txn.put(dst, str(int(txn.get(dst)) + amount).encode())
            txn.put(b"seq", str(k).encode())
        mark(f"txn-ack:{k}")
    env.close()


if __name__ == "__main__":
    main()
