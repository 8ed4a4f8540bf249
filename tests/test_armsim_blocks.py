"""armsim's block profile: the bounded parser of the plugin's block file and the llvm-mca pricing."""

from __future__ import annotations

import shutil

import pytest

from lodevem.wire.profile_section import BlockCycles
from lodevem.worker.armsim.armsim_blocks import BlockCoster, BlockProfile, ExecutedBlock, parse_blocks, price_summary

MOV_ADD = bytes.fromhex("200080d2" "00040091")  # mov x0, #1; add x0, x0, #1
FMLA_CHAIN = bytes.fromhex("20cc224e" * 4)  # fmla v0.4s, v1.4s, v2.4s x4: one accumulator, a latency chain
FMLA_FREE = bytes.fromhex("20cc224e" "23cc224e" "24cc224e" "25cc224e")  # four accumulators: throughput-bound

FILE = ("blocks 1 1\ntb 10 2 " + MOV_ADD.hex() + " 99\nend 1\n"  # a section of another marker: ignored
        "blocks 2 2\n"
        f"tb 400000 2 {MOV_ADD.hex()} 5 1\n"
        f"tb 400010 4 {FMLA_CHAIN.hex()} 2 0\n"
        f"tb 400000 2 {MOV_ADD.hex()} 1 0\n"  # the same block translated again: merged
        "end 2\n")


def test_parse_merges_retranslated_blocks_and_counts_per_vcpu() -> None:
    blocks = parse_blocks(FILE, "2")
    assert [(b.start, b.counts) for b in blocks] == [(0x400000, (6, 1)), (0x400010, (2, 0))]
    prof = BlockProfile(blocks)
    assert prof.instructions() == 7 * 2 + 2 * 4 and prof.instructions(1) == 2
    assert prof.busiest_vcpu() == 0
    priced = {MOV_ADD: 1.0, FMLA_CHAIN: 10.0}
    assert prof.cycles(priced) == 7 * 1.0 + 2 * 10.0 and prof.cycles(priced, 1) == 1.0


@pytest.mark.parametrize("line", ["tb 400000 3 " + MOV_ADD.hex() + " 1",  # 3 instructions in 8 bytes
                                  "tb 400000 2 zz 1", "tb 400000 2 " + MOV_ADD.hex() + " -1"])
def test_parse_refuses_malformed_lines(line: str) -> None:
    with pytest.raises(ValueError, match="block file line 2"):
        parse_blocks(f"blocks 2 1\n{line}\nend 2\n", "2")


def test_block_cycles_record_is_bounded() -> None:
    good = {"distinct": 2, "instructions": 22, "llvm": "19.1.7", "cycles": {"cortex-a72": {"all": 5.0, "busiest": 4.0}}}
    assert BlockCycles.parse(good).cycles == {"cortex-a72": (5.0, 4.0)}
    assert BlockCycles.parse({**good, "cycles": {"cortex-a72": {"all": -1, "busiest": 0}}}) is None
    assert BlockCycles.parse({"error": "no LLVM"}).error == "no LLVM"


@pytest.mark.skipif(shutil.which("llvm-mca-19") is None, reason="needs Debian's llvm-19 (the armsim image has it)")
def test_llvm_mca_prices_latency_chains_above_independent_work(tmp_path) -> None:
    coster = BlockCoster("cortex-a72", tmp_path / "cache.json")
    bad = bytes.fromhex("ffffffff") + MOV_ADD  # an undecodable word is dropped, the block still priced
    got = coster.cycles([MOV_ADD, FMLA_CHAIN, FMLA_FREE, bad])
    assert got[FMLA_CHAIN] > 2 * got[FMLA_FREE] > 0  # four dependent FMLAs wait on each other
    assert 0 < got[MOV_ADD] <= 2.5 and got[bad] == pytest.approx(got[MOV_ADD])
    again = BlockCoster("cortex-a72", tmp_path / "cache.json")  # answered from the cache by bytes
    assert again._cache and again.cycles([FMLA_CHAIN]) == {FMLA_CHAIN: got[FMLA_CHAIN]}
    summary = price_summary(BlockProfile(parse_blocks(FILE, "2")), tmp_path, models=("cortex-a53", "cortex-a72"))
    assert set(summary["cycles"]) == {"cortex-a53", "cortex-a72"} and summary["instructions"] == 22


def test_32_bit_blocks_carry_their_instruction_set_and_count() -> None:
    """A 32-bit guest's blocks (``tb32``): A32 words, or T32 with 2- and 4-byte instructions."""
    t32 = bytes.fromhex("10b5" "2de9f04f")  # push {r4, lr}; push.w {r4-r11, lr}
    a32 = bytes.fromhex("0400a0e1")  # mov r0, r4
    text = f"blocks 2 1\ntb32 10000 t 2 {t32.hex()} 3\ntb32 20000 a 1 {a32.hex()} 1\nend 2\n"
    blocks = parse_blocks(text, "2")
    assert [(b.isa, b.instructions, b.key[:4]) for b in blocks] == [("t32", 2, b"t32\0"), ("a32", 1, b"a32\0")]
    prof = BlockProfile(blocks)
    assert prof.instructions() == 2 * 3 + 1 and prof.isa == "a32" and prof.ins_from_gpr() == 0
    with pytest.raises(ValueError, match="block file line 2"):
        parse_blocks(f"blocks 2 1\ntb32 10000 x 2 {t32.hex()} 3\nend 2\n", "2")
    with pytest.raises(ValueError, match="block file line 2"):  # 5 T32 instructions cannot fit in 6 bytes
        parse_blocks(f"blocks 2 1\ntb32 10000 t 5 {t32.hex()} 3\nend 2\n", "2")


@pytest.mark.skipif(shutil.which("llvm-mc-19") is None, reason="needs Debian's llvm-19 (the armsim image has it)")
def test_32_bit_blocks_decode_in_their_own_instruction_set(tmp_path) -> None:
    t32 = ExecutedBlock(0x10000, bytes.fromhex("10b5" "2de9f04f"), (1,), "t32", 2)
    a32 = ExecutedBlock(0x20000, bytes.fromhex("0400a0e1"), (1,), "a32", 1)
    coster = BlockCoster("cortex-a72")
    assert coster.disassemble([MOV_ADD, t32.key, a32.key]) == [
        ["mov\tx0, #1", "add\tx0, x0, #1"], ["push\t{r4, lr}", "push.w\t{r4, r5, r6, r7, r8, r9, r10, r11, lr}"],
        ["mov\tr0, r4"]]
    summary = price_summary(BlockProfile((t32, a32)), tmp_path)
    assert list(summary["cycles"]) == ["inorder-a7"] and summary["cycles"]["inorder-a7"]["all"] > 0
