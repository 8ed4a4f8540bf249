"""ncnn's container half: measure and evaluate the ``.param``/``.bin`` pair with ncnn's Python
``Net`` (CPU only) in the lean ``lodevem-ncnn`` image, and make it with pnnx (and lodevem's own
int8 writer, ``.int8``) in the converter image (``.convert``).

Why lean: as with LiteRT, measuring imports only numpy and ncnn (~28 MB), never torch, so every
RSS phase is the runtime's.
"""

from __future__ import annotations

import os
from typing import Any

from ...wire.file_sections import ModelSection
from ...wire.protocol import DEFAULT_INPUT_SHAPE, WorkerError, artifact_files, progress
from ...wire.replies import ConvertReply, EvaluateReply, MeasureReply
from ...wire.requests import ConvertRequest, EvaluateRequest, MeasureRequest
from ...wire.sections import RuntimeSection
from ...worker.actions import _file_info, _measure
from ...worker.guest import Guest, Late, Predict, converted_file, imported, package_version, random_input
from ...worker.load.formats import _format_of
from ...worker.memory import MemoryPhases
from .arm import one_inference


class NcnnGuest(Guest):
    name = "ncnn"

    def measure(self, req: MeasureRequest, res: MeasureReply, mem: MemoryPhases, kind: str) -> Late:
        """Run the converted ncnn model (``.param`` + ``.bin``) with ncnn's Python ``Net``, CPU only.

        ncnn has no batch dimension: the request's shape is ``[1, C, H, W]`` (or a shape without the
        batch), fed as a ``C x H x W`` Mat to the net's first input; every output is extracted.
        """
        param = converted_file(req)
        weights = artifact_files(param)[1]
        res.model = _file_info(req.model_path, _format_of(kind))
        import ncnn
        import numpy as np

        imported(res, mem, self.name, f"ncnn {package_version('ncnn')}")
        shape = list(req.input_shape or DEFAULT_INPUT_SHAPE)
        if len(shape) > 4 or (len(shape) == 4 and shape[0] != 1):
            raise WorkerError("bad_input_shape", f"ncnn runs one sample at a time: input shape {shape} needs batch 1 "
                                                 "(e.g. --input-shape 1,3,224,224)")
        net, inputs, outputs = load_ncnn(ncnn, param, weights, req.threads)
        x = random_input(np, shape[1:] if len(shape) == 4 else shape, np.float32)
        mat = ncnn.Mat(x)
        res.model = res.model.with_(input_shape=tuple(shape), input_dtype="float32",
                                    converted_bytes=sum(os.path.getsize(p) for p in artifact_files(param)))
        mem.mark("after_load")
        progress(f"loaded {param}, input {shape} float32, outputs {', '.join(outputs)}")
        _measure(req, res, mem, one_inference(net, inputs[0], outputs, mat))
        return None

    def predictor(self, req: EvaluateRequest, res: EvaluateReply, mem: MemoryPhases, kind: str,
                  shape: list[int]) -> Predict:
        param = converted_file(req)
        weights = artifact_files(param)[1]
        import ncnn
        import numpy as np

        res.runtime = RuntimeSection.here(self.name, f"ncnn {package_version('ncnn')}")
        net, inputs, outputs = load_ncnn(ncnn, param, weights, req.threads)
        res.model = ModelSection(format=self.name, input_shape=tuple(shape), input_dtype="float32")

        def predict(sample: Any) -> Any:
            extractor = net.create_extractor()
            extractor.input(inputs[0], ncnn.Mat(np.ascontiguousarray(sample, dtype=np.float32)))
            code, mat = extractor.extract(outputs[0])
            if code != 0:
                raise WorkerError("model_failed", f"ncnn extract({outputs[0]}) returned {code}")
            return np.array(mat).ravel()

        return predict

    def convert(self, req: ConvertRequest, res: ConvertReply, mem: MemoryPhases, kind: str) -> None:
        from .convert import action_export_ncnn

        action_export_ncnn(req, res, mem, kind)


def load_ncnn(ncnn: Any, param: str, weights: str, threads: int) -> tuple[Any, list[str], list[str]]:
    """An ncnn net on the CPU (no Vulkan) with its input and output blob names: the one loader of
    the measurement and the evaluation; a file ncnn refuses is ``corrupt``, one line."""
    net = ncnn.Net()
    net.opt.num_threads = threads
    net.opt.use_vulkan_compute = False
    if net.load_param(param) != 0 or net.load_model(weights) != 0:
        raise WorkerError("corrupt", f"ncnn cannot load {param} (a layer ncnn does not know, or a truncated file)")
    inputs, outputs = list(net.input_names()), list(net.output_names())
    if not inputs or not outputs:
        raise WorkerError("corrupt", f"{param} declares no input or no output blob")
    return net, inputs, outputs


GUEST = NcnnGuest()
