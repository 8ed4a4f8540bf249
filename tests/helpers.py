"""Helpers more than one test module uses (real objects configured for a test, not fakes)."""

from __future__ import annotations

from typing import Any

from lodevem.predict import Predictor


def kinds_only(mode: str = "auto", **options: Any) -> Predictor:
    """A ``Predictor`` whose cells are the kinds' own figures: no calibration records read, and
    no cell kept on disk unless the test names a ``cache_dir``."""
    options.setdefault("keep_cells", "cache_dir" in options)
    return Predictor(predictor=mode, use_calibrations=False, **options)
