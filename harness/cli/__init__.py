"""The ``crashlab`` command: one click group; each subcommand lives in the
module of its pipeline stage and is registered here, in pipeline order."""

from __future__ import annotations

import sys

import click

from harness.errors import CrashlabError
from harness.sysops import Interrupted, raise_on_sigterm


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crashlab")
def cli() -> None:
    """crashlab: record a database workload's block writes, enumerate the
    crash states a power loss could leave, recover and check each one."""


def _register() -> None:
    # Imported here so that `crashlab --help` stays cheap and so that each
    # stage's module owns its own options.
    from harness.cli import (
        benchcmd,
        checkcmd,
        logcmd,
        mutantscmd,
        papercmd,
        recordcmd,
        reportcmd,
        reprocmd,
        statescmd,
    )

    for module in (recordcmd, logcmd, statescmd, checkcmd, reprocmd, reportcmd, papercmd,
                   benchcmd, mutantscmd):
        for command in module.COMMANDS:
            cli.add_command(command)


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2."""
    _register()
    raise_on_sigterm()
    try:
        rc = cli.main(standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        # click turns KeyboardInterrupt into Abort; the signal rides along.
        cause = e.__cause__ if isinstance(e, click.exceptions.Abort) else e
        signum = cause.signum if isinstance(cause, Interrupted) else 2
        click.echo(f"crashlab: interrupted ({'SIGTERM' if signum == 15 else 'SIGINT'});"
                   " `--resume` continues", err=True)
        sys.exit(128 + signum)
    except click.ClickException as e:
        e.show()
        sys.exit(2 if isinstance(e, click.UsageError) else e.exit_code)
    except CrashlabError as e:
        click.echo(f"crashlab: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    sys.exit(rc if isinstance(rc, int) else 0)
