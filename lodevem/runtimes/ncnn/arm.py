"""ncnn's Arm half: how armsim's emulated Arm python (``worker/armsim/armsim_guest.py``) loads and
runs an ncnn file with ncnn's Arm build.

Why here: the folder of a runtime holds everything that runs it, on both sides of the container
wall and in the emulated guest. The guest loads this file by path (it has no lodevem package to
import), so it imports only the stdlib at module level and ncnn inside ``load``.
"""

from __future__ import annotations

import os
from typing import Any, Callable

DISTRIBUTION = "ncnn"
_INT8_LAYERS = ("Convolution", "ConvolutionDepthWise", "InnerProduct")


def load(spec: dict[str, Any]) -> tuple[Callable[[], None], str, str, dict[str, Any]]:
    """ncnn's Python Net, CPU: (one inference, the distribution, the file's arithmetic, options).
    ``precision``: ``auto`` keeps ncnn's defaults (fp16 storage and arithmetic requested; ncnn uses
    each only where the CPU reports it: fp16 arithmetic needs ARMv8.2 asimdhp), ``fp32`` turns
    every fp16 option off, ``fp16`` turns them on."""
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
    arithmetic = "int8" if int8_file(param) else "fp16" if fp16_arithmetic(ncnn, opt) else "fp32"
    return one_inference(net, inputs[0], outputs, mat), DISTRIBUTION, arithmetic, options


def one_inference(net: Any, first_input: str, outputs: list[str], mat: Any) -> Callable[[], None]:
    """One inference of ``net``: ``mat`` fed to its first input, every output extracted (ncnn
    computes lazily, so an output not extracted is not computed). The one inference of the
    measurement (``guest``) and of the emulated Arm core's profile."""

    def infer() -> None:
        extractor = net.create_extractor()
        extractor.input(first_input, mat)
        for name in outputs:
            code, _ = extractor.extract(name)
            if code != 0:
                raise RuntimeError(f"ncnn extract({name}) returned {code}")

    return infer


def int8_file(param: str) -> bool:
    """An ncnn int8 model (ncnn's int8 format, as lodevem's ncnn int8 writer makes it): a conv/fc
    layer with ``8=`` (int8_scale_term) non-zero. pnnx's conversions are fp32 graphs and have none."""
    with open(param) as fh:
        for line in fh.read(8_000_000).splitlines():
            fields = line.split()
            if fields[:1] and fields[0] in _INT8_LAYERS and any(f.startswith("8=") and f != "8=0" for f in fields):
                return True
    return False


def fp16_arithmetic(ncnn: Any, opt: Any) -> bool:
    """ncnn runs fp16 arithmetic when asked AND the CPU has ARMv8.2 half-precision SIMD."""
    try:
        return bool(opt.use_fp16_arithmetic) and bool(ncnn.cpu_support_arm_asimdhp())
    except AttributeError:  # an older binding without the probe
        return False
