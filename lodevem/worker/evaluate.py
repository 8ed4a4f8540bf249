"""Action ``evaluate``: top-1 / top-5 accuracy of one model file under one runtime.

Why under the row's own runtime: an int8 ``.tflite`` computes with LiteRT's kernels and its own
quantization, so its accuracy can differ from its torch twin's, and the app ships the former.
So the file that is evaluated is the file that is measured: the model (or its derived variant)
under torch, its ONNX export under onnxruntime, the conversion (``converted_path``) under LiteRT
or ncnn, in that runtime's image (torch is never imported for tflite / ncnn).

The samples come from ``data_path``: an uncompressed ``.npz`` the host wrote after validating the
user's data (``lodevem.accuracy.data``), read one sample at a time (``samples``), one inference
each (batch 1: the exports and conversions have batch 1). Labels outside the model's outputs are
refused before any sample is counted. Progress goes to stderr every 10 %.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from .file_sections import ModelSection
from .formats import _format_of
from .memory import MemoryPhases
from .protocol import WorkerError, WorkerResult, artifact_files, first_line, progress
from .replies import AccuracySection
from .requests import EvaluateRequest
from .samples import NpzSamples, SampleFileError
from .sections import RuntimeSection

Predict = Callable[[Any], Any]  # one C x H x W float32 sample -> the output scores, 1-D float


def action_evaluate(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    if not req.data_path or not os.path.isfile(req.data_path):
        raise WorkerError("bad_request", f"evaluate needs data_path of an existing .npz; got {req.data_path!r}")
    import numpy as np

    fh = open(req.data_path, "rb")
    try:
        try:
            samples = NpzSamples(fh, np)
            labels = samples.labels_array()
        except SampleFileError as exc:
            raise WorkerError("bad_request", f"evaluation data {req.data_path}: {exc}") from None
        predict = _predictor(req, res, mem, kind, samples.sample_shape)
        mem.mark("after_load")
        t0 = time.perf_counter()
        n, top1, top5, classes = len(labels), 0, 0, None
        step = max(1, n // 10)
        for i, x in enumerate(samples.iter_inputs()):
            scores = np.asarray(predict(x), dtype=np.float64).ravel()
            if classes is None:
                classes = int(scores.size)
                too_big = labels[labels >= classes]
                if too_big.size:
                    raise WorkerError("bad_request", f"label {int(too_big.max())} is outside the model's {classes} "
                                                     f"outputs (labels must be 0..{classes - 1})")
            if not np.all(np.isfinite(scores)):
                raise WorkerError("model_failed", f"sample {i}: the model's output is not finite (NaN or inf)")
            label = int(labels[i])
            # ties count against the model: a label is top-k only if fewer than k scores beat it
            better = int(np.sum(scores > scores[label]))
            top1 += better == 0
            top5 += better < 5
            if (i + 1) % step == 0 or i + 1 == n:
                progress(f"evaluated {i + 1}/{n}")
        res.timings_s["measure"] = time.perf_counter() - t0
    except SampleFileError as exc:
        raise WorkerError("bad_request", f"evaluation data {req.data_path}: {exc}") from None
    finally:
        fh.close()
    res.accuracy = AccuracySection(n, int(top1), int(top5) if (classes or 0) > 5 else None, classes,
                                   round(res.timings_s["measure"] or 0.0, 3))


def _predictor(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, kind: str,
               sample_shape: tuple[int, ...]) -> Predict:
    shape = [1, *sample_shape]
    if req.input_shape and list(req.input_shape) != shape:
        raise WorkerError("bad_input_shape", f"the data's samples are {list(sample_shape)} but the model takes "
                                             f"{list(req.input_shape)}")
    if req.runtime == "tflite":
        return _tflite(req, res, mem, shape)
    if req.runtime == "ncnn":
        return _ncnn(req, res, mem, shape)
    if req.runtime == "onnxruntime":
        return _onnxruntime(req, res, mem, kind, shape)
    return _torch(req, res, mem, kind, shape)


def _converted(req: EvaluateRequest) -> str:
    path = req.converted_path
    if path is None or not all(os.path.isfile(p) for p in artifact_files(path)):
        raise WorkerError("bad_request", f"runtime '{req.runtime}' needs converted_path of an existing conversion")
    return path


def _torch(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, kind: str, shape: list[int]) -> Predict:
    from .actions import _import_torch, _load_torch

    if kind == "onnx":
        raise WorkerError("bad_request", f"{req.model_path} is an ONNX model: evaluate it with runtime 'onnxruntime'")
    torch = _import_torch(req, res, mem)
    req.input_shape = shape
    module, x = _load_torch(req, res, mem, kind)
    dtype = x.dtype

    def predict(sample: Any) -> Any:
        with torch.inference_mode():
            out = module(torch.from_numpy(sample).reshape(shape).to(dtype))
        while isinstance(out, (tuple, list)) and out:
            out = out[0]
        return out.float().numpy()

    return predict


def _onnxruntime(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, kind: str, shape: list[int]) -> Predict:
    onnx_path = req.model_path if kind == "onnx" else req.onnx_path
    if onnx_path is None or not os.path.exists(onnx_path):
        raise WorkerError("bad_request",
                          f"runtime 'onnxruntime' with a PyTorch model needs onnx_path; got {onnx_path!r}")
    import numpy as np
    import onnxruntime as ort

    from .actions import _file_info, _refuse_twin

    res.model = _file_info(req.model_path, _format_of(kind))
    res.runtime = RuntimeSection.here("onnxruntime", ort.__version__, onnxruntime=ort.__version__)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = req.threads, 1
    try:
        session = ort.InferenceSession(onnx_path, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise WorkerError("corrupt", f"onnxruntime cannot load {onnx_path}: {first_line(exc)}") from None
    _refuse_twin(session, req.model_path, kind)
    first = session.get_inputs()[0]
    ort_type = first.type[len("tensor("):-1]
    dtype = np.dtype({"float": "float32", "double": "float64"}.get(ort_type, ort_type))
    res.model = res.model.with_(input_shape=tuple(shape), input_dtype=dtype.name)
    return lambda sample: session.run(None, {first.name: sample.reshape(shape).astype(dtype)})[0]


def _tflite(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, shape: list[int]) -> Predict:
    """LiteRT's interpreter; a full-integer model's int8 input is quantized with the file's own
    scale and zero point, and its output dequantized, as an app does."""
    path = _converted(req)
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from .runtimes import _version

    res.runtime = RuntimeSection.here("tflite", f"ai-edge-litert {_version('ai-edge-litert')}")
    try:
        interpreter = Interpreter(model_path=path, num_threads=req.threads)
        interpreter.allocate_tensors()
        first = interpreter.get_input_details()[0]
        if [int(d) for d in first["shape"]] != shape:
            interpreter.resize_tensor_input(first["index"], shape)
            interpreter.allocate_tensors()
        out = interpreter.get_output_details()[0]
    except Exception as exc:
        raise WorkerError("corrupt", f"LiteRT cannot load {path} with input {shape}: {first_line(exc)}") from None
    in_dtype, (in_scale, in_zero) = np.dtype(first["dtype"]), first.get("quantization", (0.0, 0))
    out_scale, out_zero = out.get("quantization", (0.0, 0))
    res.model = ModelSection(format="tflite", input_shape=tuple(shape), input_dtype=in_dtype.name,
                             converted_bytes=os.path.getsize(path))

    def predict(sample: Any) -> Any:
        x = sample.reshape(shape)
        if in_dtype.kind in "iu" and in_scale:
            info = np.iinfo(in_dtype)
            x = np.clip(np.round(x / in_scale + in_zero), info.min, info.max)
        interpreter.set_tensor(first["index"], x.astype(in_dtype))
        interpreter.invoke()
        y = interpreter.get_tensor(out["index"]).astype(np.float32)
        return (y - out_zero) * out_scale if np.dtype(out["dtype"]).kind in "iu" and out_scale else y

    return predict


def _ncnn(req: EvaluateRequest, res: WorkerResult, mem: MemoryPhases, shape: list[int]) -> Predict:
    param = _converted(req)
    weights = artifact_files(param)[1]
    import ncnn
    import numpy as np

    from .runtimes import _version, load_ncnn

    res.runtime = RuntimeSection.here("ncnn", f"ncnn {_version('ncnn')}")
    net, inputs, outputs = load_ncnn(ncnn, param, weights, req.threads)
    res.model = ModelSection(format="ncnn", input_shape=tuple(shape), input_dtype="float32")

    def predict(sample: Any) -> Any:
        extractor = net.create_extractor()
        extractor.input(inputs[0], ncnn.Mat(np.ascontiguousarray(sample, dtype=np.float32)))
        code, mat = extractor.extract(outputs[0])
        if code != 0:
            raise WorkerError("model_failed", f"ncnn extract({outputs[0]}) returned {code}")
        return np.array(mat).ravel()

    return predict
