"""armsim's block profile: which translation blocks the runtime executed for one inference, with
their bytes and counts, and their cycles from a throughput pipeline model (llvm-mca).

Why blocks and not instruction classes: a count per class cannot price code whose
instructions-per-cycle differ. ncnn 2025's A53-tuned kernels execute 1.6-2x the instructions of
ncnn 2022's in about the same time (issue 31); the pipeline model sees the pairing, the latency
chains and the load/FMA mix of each block. The plugin (``lodevem_icount.c``, ``blocks=FILE``)
writes, per marker, every block executed since the previous one: start address, raw bytes and a
count per vCPU. Each distinct block is disassembled (``llvm-mc-19``) and priced
(``llvm-mca-19 -mtriple=aarch64 -mcpu=<model>``: total cycles of ``ITERATIONS`` back-to-back
iterations / ``ITERATIONS``, so a block that is a loop body carries its loop-carried chains), cached
by the block's bytes, model and LLVM version. A profile's cycles = sum over blocks of count x
cycles per execution: one number per pipeline model, which the fit scales per core.

The bytes come from running a user's model through the runtime: the host only parses the plugin's
text through the bounded reader here (``parse_blocks``), and the LLVM tools read them as data.
A64 only (armv8.0 / armv8.2 guests); armv7 blocks are not costed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from .armsim_arm32 import A7_MODEL, ARM32_REVISION, a7_info
from .armsim_cores import INORDER_MODELS, INORDER_REVISION
from .armsim_inorder import InsnInfo, align, parse_instruction_tables, simulate

__all__ = ["BLOCK_FORMAT", "CORE_MODELS", "MCA_MODELS", "BlockCoster", "BlockProfile", "ExecutedBlock", "InOrderCoster",
           "LlvmUnavailable", "model_coster", "parse_blocks", "price_summary"]

BLOCK_FORMAT = "lodevem-blocks-1"
# The model that prices each core's blocks, chosen by what the core is (never by fold error):
# in-order cores by lodevem's in-order model on LLVM 19's figures for that very core (the A7, which
# LLVM has no model of, on Arm's pipeline description of it in GCC)
# (armsim_inorder: cortex-a53 / cortex-a55 scheduling models + cited overrides); out-of-order cores
# by llvm-mca's out-of-order model of the core, where LLVM 19 has one of its own or of a documented
# derivative. LLVM 19 prices -mcpu=cortex-a72, cortex-a73 and cortex-a75 with one model (its
# Cortex-A57 model: identical cycles for all three), and -mcpu=cortex-a76 with it too; the Neoverse
# N1, which Arm built on the Cortex-A76 microarchitecture, has a model of its own (neoverse-n1).
IN_ORDER = {**INORDER_MODELS, A7_MODEL.name: A7_MODEL}
CORE_MODELS: dict[str, tuple[str, str, str]] = {
    "Cortex-A7": ("in-order", "inorder-a7", "Arm's Cortex-A7 pipeline description (GCC cortex-a7.md), in-order dual "
                  "issue: LLVM 19 has no Cortex-A7 model (armsim_arm32)"),
    "Cortex-A53": ("in-order", "inorder-a53", "LLVM 19 cortex-a53 figures + overrides, in-order dual issue"),
    "Cortex-A55": ("in-order", "inorder-a55", "LLVM 19 cortex-a55 figures + overrides, in-order dual issue"),
    "Cortex-A72": ("out-of-order", "cortex-a72", "llvm-mca -mcpu=cortex-a72 (LLVM's Cortex-A57 model)"),
    "Cortex-A73": ("out-of-order", "cortex-a72", "llvm-mca -mcpu=cortex-a73 is LLVM's Cortex-A57 model, "
                   "the same cycles as -mcpu=cortex-a72"),
    "Cortex-A75": ("out-of-order", "cortex-a72", "llvm-mca -mcpu=cortex-a75 is LLVM's Cortex-A57 model, "
                   "the same cycles as -mcpu=cortex-a72"),
    "Cortex-A76": ("out-of-order", "neoverse-n1", "llvm-mca -mcpu=neoverse-n1: Arm's Neoverse N1 is built on "
                   "the Cortex-A76 microarchitecture (LLVM 19's -mcpu=cortex-a76 uses the Cortex-A57 model)"),
}
MCA_MODELS: tuple[str, ...] = tuple(dict.fromkeys(m for _, m, _ in CORE_MODELS.values()))
ITERATIONS = 100
LLVM_MC, LLVM_MCA = "llvm-mc-19", "llvm-mca-19"
MATTR = "+neon,+fullfp16,+dotprod"  # every ARMv8.2 feature the guests' runtimes use (ARMv8.0 code is a subset)
# Marks the end of a block in one batched disassembly: BRK #0x4c4f never occurs in runtime code
# paths that return (a BRK traps), so its line splits the output back into blocks.
_SENTINEL = bytes.fromhex("e08929d4")  # brk #0x4c4f, little-endian
_SENTINEL_TEXT = re.compile(r"^\s*brk\s+#0x4c4f\s*$")
# Per instruction set: llvm-mc triple, the sentinel ending a block in a batched stream (a
# permanently undefined instruction, never on a path that returns), how llvm-mc prints it.
_DISASSEMBLY = {"a64": ("aarch64", _SENTINEL, _SENTINEL_TEXT),
                "a32": ("armv7a", bytes.fromhex("ffc4f4e7"), re.compile(r"^\s*udf\s+#19535\s*$")),
                "t32": ("thumbv7a", bytes.fromhex("4cde"), re.compile(r"^\s*udf\s+#76\s*$"))}
_MATTRS = {"a64": MATTR, "a32": "+neon,+vfp4", "t32": "+neon,+vfp4"}


def _key_isa(key: bytes) -> str:
    return key[:3].decode() if key[3:4] == b"\0" and key[:3] in (b"a32", b"t32") else "a64"


def _key_code(key: bytes) -> bytes:
    return key[4:] if _key_isa(key) != "a64" else key
_MAX_BLOCKS = 400_000
_MAX_BLOCK_BYTES = 16_384
_MAX_LINE = 2 * _MAX_BLOCK_BYTES + 4096
_BATCH = 2_000  # blocks per llvm-mca call (one code region each)
_TABLE_BATCH = 20_000  # distinct instructions per llvm-mca -instruction-tables call


class LlvmUnavailable(RuntimeError):
    """The LLVM tools are missing or failed: no block cycles (the caller says so, never guesses)."""


@dataclass(frozen=True)
class ExecutedBlock:
    """One translation block: guest start address, raw bytes, executions per vCPU; ``isa`` a64, or
    a32 / t32 for a 32-bit guest (``n``: its instruction count, T32 mixes 2- and 4-byte ones)."""

    start: int
    code: bytes
    counts: tuple[int, ...]
    isa: str = "a64"
    n: int = 0

    @property
    def executions(self) -> int:
        return sum(self.counts)

    @property
    def instructions(self) -> int:
        return self.n or len(self.code) // 4  # A64: fixed 4-byte instructions

    @property
    def key(self) -> bytes:
        """What prices the block: its bytes, and for a 32-bit guest the instruction set they decode in."""
        return self.code if self.isa == "a64" else self.isa.encode() + b"\0" + self.code


@dataclass(frozen=True)
class BlockProfile:
    """The blocks of one counted inference, with what made them (``provenance``: runtime, version,
    view, graph digest, plugin digest, command)."""

    blocks: tuple[ExecutedBlock, ...]
    provenance: Mapping[str, str] = field(default_factory=dict)

    @property
    def vcpus(self) -> int:
        return max((len(b.counts) for b in self.blocks), default=0)

    def instructions(self, vcpu: Optional[int] = None) -> int:
        return sum(b.instructions * (b.executions if vcpu is None else _at(b.counts, vcpu)) for b in self.blocks)

    def busiest_vcpu(self) -> int:
        return max(range(self.vcpus), key=self.instructions) if self.vcpus else 0

    def cycles(self, per_block: Mapping[bytes, Optional[float]], vcpu: Optional[int] = None) -> float:
        """Sum of count x cycles per execution (all vCPUs, or one); a block without a price is
        charged one cycle per instruction (never happens for decodable A64; see ``uncosted``)."""
        total = 0.0
        for b in self.blocks:
            n = b.executions if vcpu is None else _at(b.counts, vcpu)
            if n:
                c = per_block.get(b.key)
                total += n * (c if c is not None else b.instructions)
        return total

    def uncosted(self, per_block: Mapping[bytes, Optional[float]]) -> int:
        """Instructions executed in blocks the pipeline model could not price."""
        return sum(b.instructions * b.executions for b in self.blocks if per_block.get(b.key) is None)

    def ins_from_gpr(self) -> int:
        """Executed INS (vector element from a general register): the A53/A55-tuned kernels'
        idiom (``ldr d`` + ``ldr x`` + ``ins v.d[1], x``, dual-issued with FMLA: ncnn's
        docs/developer-guide/arm-a53-a55-dual-issue.md), so a profile shows whether the runtime
        took its in-order-tuned path even where its kernels have no symbols (ncnn's wheels)."""
        total = 0
        for b in (b for b in self.blocks if b.isa == "a64"):
            words = struct.unpack(f"<{len(b.code) // 4}I", b.code)
            total += b.executions * sum((w & 0xFFE0FC00) == 0x4E001C00 for w in words)
        return total

    def distinct_codes(self) -> list[bytes]:
        """The distinct keys (``ExecutedBlock.key``) the blocks are priced by."""
        return sorted({b.key for b in self.blocks})

    @property
    def isa(self) -> str:
        """a64 or a32 (the instruction sets a profile's blocks need pricing in)."""
        return "a64" if all(b.isa == "a64" for b in self.blocks) else "a32"


def _at(counts: tuple[int, ...], i: int) -> int:
    return counts[i] if i < len(counts) else 0


def parse_blocks(text: str, marker: str = "2") -> tuple[ExecutedBlock, ...]:
    """The plugin's block section of ``marker`` (bounded: too many or too long blocks, or a
    malformed line, raise ValueError naming the line). Blocks translated twice are merged.
    ``tb <start> <n> <bytes> <counts..>`` is an A64 block, ``tb32 <start> <a|t> <n> <bytes>
    <counts..>`` an A32 or T32 one (2- or 4-byte instructions)."""
    merged: dict[tuple[int, bytes, str, int], list[int]] = {}
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > _MAX_LINE:
            raise ValueError(f"block file line {n}: longer than {_MAX_LINE} characters")
        parts = line.split()
        if parts[:1] == ["blocks"]:
            inside = len(parts) == 3 and parts[1] == marker
            continue
        if parts[:1] == ["end"]:
            inside = False
            continue
        if not inside or parts[:1] not in (["tb"], ["tb32"]):
            continue
        wide = parts[0] == "tb32"
        try:
            if wide and parts[2] not in ("a", "t"):
                raise ValueError
            isa = ("t32" if parts[2] == "t" else "a32") if wide else "a64"
            fields = parts[2:] if wide else parts[1:]
            start, n_insns, code = int(parts[1], 16), int(fields[1]), bytes.fromhex(fields[2])
            counts = [int(v) for v in fields[3:]]
        except (IndexError, ValueError):
            raise ValueError(f"block file line {n}: expected 'tb <hex start> <n> <hex bytes> <counts...>' "
                             "or 'tb32 <hex start> <a|t> <n> <hex bytes> <counts...>'") from None
        sizes_ok = (len(code) == 4 * n_insns) if isa != "t32" else (2 * n_insns <= len(code) <= 4 * n_insns)
        if not 0 < len(code) <= _MAX_BLOCK_BYTES or not sizes_ok or any(c < 0 for c in counts):
            raise ValueError(f"block file line {n}: {n_insns} instructions in {len(code)} bytes")
        row = merged.setdefault((start, code, isa, n_insns if wide else 0), [])
        row.extend([0] * (len(counts) - len(row)))
        for i, c in enumerate(counts):
            row[i] += c
        if len(merged) > _MAX_BLOCKS:
            raise ValueError(f"block file: more than {_MAX_BLOCKS} blocks")
    return tuple(ExecutedBlock(s, c, tuple(v), isa, k) for (s, c, isa, k), v in sorted(merged.items()))


class BlockCoster:
    """Cycles per execution of A64 blocks under one llvm-mca CPU model, cached by block bytes.

    ``cache``: a JSON file (sha256 of the bytes -> cycles, or null where the block could not be
    priced), keyed by model and LLVM version so a cache never answers for another model."""

    def __init__(self, mcpu: str, cache: Optional[Path] = None, llvm_mc: str = LLVM_MC, llvm_mca: str = LLVM_MCA,
                 timeout_s: float = 600.0) -> None:
        self.mcpu, self.llvm_mc, self.llvm_mca, self.timeout_s = mcpu, llvm_mc, llvm_mca, timeout_s
        self.llvm_version = self._version()
        self.cache_path = cache
        self._cache: dict[str, Optional[float]] = {}
        if cache is not None and cache.is_file():
            data = json.loads(cache.read_text())
            if data.get("mcpu") == self.identity and data.get("llvm") == self.llvm_version:
                self._cache = {str(k): (None if v is None else float(v)) for k, v in data["cycles"].items()}

    @property
    def identity(self) -> str:
        """What a cached price belongs to besides the LLVM version: the model (and its revision)."""
        return self.mcpu

    def _save(self, path: Path) -> None:
        """Write the cache atomically (a temporary file renamed over it), so parallel profiling
        runs sharing one cache never read a half-written file; entries another run saved since
        this one loaded are kept."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                data = {}
            if data.get("mcpu") == self.identity and data.get("llvm") == self.llvm_version:
                for k, v in data.get("cycles", {}).items():
                    self._cache.setdefault(str(k), None if v is None else float(v))
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"mcpu": self.identity, "llvm": self.llvm_version, "iterations": ITERATIONS,
                                   "cycles": self._cache}))
        os.replace(tmp, path)

    def _run(self, argv: Sequence[str], stdin: str) -> str:
        try:
            done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LlvmUnavailable(f"{argv[0]}: {exc}") from None
        if done.returncode != 0:
            raise LlvmUnavailable(f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def _version(self) -> str:
        out = self._run([self.llvm_mca, "--version"], "")
        found = re.search(r"LLVM version (\S+)", out)
        return found.group(1) if found else out.strip().splitlines()[0] if out.strip() else "unknown"

    def disassemble(self, codes: Sequence[bytes]) -> list[list[str]]:
        """Assembly lines of each block (one batched llvm-mc call per instruction set; undecodable
        words dropped). A key of a 32-bit block (``ExecutedBlock.key``) decodes as A32 or T32."""
        out: list[list[str]] = [[] for _ in codes]
        for isa, (triple, sentinel, mark) in _DISASSEMBLY.items():
            mine = [(i, c) for i, c in enumerate(codes) if _key_isa(c) == isa]
            if not mine:
                continue
            stream = "\n".join(" ".join(f"0x{x:02x}" for x in _key_code(c) + sentinel) for _, c in mine)
            text = self._run([self.llvm_mc, "--disassemble", f"-triple={triple}", f"-mattr={_MATTRS[isa]}"], stream)
            blocks: list[list[str]] = [[]]
            for line in text.splitlines():
                if not line.strip() or line.strip().startswith("."):
                    continue
                if mark.match(line):
                    blocks.append([])
                else:
                    blocks[-1].append(line.split("//")[0].split("@")[0].strip())
            for (i, _), lines in zip(mine, blocks):
                out[i] = lines
        return out

    def _price(self, codes: Sequence[bytes]) -> list[Optional[float]]:
        asm = self.disassemble(codes)
        text = []
        for i, lines in enumerate(asm):
            if lines:
                text += [f"# LLVM-MCA-BEGIN b{i}", *lines, "# LLVM-MCA-END"]
        out = self._run([self.llvm_mca, "-mtriple=aarch64", f"-mcpu={self.mcpu}", f"-mattr={MATTR}",
                         f"-iterations={ITERATIONS}", "-instruction-info=false", "-resource-pressure=false",
                         "-skip-unsupported-instructions=any"], "\n".join(text) + "\n")
        cycles: dict[int, float] = {}
        region = None
        for line in out.splitlines():
            m = re.match(r"\[\d+\] Code Region - b(\d+)", line)
            if m:
                region = int(m.group(1))
            elif region is not None and line.startswith("Total Cycles:"):
                cycles[region] = float(line.split(":")[1]) / ITERATIONS
        return [cycles.get(i) for i in range(len(codes))]

    def cycles(self, codes: Iterable[bytes]) -> dict[bytes, Optional[float]]:
        """Cycles per execution of every block (cached; the misses priced in batches)."""
        codes = list(dict.fromkeys(codes))
        key = {c: hashlib.sha256(c).hexdigest() for c in codes}
        missing = [c for c in codes if key[c] not in self._cache]
        for i in range(0, len(missing), _BATCH):
            batch = missing[i:i + _BATCH]
            for code, value in zip(batch, self._price(batch)):
                self._cache[key[code]] = value
        if missing and self.cache_path is not None:
            self._save(self.cache_path)
        return {c: self._cache[key[c]] for c in codes}


class InOrderCoster(BlockCoster):
    """Cycles per execution of A64 blocks under one of lodevem's in-order models
    (``armsim_inorder``: LLVM 19's per-instruction figures of the core's own model, the cited
    overrides, in-order dual issue), cached by block bytes and the model's revision."""

    @property
    def identity(self) -> str:
        return f"{self.mcpu} {INORDER_REVISION}" + (f" {ARM32_REVISION}" if IN_ORDER[self.mcpu].isa != "a64" else "")

    def _price(self, codes: Sequence[bytes]) -> list[Optional[float]]:
        model = IN_ORDER[self.mcpu]
        asm = self.disassemble(codes)
        if not model.mcpu:  # no LLVM model of the core: the figures of its own pipeline description
            return [simulate(lines, [a7_info(line) for line in lines], model) for lines in asm]
        table: dict[str, InsnInfo] = {}
        distinct = sorted({line for lines in asm for line in lines})
        for i in range(0, len(distinct), _TABLE_BATCH):
            chunk = distinct[i:i + _TABLE_BATCH]
            out = self._run([self.llvm_mca, "-mtriple=aarch64", f"-mcpu={model.mcpu}", f"-mattr={MATTR}",
                             "-instruction-tables", "-skip-unsupported-instructions=any"], "\n".join(chunk) + "\n")
            for line, info in zip(chunk, align(chunk, parse_instruction_tables(out))):
                if info is not None:
                    table[line] = info
        return [simulate(lines, [table.get(line) for line in lines], model) for lines in asm]


def model_coster(name: str, cache: Optional[Path] = None) -> BlockCoster:
    """The coster of a block-pricing model name: lodevem's in-order models by name
    (``IN_ORDER``), any other name an ``llvm-mca -mcpu``."""
    return (InOrderCoster if name in IN_ORDER else BlockCoster)(name, cache)


def models_for(isa: str) -> tuple[str, ...]:
    """The block-pricing models of the cores of an instruction set (a64: ARMv8 cores; a32: the A7)."""
    return tuple(m for m in MCA_MODELS if (IN_ORDER[m].isa if m in IN_ORDER else "a64") == isa)


def price_summary(profile: BlockProfile, cache_dir: Optional[Path] = None,
                  models: Optional[Sequence[str]] = None) -> dict[str, object]:
    """What a profile record keeps of its blocks: counts of blocks and instructions and, per model,
    the cycles of the counted inference (all vCPUs, and the busiest vCPU) with the instructions
    no model could price. Raises LlvmUnavailable when the tools are missing or fail."""
    busiest = profile.busiest_vcpu()
    out: dict[str, object] = {"format": BLOCK_FORMAT, "distinct": len(profile.distinct_codes()),
                              "instructions": profile.instructions(), "busiest_vcpu": busiest,
                              "ins_gpr": profile.ins_from_gpr(), "cycles": {}}
    for mcpu in models if models is not None else models_for(profile.isa):
        coster = model_coster(mcpu, None if cache_dir is None else cache_dir / f"mca-cache-{mcpu}.json")
        per = coster.cycles(profile.distinct_codes())
        out["llvm"] = coster.llvm_version
        out["cycles"][mcpu] = {"all": round(profile.cycles(per), 1),  # type: ignore[index]
                               "busiest": round(profile.cycles(per, busiest), 1),
                               "uncosted_instructions": profile.uncosted(per)}
    return out
