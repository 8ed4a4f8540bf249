"""The one precision vocabulary: compression levels, kernel arithmetic, file precision, and the
mappings between them.

Why in the worker package: the worker validates level names in requests and writes each file's
precision into its ONNX metadata, and it imports no other lodevem code (the images bake only the
worker package); the host (``lodevem.levels``, the cost model, the row assembly) imports these
names from here, so a level or precision is spelled in one place. Stdlib only, no I/O.

Three words, three vocabularies:

* a **level** (``--levels``) is a variant lodevem derives from a model: ``LEVELS``;
* an **arithmetic** is what one kernel computes in: ``ARITHMETIC`` (the cost model's factors);
* a **file precision** is what a whole file is, as the worker reports it: ``FILE_PRECISIONS``
  (a dynamically quantized conv net is ``int8-dynamic``: its Linear layers are int8, its convs fp32).
"""

from __future__ import annotations

from typing import Iterable, Optional

LEVEL_DESCRIPTIONS: dict[str, str] = {
    "fp32": "the file as given (baseline)",
    "fp16": "model.half(), half-precision inputs",
    "int8": "post-training dynamic quantization (Linear/LSTM/GRU; convolutions stay fp32)",
    "int8-static": "post-training static int8 (FX graph mode, calibrated on random inputs)",
    "pruned": "structured L1-norm channel pruning at 50 %, channels physically removed (no fine-tuning)",
}
LEVELS: tuple[str, ...] = tuple(LEVEL_DESCRIPTIONS)
ARITHMETIC: tuple[str, ...] = ("fp32", "fp16", "int8")
FILE_PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "int8-dynamic", "int8-static", "mixed")

# The levels an on-device runtime's own converter makes from the fp32 source while converting
# (export-tflite / export-ncnn ``quantize``; fp32 is no quantize; pruned is a torch-side change
# made before converting): fp16 weights, int8 dynamic range (int8 weights, float activations
# quantized at run time) and int8-static (full integer, calibrated).
CONVERT_QUANTIZE: tuple[str, ...] = ("fp16", "int8", "int8-static")
# The levels whose files hold int8 weights (a conversion to them may be given calibration data).
INT8_LEVELS: tuple[str, ...] = ("int8", "int8-static")

# The arithmetic each level's kernels run in (pruned: a smaller fp32 graph of its own).
LEVEL_ARITHMETIC: dict[str, str] = {"fp32": "fp32", "fp16": "fp16", "int8": "int8", "int8-static": "int8",
                                    "pruned": "fp32"}
# The file precision a derived variant reports; levels not listed keep their file's own (pruned).
LEVEL_FILE_PRECISION: dict[str, str] = {"fp16": "fp16", "int8": "int8-dynamic", "int8-static": "int8-static"}
# File precisions whose files may still run some layers in float (quantized in part).
PARTLY_QUANTIZED: tuple[str, ...] = ("int8-dynamic", "mixed")
# Dynamic quantization (level int8) makes only these kernel categories int8: convs stay fp32.
DYNAMIC_INT8_CATEGORIES: tuple[str, ...] = ("fc",)
# The arithmetic with speed factors of its own (fp32 is the reference), in the order notes name them.
REDUCED_ARITHMETIC: tuple[str, ...] = ("int8", "fp16")
# What a runtime executes a kernel in (``lodevem.latency.arithmetic``): the arithmetic above plus
# dynamic-range int8 (int8 compute, float tensors between operators: XNNPACK's QD8 kernels).
EXECUTED_ARITHMETIC: tuple[str, ...] = (*ARITHMETIC, "int8-dynamic")
FLOAT_ARITHMETIC: tuple[str, ...] = ("fp32", "fp16")
INT8_ARITHMETIC: tuple[str, ...] = ("int8", "int8-dynamic")
# How the cost model predicts each level that is not fp32 arithmetic (the cell's note says it).
LEVEL_LATENCY_NOTES: dict[str, str] = {
    "fp16": "fp16 variant: per-kernel fp16 factors (compute and bytes)",
    "int8": "int8 (dynamic) variant: fc kernels at int8 factors, convs fp32",
    "int8-static": "int8 variant: per-kernel int8 factors (ncnn int8 rows)",
}


def level_arithmetic(level: Optional[str]) -> str:
    """The arithmetic a level runs in; ``None`` (the file as given) counts as fp32."""
    return LEVEL_ARITHMETIC[level] if level is not None else "fp32"


def kernel_arithmetic(level: Optional[str], category: str, own: str = "fp32") -> str:
    """The arithmetic one kernel of category ``category`` runs in under ``level``: its own
    (``own``, from the file's metadata) when the file is predicted as given (``level`` None),
    fp32 outside the fc kernels of dynamic int8, else the level's."""
    if level is None:
        return own
    if level == "int8" and category not in DYNAMIC_INT8_CATEGORIES:
        return "fp32"
    return level_arithmetic(level)


def file_arithmetic(kernel_arithmetic: Iterable[str]) -> str:
    """The arithmetic whose error figure a file's cell carries: int8 when any kernel is int8,
    else fp16 when any is fp16, else fp32."""
    found = set(kernel_arithmetic)
    return "int8" if "int8" in found else "fp16" if "fp16" in found else "fp32"


def cell_arithmetic(level: Optional[str], kernel_arithmetic: Iterable[str]) -> str:
    """The arithmetic a (file, level) cell is stated in: the level's, else the file's."""
    return level_arithmetic(level) if level is not None else file_arithmetic(kernel_arithmetic)

