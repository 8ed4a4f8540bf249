"""Which emulated ISA stands for which phone core, and why.

qemu-user emulates an instruction set, not a microarchitecture, so a core is profiled under the
qemu CPU model with its ISA, and the runtime is shown that core's MIDR (``uarch``, via the
image's /proc/cpuinfo views) so it picks the kernels it picks on the phone:

* ARMv7-A (Cortex-A7, 32-bit Android Go / KaiOS phones): ``qemu-arm -cpu cortex-a7`` (NEON, VFPv4).
* ARMv8.0-A (Cortex-A53, A72, A73): ``qemu-aarch64 -cpu cortex-a53``; no fp16 arithmetic, no dot
  product (Arm Cortex-A53 TRM; A72/A73 TRMs).
* ARMv8.2-A (Cortex-A55, A75, A76): ``qemu-aarch64 -cpu cortex-a76``: qemu 7.2 has no A55 model,
  and the A76 model has the ISA the A55/A75 share, ARMv8.2 + FP16 arithmetic + dot product
  (Arm Cortex-A55/A75/A76 TRMs: "Armv8.2-A ... Advanced SIMD dot product, half-precision").

Every core has its own uarch view (lodevem/sandbox/armsim/make_views.py: A7, A53, A55, A72, A73,
A75, A76): the runtimes pick in-order-tuned kernels by the MIDR (ncnn's A53/A55 kernels, XNNPACK's
A53 GEMMs), so an out-of-order A72 shown an A53's MIDR would run code the phone never runs.
"""

from __future__ import annotations

from typing import Optional

from ...wire.protocol import ARMSIM_ISAS

ISAS: tuple[str, ...] = ARMSIM_ISAS  # the worker protocol's list: one home
# profile core (lodevem.profiles.CORE_TYPES) -> (isa, uarch view)
CORE_ISA: dict[str, tuple[str, str]] = {
    "Cortex-A7": ("armv7", "cortex-a7"),
    "Cortex-A53": ("armv8.0", "cortex-a53"),
    "Cortex-A72": ("armv8.0", "cortex-a72"),
    "Cortex-A73": ("armv8.0", "cortex-a73"),
    "Cortex-A55": ("armv8.2", "cortex-a55"),
    "Cortex-A75": ("armv8.2", "cortex-a75"),
    "Cortex-A76": ("armv8.2", "cortex-a76"),
}
QEMU_CPU = {"armv7": "cortex-a7", "armv8.0": "cortex-a53", "armv8.2": "cortex-a76"}


def runtime_isas(runtime: str) -> tuple[str, ...]:
    """The ISAs the armsim image has ``runtime``'s Arm build for (the registry's ``armsim_isas``)."""
    from ...wire.registry import armsim_isas

    return armsim_isas(runtime)


def isa_for_core(core: str) -> Optional[str]:
    """The ISA profiled for ``core`` (a profile's ``Cortex-A55`` style name); None: not covered."""
    found = CORE_ISA.get(core)
    return found[0] if found else None


def uarch_for_core(core: str) -> Optional[str]:
    found = CORE_ISA.get(core)
    return found[1] if found else None


def covered(runtime: str, core: str) -> bool:
    """Whether armsim can profile ``runtime`` for ``core``."""
    isa = isa_for_core(core)
    return isa is not None and isa in runtime_isas(runtime)
