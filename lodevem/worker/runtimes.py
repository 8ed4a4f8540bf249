"""Measurement under the runtimes an Android app ships: LiteRT (TFLite) and ncnn.

Why here and lean: ``import torch`` alone is ~218 MB of RSS, more than a 256 MB KaiOS phone
leaves an app, while LiteRT's interpreter is ~33 MB and ncnn's ~28 MB. So these actions import
only numpy and the runtime (never torch, onnx or anything of the converters), and they run in an
image that carries only that runtime (``lodevem-litert`` / ``lodevem-ncnn``): every RSS phase is
the runtime's. The file they run is a conversion made beforehand by ``convert`` (in the
converter image, cached by the host) and passed as ``converted_path``; the user's file is only
hashed here, never loaded.

Phases as with torch and onnxruntime: after_import (runtime baseline), after_load (interpreter
built and tensors allocated / net loaded), after_warmup, and the process's VmHWM.
"""

from __future__ import annotations

import os
import time
from importlib import metadata
from typing import Any

from .actions import Late, _file_info, _measure
from .formats import _format_of
from .memory import MemoryPhases
from .protocol import (
    CONVERT_ACTIONS,
    DEFAULT_INPUT_SHAPE,
    WorkerError,
    WorkerResult,
    artifact_files,
    first_line,
    progress,
)
from .requests import MeasureRequest, WorkerRequest
from .sections import RuntimeSection


def _converted(req: MeasureRequest) -> str:
    path = req.converted_path
    if path is None or not all(os.path.isfile(p) for p in artifact_files(path)):
        action = CONVERT_ACTIONS[req.runtime]
        raise WorkerError("bad_request", f"runtime '{req.runtime}' needs converted_path of an existing conversion "
                                         f"(run action {action} first); got {path!r}")
    return path


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _imported(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, name: str, version: str, t0: float) -> None:
    res.timings_s["import"] = time.perf_counter() - t0
    mem.mark("after_import")
    res.runtime = RuntimeSection.here(name, version)
    progress(f"imported {name} {version}")


def _random_input(np: Any, shape: list[int], dtype: Any) -> Any:
    return (np.random.default_rng(0).standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f"
            else np.zeros(shape, dtype=dtype))


def action_measure_tflite(req: MeasureRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> Late:
    """Run the converted ``.tflite`` with LiteRT's ``Interpreter`` (its default XNNPACK CPU path)."""
    path = _converted(req)
    res.model = _file_info(req.model_path, _format_of(kind))
    t0 = time.perf_counter()
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    _imported(req, res, mem, "tflite", f"ai-edge-litert {_version('ai-edge-litert')}", t0)
    t0 = time.perf_counter()
    try:
        interpreter = Interpreter(model_path=path, num_threads=req.threads)
        interpreter.allocate_tensors()
        first = interpreter.get_input_details()[0]
        shape = [int(d) for d in first["shape"]]
        if req.input_shape and req.input_shape != shape:
            interpreter.resize_tensor_input(first["index"], req.input_shape)
            interpreter.allocate_tensors()
            shape = list(req.input_shape)
    except Exception as exc:
        raise WorkerError("corrupt", f"LiteRT cannot load {path}: {first_line(exc)}") from None
    dtype = np.dtype(first["dtype"])
    x = _random_input(np, shape, dtype)
    res.model = res.model.with_(input_shape=tuple(shape), input_dtype=dtype.name, converted_bytes=os.path.getsize(path))
    res.timings_s["load"] = time.perf_counter() - t0
    mem.mark("after_load")
    progress(f"loaded {path}, input {shape} {dtype.name}")
    index = first["index"]

    def call() -> None:
        interpreter.set_tensor(index, x)
        interpreter.invoke()

    _measure(req, res, mem, call)
    return None


def action_measure_ncnn(req: MeasureRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> Late:
    """Run the converted ncnn model (``.param`` + ``.bin``) with ncnn's Python ``Net``, CPU only.

    ncnn has no batch dimension: the request's shape is ``[1, C, H, W]`` (or a shape without the
    batch), fed as a ``C x H x W`` Mat to the net's first input; every output is extracted.
    """
    param = _converted(req)
    weights = artifact_files(param)[1]
    res.model = _file_info(req.model_path, _format_of(kind))
    t0 = time.perf_counter()
    import ncnn
    import numpy as np

    _imported(req, res, mem, "ncnn", f"ncnn {_version('ncnn')}", t0)
    shape = list(req.input_shape or DEFAULT_INPUT_SHAPE)
    if len(shape) > 4 or (len(shape) == 4 and shape[0] != 1):
        raise WorkerError("bad_input_shape", f"ncnn runs one sample at a time: input shape {shape} needs batch 1 "
                                             "(e.g. --input-shape 1,3,224,224)")
    t0 = time.perf_counter()
    net, inputs, outputs = load_ncnn(ncnn, param, weights, req.threads)
    x = _random_input(np, shape[1:] if len(shape) == 4 else shape, np.float32)
    mat = ncnn.Mat(x)
    res.model = res.model.with_(input_shape=tuple(shape), input_dtype="float32",
                                converted_bytes=sum(os.path.getsize(p) for p in artifact_files(param)))
    res.timings_s["load"] = time.perf_counter() - t0
    mem.mark("after_load")
    progress(f"loaded {param}, input {shape} float32, outputs {', '.join(outputs)}")

    def call() -> None:
        extractor = net.create_extractor()
        extractor.input(inputs[0], mat)
        for name in outputs:
            code, _ = extractor.extract(name)
            if code != 0:
                raise RuntimeError(f"ncnn extract({name}) returned {code}")

    _measure(req, res, mem, call)
    return None


def load_ncnn(ncnn: Any, param: str, weights: str, threads: int) -> tuple[Any, list[str], list[str]]:
    """An ncnn net on the CPU (no Vulkan) with its input and output blob names: the one loader of
    the measurement and the evaluation; a file ncnn refuses is ``corrupt``, one line."""
    net = ncnn.Net()
    net.opt.num_threads = threads
    net.opt.use_vulkan_compute = False
    if net.load_param(param) != 0 or net.load_model(weights) != 0:
        raise WorkerError("corrupt", f"ncnn cannot load {param} (a layer ncnn does not know, or a truncated file)")
    inputs, outputs = list(net.input_names()), list(net.output_names())
    if not inputs or not outputs:
        raise WorkerError("corrupt", f"{param} declares no input or no output blob")
    return net, inputs, outputs
