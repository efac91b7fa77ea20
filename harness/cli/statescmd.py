"""``crashlab states``: list a log's crash states, or show one by ID.

:func:`state_options` is the one set of enumeration options on the command
line; ``check``/``sweep`` reuse it with :func:`options_from` so that every
command spells them the same way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from harness.check.window import budget_for
from harness.cli.params import COUNT, FAULTS, NONNEG, SEED, all_faults
from harness.env import temporary_folder
from harness.filetrace import fault_targets
from harness.logformat import LogReader
from harness.rundir import RunDir
from harness.states import STRATEGIES, TORN_PATTERNS, Enumeration, Options, State, state_from_id
from harness.states.model import LOG_ORDERS
from harness.states.strategies import AUTO_BUDGET
from harness.validate import resolve_log

_D = Options()


class _Budget(click.ParamType):
    """``auto`` (AUTO_BUDGET), ``off`` (None: the per-epoch rule) or N >= 1."""

    name = "auto|off|N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:  # noqa: ANN401
        if value is None or isinstance(value, int):
            return value
        if value == "auto":
            return AUTO_BUDGET
        if value == "off":
            return None
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            self.fail(f"{value!r}: auto, off or a number of states >= 1", param, ctx)
        return n


BUDGET = _Budget()


# long: one click option per field of Options, in one list (their one spelling)
def state_options(
    f: Callable[..., Any], strategies: tuple[str, ...] = STRATEGIES
) -> Callable[..., Any]:
    """Click options for :class:`harness.states.Options` (defaults shown);
    ``strategies``: the ``--strategy`` choices."""
    decorators = [
        click.option(
            "--strategy",
            type=click.Choice(strategies),
            default=_D.strategy,
            show_default=True,
            help="which crash states to enumerate",
        ),
        click.option(
            "--max-exhaustive",
            type=click.IntRange(0, 24),
            default=_D.max_exhaustive,
            show_default=True,
            help="reorder: every subset of epochs with at most this many writes",
        ),
        click.option(
            "--max-drop",
            type=NONNEG,
            default=_D.max_drop,
            show_default=True,
            help="reorder, larger epochs: subsets dropping at most this many writes",
        ),
        click.option(
            "--sample",
            type=COUNT,
            default=None,
            help="reorder, larger epochs: this many seeded random subsets instead",
        ),
        click.option(
            "--budget",
            type=BUDGET,
            default="auto",
            show_default=True,
            help="reorder, torn, torn-reorder: every kept set of the window when they "
            "number at most N states, else a seeded stratified sample of N; auto: "
            "the run's tier's (100 s at its declared rate: raw 1,000,000, a file "
            "system 50,000); off: by epoch (--max-exhaustive, --max-drop, --sample)",
        ),
        click.option("--seed", type=SEED, default=_D.seed, show_default=True),
        click.option(
            "--tear-unit",
            type=COUNT,
            default=_D.tear_unit,
            show_default=True,
            help="torn: bytes that persist all or nothing",
        ),
        click.option(
            "--torn-pattern",
            type=click.Choice(TORN_PATTERNS),
            default=_D.torn_pattern,
            show_default=True,
        ),
        click.option(
            "--max-tears",
            type=NONNEG,
            default=_D.max_tears,
            show_default=True,
            help="torn: split points per write at most",
        ),
        click.option(
            "--window-start",
            default=None,
            metavar="MARK",
            help="only states whose crash can lie after this mark (its whole label, or "
            "its name without the payload: txn-ack:1 for txn-ack:1;op=sync)",
        ),
        click.option(
            "--window-end",
            default=None,
            metavar="MARK",
            help="only states whose crash can lie before this mark (named as --window-start)",
        ),
        click.option("--no-dedup", is_flag=True, help="do not fold identical states"),
        click.option(
            "--log-order",
            type=click.Choice(LOG_ORDERS),
            default=_D.log_order,
            show_default=True,
            help="what a write's log position means (a run's meta.json says; "
            "dm-log-writes: non-FUA writes logged at the next flush)",
        ),
        click.option(
            "--fault",
            "fault",
            type=FAULTS,
            multiple=True,
            metavar="SPEC",
            help="a state fault on top of every state: lost-flush[,nth=N], "
            "misdirect[,seed=N], corrupt[,seed=N][,bits=N] (repeat or join "
            "with +; a run's meta.json may list more; harness/states/README.md)",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


def options_from(kw: dict[str, Any]) -> Options:
    """Pop the :func:`state_options` values out of ``kw`` into Options
    (checked: a bad value, or a device or process fault, is a one-line
    CrashlabError)."""
    opts = Options(
        strategy=kw.pop("strategy"),
        max_exhaustive=kw.pop("max_exhaustive"),
        max_drop=kw.pop("max_drop"),
        sample=kw.pop("sample"),
        budget=kw.pop("budget"),
        seed=kw.pop("seed"),
        tear_unit=kw.pop("tear_unit"),
        torn_pattern=kw.pop("torn_pattern"),
        max_tears=kw.pop("max_tears"),
        window_start=kw.pop("window_start"),
        window_end=kw.pop("window_end"),
        dedup=not kw.pop("no_dedup"),
        log_order=kw.pop("log_order"),
        faults=all_faults(kw.pop("fault")),
    )
    opts.validate()
    return opts


def state_record(s: State) -> dict[str, Any]:
    """A state as a JSON-able dict (entry indices are log entry numbers)."""
    c = s.cut
    return {
        "id": s.id,
        "epoch": s.epoch.index,
        "kept": list(s.kept_entries),
        "dropped": list(s.dropped_entries),
        "torn": [[e, [list(r) for r in ranges]] for e, ranges in s.torn_entries],
        "durable_upto": s.durable_upto,
        "cut": [c.lo, c.hi],
        "acked": c.acked,
        "begun": c.begun,
        "in_flight": c.in_flight,
        "last_mark": c.last_mark,
        **({"faults": s.fault_notes()} if s.key.faulted else {}),
    }


@click.command("states")
@click.argument("target", type=click.Path(path_type=Path))
@state_options
@click.option("--count", "count_only", is_flag=True, help="print only the counts")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per state")
@click.option("--show", "show_id", default=None, metavar="ID", help="show one state")
def states_cmd(
    target: Path, count_only: bool, as_json: bool, show_id: str | None, **kw: Any
) -> None:
    """List the crash states of a run's log (RUN directory or log file)."""
    opts = options_from(kw)
    spans = None
    log = resolve_log(target)  # a run is validated first
    if Path(target).is_dir() and opts.budget == AUTO_BUDGET:  # a run: its tier's budget
        opts = dataclasses.replace(opts, budget=budget_for(RunDir(Path(target)).meta().fs))
    if Path(target).is_dir() and show_id is None:  # a run: faults aim as its check aims them
        with temporary_folder("crashlab-states-") as work:
            spans = fault_targets(RunDir(Path(target)), opts.faults, work)
    with LogReader(log) as reader:
        if show_id is not None:
            click.echo(
                json.dumps(state_record(state_from_id(reader, show_id, opts.log_order)), indent=2)
            )
            return
        en = Enumeration(reader, opts, targets=spans)
        for s in en:
            if count_only:
                continue
            click.echo(json.dumps(state_record(s)) if as_json else s.id)
        st = en.stats
        click.echo(
            f"{opts.strategy}: {st.emitted} states ({st.generated} generated, {st.folded} folded)"
            f" over {st.epochs} epochs",
            err=not count_only,
        )


COMMANDS = [states_cmd]
