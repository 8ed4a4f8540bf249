"""ncnn (Tencent): a phone runtime whose files pnnx makes (a ``.param`` graph and a ``.bin``)."""

from __future__ import annotations

from ...wire.precision import FLOAT_ARITHMETIC
from ..base import NUMPY_PIN, Citation, OwnImage, Runtime
from .log import parse_log

__all__ = ["ADAPTER", "Ncnn"]

NCNN_PIN = "ncnn==1.0.20261020"


class Ncnn(Runtime):
    """Runs the ``.param``/``.bin`` pair pnnx makes from the model; calibrated by ``benchncnn``."""

    name = "ncnn"
    converted_suffix = ".ncnn.param"
    read_log = staticmethod(parse_log)
    cited = kernels_cited = Citation("ncnn", "ncnn")
    data_source_prefix = "Tencent/ncnn"
    dynamic_int8 = (None, "int8")  # ncnn's int8 is full-integer (lodevem's ncnn int8 conversion)
    own_image = OwnImage("lodevem-ncnn", (NUMPY_PIN, NCNN_PIN), "python3 + numpy + ncnn", "ncnn, numpy")
    # lodevem's ncnn int8 writer (``int8.py``) calibrates by running the fp32 ncnn model
    convert_requirements = (NCNN_PIN,)

    def executes(self, arithmetic: str, fp16_core: bool) -> str:
        """ncnn's ``Option`` enables fp16 storage and arithmetic by default and uses them where the
        CPU has ARMv8.2 FP16 arithmetic (asimdhp): an fp32 or fp16 model computes in fp16 on a
        Cortex-A55/A75/A76 and in fp32 elsewhere (the dev data's ncnn rows on those cores are fp16
        for that reason, data README); it has no dynamic-range int8."""
        if arithmetic in FLOAT_ARITHMETIC:
            return "fp16" if fp16_core else "fp32"
        return "int8"


ADAPTER = Ncnn()
