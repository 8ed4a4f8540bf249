"""The script the EMULATED Arm python runs (``qemu-aarch64``/``qemu-arm`` + lodevem's counting
plugin): load a converted model in the real runtime's Arm build, run warm-up inferences, then
mark the start and the end of the counted inferences with a marker system call the plugin
watches, so the counts it snapshots hold steady-state inferences only (python start, imports,
model load and the first inference's weight packing are outside the markers).

Why a separate script: it runs under the guest's python (Debian's arm64/armhf python3.11 with
the runtime's aarch64/armv7l wheel), which has neither the worker package's dependencies nor a
reason to import them; stdlib + the runtime only. It reads one JSON argument and writes one JSON
file (the host side, ``armsim_worker``, parses it with a bounded, type-checked reader).

The marker: ``sched_get_priority_max(MAGIC + id)``, a syscall nothing else makes with such an
argument; the kernel answers EINVAL, which is ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MARKER_MAGIC = 0x4C4F0000  # "LO": the plugin's magic=...; marker id = argument - MAGIC
MARK_BEGIN, MARK_END, MARK_LOADED = 1, 2, 3


def mark(marker_id: int) -> None:
    try:
        os.sched_get_priority_max(MARKER_MAGIC + marker_id)
    except OSError:
        pass


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _ncnn(spec: dict) -> tuple:
    """ncnn's Python Net, CPU. ``precision``: ``auto`` keeps ncnn's defaults (fp16 storage and
    arithmetic requested; ncnn uses each only where the CPU reports it: fp16 arithmetic needs
    ARMv8.2 asimdhp), ``fp32`` turns every fp16 option off, ``fp16`` turns them on."""
    import ncnn

    net = ncnn.Net()
    opt = net.opt
    opt.num_threads = int(spec["threads"])
    opt.use_vulkan_compute = False
    if spec["precision"] == "fp32":
        opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = False
    elif spec["precision"] == "fp16":
        opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = True
    options = {"use_fp16_packed": bool(opt.use_fp16_packed), "use_fp16_storage": bool(opt.use_fp16_storage),
               "use_fp16_arithmetic": bool(opt.use_fp16_arithmetic), "use_int8_inference": bool(opt.use_int8_inference),
               "num_threads": int(opt.num_threads)}
    param = spec["model"]
    weights = param[: -len(".param")] + ".bin" if param.endswith(".param") else param + ".bin"
    if net.load_param(param) != 0 or net.load_model(weights) != 0:
        raise RuntimeError(f"ncnn cannot load {os.path.basename(param)}")
    inputs, outputs = list(net.input_names()), list(net.output_names())
    if not inputs or not outputs:
        raise RuntimeError("the ncnn model declares no input or no output blob")
    shape = [int(d) for d in spec["input_shape"]]
    chw = shape[1:] if len(shape) == 4 else shape
    mat = ncnn.Mat(*reversed(chw)) if len(chw) in (1, 2, 3) else None  # Mat(w, h, c)
    if mat is None:
        raise RuntimeError(f"ncnn input shape {shape} is not 1-4 dimensional")
    mat.fill(0.5)

    def infer() -> None:
        extractor = net.create_extractor()
        extractor.input(inputs[0], mat)
        for name in outputs:
            code, _ = extractor.extract(name)
            if code != 0:
                raise RuntimeError(f"ncnn extract({name}) returned {code}")

    arithmetic = "fp16" if ncnn_fp16_arithmetic(ncnn, opt) else "fp32"
    return infer, f"ncnn {_version('ncnn')}", "int8" if ncnn_int8(param) else arithmetic, options


_INT8_LAYERS = ("Convolution", "ConvolutionDepthWise", "InnerProduct")


def ncnn_int8(param: str) -> bool:
    """An ncnn int8 model (ncnn's int8 format, as lodevem's ncnn int8 writer makes it): a conv/fc
    layer with ``8=`` (int8_scale_term) non-zero. pnnx's conversions are fp32 graphs and have none."""
    with open(param) as fh:
        for line in fh.read(8_000_000).splitlines():
            fields = line.split()
            if fields[:1] and fields[0] in _INT8_LAYERS and any(f.startswith("8=") and f != "8=0" for f in fields):
                return True
    return False


def ncnn_fp16_arithmetic(ncnn, opt) -> bool:
    """ncnn runs fp16 arithmetic when asked AND the CPU has ARMv8.2 half-precision SIMD."""
    try:
        return bool(opt.use_fp16_arithmetic) and bool(ncnn.cpu_support_arm_asimdhp())
    except AttributeError:  # an older binding without the probe
        return False


def _tflite(spec: dict) -> tuple:
    """LiteRT's Interpreter with its default XNNPACK delegate: float models run in fp32 (XNNPACK
    takes fp16 only when told to, which the Python Interpreter does not by default); an int8
    model runs XNNPACK's QS8/QU8 kernels."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=spec["model"], num_threads=int(spec["threads"]))
    interpreter.allocate_tensors()
    first = interpreter.get_input_details()[0]
    shape = [int(d) for d in first["shape"]]
    if spec.get("input_shape") and [int(d) for d in spec["input_shape"]] != shape:
        shape = [int(d) for d in spec["input_shape"]]
        interpreter.resize_tensor_input(first["index"], shape)
        interpreter.allocate_tensors()
    dtype = np.dtype(first["dtype"])
    x = (np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.kind == "f"
         else np.zeros(shape, dtype=dtype))
    index = first["index"]
    kinds = {np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}
    precision = "int8" if kinds & {"int8", "uint8"} else "fp32"

    def infer() -> None:
        interpreter.set_tensor(index, x)
        interpreter.invoke()

    return infer, f"ai-edge-litert {_version('ai-edge-litert')}", precision, {"num_threads": int(spec["threads"]),
                                                                              "xnnpack_fp16": False}


# Linux hwcap bit names (arch/arm64/include/uapi/asm/hwcap.h; arch/arm/include/uapi/asm/hwcap.h)
_HWCAP64 = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop "
            "sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg").split()
_HWCAP2_64 = ("dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svef32mm svef64mm "
              "svebf16 i8mm bf16 dgh rng bti mte").split()
_HWCAP32 = ("swp half thumb 26bit fastmult fpa vfp edsp java iwmmxt crunch thumbee neon vfpv3 vfpv3d16 tls "
            "vfpv4 idiva idivt vfpd32 lpae evtstrm").split()
_HWCAP2_32 = "aes pmull sha1 sha2 crc32".split()


def identity() -> dict:
    """The core as the runtime's process sees it: the HWCAPs qemu's -cpu model reports, the
    MIDR fields of /proc/cpuinfo and sysfs (the view's), and on AArch64 the MIDR_EL1 register
    read (qemu's -cpu midr=): what XNNPACK's cpuinfo and ncnn pick kernels by."""
    import ctypes
    import platform

    out: dict = {}
    try:
        libc = ctypes.CDLL(None)
        libc.getauxval.restype = ctypes.c_ulong
        a64 = platform.machine() == "aarch64"
        names, names2 = (_HWCAP64, _HWCAP2_64) if a64 else (_HWCAP32, _HWCAP2_32)
        hw, hw2 = libc.getauxval(16), libc.getauxval(26)
        out["hwcap"] = [n for i, n in enumerate(names) if hw >> i & 1]
        out["hwcap2"] = [n for i, n in enumerate(names2) if hw2 >> i & 1]
        with open("/proc/cpuinfo") as fh:
            for line in fh.read(65536).splitlines():
                key, _, value = line.partition(":")
                if key.strip() in ("CPU part", "CPU variant", "CPU implementer") and key.strip() not in out:
                    out[key.strip()] = value.strip()
        with open("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1") as fh:
            out["sysfs_midr"] = fh.read(64).strip()
        if a64 and "cpuid" in out["hwcap"]:
            import mmap

            page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            page.write(bytes.fromhex("000038d5c0035fd6"))  # mrs x0, midr_el1 ; ret
            address = ctypes.addressof(ctypes.c_char.from_buffer(page))
            out["mrs_midr"] = f"0x{ctypes.CFUNCTYPE(ctypes.c_uint64)(address)():016x}"
    except (OSError, AttributeError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


_MAX_MAPS_BYTES = 1 << 20
_MAX_MAPS = 2000


def code_maps() -> list:
    """The guest's executable file mappings ([start, end, file offset, path], from qemu's
    /proc/self/maps): the host maps each executed block to the shared object, and the symbol,
    it ran in (which micro-kernels the runtime selected)."""
    out: list = []
    try:
        with open("/proc/self/maps") as fh:
            text = fh.read(_MAX_MAPS_BYTES)
    except OSError:
        return out
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
            start, _, end = fields[0].partition("-")
            out.append([int(start, 16), int(end, 16), int(fields[2], 16), fields[5][:300]])
            if len(out) >= _MAX_MAPS:
                break
    return out


def main() -> int:
    spec = json.loads(sys.argv[1])
    report: dict[str, Any] = {"ok": False}
    started = time.perf_counter()
    try:
        infer, version, precision, options = (_ncnn if spec["runtime"] == "ncnn" else _tflite)(spec)
        mark(MARK_LOADED)
        loaded = time.perf_counter()
        for _ in range(int(spec["warmup"])):
            infer()
        mark(MARK_BEGIN)
        begin = time.perf_counter()
        for _ in range(int(spec["inferences"])):
            infer()
        mark(MARK_END)
        end = time.perf_counter()
        # where the emulation time goes (guest clock): start + import + load, warm-up, counted
        phases = {"load_s": round(loaded - started, 3), "warmup_s": round(begin - loaded, 3),
                  "counted_s": round(end - begin, 3)}
        report = {"ok": True, "runtime_version": version, "precision": precision, "options": options,
                  "phases": phases, "code_maps": code_maps(), "identity": identity()}
    except Exception as exc:  # reported to the host as a typed error, never a traceback
        report = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    report["seconds"] = round(time.perf_counter() - started, 3)
    with open(spec["report"], "w") as fh:
        json.dump(report, fh)
    return 0 if report["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
