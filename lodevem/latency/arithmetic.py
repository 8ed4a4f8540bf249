"""What arithmetic a runtime executes each kernel of a model in, on a given core: the runtimes' rules.

Why its own home: a file's precision is not what the phone computes in, and the difference
depends on the runtime and the core. Pricing a variant by what the file holds gave a user's fp16
file a different figure from ``--levels fp16`` of the same model and carried ncnn's fp16 speed-up
to LiteRT (issue 35). Two steps, each one function:

1. **Declared** (``declared``): what each kernel holds under a compression level, or in a user's
   file as given. A file whose overall precision is a level's (fp16, int8-dynamic, int8-static) is
   read with that level's rule, so a user's file and the derived level of the same precision
   get the same figure by construction.
2. **Executed** (``executed``): what the runtime computes a declared kernel in on the core, as
   its adapter says (``lodevem.runtimes``: ``Runtime.executes`` and ``Runtime.dynamic_int8``, with
   their sources): LiteRT runs an fp16-weights file in fp32 and dynamic-range int8 as XNNPACK's QD8
   Conv2D / FC kernels; ncnn runs fp32 and fp16 models in fp16 on ARMv8.2 cores and its int8 is
   full-integer.

The executed vocabulary is ``EXECUTED``; ``int8-dynamic`` is priced like int8 compute with fp32
tensors (activations stay float between operators).
"""

from __future__ import annotations

from typing import Iterable, Optional

from ..runtimes import adapter
from ..wire.precision import EXECUTED_ARITHMETIC, INT8_ARITHMETIC, LEVEL_ARITHMETIC, LEVEL_FILE_PRECISION
from .armsim.isa import isa_for_core

__all__ = ["EXECUTED", "band_arithmetic", "cell_arithmetic_executed", "declared", "executed", "file_level",
           "has_dot_product", "has_fp16_arithmetic", "int8_group"]

EXECUTED: tuple[str, ...] = EXECUTED_ARITHMETIC
INT8_GROUP_SOURCE = ("Arm Cortex-A55/A75/A76 TRMs: ARMv8.2-A with the dot-product (SDOT/UDOT) and half-precision "
                     "(FP16) instructions; Cortex-A53/A72/A73: ARMv8.0-A; Cortex-A7: ARMv7-A NEON")


def int8_group(core: str) -> str:
    """The ISA group whose int8 kernels a core runs: ``armv8.2`` (dot product), ``armv8.0`` or
    ``armv7`` (multiply-accumulate long only); see ``INT8_GROUP_SOURCE``."""
    isa = isa_for_core(core)
    if isa is None:
        raise KeyError(core)
    return isa


def has_fp16_arithmetic(core: str) -> bool:
    """ARMv8.2-A FP16 arithmetic (Cortex-A55, A75, A76)."""
    return isa_for_core(core) == "armv8.2"


def has_dot_product(core: str) -> bool:
    """ARMv8.2-A SDOT/UDOT (Cortex-A55, A75, A76): XNNPACK then picks its ``neondot`` QS8 kernels
    (google/XNNPACK src/configs/gemm-config.c, ``init_qs8_qc8w_gemm_config``: ``c4__neondot``
    kernels when ``xnn_arch_arm_neon_dot``, else the ``mlal_lane`` ones, e.g. for the A53 and A7)."""
    return isa_for_core(core) == "armv8.2"


def file_level(file_precision: Optional[str]) -> Optional[str]:
    """The level whose rule a file of this overall precision is read with (None: its own kernels)."""
    for level, precision in LEVEL_FILE_PRECISION.items():
        if precision == file_precision:
            return level
    return None


def declared(level: Optional[str], category: str, own: str, runtime: str) -> str:
    """What one kernel holds under ``level`` for ``runtime`` (``level`` None: the file as given,
    ``own`` its kernel's precision): fp32, fp16, int8 (full integer) or int8-dynamic; the
    dynamic-range level is the runtime adapter's (``Runtime.dynamic_int8``)."""
    if level is None:
        return own
    if level == "int8":
        categories, arithmetic = adapter(runtime).dynamic_int8
        return arithmetic if categories is None or category in categories else "fp32"
    return LEVEL_ARITHMETIC[level]


def executed(runtime: str, core: str, kernel: str) -> str:
    """What ``runtime`` computes a kernel that holds ``kernel`` arithmetic in, on ``core`` (its
    adapter says: ``Runtime.executes``)."""
    return adapter(runtime).executes(kernel, has_fp16_arithmetic(core))


def band_arithmetic(executed_kernels: Iterable[str]) -> str:
    """The arithmetic whose held-out error a cell states: int8 when any kernel computes in int8,
    else fp16 when any computes in fp16, else fp32 (the dev rows' ``precision`` vocabulary)."""
    found = set(executed_kernels)
    if found & set(INT8_ARITHMETIC):
        return "int8"
    return "fp16" if "fp16" in found else "fp32"


def cell_arithmetic_executed(runtime: str, core: str, declared_cell: str) -> str:
    """The arithmetic whose held-out error a cell of ``declared_cell`` arithmetic (its level's, or
    its file's) states under ``runtime`` on ``core``."""
    return band_arithmetic([executed(runtime, core, declared_cell)])
