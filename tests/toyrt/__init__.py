"""A toy runtime: the one folder a new runtime adds (its adapter, its device log reader and, in
``guest.py``, its container half).

Its figures are plumbing, never shown to a user: ``tests/test_runtime_plugin.py`` puts this folder
at ``lodevem/runtimes/toyrt/``, adds its one registry line, and checks that every host stage that
asks a runtime something asks this adapter, and that the worker converts, measures and evaluates
with its container half.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from lodevem.runtimes.base import Runtime
from lodevem.runtimes.logs import LogEntry, ParsedLog

_LINE = re.compile(r"^toybench: (\S+) avg_ms=([0-9.]+)$")


def read_log(lines: Sequence[str], where: str) -> Optional[ParsedLog]:
    """``toybench: NAME avg_ms=N`` lines, the toy device tool's output."""
    entries = tuple(LogEntry(m.group(1), float(m.group(2))) for m in map(_LINE.match, lines) if m)
    return ParsedLog("toyrt", "toybench", None, entries, "") if entries else None


class ToyRuntime(Runtime):
    """Converts to a ``.toy`` file with ``toyconv`` in the converter image; calibrated by toybench."""

    name = "toyrt"
    converted_suffix = ".toy"
    read_log = staticmethod(read_log)


ADAPTER = ToyRuntime()
