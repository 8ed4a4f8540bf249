"""A toy runtime: the one folder a new runtime adds (its adapter and its device log reader).

Its figures are plumbing, never shown to a user: ``tests/test_runtime_plugin.py`` registers it
with one line and checks that every host stage that asks a runtime something asks this adapter.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from lodevem.runtimes.base import Runtime
from lodevem.runtimes.logs import LogEntry, ParsedLog
from lodevem.wire.registry import Converter, RuntimeSpec

# What the worker registry would hold for it (the worker validates requests by this name).
SPEC = RuntimeSpec("toyrt", "toy runtime (plumbing test)", "bench", "toypkg",
                   Converter("toyconv", "1.0", "export-toyrt"), on_device=True)

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
