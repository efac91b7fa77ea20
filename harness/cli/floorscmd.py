"""``crashlab floors``: write a matrix's coverage floors from a finished
sweep of it (harness/sweep/floors.py).

Exit codes: 0 when written, 2 for a bad sweep folder or matrix."""

from __future__ import annotations

from pathlib import Path

import click

from harness.atomic import write_text_atomic
from harness.errors import CrashlabError
from harness.sweep.floors import dump_floors, floors_of, floors_path, read_summary
from harness.sweep.matrixfile import MATRICES_DIR


def matrix_file(name: str) -> Path:
    """The file of a built-in matrix that has one, or a matrix file's path."""
    if "/" in name or name.endswith(".toml"):
        if not Path(name).is_file():
            raise CrashlabError(f"{name}: no such matrix file")
        return Path(name)
    builtin = MATRICES_DIR / f"{name}.toml"
    if not builtin.exists():
        raise CrashlabError(f"matrix {name!r} has no matrix file: no floors for it")
    return builtin


@click.command("floors")
@click.argument("sweeps", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--matrix",
    default="default",
    show_default=True,
    metavar="NAME|FILE",
    help="the matrix the sweep ran (its floors file is written beside it)",
)
def floors_cmd(sweeps: tuple[Path, ...], matrix: str) -> int:
    """Write the coverage floors of MATRIX from finished SWEEPS of it (two
    or more: a cell's state count varies between recordings): per cell and
    strategy, a share of the fewest states it checked and kept sets it
    visited; a later sweep below them fails."""
    target = floors_path(matrix_file(matrix))
    floors = floors_of([read_summary(s) for s in sweeps])
    n = len(sweeps)
    write_text_atomic(target, dump_floors(floors, f"{n} sweep{'s' * (n > 1)} of {matrix}"))
    click.echo(f"{target}: floors of {len(floors)} cells")
    return 0


COMMANDS = [floors_cmd]
