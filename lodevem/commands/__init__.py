"""The ``lodevem`` commands, one module per command group; ``cli.py`` lists them.

Every command does three things: parse its options (``options``: the shared ones, declared
once), make ONE library call, and hand what comes back to the terminal (``report.terminal``),
then exit by the result's ``failure`` (``finish``). No command formats text or knows a predictor
kind or a runtime by name: the registries and the library do (``tests/test_architecture.py``).
"""

from __future__ import annotations

from typing import Any

from ..report.terminal import Terminal

# The process's stdout and stderr as lodevem prints them (rich consoles follow sys.stdout, so a
# test's CliRunner captures them).
TERMINAL = Terminal()


def finish(result: Any) -> None:
    """Exit by ``result.failure`` (a ``LodevemError`` with its exit code), after it was shown."""
    failure = result.failure
    if failure is not None:
        raise failure
