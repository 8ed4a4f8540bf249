"""armsim's in-order pipeline model (worker/armsim/armsim_inorder.py) and kernel attribution
(worker/armsim/armsim_symbols.py): operands, the issue rules, the override table, LLVM's tables parsed,
executed addresses mapped to the functions of a real shared object."""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import shutil

import pytest

from lodevem.worker.armsim.armsim_blocks import BlockCoster, InOrderCoster
from lodevem.worker.armsim.armsim_cores import INORDER_MODELS
from lodevem.worker.armsim.armsim_inorder import (
    InOrderModel,
    InsnInfo,
    align,
    operands,
    parse_instruction_tables,
    simulate,
)
from lodevem.worker.armsim.armsim_symbols import SymbolTable, attribute, parse_maps

FMLA_Q = InsnInfo(1, 10, (("A53UnitFPMDS", 1.0),))  # LLVM 19 cortex-a53's figures for fmla .4s


def test_operands_know_what_an_instruction_reads_and_writes() -> None:
    o = operands("fmla\tv20.4s, v16.4s, v0.s[0]")  # accumulates: reads its destination
    assert o.defs == ("v20",) and set(o.uses) == {"v16", "v0", "v20"} and o.acc == ("v20",)
    o = operands("ldr\td3, [x3], #8")  # post-index: the base is written back
    assert o.defs == ("v3",) and o.uses == ("r3",) and o.base_defs == ("r3",)
    o = operands("stp\tq0, q1, [x0, #32]")
    assert o.defs == () and set(o.uses) == {"r0", "v0", "v1"}
    assert operands("mov\tv3.d[1], x8").uses == ("r8", "v3")  # INS keeps the other lane
    assert operands("subs\tx0, x0, #16").defs == ("r0", "nzcv") and "nzcv" in operands("b.hs\t#-400").uses
    assert operands("ld1\t{ v0.s }[1], [x2]").uses == ("r2", "v0")  # a lane load reads its destination
    assert operands("add\tx1, sp, #16").uses == ("sp",) and operands("mov\tx0, xzr").uses == ()


def _model(*overrides) -> InOrderModel:
    return InOrderModel("test", "cortex-a53", 2, "test", tuple(overrides))


def test_in_order_issue_latency_chains_and_dual_issue() -> None:
    add = InsnInfo(1, 1, (("A53UnitALU", 1.0),))
    # two independent adds a cycle (dual issue, two ALUs); a chain of adds one a cycle
    assert simulate(["add\tx0, x0, #1", "add\tx1, x1, #1"], [add, add], _model()) == pytest.approx(1.0)
    assert simulate(["add\tx0, x0, #1", "add\tx0, x0, #1"], [add, add], _model()) == pytest.approx(2.0)
    # one FMLA chain: LLVM's latency 10 per FMLA; the A53's accumulator forwarding: 4 (measured)
    chain = ["fmla\tv0.4s, v1.4s, v2.4s"] * 4
    assert simulate(chain, [FMLA_Q] * 4, _model()) == pytest.approx(40.0)
    a53 = INORDER_MODELS["inorder-a53"]
    assert simulate(chain, [FMLA_Q] * 4, a53) == pytest.approx(16.0)
    # integer loads between FMLAs dual-issue with them and do not wait for them to complete
    load = InsnInfo(2, 4, (("A53UnitLdSt", 1.0),))
    mixed = [line for i in range(4) for line in (f"fmla\tv{i}.4s, v8.4s, v9.4s", f"ldr\tx{i}, [x9, #{8 * i}]")]
    assert simulate(mixed, [FMLA_Q, load] * 4, a53) == pytest.approx(4.0)


def test_the_a55_prices_q_form_fmla_one_a_cycle_as_its_optimization_guide_says() -> None:
    fmla = InsnInfo(1, 4, (("CortexA55UnitFPMAC", 1.0),))  # LLVM 19: one of two FP MACs, two a cycle
    free = [f"fmla\tv{i}.4s, v20.4s, v21.s[0]" for i in range(8)]  # eight accumulators: no chain binds
    raw = InOrderModel("raw", "cortex-a55", 2, "LLVM's figures only")
    assert simulate(free, [fmla] * 8, raw) == pytest.approx(4.0)
    assert simulate(free, [fmla] * 8, INORDER_MODELS["inorder-a55"]) == pytest.approx(8.0)
    d_form = [f"fmla\tv{i}.2s, v20.2s, v21.s[0]" for i in range(8)]  # 64-bit: still two a cycle
    assert simulate(d_form, [fmla] * 8, INORDER_MODELS["inorder-a55"]) == pytest.approx(4.0)


def test_every_override_names_its_source_and_matches_what_it_means() -> None:
    for model in INORDER_MODELS.values():
        for o in model.overrides:
            assert o.source and re.compile(o.pattern)
    a53 = {o.pattern: o for o in INORDER_MODELS["inorder-a53"].overrides}
    fmac = next(o for o in a53.values() if o.acc_latency == 4)
    assert fmac.matches("fmla\tv20.4s, v16.4s, v0.s[0]") and not fmac.matches("fmul\tv0.4s, v1.4s, v2.4s")
    assert "insn_bench_aarch64" in fmac.source


TABLES = """
[0] Code Region - b0

Instruction Info:
[1]: #uOps
[2]: Latency
[3]: RThroughput
[4]: MayLoad
[5]: MayStore
[6]: HasSideEffects (U)

[1]    [2]    [3]    [4]    [5]    [6]    Instructions:
 1      10    1.00                        fmla	v20.4s, v12.4s, v0.s[0]
 2      4     1.00    *                   ldr	d3, [x9], #8


Resources:
[0.0] - A53UnitALU
[0.1] - A53UnitALU
[1]   - A53UnitFPMDS
[2]   - A53UnitLdSt


Resource pressure per iteration:
[0.0]  [0.1]  [1]    [2]
 -      -     1.00   1.00

Resource pressure by instruction:
[0.0]  [0.1]  [1]    [2]    Instructions:
 -      -     1.00    -     fmla	v20.4s, v12.4s, v0.s[0]
 -      -      -     1.00   ldr	d3, [x9], #8
"""


def test_llvm_mca_instruction_tables_are_parsed_and_aligned() -> None:
    table = parse_instruction_tables(TABLES)
    assert table == [("fmla v20.4s, v12.4s, v0.s[0]", InsnInfo(1, 10, (("A53UnitFPMDS", 1.0),))),
                     ("ldr d3, [x9], #8", InsnInfo(2, 4, (("A53UnitLdSt", 1.0),)))]
    lines = ["fmla\tv20.4s, v12.4s, v0.s[0]", "sqrdmlah\tv0.4s, v1.4s, v2.4s", "ldr\td3, [x9], #8"]
    assert align(lines, table) == [table[0][1], None, table[1][1]]  # a skipped instruction: None


# XNNPACK's f32 GEMM 6x8 main loop for the Cortex-A53 (LiteRT 2.3.0, xnn_f32_gemm_minmax_ukernel_6x8__
# asm_aarch64_neonfma_cortex_a53_prfm, as armsim recorded it: 101 instructions, 48 FMLA): ldr d + ldr x
# + ins between FMLAs. LLVM 19's own cortex-a53 model stalls every load behind the FMLAs.
XNN_A53_LOOP = bytes.fromhex(
    "638440fc131d184e1412804f288540f8161a804f1812814fac0040fd031d184e1a1a814fa80440f91c12824f1e1a824f"
    "448540fc0c1d184e3512804f688540f8371a804f3912814f858540fc041d184e3b1a814f888440f83d12824f3f1a824f"
    "ad0840fd051d184e5412a04fa80c40f9561aa04f5812a14fae1040fd0d1d184e5a1aa14fa81440f95c12a24f5e1aa24f"
    "af1840fd0e1d184e7512a04fa81c40f9771aa04f7912a14f0f1d184e7b1aa14f7d12a24f7f1aa24f608440fc9411834f"
    "288540f89619834f9811844f604080f9b02040fd001d184e9a19844fa82440f99c11854f9e19854f204180f9418540fc"
    "101d184eb511834f688540f8b719834fb911844f404180f9828540fc011d184ebb19844f888440f8bd11854fbf19854f"
    "604180f9b12840fd021d184ed411a34fa82c40f9d619a34fd811a44f804180f9b23040fd111d184eda19a44fa83440f9"
    "dc11a54fde19a54f804080f9b33840fd121d184ef511a34fa83c40f9f719a34fa06080f9f911a44fa08080f9004000f1"
    "fb19a44ffd11a54fa5000291ff19a54f82f3ff54")


@pytest.mark.skipif(shutil.which("llvm-mca-19") is None, reason="needs Debian's llvm-19 (the armsim image has it)")
def test_the_in_order_model_prices_an_a53_kernel_near_its_fmla_bound(tmp_path) -> None:
    assert len(XNN_A53_LOOP) == 4 * 101
    got = InOrderCoster("inorder-a53", tmp_path / "c.json").cycles([XNN_A53_LOOP])[XNN_A53_LOOP]
    llvm = BlockCoster("cortex-a53", tmp_path / "m.json").cycles([XNN_A53_LOOP])[XNN_A53_LOOP]
    assert got is not None and llvm is not None
    assert 48 <= got <= 80 < 200 < llvm  # one FMLA a cycle and the vector loads, vs 280 by llvm-mca


def test_executed_addresses_map_to_the_functions_of_a_real_shared_object() -> None:
    """The process's own libc: qsort's address, through /proc/self/maps, is qsort."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    address = ctypes.cast(libc.qsort, ctypes.c_void_p).value
    with open("/proc/self/maps") as fh:
        raw = []
        for line in fh.read().splitlines():
            fields = line.split(None, 5)
            if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
                start, end = (int(v, 16) for v in fields[0].split("-"))
                raw.append([start, end, int(fields[2], 16), fields[5]])
    maps = parse_maps(raw)
    assert maps and parse_maps([[1, 0, 0, "/x"], "junk", [0, 5, 0, "relative"]]) == ()
    shares = attribute([(address, 90), (address + 1, 10), (1, 5)], maps)
    assert shares[0].symbol == "qsort" and shares[0].library.startswith("libc") and shares[0].instructions == 100
    assert shares[1].symbol == "?" and shares[1].share == pytest.approx(5 / 105)
    assert SymbolTable("/nonexistent").function(0) is None


def test_the_a7_is_priced_by_arms_own_pipeline_description() -> None:
    """armv7 code (A32/T32 text) on the Cortex-A7: GCC's cortex-a7.md classes, in-order dual issue."""
    from lodevem.worker.armsim.armsim_arm32 import A7_MODEL, a7_info, operands32

    o = operands32("vmla.f32\tq8, q9, d0[0]")  # q registers as their d halves; accumulates
    assert o.defs == ("d16", "d17") and set(o.uses) == {"d18", "d19", "d0", "d16", "d17"} and o.acc == ("d16", "d17")
    assert operands32("vld1.32\t{d16, d17}, [r0]!").base_defs == ("r0",)
    assert operands32("ldm\tr0!, {r1, r2, r3}").defs == ("r1", "r2", "r3")
    assert operands32("moveq\tr0, #1").uses == ("nzcv",) and "nzcv" in operands32("subs\tr4, r4, #1").defs
    assert operands32("push\t{r4, lr}").uses == ("r4", "r14", "r13")
    assert a7_info("vmla.f32\tq8, q9, d0[0]").latency == 8 and a7_info("vadd.f32\tq0, q1, q2").latency == 4
    assert a7_info("add\tr0, r0, #1").units == (("a7slot", 1.0),)  # immediate ALU forms dual-issue
    # two independent immediate adds a cycle; NEON never dual-issues: a q-form add holds both slots 2 cycles
    adds = ["add\tr0, r0, #1", "add\tr1, r1, #1"]
    assert simulate(adds, [a7_info(t) for t in adds], A7_MODEL) == pytest.approx(1.0)
    vadds = ["vadd.f32\tq0, q1, q2", "vadd.f32\tq3, q1, q2"]
    assert simulate(vadds, [a7_info(t) for t in vadds], A7_MODEL) == pytest.approx(4.0)
    # a multiply-accumulate chain through one accumulator: forwarded in 4 cycles, not its latency 8
    chain = ["vmla.f32\tq8, q9, q10"] * 2
    assert simulate(chain, [a7_info(t) for t in chain], A7_MODEL) == pytest.approx(8.0)
