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
                  "phases": phases}
    except Exception as exc:  # reported to the host as a typed error, never a traceback
        report = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    report["seconds"] = round(time.perf_counter() - started, 3)
    with open(spec["report"], "w") as fh:
        json.dump(report, fh)
    return 0 if report["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
