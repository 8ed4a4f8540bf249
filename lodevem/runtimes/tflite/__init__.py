"""LiteRT / TFLite with XNNPACK: the runtime a phone app ships by default, and the one latencies
are predicted for unless ``--latency-runtime`` says otherwise."""

from __future__ import annotations

from ..base import Runtime
from .log import parse_log

__all__ = ["Tflite"]


class Tflite(Runtime):
    """Runs the ``.tflite`` litert-torch makes from the model; calibrated by ``benchmark_model``."""

    name = "tflite"
    converted_suffix = ".tflite"
    read_log = staticmethod(parse_log)
