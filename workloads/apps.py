"""Synthetic app profiles shaped like the mobile-app SQL traces of the DHL
thesis (its Fig. 1 and section IV).  The traces are not public: these are
synthetic profiles that match the published shape, NOT the traces.

Published shape (DHL thesis), what each profile reproduces:

* Gmail: more than 60% multi-operation transactions (one e-mail touches
  several tables in one transaction), only about 20% single write
  transactions, 21.9 operations per transaction on average.
* Facebook: about 70% single selects (auto-commit), 2.98 ops per transaction.
* Hangout: about 50% single selects, about 20% single updates, 3.99 ops/txn.
* KakaoTalk: more than 50% single updates (auto-commit), 1.76 ops/txn.

The percentages are read as fractions of transactions.  A multi-operation
transaction draws its size uniformly from ``multi_ops``; the range is chosen so
that the expected operations per transaction equal the published figure (the
tests check the realised mean).  Not modelled: the apps' frequent close/reopen
(which checkpoints a WAL), and the traces' real schemas and key skew.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppProfile:
    name: str
    tables: int
    # Fractions of transactions; multi-operation transactions are the rest.
    single_select: float
    single_update: float
    single_insert: float
    multi_ops: tuple[int, int]  # inclusive range of a multi-op transaction's size
    # Weights of insert, update, delete, select inside a multi-op transaction.
    multi_mix: tuple[float, float, float, float]
    size: tuple[int, int]  # inclusive range of value sizes in bytes
    published_ops_per_txn: float

    @property
    def multi(self) -> float:
        return 1.0 - self.single_select - self.single_update - self.single_insert

    @property
    def expected_ops_per_txn(self) -> float:
        lo, hi = self.multi_ops
        return (1.0 - self.multi) + self.multi * (lo + hi) / 2


PROFILES: dict[str, AppProfile] = {
    # 0.38 * 1 + 0.62 * 34.5 = 21.8
    "gmail": AppProfile(
        "gmail", 5, 0.18, 0.10, 0.10, (2, 67), (0.55, 0.20, 0.05, 0.20), (64, 1024), 21.9
    ),
    # 0.85 * 1 + 0.15 * 14 = 2.95
    "facebook": AppProfile(
        "facebook", 3, 0.70, 0.08, 0.07, (2, 26), (0.40, 0.30, 0.05, 0.25), (32, 256), 2.98
    ),
    # 0.75 * 1 + 0.25 * 13 = 4.0
    "hangout": AppProfile(
        "hangout", 3, 0.50, 0.20, 0.05, (2, 24), (0.40, 0.35, 0.05, 0.20), (32, 256), 3.99
    ),
    # 0.85 * 1 + 0.15 * 6 = 1.75
    "kakaotalk": AppProfile(
        "kakaotalk", 2, 0.15, 0.55, 0.15, (2, 10), (0.45, 0.35, 0.05, 0.15), (32, 256), 1.76
    ),
}
