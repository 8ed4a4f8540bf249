"""The ``lodevem`` command line: options in, one library call, results out.

Only this module turns lodevem's own exceptions into exit codes (see ``EXIT_CODES``); the
library never prints and never exits, so it stays usable from notebooks and tests.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import click
from rich.console import Console

from . import __version__
from .errors import LodevemError
from .profiles import TIERS, load_profiles, select_profiles

EXIT_CODES = {
    0: "success (and every budget gate passed)",
    1: "runtime failure (Docker, a worker crash, an I/O error)",
    2: "usage error or bad input (option, profile file, model file)",
    3: "a budget gate broke (--max-latency / --fail-on-oom)",
    130: "interrupted (Ctrl-C); results finished so far are kept",
}

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class LodevemClickError(click.ClickException):
    """A ``LodevemError`` shown as ``Error: <one line>`` with the error's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LodevemGroup(click.Group):
    """Click group that maps library errors and Ctrl-C to lodevem's documented exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LodevemError as exc:
            raise LodevemClickError(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]Interrupted.[/] Results finished so far are kept.")
            ctx.exit(130)


def profiles_dir_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--profiles-dir DIR`` (repeatable), shared by every command that reads profiles."""
    return click.option(
        "--profiles-dir",
        "profiles_dirs",
        multiple=True,
        type=click.Path(path_type=Path),
        help="Extra folder of profile YAML files (repeatable). Also read from $LODEVEM_PROFILES "
        "(':'-separated).",
    )(fn)


tier_choice = click.Choice(list(TIERS))


@click.group(cls=LodevemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="lodevem")
def cli() -> None:
    """lodevem: will this model run on an entry-level phone?

    Predicts single-thread CPU latency for each device profile and measures real peak RAM
    inside a container limited to the device's memory.

    Exit codes: 0 ok, 1 runtime failure, 2 usage/bad input, 3 budget gate broken,
    130 interrupted.
    """


@cli.command("list")
@click.option("--tier", "tiers", multiple=True, type=tier_choice, help="Only this tier (repeatable).")
@profiles_dir_option
def list_cmd(tiers: tuple[str, ...], profiles_dirs: tuple[Path, ...]) -> None:
    """List the device profiles.

    Example:

        lodevem list --tier tier3
    """
    from .reporter import profiles_table

    profiles = select_profiles(load_profiles(profiles_dirs), tiers=tiers)
    console.print(profiles_table(profiles))


@cli.command()
@click.option(
    "--backend",
    type=click.Choice(["docker", "process"]),
    default="docker",
    show_default=True,
    help="Which isolation backend `start` will use; decides what must be ready.",
)
def check(backend: str) -> None:
    """Check that what `start` needs is ready: Docker, cgroups, nn-Meter, torch.

    Exits 0 only when everything required is ready; each ✗ comes with a hint.

    Example:

        lodevem check
    """
    from .doctor import run_checks

    checks = run_checks(backend)
    for item in checks:
        mark = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]"}[item.status]
        console.print(f"{mark} [bold]{item.name}[/]: {item.detail}")
        if item.hint and item.status != "ok":
            console.print(f"    [dim]hint:[/] {item.hint}")
    failed = [c for c in checks if c.status == "fail" and c.required]
    if failed:
        raise LodevemClickError(
            f"{len(failed)} required check(s) failed: {', '.join(c.name for c in failed)}", 1
        )


def main() -> None:  # pragma: no cover - console entry point alias
    cli(prog_name="lodevem")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
