"""LiteRT's Arm half: how armsim's emulated Arm python (``worker/armsim/armsim_guest.py``) loads
and runs a ``.tflite`` file with LiteRT's Arm build.

Why here: the folder of a runtime holds everything that runs it, on both sides of the container
wall and in the emulated guest. The guest loads this file by path (it has no lodevem package to
import), so it imports only the stdlib at module level and LiteRT inside ``load``.
"""

from __future__ import annotations

from typing import Any, Callable

DISTRIBUTION = "ai-edge-litert"


def load(spec: dict[str, Any]) -> tuple[Callable[[], None], str, str, dict[str, Any]]:
    """LiteRT's Interpreter with its default XNNPACK delegate: (one inference, the distribution,
    the file's arithmetic, options). Float models run in fp32 (XNNPACK takes fp16 only when told
    to, which the Python Interpreter does not by default); an int8 model runs XNNPACK's QS8/QU8
    kernels."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=spec["model"], num_threads=int(spec["threads"]))
    interpreter.allocate_tensors()
    first = interpreter.get_input_details()[0]
    shape = [int(d) for d in first["shape"]]
    if spec.get("input_shape") and [int(d) for d in spec["input_shape"]] != shape:
        shape = [int(d) for d in spec["input_shape"]]
        interpreter.resize_tensor_input(first["index"], shape)
        interpreter.allocate_tensors()
    dtype = np.dtype(first["dtype"])
    x = (np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.kind == "f"
         else np.zeros(shape, dtype=dtype))
    index = first["index"]
    kinds = {np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}
    precision = "int8" if kinds & {"int8", "uint8"} else "fp32"

    def infer() -> None:
        interpreter.set_tensor(index, x)
        interpreter.invoke()

    return infer, DISTRIBUTION, precision, {"num_threads": int(spec["threads"]), "xnnpack_fp16": False}
