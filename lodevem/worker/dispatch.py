"""``run``: the request's action, dispatched to its module.

Why a module of its own: ``runtimes`` (tflite/ncnn measurements) and ``convert`` (export-tflite,
export-ncnn) reuse the helpers of ``actions`` (loading, timed passes, file info), so ``actions``
cannot import them back without a cycle; the dispatcher sits above all three.
"""

from __future__ import annotations

from .actions import Late
from .actions import run as run_torch_or_onnx
from .formats import sniff_format
from .memory import MemoryPhases
from .protocol import CONVERT_ACTIONS, WorkerResult
from .requests import (
    ArmsimProfileRequest,
    ConvertRequest,
    DecodeImagesRequest,
    EvaluateRequest,
    MeasureRequest,
    WorkerRequest,
)


def run(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases) -> Late:
    """Dispatch; returns the step to run once memory was recorded (or None)."""
    if isinstance(req, ConvertRequest):  # PyTorch/ONNX -> an on-device runtime's format
        from .convert import action_export_ncnn, action_export_tflite

        kind = sniff_format(req.model_path)
        (action_export_tflite if req.action == "export-tflite" else action_export_ncnn)(req, res, mem, kind)
        return None
    if isinstance(req, ArmsimProfileRequest):  # the runtime's Arm build under qemu-user (lodevem-armsim image)
        from .armsim_profile import action_armsim_profile

        action_armsim_profile(req, res, mem)
        return None
    if isinstance(req, DecodeImagesRequest):  # an ImageFolder tree's images, in the sandbox (the host never decodes)
        from .images import action_decode_images

        action_decode_images(req, res)
        return None
    if isinstance(req, EvaluateRequest):  # accuracy under the row's runtime (tflite/ncnn: torch is never imported)
        from .evaluate import action_evaluate

        action_evaluate(req, res, mem, sniff_format(req.model_path))
        return None
    if isinstance(req, MeasureRequest) and req.runtime in CONVERT_ACTIONS:  # a converted file: torch is never imported
        from .runtimes import action_measure_ncnn, action_measure_tflite

        kind = sniff_format(req.model_path)
        return (action_measure_tflite if req.runtime == "tflite" else action_measure_ncnn)(req, res, mem, kind)
    return run_torch_or_onnx(req, res, mem)
