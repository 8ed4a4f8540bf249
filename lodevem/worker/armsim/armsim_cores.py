"""The in-order cores' pricing models: LLVM 19's CPU model each takes its figures from, and the
small table of corrections where that model misprices the core, every entry with its source
(docs/armsim-accuracy.md, "Pricing in-order cores"). The issue rules are ``armsim_inorder``'s; the
Cortex-A7's model (no LLVM model of it exists) is ``armsim_arm32``'s.

Why corrections at all: LLVM 19's cortex-a53 model charges by-element FMLA 10 cycles and INS 6, and
its cortex-a55 model lets two Q-form FMLAs issue a cycle and a 256-bit ``ldp q`` take 6; each
correction below is checked against a measurement or Arm's own guide, not fitted.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .armsim_inorder import _FMAC, _IMAC, InOrderModel, Override

__all__ = ["INORDER_MODELS", "INORDER_REVISION"]

# A cached price belongs to these sources (the overrides and the issue rules): any edit is another price.
INORDER_REVISION = hashlib.sha256(Path(__file__).read_bytes()
                                  + (Path(__file__).parent / "armsim_inorder.py").read_bytes()).hexdigest()[:12]
_Q = r"\.(4s|8h|16b|2d)\b"  # a 128-bit (Q-form) vector operand
_VLOAD = r"^(ldr|ldur|ldp|ldnp)\s+[qdsbh]\d|^ld[1-4]r?\s"
_INS_GPR = r"^(mov|ins)\s+v\d+\.[bhsd]\[\d+\],\s*[wx]\d"
_NEON_DP = (r"^(?!ld|st|mov\s+v\d+\.[bhsd]\[|ins\s|umov|smov|fmov|dup\s+v\d+\.\w+,\s*[wx])"  # not moves/loads
            r"[a-z0-9]+\s+v\d+\.(4s|8h|16b|2d)\b")
A53_SOURCES = {
    "bench": ("measured on a Cortex-A53 (Raspberry Pi 3): github.com/ocxtal/insn_bench_aarch64 "
              "results/raspberry-pi-3_cortex-a53.md (Arm publishes no Cortex-A53 optimization guide: "
              "ARM-software/ComputeLibrary issue 843)"),
    "ncnn-guide": ("ncnn's measured A53/A55 dual-issue rules: Tencent/ncnn docs/developer-guide/"
             "arm-a53-a55-dual-issue.md"),
}
A55_SOURCES = {
    "sog": ("Arm Cortex-A55 Software Optimization Guide (ARM-EPM-128372 v3.0), ASIMD FP multiply(-accumulate) "
            "by element: 1 per cycle (as cited by LLVM commits 38c92c1e, D158008, and ea045b99, D153207)"),
    "ncnn-guide": A53_SOURCES["ncnn-guide"],
}
A53_OVERRIDES = (
    Override(_FMAC, A53_SOURCES["bench"] + ": FMLA/FMLS (vector, by element) latency 8, 4 through the "
             "accumulator forwarding path, 1 per cycle (LLVM 19: latency 10)", latency=8, acc_latency=4),
    Override(_IMAC, A53_SOURCES["bench"] + ": MLA/SMLAL/UMLAL latency 4, 1 through the accumulator "
             "forwarding path (LLVM 19: 6)", latency=4, acc_latency=1),
    Override(r"^ld(r|ur)\s+[xw]\d", A53_SOURCES["bench"] + ": LDR/LDUR into a general register, latency 3 "
             "(LLVM 19: 4)", latency=3),
    Override(_INS_GPR, A53_SOURCES["bench"] + ": a general register into a vector lane and back takes 5 cycles, "
             "so INS takes at most 4 (LLVM 19: 6)", latency=4),
    Override(_VLOAD, A53_SOURCES["bench"] + ": vector loads bring 64 bits a cycle (ldr q and ld1 of one register "
             "0.50 a cycle, ldp q and ld1 of two 0.25, of three 0.17, of four 0.12); " + A53_SOURCES["ncnn-guide"]
             + ": no vector load dual-issues with FMLA (a 64-bit one waits 1 cycle, a 128-bit one 2)",
             load=("A53UnitLdSt", 64, 0)),
    Override(_NEON_DP, A53_SOURCES["bench"] + ": one 128-bit ASIMD operation a cycle (fadd/fmul/fmla .4s: "
             "throughput 0.99)", extra_units=(("neon", 1.0),)),
)
A55_OVERRIDES = (
    Override(_FMAC + r".*" + _Q, A55_SOURCES["sog"] + "; Q-form FMLA/FMLS 1 per cycle (LLVM 19: 2, one "
             "FPMAC of two)", units=(("CortexA55UnitFPMAC", 2.0),)),
    Override(r"^fmulx?\s.*" + _Q + r".*\]$", A55_SOURCES["sog"] + ": Q-form FMUL by element 1 per cycle",
             units=(("CortexA55UnitFPMAC", 2.0),)),
    Override(_VLOAD, A55_SOURCES["ncnn-guide"] + ": 128 bits of vector load a cycle (two 64-bit loads dual-issue, a "
             "128-bit one issues alone) and a 128-bit load is not issued with FMLA (LLVM 19: ldp q 6 cycles, "
             "ld1 of two q registers 4)", load=("CortexA55UnitLd", 128, 128)),
    Override(_FMAC + r".*" + _Q, A55_SOURCES["ncnn-guide"] + " (the same port)", extra_units=(("neon", 1.0),)),
)
INORDER_MODELS: dict[str, InOrderModel] = {
    "inorder-a53": InOrderModel("inorder-a53", "cortex-a53", 2, "LLVM 19 cortex-a53 scheduling model "
                                "(AArch64SchedA53.td), in-order dual issue", A53_OVERRIDES),
    "inorder-a55": InOrderModel("inorder-a55", "cortex-a55", 2, "LLVM 19 cortex-a55 scheduling model "
                                "(AArch64SchedA55.td, from the Cortex-A55 Software Optimization Guide)",
                                A55_OVERRIDES),
}
