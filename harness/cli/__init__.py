"""The ``crashlab`` command: one click group; each subcommand lives in the
module of its pipeline stage and is registered here, in pipeline order.

Exit codes every command shares: 2 for bad input or an unusable
environment (one line, ``crashlab: error: ...``: a full, read-only or
forbidden output or working folder, an output folder another command holds),
128 + N when stopped by signal N, and :data:`INTERNAL_ERROR` for a bug (one
line naming the file that holds the traceback).

SIGINT and SIGTERM end a command with one line and 128 + the signal's
number, after every teardown, never with a traceback.  The console script
starts the interpreter with both blocked (the launcher line setup.sh
writes), so that one during Python's own start-up and the imports (a few
tenths of a second) waits until :func:`main` has installed its handlers."""

from __future__ import annotations

import datetime
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import NoReturn

import click

from harness.env import TMPDIR, reap_work_folders, tmp_parent
from harness.errors import CrashlabError, environment_error
from harness.sysops import Interrupted, raise_on_stop_signals, signals_deferred

INTERNAL_ERROR = 70  # EX_SOFTWARE (sysexits.h): an exception crashlab did not expect


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crashlab")
def cli() -> None:
    """crashlab: record a database workload's block writes, enumerate the
    crash states a power loss could leave, recover and check each one."""
    # the working folders of commands killed outright (SIGKILL, lost power)
    reap_work_folders()


def _register() -> None:
    # Imported here so that `crashlab --help` stays cheap and so that each
    # stage's module owns its own options.
    from harness.cli import (
        benchcmd,
        checkcmd,
        floorscmd,
        logcmd,
        mutantscmd,
        papercmd,
        recordcmd,
        reportcmd,
        reprocmd,
        statescmd,
        triagecmd,
    )

    for module in (
        recordcmd,
        logcmd,
        statescmd,
        checkcmd,
        reprocmd,
        triagecmd,
        reportcmd,
        papercmd,
        benchcmd,
        mutantscmd,
        floorscmd,
    ):
        for command in module.COMMANDS:
            cli.add_command(command)


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2;
    SIGINT and SIGTERM one line and 128 + the signal's number."""
    try:
        _main()
    except KeyboardInterrupt as e:  # one more while an error was being reported
        interrupted_exit(_signum(e))
    finally:
        # The command is over: one more while the interpreter exits ends
        # the process as the default action does, quietly.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def interrupted_exit(signum: int) -> NoReturn:
    """Say that the command was interrupted by ``signum`` and exit with 128 +
    ``signum`` (130 for Ctrl-C)."""
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    click.echo(f"crashlab: interrupted ({name}); `--resume` continues", err=True)
    sys.exit(128 + signum)


def _signum(e: BaseException) -> int:
    """The signal behind an interrupt (click turns KeyboardInterrupt into
    Abort; the signal rides along)."""
    cause = e.__cause__ if isinstance(e, click.exceptions.Abort) else e
    return cause.signum if isinstance(cause, Interrupted) else signal.SIGINT


def _main() -> None:
    try:
        # first: one that came while the interpreter started is raised here
        stopped = raise_on_stop_signals()
        with signals_deferred():  # raised in importlib's weakref callbacks, it would be dropped
            _register()
        rc = cli.main(standalone_mode=False)
        stopped()  # one that Python swallowed (in a __del__) still ends it as interrupted
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        interrupted_exit(_signum(e))
    except click.ClickException as e:
        e.show()
        sys.exit(2 if isinstance(e, click.UsageError) else e.exit_code)
    except CrashlabError as e:
        click.echo(f"crashlab: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except OSError as e:
        err = environment_error(e)
        if err is None:
            _internal_error(e)
        click.echo(f"crashlab: error: {err}{_tmp_hint(e)}", err=True)
        sys.exit(2)
    except Exception as e:  # noqa: BLE001 (the backstop: a bug, reported in one line)
        _internal_error(e)
    sys.exit(rc if isinstance(rc, int) else 0)


def _tmp_hint(e: OSError) -> str:
    """When ``e`` is of a working folder: where those go, and how to move them."""
    where = e.filename2 or e.filename
    parent = tmp_parent().resolve()
    if where is None or parent not in Path(os.fsdecode(where)).resolve().parents:
        return ""
    return f" (a working folder under {parent}: set {TMPDIR} to another folder)"


def _internal_error(e: BaseException) -> NoReturn:
    """An exception crashlab did not expect (a bug; in a worker process too:
    it is raised again here): its traceback goes to a file, one line to
    stderr, exit :data:`INTERNAL_ERROR`."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"crashlab-internal-error-{stamp}-{os.getpid()}.txt"
    text = f"crashlab {' '.join(sys.argv[1:])}\npython {sys.version.split()[0]}\n\n" + "".join(
        traceback.format_exception(e)
    )
    for parent in (tmp_parent(), Path(tempfile.gettempdir())):
        try:
            (parent / name).write_text(text)
        except OSError:
            continue
        click.echo(f"crashlab: internal error, please report; details in {parent / name}", err=True)
        sys.exit(INTERNAL_ERROR)
    sys.stderr.write(text)  # nowhere to save it: the traceback itself, then one line
    click.echo("crashlab: internal error, please report (the details above)", err=True)
    sys.exit(INTERNAL_ERROR)
