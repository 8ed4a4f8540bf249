"""onnxruntime CPU: the model's ONNX export (an ``.onnx`` file as it is)."""

from __future__ import annotations

from ..base import Citation, Runtime

__all__ = ["ADAPTER", "OnnxRuntime"]


class OnnxRuntime(Runtime):
    """Runs the ONNX export of a PyTorch file, made once without a limit so the measured runs
    time onnxruntime and not the export."""

    name = "onnxruntime"
    runs_onnx_export = True
    cited = Citation("ONNX Runtime", "onnxruntime")


ADAPTER = OnnxRuntime()
