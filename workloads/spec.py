"""Workload specs: what a run executes, as frozen values with a compact text
form usable on the command line and stored in a run's ``meta.json``.

Grammar (no spaces; keys in any order, each at most once)::

    SPEC   := KIND [":" PARAMS]          KIND := insert | update | delete
            | "app:" APP ["," PARAMS]    APP  := gmail | facebook | hangout | kakaotalk
    PARAMS := KEY "=" VALUE ("," KEY "=" VALUE)*

Mobibench-like keys (``insert``/``update``/``delete``):
  txns (1..10^7, default 100), ops (operations per transaction, 1..4096, default 1),
  size (value bytes, 1..1048576, default 100), order (seq|rand, default seq),
  tables (1..64, default 3), warmup (rows per table inserted before the
  ``setup-done`` mark; default 0 for insert, 300 for update -- Mobibench
  pre-fills at least 296 rows -- and for delete the larger of 300 and the
  deletes that land on one table), seed (>=0, default 1).
App keys: txns, warmup (default 200), seed.

``str(spec)`` is the canonical form (every key, fixed order); parsing it gives
back an equal spec.  Generation from a spec is in :mod:`workloads.generate`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from harness.errors import CrashlabError

KINDS = ("insert", "update", "delete")
APPS = ("gmail", "facebook", "hangout", "kakaotalk")
ORDERS = ("seq", "rand")
MAX_OPS = 4096
MAX_SIZE = 1 << 20
MAX_TABLES = 64
MAX_COUNT = 10_000_000  # txns and warm-up rows (the op stream counts in u32)
# Mobibench pre-fills at least 296 rows per table before update/delete runs.
DEFAULT_PREFILL = 300


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class MobibenchSpec:
    """Mobibench-shaped insert/update/delete: ``txns`` transactions of ``ops``
    operations each; operation g (counted over the whole run) goes to table
    ``g % tables``."""

    kind: str
    txns: int = 100
    ops: int = 1
    size: int = 100
    order: str = "seq"
    tables: int = 3
    warmup: int | None = None  # resolved to an int in __post_init__
    seed: int = 1

    def __post_init__(self) -> None:
        _choice("kind", self.kind, KINDS)
        _choice("order", self.order, ORDERS)
        _range("txns", self.txns, 1, MAX_COUNT)
        _range("ops", self.ops, 1, MAX_OPS)
        _range("size", self.size, 1, MAX_SIZE)
        _range("tables", self.tables, 1, MAX_TABLES)
        _range("seed", self.seed, 0, None)
        per_table = self.max_ops_per_table
        if self.warmup is None:
            default = {
                "insert": 0,
                "update": DEFAULT_PREFILL,
                "delete": max(DEFAULT_PREFILL, per_table),
            }[self.kind]
            object.__setattr__(self, "warmup", default)
        _range("warmup", self.warmup, 0, MAX_COUNT)
        warmup = self.warmup_rows
        if self.kind == "update" and warmup < 1:
            raise CrashlabError("update workload needs warmup>=1 (rows to update)")
        if self.kind == "delete" and warmup < per_table:
            raise CrashlabError(
                f"delete workload deletes up to {per_table} rows per table: "
                f"needs warmup>={per_table}"
            )

    @property
    def warmup_rows(self) -> int:
        """The warm-up rows per table: ``warmup`` as ``__post_init__`` resolved
        it (only a constructor argument may be None, never the stored value)."""
        if self.warmup is None:
            raise AssertionError("warmup is resolved in __post_init__")
        return self.warmup

    @property
    def max_ops_per_table(self) -> int:
        return _ceil_div(self.txns * self.ops, self.tables)

    @property
    def ntables(self) -> int:
        return self.tables

    def __str__(self) -> str:
        keys = ("txns", "ops", "size", "order", "tables", "warmup", "seed")
        return f"{self.kind}:" + ",".join(f"{k}={getattr(self, k)}" for k in keys)


@dataclass(frozen=True)
class AppSpec:
    """A synthetic app profile (see :mod:`workloads.apps`): its shape matches
    the published statistics of the DHL thesis's traces, not the traces."""

    app: str
    txns: int = 100
    warmup: int = 200
    seed: int = 1

    def __post_init__(self) -> None:
        _choice("app", self.app, APPS)
        _range("txns", self.txns, 1, MAX_COUNT)
        _range("warmup", self.warmup, 0, MAX_COUNT)
        _range("seed", self.seed, 0, None)

    @property
    def kind(self) -> str:
        return "app"

    @property
    def ntables(self) -> int:
        from workloads.apps import PROFILES

        return PROFILES[self.app].tables

    def __str__(self) -> str:
        return f"app:{self.app},txns={self.txns},warmup={self.warmup},seed={self.seed}"


WorkloadSpec = MobibenchSpec | AppSpec

_MOBI_KEYS = tuple(f.name for f in fields(MobibenchSpec) if f.name != "kind")
_APP_KEYS = tuple(f.name for f in fields(AppSpec) if f.name != "app")
_STR_KEYS = ("order",)


def _choice(key: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise CrashlabError(f"bad {key} {value!r} (choose from {', '.join(choices)})")


def _range(key: str, value: object, lo: int, hi: int | None) -> None:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < lo
        or (hi is not None and value > hi)
    ):
        bound = f"{lo}..{hi}" if hi is not None else f">={lo}"
        raise CrashlabError(f"bad {key} {value!r} (an integer {bound})")


def _params(text: str, valid: tuple[str, ...], spec: str) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    if not text:
        return out
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise CrashlabError(
                f"malformed workload spec {spec!r}: {item!r} is not KEY=VALUE "
                f"(keys: {', '.join(valid)})"
            )
        if key not in valid:
            raise CrashlabError(
                f"unknown key {key!r} in workload spec {spec!r} (choose from {', '.join(valid)})"
            )
        if key in out:
            raise CrashlabError(f"key {key!r} given twice in workload spec {spec!r}")
        if key in _STR_KEYS:
            out[key] = value
        else:
            try:
                out[key] = int(value, 10)
            except ValueError:
                raise CrashlabError(
                    f"bad {key} {value!r} in workload spec {spec!r} (an integer)"
                ) from None
    return out


def parse_spec(text: str) -> WorkloadSpec:
    """Parse the compact form (see the module comment); CrashlabError names
    the valid choices for whatever is wrong."""
    text = text.strip()
    head, _, rest = text.partition(":")
    if head in KINDS:
        return MobibenchSpec(kind=head, **_params(rest, _MOBI_KEYS, text))  # type: ignore[arg-type]  # values typed per key at run time (__post_init__)
    if head == "app":
        app, _, params = rest.partition(",")
        if app not in APPS:
            raise CrashlabError(
                f"unknown app {app!r} in workload spec {text!r} (choose from {', '.join(APPS)})"
            )
        return AppSpec(app=app, **_params(params, _APP_KEYS, text))  # type: ignore[arg-type]  # values typed per key at run time (__post_init__)
    raise CrashlabError(
        f"unknown workload kind {head!r} in {text!r} (choose from "
        f"{', '.join(KINDS)}, app:{'|'.join(APPS)})"
    )
