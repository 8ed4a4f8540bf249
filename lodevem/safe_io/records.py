"""Records read back, parsed and not believed: bounded JSON and dataclass fields checked by type
and range.

Why: lodevem reads back what it or somebody else wrote earlier (a run state for ``--resume``, a
results file for ``lodevem report``, a measurement or an accuracy record of the store, a
sidecar). Such a file may have been edited, planted or truncated: a latency of ``"fast"``, a
peak of ``"x"``, a top-1 of 250 %, ``NaN``, or JSON nested 100,000 deep (``json.loads`` then
ends in a ``RecursionError``). Here every such read:

* parses JSON with ``NaN``/``Infinity`` refused and a depth cap (``MAX_JSON_DEPTH``; the C parser
  stops at the recursion limit, caught here, and the parsed value is measured without recursing), and turns
  every failure into one ``BadRecord`` naming the file and what was wrong;
* fills a dataclass only from fields of the declared type (``typed``: a bool is no number, a
  text is no number, a number is finite) and, where a field has a range (``RANGES``: a
  percentage is 0..100, a peak or a limit is > 0), within it. The error names the field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from functools import cache
from typing import Any, Mapping, Optional, TypeVar

from ..errors import BadRecord
from .text import clip, printable

__all__ = ["MAX_JSON_DEPTH", "MAX_TEXT_CHARS", "RANGES", "BadRecord", "json_depth", "parse_json", "typed"]

# A record lodevem writes is at most 5 levels deep (results > environment > runtimes > x > y).
MAX_JSON_DEPTH = 32
# The longest text field a record may hold (a message, a path, a note); longer is not lodevem's.
MAX_TEXT_CHARS = 100_000
T = TypeVar("T")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON can hold")


def json_depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: no recursion on a hostile value)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            todo.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(data: "bytes | str", where: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``data`` (a file's bytes); ``BadRecord`` when it is not UTF-8 JSON,
    holds ``NaN``/``Infinity``, or nests deeper than ``max_depth``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise BadRecord(where, "", f"not JSON lodevem wrote (not UTF-8 text at byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # the C parser stops at the interpreter's recursion limit, cleanly
        raise BadRecord(where, "", f"JSON nested more than {max_depth} levels deep") from None
    except ValueError as exc:
        raise BadRecord(where, "", f"not JSON lodevem wrote ({clip(printable(str(exc), None, newlines=False), 120)})"
                        ) from None
    if json_depth(value) > max_depth:
        raise BadRecord(where, "", f"JSON nested more than {max_depth} levels deep")
    return value


# Ranges by field name (inclusive low, inclusive high, whether the low end itself is excluded):
# a figure outside is not a measurement or a prediction lodevem could have made.
_PCT = (0.0, 100.0, False)
_POSITIVE = (0.0, math.inf, True)
_NONNEGATIVE = (0.0, math.inf, False)
RANGES: Mapping[str, tuple[float, float, bool]] = types.MappingProxyType({
    "top1_pct": _PCT, "top5_pct": _PCT, "accuracy_top1_pct": _PCT, "accuracy_top5_pct": _PCT,
    "accuracy_drop_pts": (-100.0, 100.0, False), "drop_pts": (-100.0, 100.0, False),
    "sparsity": (0.0, 1.0, False), "latency_held_out_pct": _NONNEGATIVE,
    "peak_rss_mb": _POSITIVE, "cgroup_peak_mb": _POSITIVE, "limit_mb": _POSITIVE, "ram_mb": _POSITIVE,
    "threads": (1, 1024, False), "samples": (1, math.inf, False), "accuracy_samples": (1, math.inf, False),
    "latency_ms": _NONNEGATIVE, "latency_low_ms": _NONNEGATIVE, "latency_high_ms": _NONNEGATIVE,
    "model_file_mb": _NONNEGATIVE, "clock_ghz": _NONNEGATIVE, "wall_s": _NONNEGATIVE, "seconds": _NONNEGATIVE,
    "params": _NONNEGATIVE, "converted_size_bytes": _NONNEGATIVE, "converted_mb": _NONNEGATIVE,
    "app_budget_mb": _NONNEGATIVE, "min_ram_mb": _POSITIVE, "energy_mj": _NONNEGATIVE,
    "runtime_baseline_mb": _NONNEGATIVE, "power_w": _NONNEGATIVE, "zero_channels": _NONNEGATIVE,
    # a measurement's parts (results.measurements): its peak, its converted file's size
    "rss_mb": _POSITIVE, "cgroup_mb": _POSITIVE, "size_bytes": _NONNEGATIVE,
})


def _range(name: str, value: float) -> Optional[str]:
    bounds = RANGES.get(name)
    if bounds is None:
        return None
    low, high, open_low = bounds
    if value < low or value > high or (open_low and value == low):
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        return f"{shown} is outside {'(' if open_low else '['}{low:g}, {high:g}]"
    return None


def _check(name: str, hint: Any, value: Any) -> Any:
    """``value`` as a field of type ``hint`` (raises ``ValueError`` saying what is wrong)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _check(name, inner[0], value)
        raise ValueError("has a type this reader does not know")  # pragma: no cover - no such field
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {_what(value)}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (hint is int and isinstance(value, float)):
            raise ValueError(f"expected a {'whole ' if hint is int else ''}number, got {_what(value)}")
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        problem = _range(name, value)
        if problem:
            raise ValueError(problem)
        return float(value) if hint is float else value
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"expected text, got {_what(value)}")
        if len(value) > MAX_TEXT_CHARS:
            raise ValueError(f"text of {len(value)} characters, at most {MAX_TEXT_CHARS}")
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except (ValueError, TypeError):
            raise ValueError(f"expected one of {', '.join(str(m.value) for m in hint)}, got {_what(value)}") from None
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected a list, got {_what(value)}")
        return tuple(_check(name, args[0], v) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested record (a profile's OpTime)
        return typed(hint, value, "")  # its BadRecord names the field inside: ``typed`` prefixes ours
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, got {_what(value)}")
        return value
    raise ValueError("has a type this reader does not know")  # pragma: no cover - no such field


def _what(value: Any) -> str:
    if value is None:
        return "null"
    kind = {bool: "true/false", str: "text", dict: "an object", list: "a list"}.get(type(value))
    shown = clip(printable(repr(value), None, newlines=False), 40)
    return f"{kind} {shown}" if kind in ("text", "true/false") else kind or shown


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def typed(cls: type[T], data: Any, where: str, *, prefix: str = "", extra: Mapping[str, Any] = {}) -> T:
    """A ``cls`` (a dataclass) from ``data`` read back: every field of the declared type and
    range; unknown keys ignored (another version's additions), a missing field without a default
    refused. ``BadRecord`` names ``where`` and the field (``prefix`` before it: ``results[3].``)."""
    if not isinstance(data, dict):
        raise BadRecord(where, prefix.rstrip("."), f"expected an object, got {_what(data)}")
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable
    values: dict[str, Any] = dict(extra)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in values:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise BadRecord(where, prefix + f.name, "missing")
            continue
        try:
            values[f.name] = _check(f.name, hints[f.name], data[f.name])
        except ValueError as exc:
            raise BadRecord(where, prefix + f.name, str(exc)) from None
        except BadRecord as exc:  # in a nested record (a measurement's peak): the field is part.field
            raise BadRecord(where, f"{prefix}{f.name}.{exc.field}".rstrip("."), exc.problem) from None
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise BadRecord(where, prefix.rstrip("."), clip(str(exc), 200)) from None
