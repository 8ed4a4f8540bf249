"""An in-order dual-issue pipeline model for A64 blocks: LLVM 19's per-instruction figures of the
Cortex-A53 / Cortex-A55 scheduling models, corrected by a small cited override table, issued in
order (docs/armsim-accuracy.md, "Pricing in-order cores").

Why not ``llvm-mca -mcpu=cortex-a53`` itself: its model charges by-element FMLA 10 cycles of
latency, INS from a general register 6, and, having no out-of-order completion
(``RetireOOO``), stalls every integer load behind the last FMLA until the FMLA would write back:
XNNPACK's and ncnn's hand-scheduled A53 kernels (``ldr d`` + ``ldr x`` + ``ins`` between FMLAs)
come out 3-4x too slow (mobilenet_v2's main GEMM loop: 280 cycles per iteration, where 48
FMLAs at one a cycle and 16 vector loads bound it near 64). llvm-mca has no way to override a
model's figures, so this module takes LLVM's figures (``llvm-mca -instruction-tables``: micro-ops,
latency, pipeline units per instruction) and issues them itself:

* in program order, at most ``width`` instructions a cycle (one slot each: LLVM counts an
  address writeback as a second micro-op, which these cores perform in address generation, as
  LLVM's own A55 model notes: "Pre/Post Indexing - Performed as part of address generation");
* an instruction issues when its source registers are ready (producer's issue cycle + latency;
  a post-/pre-index base register is ready the next cycle) and its pipeline units are free;
* results complete out of order (the Cortex-A55 Software Optimization Guide, "Instructions with
  out-of-order completion"; on the A53, ncnn's measured dual-issue patterns, where integer loads
  issue between back-to-back FMLAs without waiting for them);
* a multiply-accumulate whose accumulator was written by the previous one of its kind reads it
  through the accumulator forwarding path (``acc_latency``).

Cycles of a block: steady state of back-to-back iterations (``WARMUP`` iterations, then the
mean of ``MEASURED``), so a loop body carries its loop-carried chains. The cores' override tables, with
their sources, are in ``armsim_cores``; their revision is part of every cached price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

__all__ = ["InOrderModel", "InsnInfo", "Override", "align", "load_bits", "operands", "parse_instruction_tables",
           "simulate"]

WARMUP, MEASURED = 8, 24


@dataclass(frozen=True)
class InsnInfo:
    """LLVM's figures for one instruction: micro-ops, latency, pipeline units (group, cycles)."""

    uops: int
    latency: int
    units: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Override:
    """A correction of LLVM's figures for instructions whose text matches ``pattern``."""

    pattern: str
    source: str
    latency: Optional[int] = None
    acc_latency: Optional[int] = None  # accumulator forwarding from the same kind of instruction
    units: Optional[tuple[tuple[str, float], ...]] = None  # replaces LLVM's pipeline units
    extra_units: tuple[tuple[str, float], ...] = ()  # added to them
    # a vector load's cycles from its width: (load unit, bits a cycle, narrowest load that also
    # holds the "neon" issue pseudo unit for as long)
    load: Optional[tuple[str, int, int]] = None

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text) is not None


@dataclass(frozen=True)
class InOrderModel:
    """One in-order core: the LLVM CPU model its figures come from, its issue width, overrides."""

    name: str
    mcpu: str
    width: int
    source: str
    overrides: tuple[Override, ...] = field(default_factory=tuple)
    isa: str = "a64"  # a64, or a32 (A32/T32 text)
    # the registers an instruction's text reads and writes (None: A64's ``operands``)
    parse: Optional[Callable[[str], "Operands"]] = field(default=None, compare=False)

    def info(self, text: str, base: InsnInfo) -> tuple[InsnInfo, Optional[int]]:
        """LLVM's figures for ``text`` with every matching override applied, and the
        accumulator-forwarding latency (None: none)."""
        latency, units, acc = base.latency, base.units, None
        for o in self.overrides:
            if o.matches(text):
                latency = o.latency if o.latency is not None else latency
                units = o.units if o.units is not None else units
                units = _merge(units, o.extra_units)
                acc = o.acc_latency if o.acc_latency is not None else acc
                if o.load is not None:
                    unit, per_cycle, neon_from = o.load
                    bits = load_bits(text)
                    cycles = float(max(1, -(-bits // per_cycle)))
                    units = _merge(tuple(u for u in units if u[0] != unit), ((unit, cycles),)
                                   + ((("neon", cycles),) if bits >= neon_from else ()))
        return InsnInfo(base.uops, latency, units), acc


def _merge(units: tuple[tuple[str, float], ...], extra: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    """Pipeline units with ``extra`` added: a group named twice keeps the longer occupancy."""
    out = dict(units)
    for group, cycles in extra:
        out[group] = max(out.get(group, 0.0), cycles)
    return tuple(sorted(out.items()))


_VREG = re.compile(r"\b([qdsbh])\d+\b|\bv\d+\.(\d*)([bhsd])\b")
_LANE_BITS = {"b": 8, "h": 16, "s": 32, "d": 64, "q": 128}


def load_bits(text: str) -> int:
    """Bits a SIMD&FP load brings in (ldr/ldur/ldp of q/d/s registers, ld1-ld4 lists of whole
    vectors; a lane or replicate load its element)."""
    head, _, _ = " ".join(text.split()).partition("[")
    if re.search(r"\}\s*\[\d+\]", text) or re.match(r"^ld[1-4]r\s", text):
        found = _VREG.search(head)
        return _LANE_BITS[found.group(3)] if found and found.group(3) else 64
    total = 0
    for m in _VREG.finditer(head):
        if m.group(1):
            total += _LANE_BITS[m.group(1)]
        else:  # v<n>.<lanes><size>: 128 or 64 bits
            total += (int(m.group(2) or 1) * _LANE_BITS[m.group(3)]) if m.group(2) else _LANE_BITS[m.group(3)]
    return total



_FMAC = r"^f(mla|mls)\s"
_IMAC = r"^(mla|mls|[su]ml[as]l2?|sqdml[as]l2?)\s"


# ---- llvm-mca -instruction-tables -------------------------------------------------------------
def parse_instruction_tables(out: str) -> list[tuple[str, InsnInfo]]:
    """(instruction text, LLVM's figures) per instruction of one ``llvm-mca -instruction-tables``
    region, in order: micro-ops and latency from "Instruction Info", pipeline units from
    "Resource pressure by instruction" (a group's columns summed). Instructions llvm-mca skipped
    are absent (``align`` pairs the rest with the input)."""
    infos: list[tuple[int, int, str]] = []
    names: list[str] = []
    units: list[tuple[str, tuple[tuple[str, float], ...]]] = []
    section = ""
    for line in out.splitlines():
        if line.startswith("[1]    [2]    [3]"):
            section = "info"
        elif line.startswith("Resources:"):
            section, names = "resources", []
        elif line.startswith("Resource pressure by instruction:"):
            section = "pressure"
        elif section == "resources" and (m := re.match(r"^\[[\d.]+\]\s+-\s+(\S+)", line)):
            names.append(m.group(1))
        elif not line.strip() or line.startswith("["):
            section = "" if section == "info" and not line.strip() else section
        elif section == "info":
            m = re.match(r"^\s*(\d+)\s+(\d+)\s+[\d.]+\s+(?:[*U]\s+)*(.*)$", line)
            if m:
                infos.append((int(m.group(1)), int(m.group(2)), _norm(m.group(3))))
        elif section == "pressure":
            cells = line.split(None, len(names))
            used: dict[str, float] = {}
            for name, v in zip(names, cells[:len(names)]):
                if v != "-":
                    used[name] = used.get(name, 0.0) + float(v)
            units.append((_norm(cells[len(names)] if len(cells) > len(names) else ""), tuple(sorted(used.items()))))
    return [(text, InsnInfo(u, lat, res)) for (u, lat, text), (_, res) in zip(infos, units)]


def _norm(text: str) -> str:
    return " ".join(text.split())


def align(lines: Sequence[str], table: Sequence[tuple[str, InsnInfo]]) -> list[Optional[InsnInfo]]:
    """LLVM's figures for each input line (None where llvm-mca skipped it: unsupported)."""
    out: list[Optional[InsnInfo]] = []
    j = 0
    for line in lines:
        if j < len(table) and table[j][0] == _norm(line):
            out.append(table[j][1])
            j += 1
        else:
            out.append(None)
    return out


# ---- operands: which registers an instruction reads and writes ---------------------------------
_REG = re.compile(r"(?<![\w.#])(?:([xw])(\d+)|(w?sp)|([vqdshb])(\d+))(?![\w])")
_NO_DEF = re.compile(r"^(st[a-z0-9]*|cmp|cmn|tst|fcmpe?|f?ccmpe?|ccmn|b|b\.\w+|br|ret|cbn?z|tbn?z|prfu?m|nop|"
                     r"hint|dmb|dsb|isb|yield|brk|svc|msr|bti|paciasp|autiasp)$")
_FLAGS_DEF = re.compile(r"^(adds|subs|ands|bics|adcs|sbcs|negs|ngcs|cmp|cmn|tst|f?ccmpe?|ccmn|fcmpe?)$")
_FLAGS_USE = re.compile(r"^(b\.\w+|csel|csinc|csinv|csneg|cset|csetm|cinc|cinv|cneg|fcsel|adcs?|sbcs?|ngcs?|"
                        r"f?ccmpe?|ccmn)$")
_READS_DEST = re.compile(r"^(f?ml[as]|[su]ml[as]l2?|[su]dot|usdot|sudot|sqdml[as]l2?|sqrdml[as]h|bsl|bit|bif|ins|"
                         r"movk|bfi|bfxil|bfm|bfc|[su]adalp|[su]aba|[su]abal2?|[su]r?sra|sl[ir]|sri|tbx|"
                         r"[a-z]*xtn2|[a-z]*shrn2|[a-z]*shrun2|fcvtx?n2|r?(add|sub)hn2|fml[as]l2?|fcmla|"
                         r"[su]mmla|usmmla|bfmmla|bfdot)$")
_WRITEBACK = re.compile(r"\]!|\],")


def _reg_name(m: re.Match) -> Optional[str]:
    if m.group(1):
        return f"r{m.group(2)}" if int(m.group(2)) < 31 else None
    if m.group(3):
        return "sp"
    return f"v{m.group(5)}"


def _split_operands(rest: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


@dataclass(frozen=True)
class Operands:
    defs: tuple[str, ...]
    uses: tuple[str, ...]
    base_defs: tuple[str, ...]  # written by address writeback (ready the next cycle)
    acc: tuple[str, ...]  # the destination registers a multiply-accumulate also reads


def operands(text: str) -> Operands:
    mnemonic, _, rest = " ".join(text.split()).partition(" ")
    mnemonic = mnemonic.lower()
    ops = _split_operands(rest.strip())
    regs = [[r for m in _REG.finditer(op) if (r := _reg_name(m))] for op in ops]
    defs: list[str] = []
    uses: list[str] = []
    base: list[str] = []
    memory = [i for i, op in enumerate(ops) if op.startswith("[")]
    if memory:
        i = memory[0]
        base_regs = regs[i][:1]
        uses += regs[i]
        uses += [r for op in regs[i + 1:] for r in op]  # a post-index register
        if _WRITEBACK.search(rest):
            base += base_regs
        targets = [r for op in regs[:i] for r in op]
        if mnemonic.startswith("st"):
            if mnemonic.startswith(("stxr", "stlxr", "stxp", "stlxp")) and targets:
                defs.append(targets[0])
                targets = targets[1:]
            uses += targets
        elif mnemonic.startswith("prf"):
            pass
        else:  # loads (a lane load keeps the other lanes: it reads its destination)
            defs += targets
            if re.search(r"\}\s*\[\d+\]", rest):
                uses += targets
    elif _NO_DEF.match(mnemonic):
        uses += [r for op in regs for r in op]
    elif ops:
        defs += regs[0]
        uses += [r for op in regs[1:] for r in op]
    acc: tuple[str, ...] = ()
    lane_insert = mnemonic in ("mov", "ins") and bool(ops) and re.search(r"^v\d+\.[bhsd]\[\d+\]$", ops[0] or "")
    if defs and (_READS_DEST.match(mnemonic) or lane_insert):
        uses.append(defs[0])
        acc = (defs[0],)
    if mnemonic in ("bl", "blr"):
        defs.append("r30")
    if mnemonic == "ret":
        uses.append("r30")
    if _FLAGS_DEF.match(mnemonic):
        defs.append("nzcv")
    if _FLAGS_USE.match(mnemonic):
        uses.append("nzcv")
    return Operands(tuple(defs), tuple(uses), tuple(base), acc)


# ---- the pipeline -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Step:
    ops: Operands
    info: InsnInfo
    acc_latency: Optional[int]
    kind: str  # accumulate kind (fmac / imac / "") for forwarding


def _kind(text: str) -> str:
    if re.match(_FMAC, text) or re.match(r"^v(ml[as]|fm[as])\.f", text):
        return "fmac"
    if re.match(_IMAC, text):
        return "imac"
    return ""


def _steps(lines: Sequence[str], infos: Sequence[InsnInfo], model: InOrderModel) -> list[_Step]:
    parse = model.parse or operands
    out = []
    for text, base in zip(lines, infos):
        info, acc = model.info(text, base)
        out.append(_Step(parse(text), info, acc, _kind(" ".join(text.split()))))
    return out


_UNKNOWN = InsnInfo(1, 1, ())
# Units per pipeline group: LLVM's groups of two (integer ALUs; the A55's FP ALUs and MACs), one
# otherwise; "neon" is the overrides' pseudo unit (one 128-bit ASIMD issue a cycle).
_PAIRED = {"A53UnitALU", "CortexA55UnitALU", "CortexA55UnitFPALU", "CortexA55UnitFPMAC", "a7slot"}


def _needs(units: Sequence[tuple[str, float]], free: dict[str, list[int]]) -> list[tuple[list[int], bool, int]]:
    """Per pipeline group an instruction uses: (that group's next-free cycles, whether it takes
    every unit of the group, for how many cycles)."""
    out = []
    for group, cycles in units:
        n = 2 if group in _PAIRED else 1
        row = free.setdefault(group, [0] * n)
        every = n > 1 and cycles >= n
        out.append((row, every, max(1, round(cycles / n if every else cycles))))
    return out


def simulate(lines: Sequence[str], infos: Sequence[Optional[InsnInfo]], model: InOrderModel,
             warmup: int = WARMUP, measured: int = MEASURED) -> Optional[float]:
    """Steady-state cycles of one execution of the block ``lines`` (LLVM's ``infos`` for them,
    the model's overrides applied). None for an empty block."""
    if not lines or len(lines) != len(infos):
        return None
    free: dict[str, list[int]] = {}
    steps = [(s, _needs(s.info.units, free)) for s in _steps(lines, [i or _UNKNOWN for i in infos], model)]
    ready: dict[str, int] = {}
    acc_ready: dict[str, tuple[int, str]] = {}  # reg -> (cycle via forwarding, producer kind)
    cycle, slots = 0, 0
    marks = []
    for _ in range(warmup + measured):
        for s, needs in steps:
            t = cycle
            for r in s.ops.uses:
                at = ready.get(r, 0)
                if s.acc_latency is not None and r in s.ops.acc and r in acc_ready and acc_ready[r][1] == s.kind:
                    at = min(at, acc_ready[r][0])
                if at > t:
                    t = at
            while True:  # in order: not before the previous instruction, a slot and its units free
                if t == cycle and slots >= model.width:
                    t += 1
                    continue
                late = t
                for row, every, _ in needs:
                    late = max(late, max(row) if every else min(row))
                if late == t:
                    break
                t = late
            if t > cycle:
                cycle, slots = t, 0
            slots += 1
            for row, every, hold in needs:
                if every:
                    row[:] = [t + hold] * len(row)
                else:
                    row[row.index(min(row))] = t + hold
            for r in s.ops.defs:
                ready[r] = t + max(s.info.latency, 1) if r != "nzcv" else t + 1
                acc_ready.pop(r, None)
            if s.acc_latency is not None:
                for r in s.ops.acc:
                    acc_ready[r] = (t + s.acc_latency, s.kind)
            for r in s.ops.base_defs:
                ready[r] = t + 1
        marks.append(cycle + (1 if slots else 0))
    return (marks[-1] - marks[warmup - 1]) / measured
