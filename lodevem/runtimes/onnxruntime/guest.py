"""onnxruntime's container half: measure and evaluate an ``.onnx`` (the model's export, made
once without a limit by action export-onnx, or the user's own) with onnxruntime's CPU provider.

Why torch is never imported here: every RSS phase of the run is then onnxruntime's; the model
info the onnx package reads is taken after memory was recorded (``_late_onnx_info``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ...wire.protocol import WorkerError, first_line, progress
from ...wire.replies import EvaluateReply, MeasureReply
from ...wire.requests import EvaluateRequest, MeasureRequest
from ...wire.sections import RuntimeSection
from ...worker.actions import _file_info, _filled_from_onnx, _measure
from ...worker.export.onnx_export import load_onnx, resolve_static
from ...worker.export.quantized import PRECISION_KEY
from ...worker.guest import Guest, Late, Predict
from ...worker.load.formats import _format_of
from ...worker.memory import MemoryPhases


class OnnxRuntimeGuest(Guest):
    name = "onnxruntime"

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        """Run an .onnx with onnxruntime; torch is never imported, so every RSS phase is ORT's.

        A PyTorch model must come with ``onnx_path`` of an existing export (action export-onnx, which
        the host caches): exporting here, even in a child process, would charge torch's memory to the
        container cgroup whose peak is the number lodevem reports.
        """
        onnx_path = req.model_path if kind == "onnx" else req.onnx_path
        if onnx_path is None or not os.path.exists(onnx_path):
            raise WorkerError("bad_request", f"runtime '{self.name}' with a PyTorch model needs onnx_path of an "
                                             f"existing export (run action export-onnx first); got {onnx_path!r}")
        res.model = _file_info(req.model_path, _format_of(kind))
        import numpy as np
        import onnxruntime as ort

        mem.mark("after_import")
        res.runtime = RuntimeSection.here(self.name, ort.__version__)
        progress(f"imported onnxruntime {ort.__version__}")
        session, first, dtype = _session(ort, np, onnx_path, req.threads, req.model_path, kind, sequential=True)
        shape = req.input_shape or resolve_static([d if isinstance(d, int) and d > 0 else None for d in first.shape])
        res.model = res.model.with_(input_shape=tuple(shape), input_dtype=dtype.name)
        x = (np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.kind == "f"
             else np.zeros(shape, dtype=dtype))
        mem.mark("after_load")
        progress(f"loaded {onnx_path}, input {shape} {dtype.name}")
        feeds = {first.name: x}
        _measure(req, res, mem, lambda: session.run(None, feeds))
        return lambda: _late_onnx_info(res, onnx_path)

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        onnx_path = req.model_path if kind == "onnx" else req.onnx_path
        if onnx_path is None or not os.path.exists(onnx_path):
            raise WorkerError("bad_request",
                              f"runtime '{self.name}' with a PyTorch model needs onnx_path; got {onnx_path!r}")
        import numpy as np
        import onnxruntime as ort

        res.model = _file_info(req.model_path, _format_of(kind))
        res.runtime = RuntimeSection.here(self.name, ort.__version__)
        session, first, dtype = _session(ort, np, onnx_path, req.threads, req.model_path, kind)
        res.model = res.model.with_(input_shape=tuple(shape), input_dtype=dtype.name)
        return lambda sample: session.run(None, {first.name: sample.reshape(shape).astype(dtype)})[0]


def _session(ort: Any, np: Any, onnx_path: str, threads: int, model_path: str, kind: str,
             sequential: bool = False) -> tuple[Any, Any, Any]:
    """(CPU session, its first input, that input's numpy dtype) of ``onnx_path``; a file onnxruntime
    refuses is ``corrupt``, a float twin is refused (``_refuse_twin``)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    if sequential:
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(onnx_path, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise WorkerError("corrupt", f"onnxruntime cannot load {onnx_path}: {first_line(exc)}") from None
    _refuse_twin(session, model_path, kind)
    first = session.get_inputs()[0]
    ort_type = first.type[len("tensor("):-1]  # e.g. "tensor(float)"
    return session, first, np.dtype({"float": "float32", "double": "float64"}.get(ort_type, ort_type))


def _refuse_twin(session: Any, model_path: str, kind: str) -> None:
    """An export of an int8 or fp16 PyTorch model is its float twin (for the kernel detector):
    onnxruntime would measure fp32 weights, not the user's model. Read from the session's own
    metadata, so the onnx package (and its RSS) stays out of the measured process."""
    if kind == "onnx":
        return
    recorded = session.get_modelmeta().custom_metadata_map.get(PRECISION_KEY)
    precision = json.loads(recorded).get("precision") if recorded else "fp32"
    if precision != "fp32":
        raise WorkerError("bad_request", f"{model_path} is a {precision} model; its ONNX export is a float twin for "
                                         f"latency prediction, so onnxruntime would measure fp32 weights: measure it "
                                         f"with runtime 'torch', or give an .onnx quantized with onnxruntime")


def _late_onnx_info(res: MeasureReply, path: str) -> None:
    """Model info for an onnxruntime run, read only after memory was recorded: parsing the file
    with the onnx package would otherwise inflate the onnxruntime process's RSS figures."""
    try:
        model = load_onnx(path)
    except Exception as exc:  # informative only; the measurement stands
        progress(f"could not read the model info from {path}: {first_line(exc)}")
        return
    if res.model is not None and res.model.params is None:
        res.model = _filled_from_onnx(res.model, model)


GUEST = OnnxRuntimeGuest()
