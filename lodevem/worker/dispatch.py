"""``run``: the request's action, dispatched to its module.

Why a module of its own: the actions that load a PyTorch or ONNX file (``actions``), the
evaluation, the image decoding and armsim's profile are separate jobs; a runtime's measurement,
evaluation and conversion are its container half's (``worker.guest``: the one table, built from
the registry's names), so no runtime is chosen here by name.
"""

from __future__ import annotations

from ..wire.replies import (
    ArmsimProfileReply,
    ConvertReply,
    DecodeImagesReply,
    EvaluateReply,
    WorkerReply,
    as_reply,
)
from ..wire.requests import (
    ArmsimProfileRequest,
    ConvertRequest,
    DecodeImagesRequest,
    EvaluateRequest,
    WorkerRequest,
)
from .actions import run as run_file_actions
from .guest import Late, converter_guest
from .load.formats import sniff_format
from .memory import MemoryPhases


def run(req: WorkerRequest, res: WorkerReply, mem: MemoryPhases) -> Late:
    """Dispatch; returns the step to run once memory was recorded (or None)."""
    if isinstance(req, ConvertRequest):  # PyTorch/ONNX -> an on-device runtime's format, by its converter
        converter_guest(req.action).convert(req, as_reply(res, ConvertReply), mem, sniff_format(req.model_path))
        return None
    if isinstance(req, ArmsimProfileRequest):  # the runtime's Arm build under qemu-user (lodevem-armsim image)
        from .armsim.armsim_profile import action_armsim_profile

        action_armsim_profile(req, as_reply(res, ArmsimProfileReply), mem)
        return None
    if isinstance(req, DecodeImagesRequest):  # an ImageFolder tree's images, in the sandbox (the host never decodes)
        from .evaluate.images import action_decode_images

        action_decode_images(req, as_reply(res, DecodeImagesReply))
        return None
    if isinstance(req, EvaluateRequest):  # accuracy under the row's runtime (tflite/ncnn: torch is never imported)
        from .evaluate.evaluate import action_evaluate

        action_evaluate(req, as_reply(res, EvaluateReply), mem, sniff_format(req.model_path))
        return None
    return run_file_actions(req, res, mem)  # inspect, export-onnx, derive, measure (by the runtime's guest)
