"""Pricing ARMv7 (A32/T32) blocks for the Cortex-A7 (docs/armsim-accuracy.md, "The Cortex-A7").

What LLVM 19 offers for an in-order dual-issue ARMv7 core, and why none of it prices the A7:
``-mcpu=cortex-a7`` has no scheduling model (a ``ProcNoItin`` processor: llvm-mca refuses it);
``cortex-a8`` has itineraries only, which llvm-mca cannot use ("unable to find instruction-level
scheduling information"); ``cortex-r52``, the one in-order AArch32 machine model, has no classes for
NEON multiply-accumulate (``vmla.f32`` is an unsupported instruction to it), the bulk of ncnn's
armv7 kernels; ``cortex-a9``, ``cortex-a15``, ``swift`` and ``cortex-a57`` are out-of-order models.

So the A7's figures come from Arm's own pipeline description of the core, contributed to GCC
(``gcc/config/arm/cortex-a7.md``, "Contributed by ARM Ltd."): in order, dual issue under limited
circumstances (two execute slots; a register-operand ALU instruction and loads take the first; a
multiply, a double load or any NEON instruction both), result latencies per class (ALU 2 with a
forwarding path of 1, load 2, VFP 4, VFP/NEON multiply-accumulate 8 with accumulator forwarding 4,
other NEON 4 and two cycles of both slots, NEON multiply 4 and two cycles), with completion out of
order (a measured account, hardwarebug.org 2014 "Cortex-A7 instruction cycle timings": "although
instruction issue is in-order, completion is out of order"). These feed the same in-order issue as
the A53/A55 (``armsim_inorder.simulate``); the registers each instruction reads and writes come from
its UAL text (``operands32``: q registers as their two d halves, s registers as their d register).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .armsim_inorder import InOrderModel, InsnInfo, Operands, Override

ARM32_REVISION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]  # part of a cached A7 price
GCC_A7 = ("Arm's Cortex-A7 pipeline description in GCC, gcc/config/arm/cortex-a7.md (contributed by ARM Ltd); "
          "out-of-order completion: hardwarebug.org/2014/05/15/cortex-a7-instruction-cycle-timings")


_COND = r"(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)"
_BOTH = (("a7slot", 2.0),)  # both execute slots for one cycle
_EX1 = (("a7slot", 1.0), ("a7ex1", 1.0))  # the first slot (no dual issue with another ex1-only)
_ANY = (("a7slot", 1.0),)


def a7_info(text: str) -> InsnInfo:
    """The A7's figures for one A32/T32 instruction, by GCC's reservation classes."""
    m = " ".join(text.split()).lower()
    op = m.split(" ", 1)[0].split(".", 1)[0]
    if op.startswith("v"):
        shape = m.split(" ", 1)[0]
        if re.match(r"v(ml[as]l?|fm[as]|qdml[as]l|qrdml[as]h)", op):  # multiply-accumulate (VFP or NEON)
            return InsnInfo(1, 8, (_BOTH if _neon(m) else _EX1) + (("a7fpmul", 1.0),))
        if re.match(r"v(mul|mull|qdmulh|qrdmulh|qdmull|nmul)$", op):
            return InsnInfo(1, 4, ((("a7slot", 4.0),) if _neon(m) else _EX1) + (("a7fpmul", 1.0),))
        if re.match(r"v(div|sqrt)$", op):
            return InsnInfo(1, 16 if ".f32" in shape else 31, _EX1 + (("a7fpdiv", 13.0),))
        if re.match(r"v(ldr|str)$", op):  # VFP single/double load and store
            return InsnInfo(1, 2 if op == "vldr" else 0, _BOTH if " d" in m else _EX1)
        if op == "vmov" and re.search(r"\b[rs]\d+\b", m) and not _neon(m):
            return InsnInfo(1, 2, _EX1)  # core <-> VFP transfers
        if op in ("vmrs", "vmsr"):
            return InsnInfo(1, 4, _EX1)
        if _neon(m) or op.startswith(("vld", "vst")):
            return InsnInfo(1, 4, (("a7slot", 4.0),))  # other NEON: two cycles of both slots
        return InsnInfo(1, 4, _EX1 + (("a7fpadd", 1.0),))  # VFP arithmetic, compare, convert
    if re.match(r"b(l|lx|x)?" + _COND + r"?(\.w)?$|^(cbn?z|tb[bh])$", op):
        return InsnInfo(1, 1, (("a7slot", 1.0), ("a7branch", 1.0)))
    if re.match(r"(s|u)?(mul|mla|mls|mull|mlal|smla\w*|smul\w*|smmul\w*|smmla\w*|smuad\w*|usad\w*)", op):
        return InsnInfo(1, 2, _BOTH)
    if re.match(r"(s|u)div", op):
        return InsnInfo(1, 5, (("a7slot", 10.0),))
    if re.match(r"(ldr|ldrb|ldrh|ldrsb|ldrsh|ldrex)", op):
        return InsnInfo(1, 2, _BOTH if op.startswith("ldrd") else _EX1)
    if re.match(r"(ldm|pop)", op):
        return InsnInfo(1, 3, (("a7slot", 2.0 * max(1, (len(_reglist(m)) + 1) // 2)),))
    if re.match(r"(str|stm|push)", op):
        return InsnInfo(1, 0, _BOTH if op.startswith(("strd", "stm", "push")) else _EX1)
    if re.search(r"#", m) or op in ("mov", "movs", "movw", "movt", "uxtb", "uxth", "sxtb", "sxth", "uxtab", "sxtab"):
        return InsnInfo(1, 1, _ANY)  # immediate / extend forms dual-issue (latency 2, forwarded in 1)
    return InsnInfo(1, 1, _EX1)  # register and shifted-register ALU forms: the first slot


def _neon(m: str) -> bool:
    return bool(re.search(r"\bq\d+\b", m)) or (bool(re.search(r"\bd\d+\b", m)) and bool(
        re.match(r"v\w+\.(i|u|s|p)?(8|16|32|64)\b", m.split(" ", 1)[0])) and not m.startswith(("vldr", "vstr")))


def _reglist(m: str) -> list[str]:
    found = re.search(r"\{([^}]*)\}", m)
    return [r.strip() for r in found.group(1).split(",")] if found else []


_REG32 = re.compile(r"\b(r\d+|sp|lr|pc|ip|fp|sb|sl|[sdq]\d+)\b")
_ALIAS = {"ip": "r12", "fp": "r11", "sb": "r9", "sl": "r10", "sp": "r13", "lr": "r14", "pc": "r15"}
_READS_DEST32 = re.compile(r"^(v?ml[as]l?|vfm[as]|vqdml[as]l|vqrdml[as]h|vbsl|vbit|vbif|vpadal|vaba|vabal|vsra|"
                           r"vrsra|vsli|vsri|vtbx|movt|bfi|bfc|mla|mls|smla\w*|smlal\w*|umlal)$")
_NO_DEF32 = re.compile(r"^(str\w*|stm\w*|push|vst\w*|vpush|cmp|cmn|tst|teq|vcmpe?|b\w*|cbn?z|tb[bh]|pld\w*|nop|"
                       r"dmb|dsb|isb|it\w*|vmsr|bkpt|svc|udf)$")


def _names(token: str) -> list[str]:
    out = []
    for r in _REG32.findall(token):
        r = _ALIAS.get(r, r)
        if r[0] == "q":
            n = int(r[1:])
            out += [f"d{2 * n}", f"d{2 * n + 1}"]
        elif r[0] == "s":
            out.append(f"d{int(r[1:]) // 2}")
        elif r != "r15":
            out.append(r)
    return out


def operands32(text: str) -> Operands:
    """Registers an A32/T32 instruction reads and writes (UAL text from llvm-mc)."""
    m = " ".join(text.split()).lower()
    mnemonic, _, rest = m.partition(" ")
    base = mnemonic.split(".", 1)[0]
    flags_def = base.endswith("s") and not re.match(r"^(v\w+|mls|bls|ls|cs|mrs|smmls)$", base) and base not in (
        "vmrs", "ldrs", "ls") or base in ("cmp", "cmn", "tst", "teq") or "apsr_nzcv" in rest
    conditional = bool(re.search(_COND + r"(\.w)?$", base)) and not base.startswith(("vcmp", "teq")) or \
        base.startswith(("adc", "sbc", "rsc", "it"))
    ops = [o.strip() for o in re.split(r",(?![^{\[]*[}\]])", rest) if o.strip()]
    defs: list[str] = []
    uses: list[str] = []
    wb: list[str] = []
    mem = next((i for i, o in enumerate(ops) if o.startswith("[")), None)
    if base in ("push", "pop", "vpush", "vpop"):
        regs = _names(rest)
        (defs if base in ("pop", "vpop") else uses).extend(regs)
        uses.append("r13")
        wb.append("r13")
    elif mem is not None or re.match(r"^(ldm|stm|vldm|vstm)", base):
        if mem is not None:  # [base, offset] then an optional post-index register or immediate
            address, targets_ops = ops[mem], ops[:mem]
            uses += _names(address) + [r for o in ops[mem + 1:] for r in _names(o)]
            post = mem + 1 < len(ops)
        else:  # ldm/stm base{!}, {list}
            address, targets_ops, post = ops[0], ops[1:], False
            uses += _names(address)
        if "!" in rest or post:
            wb += _names(address)[:1]
        targets = [r for o in targets_ops for r in _names(o)]
        if base.startswith(("st", "vst")):
            uses += targets
        else:
            defs += targets
            if re.search(r"\[\d*\]", ops[0] if ops else ""):  # a lane load keeps the other lanes
                uses += targets
    elif _NO_DEF32.match(base) or base.startswith("it"):
        uses += [r for o in ops for r in _names(o)]
    elif ops:
        defs += _names(ops[0])
        uses += [r for o in ops[1:] for r in _names(o)]
    acc: tuple[str, ...] = ()
    if defs and ops and base == "vmov" and re.search(r"\[\d+\]", ops[0]):  # a lane insert keeps the others
        uses += defs
    if defs and _READS_DEST32.match(base):
        uses += defs
        acc = tuple(defs)
    if flags_def:
        defs.append("nzcv")
    if conditional:
        uses.append("nzcv")
    return Operands(tuple(dict.fromkeys(defs)), tuple(dict.fromkeys(uses)), tuple(wb), acc)


A7_MODEL = InOrderModel("inorder-a7", "", 2, GCC_A7, (
    Override(r"^v(ml[as]|fm[as])\.f", GCC_A7 + ": the accumulator of a multiply-accumulate is forwarded to the "
             "next one in 4 cycles (define_bypass 4 ... arm_mac_accumulator_is_result)", acc_latency=4),),
    isa="a32", parse=operands32)
