"""The benchmark worker: the only lodevem code that ever loads a user's model file.

Why a separate program: ``.pt`` files are pickles and unpickling runs arbitrary code, so the host
never loads them; this package runs inside the memory-limited container (or a child process)
and reports back one JSON line. It therefore imports only what the images bake
(``protocol.WORKER_SOURCES``: the runtimes' container halves among them; the image has
torch/onnx/onnxruntime but not click, pydantic, docker...) and every one of its modules
imports only the stdlib at module top level, so the host can import the protocol constants
without paying for ``import torch``.

Protocol: ``python -m lodevem.worker --request '<json>' | --request-file PATH | --request -``.
Exactly one JSON object (one line) goes to stdout, progress lines go to stderr prefixed
``lodevem-worker: ``. Exit 0 = ok, 3 = clean error (``ok: false`` and ``error`` set), anything
else = crash or kill. Anything the model itself prints (Python or C++) is diverted to stderr so
stdout stays parseable.

Compression levels (``level``, names as in ``lodevem.levels``): only action ``derive`` takes one.
It loads the user's model, derives the variant here, in the sandbox, and writes it to
``derive_out`` as a file the user then owns; the host then measures and exports that file like
any other, so a variant's peak RAM never includes loading the original. fp16 is ``.half()`` with
half inputs; int8 is dynamic quantization (Linear/LSTM/GRU only, convolutions stay fp32);
int8-static is FX graph mode post-training static quantization calibrated on seeded random inputs
of the request's shape; pruned is structured L1-norm channel pruning at 50 % with torch-pruning's
dependency graph, channels physically removed, no fine-tuning. The ``model`` section then
describes the variant and ``variant`` holds before/after figures.

The records it speaks are the ground floor's (``lodevem.wire``: the protocol's constants,
``WorkerError`` and progress lines; one request record per action; ``WorkerReply``, the one reply
class, and its sections). Modules:
``__main__`` (command line, ``main``), ``formats`` (sniffing and loading model files),
``memory`` (RSS phases, cgroup counters), ``timing`` (timed passes, latency stats),
``onnx_export`` (export, nn-Meter cleanup, reading .onnx), ``variants`` (compression levels),
``guest`` (what a runtime's container half does, and the one table that finds it:
``lodevem/runtimes/<name>/guest.py`` measures, evaluates and converts), ``convert`` (what the
conversions share), ``actions`` (the actions on a PyTorch or ONNX file), ``dispatch``
(``run``: any request to its action). Their public names are
re-exported here.
"""

from __future__ import annotations

# The protocol and every public name of the modules, as ``lodevem.worker.X`` (host code, tests).
from ..wire.protocol import (  # noqa: F401
    ACTIONS,
    CONVERT_ACTIONS,
    DEFAULT_INPUT_SHAPE,
    ERROR_KINDS,
    EXIT_ERROR,
    EXIT_OK,
    FORMATS,
    LEVELS,
    PROGRESS_PREFIX,
    RUNTIMES,
    SCHEMA_VERSION,
    WORKER_RELEASE,
    WORKER_VERSION,
    WorkerError,
    artifact_files,
    first_line,
    progress,
)
from ..wire.replies import WorkerReply  # noqa: F401
from ..wire.requests import (  # noqa: F401
    REQUESTS,
    ArmsimProfileRequest,
    ConvertRequest,
    DecodeImagesRequest,
    DeriveRequest,
    EvaluateRequest,
    ExportOnnxRequest,
    InspectRequest,
    MeasureRequest,
    RequestFiles,
    WorkerRequest,
)
from .actions import (  # noqa: F401
    Late,
    action_derive,
    action_export,
    action_inspect,
)
from .derive.variants import (  # noqa: F401
    CALIBRATION_BATCHES,
    CALIBRATION_SEED,
    NOTE_DYNAMIC,
    NOTE_PRUNED,
    PRUNING_RATIO,
    derive_variant,
    probe_layers,
    quantization_engine,
    serialized_size,
    write_variant,
)
from .dispatch import run  # noqa: F401  (every action, the tflite/ncnn ones included)
from .export.onnx_export import (  # noqa: F401
    ONNX_OPSET,
    export_module,
    load_onnx,
    nn_meter_friendly,
    onnx_model_info,
    onnx_section,
    resolve_static,
)
from .load.formats import (  # noqa: F401
    CHECKPOINT_KEYS,
    HOW_TO_SAVE,
    file_sha256,
    load_torch_model,
    make_torch_input,
    sniff_format,
    torch_model_info,
)
from .memory import (  # noqa: F401
    MemoryPhases,
    cgroup_memory,
    proc_status_kb,
)
from .timing import (  # noqa: F401
    latency_stats,
    percentile,
    timed_passes,
)
