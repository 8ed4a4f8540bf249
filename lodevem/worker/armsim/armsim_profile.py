"""``armsim-profile``: count what the runtime's own Arm build executes for one inference of a
converted model, under qemu-user emulating an Arm core, with lodevem's TCG plugin.

Runs in the ``lodevem-armsim`` image (x86 python: this module; the guests' userlands, the plugin
and per-core ``/proc/cpuinfo`` views under ``$LODEVEM_ARMSIM_ROOT``). The guest python runs
``armsim_guest.py``, which marks the counted inferences with a marker syscall; the plugin writes
one snapshot of every vCPU's class counters per marker; this module takes the difference of the
two snapshots and divides by the number of counted inferences. See docs/armsim.md.

The ISA is qemu's ``-cpu`` model (qemu has no Cortex-A55: the A76 model has its ISA, ARMv8.2 +
fp16 + dot product); the core the runtime *believes* it runs on (XNNPACK picks core-tuned
kernels from the MIDR in /proc/cpuinfo) is the ``uarch`` view.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from typing import Any, Optional

from ...wire.profile_section import INSN_CLASSES, BlockCycles, InstructionProfile, ThreadCounts
from ...wire.protocol import WorkerError, artifact_files, first_line, progress
from ...wire.registry import RUNTIMES, armsim_isas
from ...wire.replies import ArmsimProfileReply
from ...wire.requests import ArmsimProfileRequest
from ...wire.sections import RuntimeSection
from ..memory import MemoryPhases
from .armsim_blocks import BlockProfile, LlvmUnavailable, parse_blocks, price_summary
from .armsim_symbols import KernelShare, attribute, parse_maps

# ISA -> (qemu binary, qemu -cpu, the core view whose cpuinfo the guest sees by default,
#         the marker syscall's number: sched_get_priority_max on that ABI)
ISA_TARGETS: dict[str, tuple[str, str, str, int]] = {
    "armv7": ("qemu-arm", "cortex-a7", "cortex-a7", 159),
    "armv8.0": ("qemu-aarch64", "cortex-a53", "cortex-a53", 125),
    "armv8.2": ("qemu-aarch64", "cortex-a76", "cortex-a55", 125),
}
_VIEW_ARCH = {"cortex-a7": "armhf", "cortex-a53": "arm64", "cortex-a72": "arm64", "cortex-a73": "arm64",
              "cortex-a55": "arm64", "cortex-a75": "arm64", "cortex-a76": "arm64"}
MARKER_MAGIC = 0x4C4F0000  # the same value as armsim_guest.MARKER_MAGIC (that file runs in the guest)
CLASS_COLUMNS = (*INSN_CLASSES, "total")  # the plugin's columns, in its order
_MAX_COUNTS_BYTES = 1 << 20
_MAX_BLOCKS_BYTES = 256 << 20


def armsim_root() -> str:
    return os.environ.get("LODEVEM_ARMSIM_ROOT", "/opt/armsim")


def view_midr(view_dir: str) -> Optional[int]:
    """The MIDR a core view declares (its sysfs ``midr_el1``, written by make_views.py); None for
    a view made before it had one."""
    try:
        with open(os.path.join(view_dir, "sys", "devices", "system", "cpu", "cpu0", "regs", "identification",
                               "midr_el1")) as fh:
            return int(fh.read(64).strip(), 16)
    except (OSError, ValueError):
        return None


def qemu_cpu_option(cpu: str, view_dir: str) -> str:
    """qemu's ``-cpu`` value: the model with the ISA, told the view's MIDR, so an ``mrs MIDR_EL1``
    in the guest reads the phone core's identity as /proc/cpuinfo and sysfs do."""
    value = view_midr(view_dir)
    return cpu if value is None else f"{cpu},midr=0x{value:x}"


def _snapshots(text: str) -> dict[str, list[list[int]]]:
    """``mark <id> <n>`` blocks of ``vcpu <i> <counts...>`` lines -> {id: [row per vCPU]}."""
    marks: dict[str, list[list[int]]] = {}
    current: list[list[int]] = []
    width = len(CLASS_COLUMNS) + 2
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["mark"] and len(fields) == 3:
            current = marks.setdefault(fields[1], [])
        elif fields[:1] == ["vcpu"] and len(fields) == width + 2:
            current.append([int(v) for v in fields[2:]])
    return marks


def per_inference(text: str, inferences: int) -> list[list[int]]:
    """Each vCPU's counts between marker 1 and marker 2, divided by the number of inferences."""
    marks = _snapshots(text)
    if "1" not in marks or "2" not in marks:
        raise WorkerError("internal", "the counting plugin recorded no inference markers")
    begin, end = marks["1"], marks["2"]
    rows = []
    for vcpu, after in enumerate(end):
        before = begin[vcpu] if vcpu < len(begin) else [0] * len(after)
        rows.append([round((a - b) / inferences) for a, b in zip(after, before)])
    return rows


def _target(req: ArmsimProfileRequest, model: str, isa: str) -> tuple[str, str, str, int]:
    """(qemu binary, emulated cpu, the core's view, the syscall number of the marker) for the
    request, refused in one line when the model, the view or the runtime's Arm build is missing."""
    if not all(os.path.isfile(p) for p in artifact_files(model)):
        raise WorkerError("bad_request", f"armsim-profile needs an existing converted model; got {model!r}")
    qemu, cpu, default_view, sysno = ISA_TARGETS[isa]
    view = req.uarch or default_view
    if view not in _VIEW_ARCH or (_VIEW_ARCH[view] == "armhf") != (isa == "armv7"):
        views = ", ".join(v for v, a in _VIEW_ARCH.items() if (a == "armhf") == (isa == "armv7"))
        raise WorkerError("bad_request", f"uarch {view} is not an {isa} core this image has a view for ({views})")
    if isa not in armsim_isas(req.runtime):
        raise WorkerError("bad_request", f"{RUNTIMES[req.runtime].package} publishes no {isa} wheel: the armsim "
                                         f"image has no {isa} build of {req.runtime}")
    return qemu, cpu, view, sysno


def _thread_counts(counts_path: str, runs: int) -> tuple[list[dict[str, int]], dict[str, int]]:
    """The plugin's counts of one inference per thread (threads that ran nothing left out) and their sum."""
    try:
        with open(counts_path) as fh:
            rows = per_inference(fh.read(_MAX_COUNTS_BYTES), runs)
    except (OSError, ValueError) as exc:
        raise WorkerError("internal", f"cannot read the plugin's counts: {first_line(exc)}") from None
    columns = CLASS_COLUMNS + ("bytes_loaded", "bytes_stored")
    threads = [dict(zip(columns, row)) for row in rows]
    threads = [t for t in threads if t["total"] > 0]
    return threads, {name: sum(t[name] for t in threads) for name in columns}


def action_armsim_profile(req: ArmsimProfileRequest, res: ArmsimProfileReply, mem: MemoryPhases) -> None:
    model = req.converted_path or ""
    isa = req.isa or ""
    qemu, cpu, view, sysno = _target(req, model, isa)
    root = armsim_root()
    view_dir = os.path.join(root, "views", view)
    plugin = os.path.join(root, "liblodevem_icount.so")
    with open(os.path.join(root, "plugin.digest")) as fh:
        plugin_digest = fh.read(64).strip()
    work = tempfile.mkdtemp(prefix="armsim-", dir="/tmp")
    counts_path, report_path = os.path.join(work, "counts.txt"), os.path.join(work, "report.json")
    # the block profile too (armsim_blocks: each executed block priced by the core's pipeline model)
    blocks_path = os.path.join(work, "blocks.txt")
    spec = {"runtime": req.runtime, "model": model, "threads": req.threads, "precision": req.precision,
            "input_shape": req.input_shape or [], "warmup": req.warmup, "inferences": req.runs,
            "report": report_path}
    guest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "armsim_guest.py")
    cmd = [qemu, "-cpu", qemu_cpu_option(cpu, view_dir), "-L", view_dir,
           "-plugin", f"{plugin},out={counts_path},sysno={sysno},magic={MARKER_MAGIC}"
           + (f",blocks={blocks_path}" if blocks_path else ""),
           os.path.join(view_dir, "usr", "bin", "python3.11"), guest, json.dumps(spec)]
    # PYTHONHASHSEED fixed: str hashing decides dict probe lengths in the guest's own Python code,
    # so a random seed moved the count by ~1e-5 run to run; with it fixed, counts repeat exactly.
    env = {"PYTHONPATH": os.path.join(view_dir, "opt", "pydeps"), "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp",
           "PYTHONHASHSEED": "0",
           "LANG": "C.UTF-8", "OMP_NUM_THREADS": str(req.threads), "OMP_WAIT_POLICY": "PASSIVE",
           "PATH": "/usr/bin:/bin"}
    progress(f"profiling {os.path.basename(model)} with {req.runtime} under {qemu} -cpu {cpu} ({view} view), "
             f"{req.threads} thread(s), precision {req.precision}")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace")
    seconds = time.perf_counter() - t0
    report = _read_json(report_path)
    if not report.get("ok"):
        stderr_lines = (proc.stderr or "").strip().splitlines()
        reason = report.get("error") or (stderr_lines[-1] if stderr_lines else f"exit code {proc.returncode}")
        raise WorkerError("model_failed" if report else "internal",
                          f"{req.runtime} under emulated {cpu} failed on {os.path.basename(model)}: "
                          f"{first_line(reason)}")
    threads, totals = _thread_counts(counts_path, req.runs)
    runtime = res.runtime = RuntimeSection(req.runtime, str(report.get("runtime_version", "unknown"))[:80],
                                           "3.11 (emulated)")
    options, phases = report.get("options"), report.get("phases")
    blocks, kernels = _block_summary(blocks_path, req.runs, report.get("code_maps"))
    res.profile = InstructionProfile(
        runtime=runtime.name, runtime_version=runtime.version, isa=isa, qemu_cpu=cpu, uarch=view,
        precision=str(report.get("precision", ""))[:20], threads=req.threads, counts=totals,
        per_thread=tuple(ThreadCounts(i, t) for i, t in enumerate(threads)), inferences=req.runs,
        seconds=round(seconds, 3), plugin_digest=plugin_digest, options=options if isinstance(options, dict) else {},
        phases={k: float(v) for k, v in phases.items() if isinstance(v, (int, float))} if isinstance(phases, dict)
        else {}, blocks=blocks, identity=_identity(report.get("identity")), kernels=kernels)
    progress(f"{totals['total'] / 1e6:.1f} M instructions per inference ({len(threads)} thread(s)), {seconds:.1f} s")


def _block_summary(path: str, runs: int, code_maps: Any) -> tuple[BlockCycles, tuple[KernelShare, ...]]:
    """The priced block profile of the counted inference(s) (marker 2), per inference, and the
    functions it ran in (``armsim_symbols``: the runtime's selected micro-kernels, by the
    guest's executable mappings); an ``error`` instead where the plugin wrote no blocks or LLVM is
    missing (an older image): the counts stand, the block cost model then has nothing to price."""
    try:
        with open(path) as fh:
            text = fh.read(_MAX_BLOCKS_BYTES + 1)
        if len(text) > _MAX_BLOCKS_BYTES:
            return BlockCycles(error=f"block profile larger than {_MAX_BLOCKS_BYTES} bytes"), ()
        profile = BlockProfile(parse_blocks(text, "2"))
    except (OSError, ValueError) as exc:
        return BlockCycles(error=first_line(exc)[:200]), ()
    kernels = tuple(attribute(((b.start, b.instructions * b.executions // max(runs, 1)) for b in profile.blocks),
                              parse_maps(code_maps)))
    try:
        progress("pricing the executed blocks")
        summary: dict[str, Any] = dict(price_summary(profile))
    except (OSError, ValueError, LlvmUnavailable) as exc:
        return BlockCycles(error=first_line(exc)[:200]), kernels
    per = max(runs, 1)
    return BlockCycles(distinct=int(summary["distinct"]), instructions=int(summary["instructions"]) // per,
                       llvm=str(summary.get("llvm", "")),
                       cycles={model: (round(figures["all"] / per, 1), round(figures["busiest"] / per, 1))
                               for model, figures in summary["cycles"].items()}), kernels


_IDENTITY_KEYS = ("hwcap", "hwcap2", "CPU implementer", "CPU variant", "CPU part", "sysfs_midr", "mrs_midr", "error")


def _identity(raw: Any) -> dict[str, Any]:
    """The guest's view of its core (``armsim_guest.identity``), bounded: what the runtime picked
    its kernels by, kept with the profile."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for key in _IDENTITY_KEYS:
        value = raw.get(key)
        if isinstance(value, list):
            out[key] = [str(v)[:20] for v in value[:64]]
        elif isinstance(value, str):
            out[key] = value[:200]
    return out


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as fh:
            data = json.loads(fh.read(65536))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
