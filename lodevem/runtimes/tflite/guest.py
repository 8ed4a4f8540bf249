"""LiteRT's container half: measure and evaluate a ``.tflite`` with its ``Interpreter`` (its
default XNNPACK CPU path) in the lean ``lodevem-litert`` image, and make the ``.tflite`` with
litert-torch in the converter image (``.convert``).

Why lean: ``import torch`` alone is ~218 MB of RSS, more than a 256 MB KaiOS phone leaves an app,
while LiteRT's interpreter is ~33 MB; so measuring imports only numpy and LiteRT, and every RSS
phase is the runtime's. Phases as with torch: after_import, after_load (interpreter built and
tensors allocated), after_warmup, and the process's VmHWM.
"""

from __future__ import annotations

import os
from typing import Any

from ...wire.file_sections import ModelSection
from ...wire.protocol import WorkerError, first_line, progress
from ...wire.replies import ConvertReply, EvaluateReply, MeasureReply
from ...wire.requests import ConvertRequest, EvaluateRequest, MeasureRequest
from ...wire.sections import RuntimeSection
from ...worker.actions import _file_info, _measure
from ...worker.guest import Guest, Late, Predict, converted_file, imported, package_version, random_input
from ...worker.load.formats import _format_of
from ...worker.memory import MemoryPhases


class TfliteGuest(Guest):
    name = "tflite"

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        """Run the converted ``.tflite`` with LiteRT's ``Interpreter`` (its default XNNPACK CPU path)."""
        path = converted_file(req)
        res.model = _file_info(req.model_path, _format_of(kind))
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter

        imported(res, mem, self.name, f"ai-edge-litert {package_version('ai-edge-litert')}")
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
        x = random_input(np, shape, dtype)
        res.model = res.model.with_(input_shape=tuple(shape), input_dtype=dtype.name,
                                    converted_bytes=os.path.getsize(path))
        mem.mark("after_load")
        progress(f"loaded {path}, input {shape} {dtype.name}")
        index = first["index"]

        def call() -> None:
            interpreter.set_tensor(index, x)
            interpreter.invoke()

        _measure(req, res, mem, call)
        return None

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        """LiteRT's interpreter; a full-integer model's int8 input is quantized with the file's own
        scale and zero point, and its output dequantized, as an app does."""
        path = converted_file(req)
        import numpy as np
        from ai_edge_litert.interpreter import Interpreter

        res.runtime = RuntimeSection.here(self.name, f"ai-edge-litert {package_version('ai-edge-litert')}")
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
        res.model = ModelSection(format=self.name, input_shape=tuple(shape), input_dtype=in_dtype.name,
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

    def convert(self, req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
        from .convert import action_export_tflite

        action_export_tflite(req, res, mem, kind)


GUEST = TfliteGuest()
