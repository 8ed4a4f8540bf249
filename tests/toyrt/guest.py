"""The toy runtime's container half: its converter traces the model to TorchScript (a ``.toy``
file) in the converter image, and its measurement and evaluation run that file with
``torch.jit.load`` in the bench image.

Why TorchScript: it is the one runtime-like thing both images already have, so the toy needs no
image of its own; its numbers are plumbing, never shown to a user. The folder is copied into a
copy of the package as ``lodevem/runtimes/toyrt/`` with its one registry line
(``tests/test_runtime_plugin.py``), which the container then runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from lodevem.wire.file_sections import ModelSection
from lodevem.wire.protocol import WorkerError, first_line, progress
from lodevem.wire.replies import ConvertReply, EvaluateReply, MeasureReply, WorkerReply
from lodevem.wire.requests import ConvertRequest, EvaluateRequest, MeasureRequest
from lodevem.worker.actions import _file_info, _measure
from lodevem.worker.export.convert import _converted_section, _loaded_and_checked
from lodevem.worker.guest import Guest, Late, Predict, converted_file, imported
from lodevem.worker.load.formats import _format_of
from lodevem.worker.memory import MemoryPhases


class ToyGuest(Guest):
    name = "toyrt"

    def convert(self, req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
        torch, module, x = _loaded_and_checked(req, res, mem, kind)
        out = req.converted_path or ""
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                torch.jit.trace(module, x, check_trace=False).save(out + ".tmp")
        except Exception as exc:
            raise WorkerError("export_failed", f"toyconv cannot trace {req.model_path}: {first_line(exc)}") from None
        os.replace(out + ".tmp", out)
        assert res.model is not None
        res.converted = _converted_section(req, self.name, "toyconv", res.model.shape, t0, precision="fp32",
                                           scheme="TorchScript trace (toy)", calibration=None, census={})
        progress(f"wrote {out}")

    def _load(self, req: "MeasureRequest | EvaluateRequest", res: WorkerReply, mem: MemoryPhases) -> tuple[Any, Any]:
        path = converted_file(req)
        time.perf_counter()
        import torch

        torch.set_num_threads(req.threads)
        imported(res, mem, self.name, f"torch {torch.__version__}")
        return torch, torch.jit.load(path).eval()

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        res.model = _file_info(req.model_path, _format_of(kind))
        torch, module = self._load(req, res, mem)
        shape = list(req.input_shape or [1, 3, 224, 224])
        x = torch.randn(shape)
        res.model = res.model.with_(input_shape=tuple(shape), input_dtype="float32",
                                    converted_bytes=os.path.getsize(converted_file(req)))
        mem.mark("after_load")
        with torch.inference_mode():
            _measure(req, res, mem, lambda: module(x))
        return None

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        torch, module = self._load(req, res, mem)
        res.model = ModelSection(format=self.name, input_shape=tuple(shape), input_dtype="float32")

        def predict(sample: Any) -> Any:
            with torch.inference_mode():
                return module(torch.from_numpy(sample).reshape(shape)).float().numpy()

        return predict


GUEST = ToyGuest()
