"""PyTorch eager's container half: measure and evaluate the model file as it is, in the bench
image (the worker's loader builds the module: ``worker.actions``)."""

from __future__ import annotations

from typing import Any

from ...wire.protocol import WorkerError
from ...wire.registry import RUNTIMES
from ...wire.replies import EvaluateReply, MeasureReply
from ...wire.requests import EvaluateRequest, MeasureRequest
from ...worker.actions import _import_torch, _load_torch, _measure
from ...worker.guest import Guest, Late, Predict
from ...worker.memory import MemoryPhases


def _no_onnx(model_path: str, verb: str) -> WorkerError:
    """An ``.onnx`` has no torch form: the runtime the registry runs it under instead."""
    return WorkerError("bad_request", f"{model_path} is an ONNX model: {verb} it with runtime "
                                      f"'{RUNTIMES[TorchGuest.name].onnx_files_under}'")


class TorchGuest(Guest):
    name = "torch"

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        """Measure the model file as given (a level's variant is a file ``derive`` wrote first)."""
        if kind == "onnx":
            raise _no_onnx(req.model_path, "measure")
        torch = _import_torch(req, res, mem)
        module, x = _load_torch(req, res, mem, kind)
        with torch.inference_mode():
            _measure(req, res, mem, lambda: module(x))
        return None

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        if kind == "onnx":
            raise _no_onnx(req.model_path, "evaluate")
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


GUEST = TorchGuest()
