"""The ``dhl`` command: ``dhl dump|check|recover|digest FILE``.

dump     every page with both slot headers (TID, records, free-space offset,
         commit field), the FCC and transaction size, read without recovery
check    structure check of the committed state (exit 1 when it fails)
recover  run recovery and say what it did
digest   the oracle content digest (32 hex digits)

Errors (not a DHL file, truncated, corrupt...) print one line and exit 2
(check: exit 1 for a structure violation)."""

from __future__ import annotations

import sys

import click

from dhl.binding import OPEN_MODES, Database, DhlError

_mode = click.option(
    "--mode",
    type=click.Choice(sorted(OPEN_MODES)),
    default=None,
    help="commit mode to open with (default: auto, the mode the file was created for)",
)


def _open(path: str, mode: str | None, **kw: object) -> Database:
    return Database(path, mode or "auto", **kw)  # type: ignore[arg-type]  # **kw passes Database's options through


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Inspect and repair DHL databases."""


@cli.command()
@click.argument("path")
@_mode
def dump(path: str, mode: str | None) -> None:
    """Print the header and every page's two slot headers (no recovery)."""
    with _open(path, mode, readonly=True) as db:
        i, r = db.info(), db.recovery()
        click.echo(
            f"{path}: page size {i.page_size}, {i.ntrees} trees, flags {i.flags:#x}, "
            f"{i.page_count} pages ({i.file_pages} in the file)"
        )
        click.echo(
            f"FCC {i.fcc}, transaction size {i.txn_size}, meta slot {i.valid_meta}; "
            f"newest commit record {r.max_commit_tid} (size {r.max_commit_size}, "
            f"{r.max_commit_count} found){', rolled back' if r.rolled_back else ''}; "
            f"{r.invalid_headers} slot headers above the FCC"
        )
        click.echo("roots: " + " ".join(str(i.roots[t]) for t in range(i.ntrees)))
        for p in range(int(i.file_pages)):
            pi = db.page(p)
            desc = []
            for s, h in enumerate(pi.slots):
                mark = "*" if pi.valid_slot == s else " "
                if p == 0:
                    desc.append(f"{mark}meta{s} tid={h.tid} commit={h.commit} pages={h.nrec}")
                else:
                    kind = {1: "leaf", 2: "interior"}.get(h.type, f"type{h.type}")
                    bad = "" if h.array_ok else " BAD"
                    desc.append(
                        f"{mark}slot{s} tid={h.tid} {kind} n={h.nrec} "
                        f"free={h.free_off} commit={h.commit}{bad}"
                    )
            click.echo(f"page {p:5d}: " + " | ".join(desc))


@cli.command()
@click.argument("path")
@_mode
def check(path: str, mode: str | None) -> None:
    """Structure check (recovers first, like any open)."""
    with _open(path, mode) as db:
        try:
            db.check()
        except DhlError as e:
            click.echo(f"dhl: check failed: {e}", err=True)
            sys.exit(1)
        i = db.info()
        click.echo(
            f"ok: FCC {i.fcc}, {i.page_count} pages, "
            + ", ".join(f"tree {t}: {db.count(t)} records" for t in range(i.ntrees))
        )


@cli.command()
@click.argument("path")
@_mode
def recover(path: str, mode: str | None) -> None:
    """Recover (done by every writable open) and report."""
    with _open(path, mode) as db:
        r, c = db.recovery(), db.counters()
        click.echo(
            f"FCC {r.fcc} (transaction size {r.txn_size}); newest commit record "
            f"{r.max_commit_tid}: {r.max_commit_count}/{r.max_commit_size} slot headers"
            f"{' -> rolled back' if r.rolled_back else ''}; invalidated "
            f"{r.invalid_headers} slot headers in {c.recovered_pages} pages"
        )


@cli.command()
@click.argument("path")
@_mode
@click.option("--no-recover", is_flag=True, help="read through the valid-header rule only")
def digest(path: str, mode: str | None, no_recover: bool) -> None:
    """Print the oracle content digest."""
    with _open(path, mode, recover=not no_recover, readonly=no_recover) as db:
        click.echo(db.digest())


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.ClickException as e:
        e.show()
        sys.exit(2)
    except (DhlError, FileNotFoundError) as e:
        click.echo(f"dhl: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
