"""The ``lodevem`` command line: the Click group and the list of its commands.

The commands live beside it in ``lodevem.commands`` (one module per command group: parse the
options, make one library call, hand the result to the terminal renderer). Only this module turns
lodevem's own exceptions into exit codes (see ``EXIT_CODES``); the library never prints and never
exits, so it stays usable from notebooks and tests.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

import click

from .commands import TERMINAL
from .commands.calibrate import calibrate
from .commands.device import device
from .commands.models import derive, inspect_cmd, zoo
from .commands.predict import predict
from .commands.run import report_cmd, start
from .commands.setup import build_image_cmd, check, fetch_predictors_cmd, list_cmd
from .errors import Interrupted, LodevemError
from .safe_io import printable
from .version import __version__

EXIT_CODES = {
    0: "success (and every budget gate passed)",
    1: "runtime failure (Docker, a worker crash, an I/O error), or no row got a memory figure",
    2: "usage error or bad input (option, profile file, model file)",
    3: "a budget gate broke (--max-latency / --fail-on-oom / --fail-on-tight)",
    4: "partial failure: a row asked for is missing a figure (error / no peak, no latency, no top-1); the rest "
       "is written and the reasons are printed under the table",
    130: "interrupted (Ctrl-C); the pairs finished so far are kept (start --resume continues)",
    143: "terminated (SIGTERM); the pairs finished so far are kept (start --resume continues)",
}


class LodevemClickError(click.ClickException):
    """A ``LodevemError`` shown as ``Error: <one line>`` with the error's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class; ours is per error


class LodevemGroup(click.Group):
    """Click group that maps library errors and Ctrl-C to lodevem's documented exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        TERMINAL.fit_width()
        try:
            with _signals_unwind():
                return super().invoke(ctx)
        except LodevemError as exc:  # may quote a record, a log or a model's message: escaped, capped
            raise LodevemClickError(printable(exc, newlines=False), exc.exit_code) from None
        except OSError as exc:  # the file system said no (read-only, full, permissions): name the path
            where = f"{exc.filename}: " if exc.filename else ""
            raise LodevemClickError(f"{where}{exc.strerror or exc}", 1) from None
        except KeyboardInterrupt as exc:  # a command that saves partial results says what (see start)
            stopped = exc if isinstance(exc, Interrupted) else Interrupted.from_interrupt(
                exc, Interrupted.NOTHING_SAVED)
            # the cleanup is done and the process is about to exit: a further Ctrl-C must not turn
            # the documented exit code into a kill by SIGINT (an uncaught KeyboardInterrupt)
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_IGN)
            TERMINAL.interrupted(stopped.note)
            ctx.exit(128 + stopped.signum)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM unwind as ``Interrupted``, so the same cleanup runs
    (containers removed, scratch folders deleted, partial results kept); any later signal is
    ignored until the block is left, so a second Ctrl-C cannot cut the cleanup short. Signal
    handlers belong to the process: only the entry point installs them, from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = (signal.SIGINT, signal.SIGTERM)

    def interrupt(signum: int, frame: Any) -> None:
        for other in caught:
            signal.signal(other, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@click.group(cls=LodevemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="lodevem")
def cli() -> None:
    """lodevem: will this model run on an entry-level phone?

    Predicts single-thread CPU latency for each device profile and measures real peak RAM
    inside a container limited to the device's memory.

    Exit codes: 0 ok, 1 runtime failure (or no row got a memory figure), 2 usage/bad
    input, 3 budget gate broken, 4 partial failure (a row asked for is missing a
    figure: error, no peak, no latency, no top-1), 130 interrupted, 143 terminated.

    \b
    Environment variables:
      LODEVEM_PROFILES       extra profile folders, ':'-separated
                             (see --profiles-dir)
      LODEVEM_NNMETER_DATA   nn-Meter predictor data folder (see --nnmeter-data)
      LODEVEM_CALIBRATIONS   calibration records folder (see --calibrations)
      LODEVEM_CODE           your model code for the sandbox, ':'-separated (see --code)
      XDG_CONFIG_HOME        default calibrations folder is
                             $XDG_CONFIG_HOME/lodevem/calibrations
                             (default ~/.config/lodevem/calibrations)
      LODEVEM_ADB            the adb executable of `device`, --device and
                             `calibrate adb` (default: adb on PATH)
      LODEVEM_DEBIAN_MIRROR  mirror for build-image's offline base image
                             (see build-image --debian-mirror)
      LODEVEM_ARMSIM_ROOT    inside the armsim image only: where its Arm guests
                             live (set by the image, docs/armsim.md)
      DOCKER_HOST            the Docker daemon (default: the local socket), read
                             by docker-py with its other DOCKER_* variables
      SLURM_CONF             the Slurm cluster of --backend slurm, read by
                             sbatch/sacct/scancel (default /etc/slurm/slurm.conf)
      LODEVEM_SHARED_STORE   one folder for the exports, conversions, derivations
                             and armsim profiles of every run (default: each
                             --output's .cache; measurements stay there)
      XDG_CACHE_HOME         build-image's cache is $XDG_CACHE_HOME/lodevem/build,
                             predict's exports $XDG_CACHE_HOME/lodevem/onnx and
                             /zoo (default ~/.cache/lodevem)
      COLUMNS                width of printed output (default: the terminal's,
                             or 120 when output is not a terminal)
    """


# The commands, in the pipeline's order: look around, get ready, run, then the model tools.
for command in (list_cmd, check, zoo, device, start, report_cmd, predict, calibrate, derive, inspect_cmd,
                build_image_cmd, fetch_predictors_cmd):
    cli.add_command(command)


if __name__ == "__main__":  # pragma: no cover - the console script is lodevem.cli:cli
    cli(prog_name="lodevem")
