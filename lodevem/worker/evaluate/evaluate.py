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

from ...wire.protocol import WorkerError, progress
from ...wire.replies import AccuracySection, EvaluateReply
from ...wire.requests import EvaluateRequest
from ..guest import Predict, guest
from ..memory import MemoryPhases
from .samples import NpzSamples, SampleFileError


def action_evaluate(req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str) -> None:
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
        seconds = time.perf_counter() - t0
    except SampleFileError as exc:
        raise WorkerError("bad_request", f"evaluation data {req.data_path}: {exc}") from None
    finally:
        fh.close()
    res.accuracy = AccuracySection(n, int(top1), int(top5) if (classes or 0) > 5 else None, classes,
                                   round(seconds, 3))


def _predictor(req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
               sample_shape: tuple[int, ...]) -> Predict:
    shape = [1, *sample_shape]
    if req.input_shape and list(req.input_shape) != shape:
        raise WorkerError("bad_input_shape", f"the data's samples are {list(sample_shape)} but the model takes "
                                             f"{list(req.input_shape)}")
    return guest(req.runtime).predictor(req, res, mem, kind, shape)


