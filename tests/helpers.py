"""Helpers more than one test module uses (real objects configured for a test, not fakes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lodevem.predict import Predictor

if TYPE_CHECKING:
    from lodevem.results import PairResult


def kinds_only(mode: str = "auto", **options: Any) -> Predictor:
    """A ``Predictor`` whose cells are the kinds' own figures: no calibration records read, and
    no cell kept on disk unless the test names a ``cache_dir``."""
    options.setdefault("keep_cells", "cache_dir" in options)
    return Predictor(predictor=mode, use_calibrations=False, **options)


def runs_in_the_sandbox(rel: str) -> bool:
    """Whether the module at ``rel`` (a path under lodevem/) is code the sandbox runs, not the host:
    the worker, and each runtime's container half in its folder (``guest.py``, its converter, and
    what only they import, ncnn's int8 writer) and its Arm half (``arm.py``, which armsim's
    emulated Arm python runs in the armsim container)."""
    parts = rel.split("/")
    return parts[0] == "worker" or (parts[0] == "runtimes" and len(parts) == 3
                                    and parts[2] in ("guest.py", "convert.py", "int8.py", "arm.py"))


def row_of(**columns: Any) -> "PairResult":
    """A results row from its CSV/JSON columns (``results.columns``: the one mapping to its parts),
    as a results file read back gives it: a test states a row in the columns a user reads."""
    from lodevem.results import PairResult

    return PairResult.from_dict(dict(columns), "a test row")


def with_columns(row: "PairResult", **columns: Any) -> "PairResult":
    """``row`` with some columns changed (``row_of``)."""
    return row_of(**{**row.to_dict(), **columns})
