"""lodevem 0.1's flag forms of ``calibrate``, read as today's subcommands for one more release.

``calibrate PROFILE MODEL=MS`` is ``calibrate add``, ``--list`` is ``list``, ``--remove ID`` is
``remove ID``, ``PROFILE MODEL --from-log FILE`` is ``from-log FILE PROFILE MODEL``. Why a module
of its own: it is a translation of command lines with a deadline, not a command; when it goes,
this file goes and nothing else changes.
"""

from __future__ import annotations

from typing import Optional

import click

from . import TERMINAL


def subcommand_form(args: list[str]) -> tuple[str, list[str]]:
    """(the subcommand, its arguments) of a 0.1 ``calibrate`` command line."""

    def take(flag: str) -> Optional[tuple[list[str], Optional[str]]]:
        for i, arg in enumerate(args):
            if arg == flag:
                return args[:i] + args[i + 2:], args[i + 1] if i + 1 < len(args) else None
            if arg.startswith(flag + "="):
                return args[:i] + args[i + 1:], arg.split("=", 1)[1]
        return None

    if "--list" in args:
        return "list", [a for a in args if a != "--list"]
    if (removed := take("--remove")) is not None:
        return "remove", removed[0] + ([removed[1]] if removed[1] is not None else [])
    if (logged := take("--from-log")) is not None:
        return "from-log", ([logged[1]] if logged[1] is not None else []) + logged[0]
    return "add", args


class CalibrateGroup(click.Group):
    """``calibrate``'s subcommands; a command line in the 0.1 flag form is rewritten to its
    subcommand (``subcommand_form``), with a deprecation line on stderr."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            name, rest = subcommand_form(args)
            TERMINAL.deprecated(f"the flag form of calibrate goes in the next release; use `lodevem calibrate "
                                f"{name}` (lodevem calibrate --help)")
            args = [name, *rest]
        return super().parse_args(ctx, args)
