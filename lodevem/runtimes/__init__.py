"""The runtimes as plug-ins: one folder per runtime, one adapter each, one registry line.

Why: what differs between runtimes (the image that measures it, whether and how its own file is
made, what a run loads besides the model, the device benchmark whose log calibrates it) used to be
chosen by comparing the runtime's name in a dozen host modules. Each runtime's folder now says it
once, behind ``Runtime`` (``base``), and the host asks the adapter (``adapter(name)``): the
images (``sandbox.image``), the converted file's name (``sandbox.artifacts``), the files a
measurement or an evaluation runs (``measure.MeasurePlan.files``), the device logs
(``latency.calibration``). The registry of what each runtime *is* (its pinned package, converter
and the predictor kinds that serve it) stays ``wire.registry.RUNTIMES``, which the worker
validates requests against (the worker imports nothing of the host); an adapter is found by that
name, as the folder's ``ADAPTER``. Adding a runtime is a folder here (its adapter, its container
half, its image pins) and its one ``RuntimeSpec`` line there: ``ADAPTERS`` is made from the
registry's names (``tests/test_runtime_plugin.py`` does it with a toy runtime).

Each folder also holds the runtime's container half (``guest.py``: load, measure, evaluate and,
for a converting runtime, ``convert.py``), which the images bake (``wire.protocol.WORKER_SOURCES``)
and the worker finds by the registry's name (``worker.guest.guest``). That half imports only the
stdlib at module level, and this package's host modules are stdlib-only too, so both run in an
image that has none of the host's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Mapping, Optional, Sequence

from ..errors import InputError
from ..wire.registry import COMPARISON_RUNTIME, RUNTIMES, Live
from .base import Citation, Runtime
from .logs import LogEntry, ParsedLog

__all__ = ["ADAPTERS", "FALLBACK", "Citation", "LogEntry", "ParsedLog", "Runtime", "adapter", "parse_device_log"]


def _folder_adapter(name: str) -> Runtime:
    """The adapter in the folder ``runtimes/<name>/`` (its ``ADAPTER``)."""
    found = importlib.import_module(f"{__name__}.{name}").ADAPTER
    assert isinstance(found, Runtime) and found.name == name, name
    return found


# Each registry runtime's adapter, found in its folder (in wire.registry.RUNTIMES order).
ADAPTERS: Mapping[str, Runtime] = Live(lambda: {name: _folder_adapter(name) for name in RUNTIMES})
# What measures the memory when the default runtime cannot be (its image is not built): the file as is.
FALLBACK = COMPARISON_RUNTIME


def adapter(name: str) -> Runtime:
    """The adapter of runtime ``name`` (its registry name); ``InputError`` for one without."""
    found = ADAPTERS.get(name)
    if found is None:
        raise InputError(f"runtime {name}: no adapter in lodevem.runtimes (expected one of {', '.join(ADAPTERS)})")
    return found


def parse_device_log(lines: Sequence[str], where: str) -> Optional[ParsedLog]:
    """The first runtime whose device benchmark tool wrote ``lines``, read (None: no runtime's)."""
    for runtime in ADAPTERS.values():
        found = runtime.read_log(lines, where) if runtime.read_log is not None else None
        if found is not None:
            return found
    return None
