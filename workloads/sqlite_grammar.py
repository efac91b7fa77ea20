"""SQLite as a SUT name grammar: the configuration a name spells, its
canonical name and its runner options (the guarantees derived from it are
workloads/sqlite_rules.py's).

    NAME := "sqlite:" KEY "=" VALUE ("," KEY "=" VALUE)*

    journal   delete, truncate, persist, wal, memory, off   (required)
    sync      off, normal, full, extra                      (required)
    page      a power of two, 512..65536                    default 4096
    autockpt  pages between automatic checkpoints, 0: none  default 1000   (wal only)
    locking   normal, exclusive                             default normal
    jlimit    bytes a kept journal is cut to, -1: no limit  default -1     (persist, wal,
              or delete with locking=exclusive: a journal that outlives its transaction)
    walopt    N frames: the WAL pre-allocated to N frames and autockpt=N   (wal only; not
              with autockpt or jlimit)
    onerror   stop, retry: after a failed transaction the application    default stop
              stops, or runs the transaction once more
    syncretry 0, 1: 1 retries a failed fsync and reports the retry's     default 0
              success (the fsyncgate bug, on purpose: never do this)
    cksum     0, 1: page checksums through crashlab's checksum VFS       default 0
    waldio    N frames: WALDIO, the WAL written with direct I/O through crashlab's
              WALDIO VFS, pre-allocated to N frames, autockpt=N   (wal only, page 4096;
              not with walopt, autockpt, jlimit or cksum)

workloads/README.md maps each key to its runner option.
Values are case-insensitive and keys may come in any order; the *canonical*
name (``SqliteConfig.name``) has the keys in the table's order, lowercase
values and every default left out: ``sqlite:journal=truncate,sync=normal``.
The defaults are SQLite's own (this build: DEFAULT_WAL_AUTOCHECKPOINT=1000,
DEFAULT_JOURNAL_SIZE_LIMIT=-1, locking NORMAL); the runner sets each pragma
explicitly, so they do not depend on how SQLite was compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import CrashlabError

JOURNALS = ("delete", "truncate", "persist", "wal", "memory", "off")
SYNCS = ("off", "normal", "full", "extra")
LOCKINGS = ("normal", "exclusive")
KEYS = (
    "journal",
    "sync",
    "page",
    "autockpt",
    "locking",
    "jlimit",
    "walopt",
    "onerror",
    "syncretry",
    "cksum",
    "waldio",
)
ON_ERRORS = ("stop", "retry")
PREFIX = "sqlite:"
DEFAULT_PAGE = 4096
DEFAULT_AUTOCKPT = 1000
DEFAULT_JLIMIT = -1
MAX_INT = 2**31 - 1  # autockpt, jlimit: what the runner's C int holds
MAX_WALOPT = 65536
MAX_WALDIO = 65536
GRAMMAR = (
    "sqlite:journal="
    + "|".join(JOURNALS)
    + ",sync="
    + "|".join(SYNCS)
    + "[,page=512..65536][,autockpt=N][,locking=normal|exclusive][,jlimit=N][,walopt=N]"
    + "[,onerror=stop|retry][,syncretry=0|1][,cksum=0|1][,waldio=N]"
)


class InvalidConfig(CrashlabError):
    """A configuration no SUT name may spell; ``why`` says what is wrong."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(_bad_message(name, why))
        self.why = why


def _bad_message(name: str, why: str) -> str:
    return f"bad SUT {name!r}: {why} (grammar: {GRAMMAR})"


@dataclass(frozen=True)
class SqliteConfig:
    """One SQLite SUT: every configuration is valid (CrashlabError otherwise)."""

    journal: str
    sync: str
    page: int = DEFAULT_PAGE
    autockpt: int = DEFAULT_AUTOCKPT
    locking: str = "normal"
    jlimit: int = DEFAULT_JLIMIT
    walopt: int = 0  # 0: no pre-allocated WAL
    onerror: str = "stop"  # the application after a failed transaction
    syncretry: int = 0  # 1: the fsyncgate bug (see the module comment)
    cksum: int = 0  # 1: 8 reserved bytes per page hold a checksum (workloads/vfs.py)
    waldio: int = 0  # N: WALDIO, the WAL pre-allocated to N frames (workloads/vfs.py)

    def __post_init__(self) -> None:
        if self.walopt > 0 and self.autockpt == DEFAULT_AUTOCKPT:
            object.__setattr__(self, "autockpt", self.walopt)  # walopt's interval
        if self.waldio > 0 and self.autockpt == DEFAULT_AUTOCKPT:
            object.__setattr__(self, "autockpt", self.waldio)  # waldio's likewise
        why = _invalid(self)
        if why:
            raise InvalidConfig(self.name, why)

    @property
    def name(self) -> str:
        """The canonical name: keys in KEYS order, defaults left out."""
        parts = [f"journal={self.journal}", f"sync={self.sync}"]
        if self.page != DEFAULT_PAGE:
            parts.append(f"page={self.page}")
        if self.autockpt != DEFAULT_AUTOCKPT and not self.walopt and not self.waldio:
            parts.append(f"autockpt={self.autockpt}")
        if self.locking != "normal":
            parts.append(f"locking={self.locking}")
        if self.jlimit != DEFAULT_JLIMIT:
            parts.append(f"jlimit={self.jlimit}")
        if self.walopt:
            parts.append(f"walopt={self.walopt}")
        if self.onerror != "stop":
            parts.append(f"onerror={self.onerror}")
        if self.syncretry:
            parts.append("syncretry=1")
        if self.cksum:
            parts.append(f"cksum={self.cksum}")
        if self.waldio:
            parts.append(f"waldio={self.waldio}")
        return PREFIX + ",".join(parts)

    @property
    def journal_persists(self) -> bool:
        """A journal file outlives its transaction (what jlimit limits)."""
        return self.journal in ("persist", "wal") or (
            self.journal == "delete" and self.locking == "exclusive"
        )

    def runner_options(self) -> tuple[tuple[str, str], ...]:
        """crashlab-runner's (--flag, value) pairs; a default is not passed
        (the runner's defaults are the table's)."""
        opts = [
            ("--journal-mode", self.journal.upper()),
            ("--synchronous", self.sync.upper()),
            ("--page-size", str(self.page)),
        ]
        if self.autockpt != DEFAULT_AUTOCKPT:
            opts.append(("--wal-autocheckpoint", str(self.autockpt)))
        if self.locking != "normal":
            opts.append(("--locking-mode", self.locking.upper()))
        if self.jlimit != DEFAULT_JLIMIT:
            opts.append(("--journal-size-limit", str(self.jlimit)))
        if self.walopt:
            opts.append(("--wal-prealloc", str(self.walopt)))
        if self.onerror != "stop":
            opts.append(("--on-error", self.onerror))
        if self.syncretry:
            opts.append(("--sync-retry", ""))  # a flag: no value
        if self.cksum:
            opts.append(("--cksumvfs", str(self.cksum)))
        if self.waldio:
            opts.append(("--waldio", str(self.waldio)))
        return tuple(opts)

    def describe(self) -> str:
        text = f"SQLite journal_mode={self.journal.upper()}, synchronous={self.sync.upper()}"
        extra = self.name.split(",")[2:]
        return text + (" (" + ", ".join(extra) + ")" if extra else "")


def _invalid(c: SqliteConfig) -> str:
    """Why ``c`` is not a valid configuration ('' if it is)."""
    if c.journal not in JOURNALS:
        return f"journal={c.journal} (choose from {', '.join(JOURNALS)})"
    if c.sync not in SYNCS:
        return f"sync={c.sync} (choose from {', '.join(SYNCS)})"
    if c.page < 512 or c.page > 65536 or c.page & (c.page - 1):
        return f"page={c.page} (a power of two, 512..65536)"
    if c.locking not in LOCKINGS:
        return f"locking={c.locking} (choose from {', '.join(LOCKINGS)})"
    if c.onerror not in ON_ERRORS:
        return f"onerror={c.onerror} (choose from {', '.join(ON_ERRORS)})"
    if c.syncretry not in (0, 1):
        return f"syncretry={c.syncretry} (0 or 1)"
    if not 0 <= c.walopt <= MAX_WALOPT or (c.walopt and c.journal != "wal"):
        return f"walopt=N (1 <= N <= {MAX_WALOPT}) is for journal=wal only"
    if c.walopt and (c.autockpt != c.walopt or c.jlimit != DEFAULT_JLIMIT):
        return "walopt sets the checkpoint interval itself and keeps the WAL: no autockpt or jlimit"
    if not 0 <= c.waldio <= MAX_WALDIO or (c.waldio and c.journal != "wal"):
        return f"waldio=N (1 <= N <= {MAX_WALDIO}) is for journal=wal only"
    if c.waldio and (
        c.page != 4096
        or c.walopt
        or c.cksum
        or c.autockpt != c.waldio
        or c.jlimit != DEFAULT_JLIMIT
    ):
        return (
            "waldio needs page=4096 (a frame is one 4 KiB block), sets the checkpoint "
            "interval itself and keeps the WAL: no walopt, cksum, autockpt or jlimit"
        )
    if not 0 <= c.autockpt <= MAX_INT:
        return f"autockpt={c.autockpt} (0 <= N <= {MAX_INT})"
    if c.autockpt != DEFAULT_AUTOCKPT and c.journal != "wal":
        return "autockpt is for journal=wal only"
    if not -1 <= c.jlimit <= MAX_INT:
        return f"jlimit={c.jlimit} (-1 <= N <= {MAX_INT})"
    if c.cksum not in (0, 1):
        return f"cksum={c.cksum} (0 or 1)"
    if c.jlimit != DEFAULT_JLIMIT and not c.journal_persists:
        return (
            "jlimit is for a journal that outlives its transaction: journal=persist, "
            "journal=wal, or journal=delete with locking=exclusive"
        )
    return ""


def parse_sqlite_name(text: str) -> SqliteConfig:
    """The configuration a grammar name spells; one-line CrashlabError if none."""

    def bad(why: str) -> CrashlabError:
        return CrashlabError(_bad_message(text, why))

    if not text.startswith(PREFIX):
        raise bad(f"a SQLite SUT name starts with {PREFIX!r}")
    given: dict[str, str] = {}
    for item in text[len(PREFIX) :].split(","):
        key, eq, value = item.partition("=")
        key, value = key.strip().lower(), value.strip().lower()
        if not eq or not key or not value:
            raise bad(f"{item!r} is not KEY=VALUE")
        if key not in KEYS:
            raise bad(f"unknown key {key!r} (choose from {', '.join(KEYS)})")
        if key in given:
            raise bad(f"{key} given twice")
        given[key] = value
    for key in ("journal", "sync"):
        if key not in given:
            raise bad(f"{key}= is required")
    ints: dict[str, int] = {}
    for key in ("page", "autockpt", "jlimit", "walopt", "syncretry", "cksum", "waldio"):
        if key in given:
            try:
                ints[key] = int(given[key])
            except ValueError:
                raise bad(f"{key}={given[key]} is not an integer") from None
    try:
        return SqliteConfig(
            journal=given["journal"],
            sync=given["sync"],
            locking=given.get("locking", "normal"),
            onerror=given.get("onerror", "stop"),
            **ints,
        )
    except InvalidConfig as e:
        raise bad(e.why) from None


def grid() -> tuple[SqliteConfig, ...]:
    """Every journal x sync combination with the default options."""
    return tuple(SqliteConfig(j, s) for j in JOURNALS for s in SYNCS)
