"""The workloads the built-in matrices run, by the names a matrix file may
use for them (``workload = "MULTI"``)."""

from __future__ import annotations

# Mobibench's shape: one statement on each of 3 tables per transaction, so a
# transaction dirties several pages (what atomicity needs to be tested).  The
# warm-up rows matter: in a tiny database a transaction's dirty pages are
# adjacent, ext4 writes them back as one bio, and one logged write is never
# split by reordering (only by tearing).
MULTI = "insert:txns=10,ops=3,tables=3,warmup=100,seed=1"
SINGLE = "insert:txns=10,ops=1,tables=1,seed=1"
UPDATE = "update:txns=10,ops=3,tables=3,warmup=60,seed=1"
DELETE = "delete:txns=10,ops=3,tables=3,warmup=60,seed=1"
# DHL: 400-byte values, two per tree per transaction on 3 trees, so every
# transaction rewrites >= 3 leaves (plus the header page unless embedded) and
# the measured transactions split pages: 6 new pages in insert and update
# (dhl-cc, page count after txn 1 vs txn 10); delete frees space, no splits.
DHL_INSERT = "insert:txns=10,ops=6,tables=3,size=400,warmup=20,seed=1"
DHL_UPDATE = "update:txns=10,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
DHL_DELETE = "delete:txns=10,ops=6,tables=3,size=400,order=rand,warmup=30,seed=1"
# Enough 2 KB rows to fill the 96 KiB an enospc fault leaves (harness/faults.py):
# SQLite DELETE+EXTRA stops at about transaction 32, WAL earlier.
FILL = "insert:txns=60,size=2000,seed=1"
# Shapes the seed systems' mechanisms depend on (harness/sweep/matrices/
# default.toml says which cell runs which): single-operation transactions
# (SINGLE above: one row, one leaf page), and BIG: transactions of 40 rows
# of 3,000 bytes, one leaf page each, so a transaction is ~42 pages and
# ~120 KB of operations — past WALDIO's one aligned write (31 blocks: the
# unix VFS writes below 128 KiB per call, workloads/runner/waldiovfs.c).
BIG = "insert:txns=3,ops=40,size=3000,tables=1,seed=1"
# the names a matrix file may use for them
BUILTIN_WORKLOADS = {
    "MULTI": MULTI,
    "SINGLE": SINGLE,
    "BIG": BIG,
    "UPDATE": UPDATE,
    "DELETE": DELETE,
    "DHL_INSERT": DHL_INSERT,
    "DHL_UPDATE": DHL_UPDATE,
    "DHL_DELETE": DHL_DELETE,
    "FILL": FILL,
}
