"""ncnn (Tencent): a phone runtime whose files pnnx makes (a ``.param`` graph and a ``.bin``)."""

from __future__ import annotations

from ..base import Runtime
from .log import parse_log

__all__ = ["Ncnn"]


class Ncnn(Runtime):
    """Runs the ``.param``/``.bin`` pair pnnx makes from the model; calibrated by ``benchncnn``."""

    name = "ncnn"
    converted_suffix = ".ncnn.param"
    read_log = staticmethod(parse_log)
