"""``crashlab bench``: run every benchmark module (or the ones named)."""

from __future__ import annotations

import importlib

import click

from harness.bench import MODULES
from harness.errors import CrashlabError


@click.command("bench")
@click.option("--only", multiple=True, help="run only the benchmark(s) with this NAME")
def bench_cmd(only: tuple[str, ...]) -> None:
    """Print benchmark figures (recording overhead, engine and sweep speed)."""
    mods = [importlib.import_module(f"harness.bench.{m}") for m in MODULES]
    names = [m.NAME for m in mods]
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise CrashlabError(f"unknown benchmark {unknown[0]!r} (choose from {', '.join(names)})")
    for mod in mods:
        if not only or mod.NAME in only:
            click.echo(f"== {mod.NAME}")
            mod.run()


COMMANDS = [bench_cmd]
