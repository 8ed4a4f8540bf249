"""The benchmark worker: the only lodevem code that ever loads a user's model file.

Why a separate program: ``.pt`` files are pickles and unpickling runs arbitrary code, so the host
never loads them; this file runs inside the memory-limited container (or a child process) and
reports back one JSON line. It therefore imports nothing from other lodevem modules (the image
has torch/onnx/onnxruntime but not click, pydantic, docker...) and only the stdlib at module top
level, so the host can import the protocol constants without paying for ``import torch``.

Protocol: ``python -m lodevem.worker --request '<json>' | --request-file PATH | --request -``.
Exactly one JSON object (one line) goes to stdout, progress lines go to stderr prefixed
``lodevem-worker: ``. Exit 0 = ok, 3 = clean error (``ok: false`` and ``error`` set), anything
else = crash or kill. Anything the model itself prints (Python or C++) is diverted to stderr so
stdout stays parseable.

Compression levels (``level``, names as in ``lodevem.levels``): measure, export-onnx and inspect
derive the variant here, in the sandbox, right after loading the user's model, and then work on
the variant; action ``derive`` writes it to ``derive_out`` as a file the user then owns. fp16 is
``.half()`` with half inputs; int8 is dynamic quantization (Linear/LSTM/GRU only, convolutions stay
fp32); int8-static is FX graph mode post-training static quantization calibrated on seeded random
inputs of the request's shape; pruned is structured L1-norm channel pruning at 50 % with
torch-pruning's dependency graph, channels physically removed, no fine-tuning. The ``model``
section then describes the variant (params, param_bytes, dtypes; format/sha256/file_bytes stay the
file's) and ``variant`` holds before/after figures. The ONNX export of fp16/int8/int8-static is the
fp32 graph of the original (nn-Meter and the estimator model fp32 kernels; the host's predictor
applies the level's factor), of pruned the pruned graph.

Memory with a level: the variant is derived after ``rss_after_load_kb`` and the original freed
before warm-up (``rss_after_derive_kb``), but VmHWM cannot be reset, so ``hwm_kb`` also covers
loading the original and the derivation transient; ``hwm_after_derive_kb`` and ``peak_phase`` say
whether the peak was set then or during inference. The exact peak of the variant alone comes from
``lodevem derive`` then measuring the written file.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import re
import resource
import statistics
import sys
import time
import traceback
import warnings
import zipfile
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Optional

SCHEMA_VERSION = 1
WORKER_VERSION = "2"  # bump when measurement semantics change: host caches key on it
EXIT_OK, EXIT_ERROR = 0, 3
ACTIONS = ("measure", "export-onnx", "inspect", "derive")
RUNTIMES = ("torch", "onnxruntime")
ERROR_KINDS = ("bad_request", "not_found", "state_dict", "optimizer_checkpoint", "not_a_model", "corrupt",
               "bad_input_shape", "export_failed", "unsupported_format", "level_failed", "internal")
FORMATS = ("pickled_module", "torchscript", "exported_program", "onnx")
DEFAULT_INPUT_SHAPE = [1, 3, 224, 224]
# Opset 13: nn-Meter's converter knows its op set; opset >= 14 emits HardSwish, which nn-Meter
# has no alias for, while at 13 the exporter writes HardSigmoid+Mul (detected as kernels).
ONNX_OPSET = 13
PROGRESS_PREFIX = "lodevem-worker: "
HOW_TO_SAVE = ("save the whole module with torch.save(model, path), or "
               "torch.jit.save(torch.jit.script(model), path), or "
               "torch.export.save(torch.export.export(model, (example_input,)), path)")
CHECKPOINT_KEYS = {"state_dict", "model_state_dict", "model_state", "optimizer", "optimizer_state_dict",
                   "epoch", "global_step", "scheduler", "lr_scheduler", "model", "net", "args", "hyper_parameters"}
_TORCH_LEGACY_MAGIC = b"\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickled magic number of torch.save(legacy)
# Compression levels: the same names as lodevem.levels.LEVELS (this module imports no lodevem code).
LEVELS = ("fp32", "fp16", "int8", "int8-static", "pruned")
PRUNING_RATIO = 0.5
CALIBRATION_BATCHES, CALIBRATION_SEED = 8, 0
NOTE_DYNAMIC = "dynamic int8: Linear/LSTM/GRU only, convolutions stay fp32"
NOTE_PRUNED = "pruned only, not fine-tuned (no --finetune-data)"
NOTE_PEAK = ("derived in the sandbox: the peak RSS (hwm_kb) also covers loading the original and deriving the "
             "variant (see hwm_after_derive_kb, peak_phase); for the variant alone run `lodevem derive` and "
             "benchmark the written file")
GRAPH_OF_FP32 = "fp32 original (predictor applies the level's factor)"


class WorkerError(Exception):
    """A failure the worker can explain in one line; becomes ``error: {kind, message}``, exit 3."""

    def __init__(self, kind: str, message: str) -> None:
        assert kind in ERROR_KINDS, kind
        super().__init__(message)
        self.kind, self.message = kind, " ".join(message.split())


@dataclass
class WorkerRequest:
    """One job for the worker. Field names and defaults are the wire format."""

    action: str
    model_path: str
    schema_version: int = SCHEMA_VERSION
    input_shape: Optional[list[int]] = None
    warmup: int = 5
    runs: int = 50
    threads: int = 1
    runtime: str = "torch"
    onnx_path: Optional[str] = None
    level: Optional[str] = None
    derive_out: Optional[str] = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: "str | dict[str, Any]") -> "WorkerRequest":
        """Parse and validate; every problem is a ``bad_request`` WorkerError, never a traceback."""
        try:
            obj = json.loads(data) if isinstance(data, str) else data
        except ValueError as exc:
            raise WorkerError("bad_request", f"request is not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise WorkerError("bad_request", "request must be a JSON object")
        unknown = sorted(set(obj) - {f.name for f in fields(cls)})
        if unknown:
            raise WorkerError("bad_request", f"unknown request field(s): {', '.join(unknown)}")
        missing = [k for k in ("action", "model_path") if k not in obj]
        if missing:
            raise WorkerError("bad_request", f"missing request field(s): {', '.join(missing)}")
        request = cls(**obj)
        request.validate()
        return request

    def validate(self) -> None:
        """Raise a ``bad_request`` WorkerError for the first invalid field.

        Not run at construction: the host builds requests freely (e.g. with a compression level
        this worker does not know yet) and gets the refusal back as a normal worker result.
        """
        def is_int(v: Any, low: int) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= low

        checks = [
            (self.schema_version == SCHEMA_VERSION, f"schema_version must be {SCHEMA_VERSION}"),
            (self.action in ACTIONS, f"action must be one of {', '.join(ACTIONS)}"),
            (self.runtime in RUNTIMES, f"runtime must be one of {', '.join(RUNTIMES)}"),
            (isinstance(self.model_path, str) and bool(self.model_path), "model_path must be a non-empty string"),
            (self.onnx_path is None or isinstance(self.onnx_path, str), "onnx_path must be a string or null"),
            (self.input_shape is None or (isinstance(self.input_shape, list) and bool(self.input_shape)
                                          and all(is_int(d, 1) for d in self.input_shape)),
             "input_shape must be a non-empty list of positive integers or null"),
            (is_int(self.warmup, 0), "warmup must be an integer >= 0"),
            (is_int(self.runs, 1), "runs must be an integer >= 1"),
            (is_int(self.threads, 1), "threads must be an integer >= 1"),
            (self.level is None or self.level in LEVELS, f"level must be null or one of {', '.join(LEVELS)}"),
            (self.derive_out is None or (isinstance(self.derive_out, str) and bool(self.derive_out)),
             "derive_out must be a non-empty string or null"),
            (self.action == "derive" or self.derive_out is None, "derive_out is only for action derive"),
            (self.action != "derive" or self.derive_out is not None, "derive needs derive_out (where to write)"),
            (self.action != "derive" or self.level not in (None, "fp32"),
             "derive needs a level other than fp32 (fp32 is the file as given: nothing to derive)"),
            (self.action != "derive" or self.runtime == "torch", "derive runs with runtime torch"),
            (self.runtime != "onnxruntime" or self.level in (None, "fp32", "pruned"),
             f"level {self.level} cannot be measured with runtime onnxruntime: its ONNX export is the fp32 "
             "original graph; measure it with runtime torch"),
        ]
        for ok, message in checks:
            if not ok:
                raise WorkerError("bad_request", f"{message} (request: {json.dumps(asdict(self))})")


@dataclass
class WorkerResult:
    """The one JSON object printed on stdout. Sections stay ``None`` when not applicable
    (``action`` too, when the request itself could not be read)."""

    action: Optional[str] = None
    ok: bool = False
    schema_version: int = SCHEMA_VERSION
    worker_version: str = WORKER_VERSION
    error: Optional[dict[str, str]] = None
    model: Optional[dict[str, Any]] = None
    latency: Optional[dict[str, Any]] = None
    memory: Optional[dict[str, Any]] = None
    onnx: Optional[dict[str, Any]] = None
    runtime: Optional[dict[str, Any]] = None
    variant: Optional[dict[str, Any]] = None
    derived: Optional[dict[str, Any]] = None
    timings_s: dict[str, Optional[float]] = field(
        default_factory=lambda: {"import": None, "load": None, "derive": None, "warmup": None, "measure": None,
                                 "export": None})

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


# --- Progress, memory --------------------------------------------------------------------------

def progress(message: str) -> None:
    """Progress goes to stderr so the host can show liveness without touching the result line."""
    sys.stderr.write(PROGRESS_PREFIX + message + "\n")
    sys.stderr.flush()


def proc_status_kb() -> dict[str, int]:
    """VmRSS/VmHWM of this process in kB (the RSS the phone's low-memory killer would see)."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def _read_cgroup(path: str) -> Any:
    """An int (None for "max"/unreadable) or, for memory.stat, a dict of its selected keys."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    if path.endswith("stat"):
        pairs = (line.split() for line in text.splitlines())
        return {k: int(v) for k, v in pairs if k in _CGROUP_STAT_KEYS} or None
    return int(text) if text.strip().isdigit() else None


_CGROUP_STAT_KEYS = {"anon", "file", "file_mapped", "shmem", "kernel", "pgfault", "pgmajfault",  # v2
                     "cache", "rss", "rss_huge", "mapped_file", "total_cache", "total_rss", "total_mapped_file"}  # v1
_CGROUP_FILES = {2: ("/sys/fs/cgroup/memory.", "peak", "current", "max", "stat"),
                 1: ("/sys/fs/cgroup/memory/memory.", "max_usage_in_bytes", "usage_in_bytes", "limit_in_bytes", "stat")}


def cgroup_memory() -> Optional[dict[str, Any]]:
    """The container cgroup's counters, read from inside because the cgroup vanishes on exit.

    They differ from VmHWM: the cgroup is also charged for page cache (e.g. libtorch's pages).
    Outside a container these are the enclosing cgroup's numbers; the host decides what to trust.
    """
    version = 2 if os.path.exists("/sys/fs/cgroup/memory.current") else 1
    base, *names = _CGROUP_FILES[version]
    values = dict(zip(("peak_bytes", "usage_bytes", "limit_bytes", "stat"), (_read_cgroup(base + n) for n in names)))
    if values["limit_bytes"] is not None and values["limit_bytes"] >= 2 ** 60:
        values["limit_bytes"] = None  # v1 spells "unlimited" as a huge number
    if all(v is None for v in values.values()):
        return None
    return {"version": version, **{k: v for k, v in values.items() if v is not None}}


class MemoryPhases:
    """RSS at each phase; ``finish`` adds the high-water mark, faults and cgroup counters."""

    def __init__(self, rss_start_kb: int) -> None:
        self.kb: dict[str, Optional[int]] = {"rss_start_kb": rss_start_kb, "rss_after_import_kb": None,
                                             "rss_after_load_kb": None, "rss_after_derive_kb": None,
                                             "rss_after_warmup_kb": None}
        self.hwm_after_derive: Optional[int] = None

    def mark(self, phase: str) -> None:
        status = proc_status_kb()
        self.kb[f"rss_{phase}_kb"] = status["VmRSS"]
        if phase == "after_derive":
            self.hwm_after_derive = status["VmHWM"]

    def finish(self) -> dict[str, Any]:
        """``peak_phase`` (with a level only): "derivation" when the high-water mark was already
        reached by loading the original and deriving the variant, else "inference"."""
        status, usage = proc_status_kb(), resource.getrusage(resource.RUSAGE_SELF)
        base = self.kb["rss_after_import_kb"]
        derive_hwm = self.hwm_after_derive
        return {**self.kb, "rss_end_kb": status["VmRSS"], "hwm_kb": status["VmHWM"],
                "hwm_after_derive_kb": derive_hwm,
                "peak_phase": None if derive_hwm is None else
                ("derivation" if status["VmHWM"] <= derive_hwm else "inference"),
                "runtime_baseline_kb": base,
                "model_increment_kb": status["VmHWM"] - base if base is not None else None,
                "major_faults": usage.ru_majflt, "minor_faults": usage.ru_minflt, "cgroup": cgroup_memory()}


# --- Format detection (stdlib only: runs before any heavy import) ------------------------------

def sniff_format(path: str) -> str:
    """Identify the file from its content: a format name, ``"pickle"`` (raw/legacy) or an error.

    Content, not extension, because users rename files freely and a wrong guess would either
    refuse a good model or feed a PNG to the unpickler.
    """
    if not os.path.exists(path):
        raise WorkerError("not_found", f"model file not found: {path}")
    if os.path.isdir(path):
        raise WorkerError("not_a_model", f"{path} is a directory, not a model file; {HOW_TO_SAVE}")
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if not head:
        raise WorkerError("corrupt", f"{path} is empty (0 bytes); {HOW_TO_SAVE}")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _sniff_zip(path)
    if len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if head[:1] == b"\x08" or path.lower().endswith(".onnx"):
        return "onnx"  # ModelProto starts with field 1 (ir_version, varint): tag byte 0x08
    raise _not_a_model(path, head)


def _sniff_zip(path: str) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n.split("/", 1)[-1] for n in zf.namelist()]
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise WorkerError("corrupt", f"{path} is a truncated or corrupt zip archive ({exc}); "
                                     f"re-save it: {HOW_TO_SAVE}") from None
    if any(n.endswith("serialized_exported_program.json") or n == "archive_format"
           or (n.startswith("models/") and n.endswith(".json")) for n in names):
        return "exported_program"
    if "constants.pkl" in names or any(n.startswith("code/") for n in names):
        return "torchscript"
    if "data.pkl" in names:
        return "pickle"
    shown = ", ".join(names[:4]) or "none"
    raise WorkerError("not_a_model", f"{path} is a zip archive but not a PyTorch file (members: {shown}); "
                                     f"{HOW_TO_SAVE}")


def _not_a_model(path: str, head: bytes) -> WorkerError:
    """Name the common non-model files so the user knows what they passed."""
    known = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image",
             b"%PDF": "a PDF document", b"\x1f\x8b": "a gzip archive", b"\x89HDF": "an HDF5 file (Keras .h5?)"}
    what = next((desc for magic, desc in known.items() if head.startswith(magic)), None)
    if head[4:8] == b"TFL3":
        return WorkerError("unsupported_format", f"{path} is a TensorFlow Lite model; lodevem takes PyTorch or ONNX "
                                                 f"models: {HOW_TO_SAVE}")
    if len(head) > 9 and head[8:10] == b'{"':
        return WorkerError("state_dict", f"{path} is a safetensors file: weights only, no architecture; {HOW_TO_SAVE}")
    if what is None:
        try:
            text = head.decode("utf-8")
            what = f"a text file starting with {text.strip()[:40]!r}" if "\x00" not in text else None
        except UnicodeDecodeError:
            pass
    what = what or f"an unrecognised binary file (first bytes {head[:8].hex()})"
    return WorkerError("not_a_model", f"{path} is {what}, not a model; {HOW_TO_SAVE}")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def first_line(exc: "BaseException | str", limit: int = 300) -> str:
    """The first non-empty line of an exception message, trimmed: enough to quote, never a dump."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        lines = [ln for ln in lines if re.match(r"^\w*(Error|Exception): ", ln)][-1:] or lines  # the real cause
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- Loading PyTorch models (torch imported lazily) --------------------------------------------

def load_torch_model(path: str, kind: str) -> tuple[Any, str, Optional[list[int]]]:
    """Load a model file into an eval-mode module: (module, format, input-shape hint or None)."""
    import torch

    try:
        if kind == "torchscript":
            return _eval(torch.jit.load(path, map_location="cpu")), "torchscript", None
        if kind == "exported_program":
            program = torch.export.load(path)
            return program.module(), "exported_program", _exported_input_shape(program)
        obj = _unpickle(path)
    except WorkerError:
        raise
    except (ImportError, AttributeError) as exc:  # class not importable where the worker runs
        raise WorkerError("unsupported_format", f"{path} is a pickled module whose code is not available here "
                                                f"({_missing_code(exc)}); save it with torch.jit.save("
                                                f"torch.jit.script(model), path) or torch.export.save(...), "
                                                f"which carry their own code") from None
    except Exception as exc:  # truncated pickle, bad CRC, PytorchStreamReader errors...
        what = _format_of(kind).replace("_", " ")
        raise WorkerError("corrupt", f"{path} could not be read as a {what} file, it looks truncated or corrupt "
                                     f"({type(exc).__name__}: {first_line(exc, 200)}); {HOW_TO_SAVE}") from None
    return _eval(_module_from_object(path, obj)), "pickled_module", None


def _missing_code(exc: BaseException) -> str:
    """Say which class/module the pickle needs; ``__main__`` means the user's training script."""
    found = re.search(r"Can't get attribute '([^']+)' on <module '([^']+)'", str(exc))
    if found and found.group(2) in ("__main__", __name__, getattr(__spec__, "name", None)):
        return f"class {found.group(1)!r} was defined in the script that saved it (__main__)"
    if found:
        return f"class {found.group(1)!r} not found in module {found.group(2)!r}"
    if isinstance(exc, ModuleNotFoundError):
        return f"module {exc.name!r} is not installed in the benchmark environment"
    return first_line(exc)


def _unpickle(path: str) -> Any:
    """torch.save files (zip or legacy) via torch.load; other pickles via pickle with torch loaded."""
    import pickle

    import torch

    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"PK") or head[2:14] == _TORCH_LEGACY_MAGIC:
        return torch.load(path, map_location="cpu", weights_only=False)
    with open(path, "rb") as fh:
        return pickle.load(fh)


def _module_from_object(path: str, obj: Any) -> Any:
    """Accept an nn.Module; explain state_dicts, checkpoints and other pickles in one line."""
    from collections.abc import Mapping

    import torch

    if isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, torch.export.ExportedProgram):
        return obj.module()
    if isinstance(obj, Mapping) and obj:
        keys = [str(k) for k in obj]
        if all(torch.is_tensor(v) for v in obj.values()):
            example = ", ".join(repr(k) for k in keys[:2])
            raise WorkerError("state_dict", f"{path} is a state_dict only ({type(obj).__name__} of {len(keys)} "
                                            f"tensors, e.g. {example}): weights, no architecture; {HOW_TO_SAVE}")
        module_keys = [str(k) for k, v in obj.items() if isinstance(v, torch.nn.Module)]
        if module_keys or CHECKPOINT_KEYS & set(keys):
            shown = ", ".join(repr(k) for k in keys[:6])
            hint = (f"; it holds a whole nn.Module under key {module_keys[0]!r}: re-save that with "
                    f"torch.save(ckpt[{module_keys[0]!r}], path)" if module_keys else "")
            raise WorkerError("optimizer_checkpoint",
                              f"{path} is a training checkpoint (dict with keys {shown}){hint}; {HOW_TO_SAVE}")
    raise WorkerError("not_a_model", f"{path} is a pickled {type(obj).__name__}, not an nn.Module; {HOW_TO_SAVE}")


def _eval(module: Any) -> Any:
    """Benchmark inference behaviour (BN running stats, no dropout) even if saved in train mode."""
    if getattr(module, "training", False):
        progress("model was saved in train mode; switching to eval()")
        try:
            module.eval()
        except Exception:  # some exported modules refuse eval(); they run as captured
            pass
    return module


def _exported_input_shape(program: Any) -> Optional[list[int]]:
    """The example input shape an ExportedProgram was captured with (its guards require it)."""
    try:
        args = program.example_inputs[0] if program.example_inputs else ()
        if args and hasattr(args[0], "shape"):
            return [int(d) for d in args[0].shape]
        user = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        node = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == user[0])
        return [int(d) for d in node.meta["val"].shape]
    except Exception:  # symbolic dims or no metadata: fall back to the default shape
        return None


def torch_model_info(module: Any, input_shape: list[int]) -> dict[str, Any]:
    """params = parameter elements; param_bytes = every state tensor (parameters, buffers, packed
    quantized weights) since that is what occupies RAM; input dtype follows the first float param."""
    import torch

    state = _state_tensors(module.state_dict())
    if isinstance(module, torch.jit.ScriptModule):  # quantized TorchScript keeps weights out of state_dict
        state += _script_packed_tensors(module)
    # quantized weights live in packed buffers, not parameters: count them too
    params = sum(p.numel() for p in module.parameters()) + sum(t.numel() for t in state if t.is_quantized)
    by_dtype: dict[str, int] = {}
    for tensor in state:
        name = str(tensor.dtype).replace("torch.", "")
        by_dtype[name] = by_dtype.get(name, 0) + tensor.numel() * tensor.element_size()
    input_dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    return {"params": params, "param_bytes": sum(by_dtype.values()),
            "dtype": max(by_dtype, key=by_dtype.__getitem__) if by_dtype else "float32",
            "input_shape": input_shape, "input_dtype": str(input_dtype).replace("torch.", "")}


def _script_packed_tensors(module: Any) -> list[Any]:
    """(weight, bias) of the packed params of quantized layers in a TorchScript module (e.g. an
    int8-static file written by ``derive``): they are opaque ScriptObjects, not state_dict entries."""
    import torch

    out: list[Any] = []
    for _, sub in module.named_modules():
        packed = getattr(sub, "_packed_params", None) if hasattr(sub, "_packed_params") else None
        if isinstance(packed, torch.ScriptObject) and "unpack" in packed._method_names():
            try:
                out += [t for t in packed.unpack() if torch.is_tensor(t)]
            except Exception:  # an unknown packed layout: leave it uncounted
                pass
    return out


def _state_tensors(values: Any) -> list[Any]:
    import torch

    items = values.values() if isinstance(values, dict) else values
    out: list[Any] = []
    for v in items:
        if torch.is_tensor(v):
            out.append(v)
        elif isinstance(v, (tuple, list)):  # quantized packed params are (weight, bias) tuples
            out += _state_tensors(v)
    return out


def make_torch_input(shape: list[int], dtype_name: str) -> Any:
    import torch

    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return torch.zeros(shape, dtype=dtype)


# --- Compression levels (derived in the sandbox; torch, torch_pruning imported lazily) ----------

def derive_variant(module: Any, level: str, example: Any, keep_original: bool
                   ) -> tuple[Any, list[str], dict[str, Any]]:
    """``(variant, notes, details)`` of ``level`` for an eval-mode module and an example input.

    With ``keep_original`` False the derivation may reuse (and change) ``module`` in place, so the
    process never holds two full copies when the original is discarded afterwards (measure,
    derive); export-onnx of fp16/int8 keeps it, since it exports the original's fp32 graph.
    Raises ``WorkerError("level_failed")`` with the reason for failures it can name.
    """
    import copy

    import torch

    if level == "fp16":
        variant = (copy.deepcopy(module) if keep_original else module).half()
        return variant, ["model.half(): weights, buffers and inputs float16; the host CPU's fp16 kernels are often "
                         "slower than fp32, so its host latency says nothing about a phone's fp16 speed"], {}
    if level == "int8":
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch 2.13 deprecates torch.ao quantization (-> torchao)
            variant = quantize_dynamic(module, {torch.nn.Linear, torch.nn.LSTM, torch.nn.GRU}, dtype=torch.qint8,
                                       inplace=not keep_original)
        layers = _quantized_layers(variant, "torch.ao.nn.quantized.dynamic")
        notes = [NOTE_DYNAMIC + (f" ({layers} layer(s) quantized)" if layers else
                                 "; this model has none, so the int8 variant computes exactly as fp32")]
        return variant, notes, {"quantized_layers": layers}
    if level == "int8-static":
        return _static_int8(module, example, keep_original)
    if level == "pruned":
        return _prune(copy.deepcopy(module) if keep_original else module, example)
    raise WorkerError("bad_request", f"unknown level {level!r}")


def quantization_engine() -> str:
    """x86 (fbgemm + onednn kernels) on x86 hosts, else qnnpack, the ARM engine phones use."""
    import torch

    engines = torch.backends.quantized.supported_engines
    x86_host = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
    return "x86" if x86_host and "x86" in engines else "qnnpack" if "qnnpack" in engines else engines[-1]


def _quantized_layers(module: Any, prefix: str) -> int:
    return sum(1 for m in module.modules() if type(m).__module__.startswith(prefix))


def _static_int8(module: Any, example: Any, keep_original: bool) -> tuple[Any, list[str], dict[str, Any]]:
    """FX graph mode post-training static quantization, calibrated on seeded random inputs."""
    import copy

    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engine = quantization_engine()
    torch.backends.quantized.engine = engine  # the measurement runs on the same kernels
    shape = list(example.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation notices (-> torchao) and observer chatter
        try:
            prepared = prepare_fx(copy.deepcopy(module) if keep_original else module,
                                  get_default_qconfig_mapping(engine), (example,))
        except Exception as exc:
            raise WorkerError("level_failed", f"int8-static needs a model torch.fx can trace symbolically, and tracing "
                                              f"failed ({type(exc).__name__}: {first_line(exc, 200)}); data-dependent "
                                              f"control flow in forward() is the usual cause; use level int8 "
                                              f"(dynamic) or quantize the model yourself") from None
        gen = torch.Generator().manual_seed(CALIBRATION_SEED)
        with torch.no_grad():
            for _ in range(CALIBRATION_BATCHES):
                prepared(torch.randn(shape, generator=gen, dtype=torch.float32).to(example.dtype))
        variant = convert_fx(prepared)
    layers = _quantized_layers(variant, "torch.ao.nn.quantized") + _quantized_layers(variant, "torch.ao.nn.intrinsic.quantized")
    note = (f"static int8 (FX graph mode, {engine} engine): conv/linear weights int8 per channel, activation ranges "
            f"calibrated on {CALIBRATION_BATCHES} random inputs of shape {shape} (seed {CALIBRATION_SEED}); real "
            f"data would set other ranges, so accuracy is unknown")
    return variant, [note], {"engine": engine, "quantized_layers": layers, "calibration_batches": CALIBRATION_BATCHES,
                             "calibration_seed": CALIBRATION_SEED}


def _tensors(obj: Any) -> list[Any]:
    import torch

    if torch.is_tensor(obj):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


def probe_layers(module: Any, example: Any) -> dict[str, Any]:
    """One forward pass recording, for every Conv/Linear: its output width and MACs; also which
    of them produce the model's outputs (or ran last), the layers pruning must leave alone."""
    import torch

    macs, widths, order, produced = 0, {}, [], {}

    def hook(name: str) -> Callable[..., None]:
        def record(m: Any, _inp: Any, out: Any) -> None:
            nonlocal macs
            if isinstance(m, torch.nn.Linear):
                macs += out.numel() * m.in_features
                widths[name] = m.out_features
            else:
                k = 1
                for d in m.kernel_size:
                    k *= d
                macs += out.numel() * (m.in_channels // m.groups) * k
                widths[name] = m.out_channels
            order.append(name)
            produced[id(out)] = name
        return record

    layers = {name: m for name, m in module.named_modules() if isinstance(m, (torch.nn.Linear, torch.nn.modules.conv._ConvNd))}
    handles = [m.register_forward_hook(hook(name)) for name, m in layers.items()]
    try:
        with torch.no_grad():
            output = module(example)
    finally:
        for h in handles:
            h.remove()
    outputs = _tensors(output)
    final = {produced[id(t)] for t in outputs if id(t) in produced} | ({order[-1]} if order else set())
    return {"macs": macs, "widths": widths, "final": sorted(final), "layers": layers,
            "output_shapes": [list(t.shape) for t in outputs]}


def _prune(module: Any, example: Any) -> tuple[Any, list[str], dict[str, Any]]:
    """Structured L1-norm channel pruning with torch-pruning's dependency graph: coupled layers
    (residual adds, depthwise groups, concatenations) lose the same channels, and the tensors are
    physically shrunk, so the result is a smaller dense model. The layers producing the output
    (the classifier) keep their width so the output shape does not change."""
    import torch
    import torch_pruning as tp

    before = probe_layers(module, example)
    ignored = [before["layers"][name] for name in before["final"]]
    for p in module.parameters():  # the dependency graph is traced through autograd
        if p.is_floating_point():
            p.requires_grad_(True)
    with torch.enable_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pruner = tp.pruner.MagnitudePruner(module, example, tp.importance.MagnitudeImportance(p=1),
                                               pruning_ratio=PRUNING_RATIO, ignored_layers=ignored)
            pruner.step()
        except Exception as exc:  # the model itself ran (probe_layers): this is torch-pruning's limit
            where = traceback.extract_tb(exc.__traceback__)[-1].name
            raise WorkerError("level_failed", f"torch-pruning could not prune this model ({type(exc).__name__} in "
                                              f"{where}: {first_line(exc, 150)}); reshapes that split the channel "
                                              f"dimension (e.g. channel shuffle) and custom ops are its known "
                                              f"limits") from None
    del pruner
    for p in module.parameters():
        p.requires_grad_(False)
    after = probe_layers(module, example)
    if after["output_shapes"] != before["output_shapes"]:
        raise WorkerError("level_failed", f"pruning changed the output shape {before['output_shapes']} -> "
                                          f"{after['output_shapes']}; the model's output layer was not recognised")
    removed = {name: 1 - after["widths"][name] / width for name, width in before["widths"].items()
               if name in after["widths"] and after["widths"][name] < width}
    if not removed:
        raise WorkerError("level_failed", "structured pruning found no prunable channels (no Conv/Linear layer "
                                          "besides the output layer, or all channels are coupled to the output)")
    fractions = sorted(removed.values())
    try:
        from importlib.metadata import version

        tp_version = version("torch-pruning")  # tp.__version__ lags the release (1.6.1 says 1.6.0)
    except Exception:
        tp_version = tp.__version__
    note = (f"L1-norm structured channel pruning at {PRUNING_RATIO:.0%} (torch-pruning {tp_version}): "
            f"{len(removed)} layer(s) narrowed, output layer(s) {', '.join(before['final'])} kept")
    return module, [note, NOTE_PRUNED], {
        "pruning_ratio": PRUNING_RATIO, "layers_pruned": len(removed), "kept_layers": before["final"],
        "removed_fraction_min": round(fractions[0], 4), "removed_fraction_max": round(fractions[-1], 4),
        "macs_before": before["macs"], "macs_after": after["macs"], "torch_pruning": tp_version}


def _derive(req: WorkerRequest, res: WorkerResult, kind: str, module: Any, example: Any, keep_original: bool
            ) -> tuple[Any, Any]:
    """Derive ``req.level``, fill ``res.variant`` and make ``res.model`` describe the variant;
    returns (variant, its input). The caller drops the original and calls ``_released``."""
    import torch

    level = req.level
    assert level is not None
    fmt = res.model["format"]
    if fmt == "torchscript" and level != "fp16":
        raise WorkerError("level_failed", f"level {level} needs a pickled nn.Module (torch.save(model)): a TorchScript "
                                          f"file's compiled graph cannot be quantized or pruned here (fp16 works)")
    progress(f"deriving {level}")
    t0 = time.perf_counter()
    before = {k: res.model[k] for k in ("params", "param_bytes", "dtype")}
    try:
        variant, notes, details = derive_variant(module, level, example, keep_original)
        info = torch_model_info(variant, res.model["input_shape"])
        x = make_torch_input(res.model["input_shape"], info["input_dtype"])
        with torch.inference_mode():
            variant(x)
    except WorkerError:
        raise
    except Exception as exc:
        raise _level_failure(req, kind, level, exc, res.model["input_shape"]) from None
    res.timings_s["derive"] = time.perf_counter() - t0
    res.model.update(info)
    res.variant = {"level": level, "params_before": before["params"], "params_after": info["params"],
                   "param_bytes_before": before["param_bytes"], "param_bytes_after": info["param_bytes"],
                   "dtype_before": before["dtype"], "dtype_after": info["dtype"],
                   "serialized_bytes": None, "serialized_format": None, "derive_s": round(res.timings_s["derive"], 3),
                   "notes": notes, "details": details}
    progress(f"derived {level} in {res.timings_s['derive']:.2f} s: {before['params']} -> {info['params']} params, "
             f"{before['param_bytes']} -> {info['param_bytes']} bytes")
    return variant, x


def _level_failure(req: WorkerRequest, kind: str, level: str, exc: BaseException, shape: list[int]
                   ) -> WorkerError:
    """Blame the input shape when the original model rejects it too (reloaded: derivation may have
    changed it in place), else the level, quoting the failing op's message."""
    import torch

    try:
        original, _, _ = load_torch_model(req.model_path, kind)
        x = make_torch_input(shape, torch_model_info(original, shape)["input_dtype"])
    except Exception:
        original = None
    if original is not None:
        try:
            with torch.inference_mode():
                original(x)
        except Exception as original_exc:
            return WorkerError("bad_input_shape", f"the model rejected an input of shape {shape}: "
                                                  f"{first_line(original_exc)}; set input_shape to what the model "
                                                  f"expects")
    return WorkerError("level_failed", f"the {level} variant could not be derived or run "
                                       f"({type(exc).__name__}: {first_line(exc)})")


def _released(mem: MemoryPhases) -> None:
    """After the caller dropped the original: collect it, hand freed heap pages back to the OS
    (glibc keeps them otherwise, and RSS would still show the derivation), then record RSS and
    the peak so far."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS may include freed heap
        pass
    mem.mark("after_derive")


class _ByteCounter:
    """A write-only sink: torch.save's size without holding the bytes (no RSS of its own)."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: Any) -> int:
        self.n += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def serialized_size(variant: Any, example: Any) -> tuple[int, str]:
    """(bytes, format) of the variant as ``derive`` would write it: torch.save of the module, or
    TorchScript (traced) where the module does not pickle (FX-quantized GraphModules)."""
    import torch

    if isinstance(variant, torch.jit.ScriptModule):
        return len(variant.save_to_buffer()), "torchscript"
    try:
        counter = _ByteCounter()
        torch.save(variant, counter)
        return counter.n, "pickled_module"
    except Exception:
        return len(_trace(variant, example).save_to_buffer()), "torchscript"


def _trace(variant: Any, example: Any) -> Any:
    import torch

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about constants are expected here
        return torch.jit.trace(variant, example, check_trace=False)


def _fill_size(res: WorkerResult, variant: Any, example: Any) -> None:
    size, fmt = serialized_size(variant, example)
    res.variant.update(serialized_bytes=size, serialized_format=fmt)


def write_variant(variant: Any, example: Any, out: str) -> dict[str, Any]:
    """Write the variant atomically as whole-module torch.save, else (does not pickle, or does not
    load back) traced TorchScript; the file is loaded back and run once before it is moved in place."""
    import torch

    tmp = f"{out}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    reason = None
    try:
        fmt = "torchscript" if isinstance(variant, torch.jit.ScriptModule) else "pickled_module"
        if fmt == "pickled_module":
            stage = "fails"
            try:
                torch.save(variant, tmp)
                stage = "does not load back"
                _reload_check(tmp, fmt, example)
            except Exception as exc:
                reason = (f"torch.save of the variant {stage} ({type(exc).__name__}: {first_line(exc, 150)}); "
                          f"written as traced TorchScript")
                progress(reason)
                fmt = "torchscript"
        if fmt == "torchscript":
            torch.jit.save(variant if isinstance(variant, torch.jit.ScriptModule) else _trace(variant, example), tmp)
            _reload_check(tmp, fmt, example)
        os.replace(tmp, out)
    except WorkerError:
        raise
    except Exception as exc:
        raise WorkerError("level_failed", f"could not write the variant to {out}: {type(exc).__name__}: "
                                          f"{first_line(exc)}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return {"path": os.path.abspath(out), "format": fmt, "size_bytes": os.path.getsize(out),
            "sha256": file_sha256(out), "format_reason": reason,
            "check": "loaded back and ran one forward pass in the sandbox"}


def _reload_check(path: str, fmt: str, example: Any) -> None:
    import torch

    loaded = (torch.jit.load(path, map_location="cpu") if fmt == "torchscript"
              else torch.load(path, map_location="cpu", weights_only=False))
    with torch.inference_mode():
        loaded(example)


# --- Timing ------------------------------------------------------------------------------------

def timed_passes(call: Callable[[], Any], label: str, n: int, describe_input: str) -> list[float]:
    """Run ``call`` n times, return per-pass ms. Any exception means the model rejected the input."""
    samples: list[float] = []
    step, last = max(1, n // 10), time.monotonic()
    for i in range(1, n + 1):
        t0 = time.perf_counter_ns()
        try:
            call()
        except Exception as exc:
            raise WorkerError("bad_input_shape", f"the model rejected an input of {describe_input}: {first_line(exc)}; "
                                                 f"set input_shape to what the model expects") from None
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        if i == n or i % step == 0 or time.monotonic() - last >= 2.0:
            progress(f"{label} {i}/{n}")
            last = time.monotonic()
    return samples


def percentile(sorted_xs: list[float], q: float) -> float:
    """numpy's default (linear interpolation) percentile, q in [0, 100]."""
    k = (len(sorted_xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def latency_stats(samples: list[float], batch: int, req: WorkerRequest) -> dict[str, Any]:
    """Summary of every timed pass; std is the population std (numpy's default)."""
    xs, mean = sorted(samples), statistics.fmean(samples)
    stats: dict[str, Any] = {"samples_ms": samples, "mean_ms": mean, "std_ms": statistics.pstdev(samples),
                             "min_ms": xs[0], "max_ms": xs[-1]}
    stats.update({f"p{q}_ms": percentile(xs, q) for q in (50, 90, 95, 99)})
    stats.update({"throughput_ips": 1000.0 / mean * batch if mean > 0 else None,
                  "warmup": req.warmup, "runs": req.runs, "threads": req.threads})
    return stats


# --- ONNX --------------------------------------------------------------------------------------

def export_module(module: Any, example: Any, out_path: str, model_info: Optional[dict[str, Any]] = None,
                  metadata: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Export to ONNX for nn-Meter and write atomically; returns the ``onnx`` result section.

    Legacy (TorchScript-based) exporter first: fast, no onnxscript needed, and nn-Meter handles
    its output once simplified; the dynamo exporter only when onnxscript exists and legacy fails.
    """
    import onnx

    tmp = f"{out_path}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    exporter = "legacy"
    try:
        try:
            _torch_export(module, example, tmp, dynamo=False)
        except Exception as legacy_exc:
            exporter = "dynamo"
            if not _dynamo_fallback(module, example, tmp):
                raise WorkerError("export_failed", _export_message(legacy_exc)) from None
        model = nn_meter_friendly(onnx.load(tmp))
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    # Recorded in the file so a cache hit can report them without importing torch or unpickling.
    model.metadata_props.add(key="lodevem.exporter", value=exporter)
    if model_info:
        model.metadata_props.add(key="lodevem.model", value=json.dumps(model_info))
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    _atomic_onnx_save(model, out_path)
    return onnx_section(model, out_path, exporter, cached=False)


def _dynamo_fallback(module: Any, example: Any, path: str) -> bool:
    """Try the dynamo exporter, only when onnxscript is installed (it needs it)."""
    try:
        import onnxscript  # noqa: F401

        _torch_export(module, example, path, dynamo=True)
        return True
    except Exception:
        return False


def _torch_export(module: Any, example: Any, path: str, dynamo: bool) -> None:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation/tracer chatter would drown the progress lines
        torch.onnx.export(module, (example,), path, dynamo=dynamo, opset_version=ONNX_OPSET,
                          input_names=["input"], output_names=["output"], do_constant_folding=True)


def _export_message(exc: BaseException) -> str:
    """Name the unsupported operator when torch's message says which one it is."""
    found = re.search(r"operator '([^']+)'", str(exc))
    if found:
        return (f"cannot export to ONNX: operator '{found.group(1)}' is not supported by the ONNX exporter at opset "
                f"{ONNX_OPSET}; replace it with supported ops or supply an .onnx file")
    return f"cannot export to ONNX ({type(exc).__name__}): {first_line(exc)}"


def nn_meter_friendly(model: Any, input_shape: Optional[list[int]] = None) -> Any:
    """Simplify (onnxsim removes Identity nodes and folds BN) and move Constant nodes into initializers.

    nn-Meter's converter gives attribute-less nodes to Constant and Identity (they have no shaped
    input), and its ``convert_nodes`` then fails with ``KeyError: 'type'``. onnxsim also fixes
    dynamic input dims to ``input_shape`` so shape inference yields the static shapes it needs.
    """
    try:
        import onnxsim

        overwrite = {_graph_inputs(model)[0].name: input_shape} if input_shape else None
        simplified, ok = onnxsim.simplify(model, overwrite_input_shapes=overwrite)
        if ok:
            model = simplified
    except Exception as exc:  # unsimplified graphs still work once constants are moved
        progress(f"onnxsim failed, keeping the unsimplified graph: {first_line(exc)}")
    _constants_to_initializers(model.graph)
    return model


def _constants_to_initializers(graph: Any) -> None:
    import numpy as np
    from onnx import helper, numpy_helper

    keep = []
    for node in graph.node:
        if node.op_type != "Constant" or len(node.attribute) != 1 or node.attribute[0].name == "sparse_value":
            keep.append(node)
            continue
        attr = node.attribute[0]
        value = helper.get_attribute_value(attr)
        if attr.name == "value":
            array = numpy_helper.to_array(value)
        else:
            dtype = np.float32 if attr.name.startswith("value_float") else np.int64 if "int" in attr.name else None
            array = np.array(value, dtype=dtype)
        graph.initializer.append(numpy_helper.from_array(array, node.output[0]))
    del graph.node[:]
    graph.node.extend(keep)


def _graph_inputs(model: Any) -> list[Any]:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def onnx_section(model: Any, path: str, exporter: str, cached: bool) -> dict[str, Any]:
    """``level``/``graph_of`` say which graph the file holds (recorded at export with a level)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    meta = _metadata(model)
    return {"path": os.path.abspath(path), "exporter": exporter, "opset": opset, "nodes": len(model.graph.node),
            "cached": cached, "level": meta.get("lodevem.level"),
            "graph_of": meta.get("lodevem.graph_of", "the model as given")}


def _metadata(model: Any) -> dict[str, str]:
    return {p.key: p.value for p in model.metadata_props}


def _check_onnx_level(model: Any, path: str, level: Optional[str]) -> None:
    """An existing export must be of the requested level (the host keys its cache on the level)."""
    recorded, wanted = _metadata(model).get("lodevem.level"), (None if level == "fp32" else level)
    if recorded != wanted:
        raise WorkerError("bad_request", f"{path} is an export of level {recorded or 'fp32'}, not "
                                         f"{wanted or 'fp32'}: use one ONNX path per level")


def load_onnx(path: str) -> Any:
    import onnx

    try:
        model = onnx.load(path)
    except Exception as exc:
        raise WorkerError("corrupt", f"{path} is not a readable ONNX model ({first_line(exc, 200)}); "
                                     f"re-export it or {HOW_TO_SAVE}") from None
    if not model.graph.node or not _graph_inputs(model):
        raise WorkerError("not_a_model", f"{path} parses as ONNX but has no graph nodes or inputs")
    return model


def onnx_model_info(model: Any, input_shape: Optional[list[int]]) -> dict[str, Any]:
    """params/param_bytes from initializers (what onnxruntime holds), shape/dtype from graph input."""
    from onnx import helper

    params, by_dtype = 0, {}
    for init in model.graph.initializer:
        n = 1
        for d in init.dims:
            n *= d
        dtype = helper.tensor_dtype_to_np_dtype(init.data_type)
        params += n
        by_dtype[dtype.name] = by_dtype.get(dtype.name, 0) + n * dtype.itemsize
    first = _graph_inputs(model)[0].type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in first.shape.dim]
    return {"params": params, "param_bytes": sum(by_dtype.values()),
            "dtype": max(by_dtype, key=by_dtype.__getitem__) if by_dtype else None,
            "input_shape": input_shape or resolve_static(dims),
            "input_dtype": helper.tensor_dtype_to_np_dtype(first.elem_type).name}


def resolve_static(dims: list[Optional[int]]) -> list[int]:
    """Static graph dims as-is; dynamic ones from the default NCHW shape (or 1 for other ranks)."""
    default = DEFAULT_INPUT_SHAPE if len(dims) == len(DEFAULT_INPUT_SHAPE) else [1] * len(dims)
    return [d if d else default[i] for i, d in enumerate(dims)]


# --- Actions -----------------------------------------------------------------------------------

def _import_torch(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases) -> Any:
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(req.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only settable once, before any parallel work
        pass
    res.timings_s["import"] = time.perf_counter() - t0
    mem.mark("after_import")
    res.runtime = {"name": "torch", "version": torch.__version__, "python": platform.python_version(),
                   "onnxruntime": None}
    progress(f"imported torch {torch.__version__}")
    return torch


def _file_info(path: str, fmt: Optional[str]) -> dict[str, Any]:
    return {"format": fmt, "sha256": file_sha256(path), "file_bytes": os.path.getsize(path), "params": None,
            "param_bytes": None, "dtype": None, "input_shape": None, "input_dtype": None}


def _format_of(kind: str) -> str:
    """Format name from the sniffed kind, without loading (a bare pickle is presumed a module)."""
    return "pickled_module" if kind == "pickle" else kind


def _load_torch(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> tuple[Any, Any]:
    """Load the model and fill ``res.model``; returns (eval-mode module, example input)."""
    t0 = time.perf_counter()
    module, fmt, hint = load_torch_model(req.model_path, kind)
    shape = req.input_shape or hint or list(DEFAULT_INPUT_SHAPE)
    res.model = {**_file_info(req.model_path, fmt), **torch_model_info(module, shape)}
    res.timings_s["load"] = time.perf_counter() - t0
    mem.mark("after_load")
    progress(f"loaded {fmt}, {res.model['params']} params, input {shape} {res.model['input_dtype']}")
    return module, make_torch_input(shape, res.model["input_dtype"])


def _measure(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, call: Callable[[], Any]) -> None:
    shape, describe = res.model["input_shape"], _describe_input(res.model)
    t0 = time.perf_counter()
    if req.warmup:
        timed_passes(call, "warmup", req.warmup, describe)
    res.timings_s["warmup"] = time.perf_counter() - t0
    mem.mark("after_warmup")
    t0 = time.perf_counter()
    samples = timed_passes(call, "run", req.runs, describe)
    res.timings_s["measure"] = time.perf_counter() - t0
    res.latency = latency_stats(samples, shape[0] if shape else 1, req)


def _describe_input(model: dict[str, Any]) -> str:
    return f"shape {model['input_shape']} ({model['input_dtype']})"


Late = Optional[Callable[[], None]]  # runs after the memory summary was taken (see main)


def action_inspect(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    if kind == "onnx":
        info = onnx_model_info(load_onnx(req.model_path), req.input_shape)
        res.model = {**_file_info(req.model_path, "onnx"), **info}
        return
    _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    if req.level:
        module, x = _derive(req, res, kind, module, x, keep_original=False)
        _released(mem)
        _fill_size(res, module, x)


def action_measure_torch(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> Late:
    """Measure the model, or with a level the variant derived from it (original freed first).

    The variant's serialized size is computed only after the memory summary, as serializing
    would add its own transient to the peak.
    """
    if kind == "onnx":
        raise WorkerError("bad_request", f"{req.model_path} is an ONNX model: measure it with runtime 'onnxruntime'")
    torch = _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    if req.level:
        module, x = _derive(req, res, kind, module, x, keep_original=False)  # rebinding drops the original
        _released(mem)
        res.variant["notes"].append(NOTE_PEAK)
    with torch.inference_mode():
        _measure(req, res, mem, lambda: module(x))
    if req.level:
        return lambda: _fill_size(res, module, x)
    return None


def action_derive(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    """Write the variant to ``derive_out`` (whole-module torch.save, or TorchScript), atomically."""
    if kind == "onnx":
        raise WorkerError("level_failed", f"{req.model_path} is an ONNX model: levels are derived from PyTorch models")
    out = os.path.abspath(req.derive_out or "")
    if os.path.exists(out) and os.path.samefile(out, req.model_path):
        raise WorkerError("bad_request", f"derive_out {out} is the input file: lodevem never overwrites it")
    _import_torch(req, res, mem)
    module, x = _load_torch(req, res, mem, kind)
    module, x = _derive(req, res, kind, module, x, keep_original=False)
    _released(mem)
    t0 = time.perf_counter()
    progress(f"writing the {req.level} variant to {out}")
    res.derived = write_variant(module, x, out)
    res.timings_s["export"] = time.perf_counter() - t0
    res.variant.update(serialized_bytes=res.derived["size_bytes"], serialized_format=res.derived["format"])
    progress(f"wrote {res.derived['format']} {out} ({res.derived['size_bytes']} bytes)")


def action_measure_ort(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> Late:
    """Run an .onnx with onnxruntime; torch is never imported, so every RSS phase is ORT's.

    A PyTorch model must come with ``onnx_path`` of an existing export (action export-onnx, which
    the host caches): exporting here, even in a child process, would charge torch's memory to the
    container cgroup whose peak is the number lodevem reports.
    """
    onnx_path = req.model_path if kind == "onnx" else req.onnx_path
    if onnx_path is None or not os.path.exists(onnx_path):
        raise WorkerError("bad_request", f"runtime 'onnxruntime' with a PyTorch model needs onnx_path of an existing "
                                         f"export (run action export-onnx first); got {onnx_path!r}")
    if req.level and kind == "onnx":
        raise WorkerError("level_failed", f"{req.model_path} is an ONNX model: levels are derived from PyTorch models")
    res.model = _file_info(req.model_path, _format_of(kind))
    t0 = time.perf_counter()
    import numpy as np
    import onnxruntime as ort

    res.timings_s["import"] = time.perf_counter() - t0
    mem.mark("after_import")
    res.runtime = {"name": "onnxruntime", "version": ort.__version__, "python": platform.python_version(),
                   "onnxruntime": ort.__version__}
    progress(f"imported onnxruntime {ort.__version__}")
    t0 = time.perf_counter()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = req.threads, 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(onnx_path, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise WorkerError("corrupt", f"onnxruntime cannot load {onnx_path}: {first_line(exc)}") from None
    first = session.get_inputs()[0]
    shape = req.input_shape or resolve_static([d if isinstance(d, int) and d > 0 else None for d in first.shape])
    ort_type = first.type[len("tensor("):-1]  # e.g. "tensor(float)"
    dtype = np.dtype({"float": "float32", "double": "float64"}.get(ort_type, ort_type))
    res.model.update(input_shape=shape, input_dtype=dtype.name)
    x = (np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.kind == "f"
         else np.zeros(shape, dtype=dtype))
    res.timings_s["load"] = time.perf_counter() - t0
    mem.mark("after_load")
    progress(f"loaded {onnx_path}, input {shape} {dtype.name}")
    feeds = {first.name: x}
    _measure(req, res, mem, lambda: session.run(None, feeds))
    return lambda: _late_onnx_info(res, onnx_path, req.level)


def action_export(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases, kind: str) -> None:
    """Export (or validate an .onnx) to onnx_path; an existing onnx_path is a cache hit: no torch."""
    if req.onnx_path is None and kind != "onnx":
        raise WorkerError("bad_request", "export-onnx needs onnx_path (where to write the .onnx)")
    out = req.onnx_path or req.model_path
    if req.level and kind == "onnx":
        raise WorkerError("level_failed", f"{req.model_path} is an ONNX model: levels are derived from PyTorch models")
    if req.onnx_path and os.path.exists(req.onnx_path):
        res.model = _file_info(req.model_path, _format_of(kind))
        cached = load_onnx(req.onnx_path)
        _check_onnx_level(cached, req.onnx_path, req.level)
        _fill_from_onnx(res.model, cached)
        meta = _metadata(cached)
        res.variant = json.loads(meta["lodevem.variant"]) if "lodevem.variant" in meta else None
        res.onnx = onnx_section(cached, out, meta.get("lodevem.exporter", "as-is"), cached=True)
        return
    t0 = time.perf_counter()
    if kind == "onnx":
        model = load_onnx(req.model_path)
        res.model = {**_file_info(req.model_path, "onnx"), **onnx_model_info(model, req.input_shape)}
        if out != req.model_path:  # normalise the copy for nn-Meter; the user's file stays untouched
            model = nn_meter_friendly(model, res.model["input_shape"])
            _atomic_onnx_save(model, out)
        res.onnx = onnx_section(model, out, "as-is", cached=False)
    else:
        torch = _import_torch(req, res, mem)
        module, x = _load_torch(req, res, mem, kind)
        t0 = time.perf_counter()
        with torch.inference_mode():  # a shape the model rejects is the user's error, not the exporter's
            timed_passes(lambda: module(x), "check", 1, _describe_input(res.model))
        metadata: dict[str, str] = {}
        if req.level:
            # nn-Meter and the estimator model fp32 kernels: fp16/int8 graphs are predicted from the
            # original's fp32 graph times the level's factor; pruning changes the graph itself.
            pruned = req.level == "pruned"
            variant, vx = _derive(req, res, kind, module, x, keep_original=not pruned)
            _fill_size(res, variant, vx)
            if pruned:
                module, x = variant, vx
            del variant, vx
            graph_of = "pruned variant (channels removed)" if pruned else GRAPH_OF_FP32
            metadata = {"lodevem.level": req.level, "lodevem.graph_of": graph_of,
                        "lodevem.variant": json.dumps(res.variant)}
            t0 = time.perf_counter()
        progress("exporting to ONNX")
        if res.model["format"] == "exported_program":
            module = _frozen_mode(module)
        keep = ("format", "params", "param_bytes", "dtype", "input_shape", "input_dtype")
        res.onnx = export_module(module, x, out, {k: res.model[k] for k in keep}, metadata)
    res.timings_s["export"] = time.perf_counter() - t0
    progress(f"exported {res.onnx['nodes']} nodes to {out} ({res.timings_s['export']:.2f} s)")


def _frozen_mode(module: Any) -> Any:
    """Wrap an ExportedProgram's module for the legacy exporter, whose ``train(False)`` call the
    exported module refuses ("Calling train() is not supported yet"); it runs as captured anyway."""
    import torch

    class FrozenMode(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            self.training = False

        def forward(self, x: Any) -> Any:
            return self.inner(x)

        def train(self, mode: bool = True) -> "FrozenMode":
            return self

    return FrozenMode(module)


def _atomic_onnx_save(model: Any, path: str) -> None:
    import onnx

    tmp = f"{path}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save(model, tmp)
    os.replace(tmp, path)


def run(req: WorkerRequest, res: WorkerResult, mem: MemoryPhases) -> Late:
    """Dispatch; returns the step to run once memory was recorded (or None)."""
    kind = sniff_format(req.model_path)
    if req.level == "fp32":  # the file as given
        req.level = None
    if req.action == "inspect":
        action_inspect(req, res, mem, kind)
    elif req.action == "export-onnx":
        action_export(req, res, mem, kind)
    elif req.action == "derive":
        action_derive(req, res, mem, kind)
    elif req.runtime == "onnxruntime":
        return action_measure_ort(req, res, mem, kind)
    else:
        return action_measure_torch(req, res, mem, kind)
    return None


def _fill_from_onnx(model: dict[str, Any], onnx_model: Any) -> None:
    """Fill unknown ``model`` fields from an .onnx: the source model's info that export_module
    recorded in its metadata, else (an .onnx model itself) its initializers and graph input."""
    recorded = next((p.value for p in onnx_model.metadata_props if p.key == "lodevem.model"), None)
    info = json.loads(recorded) if recorded else onnx_model_info(onnx_model, model["input_shape"])
    model.update({k: v for k, v in info.items() if model.get(k) is None})


def _late_onnx_info(res: WorkerResult, path: str, level: Optional[str]) -> None:
    """Model info for an onnxruntime run, read only after memory was recorded: parsing the file
    with the onnx package would otherwise inflate the onnxruntime process's RSS figures. With a
    level (only pruned reaches here) the export must be of that level: else the run is an error."""
    try:
        model = load_onnx(path)
    except Exception as exc:  # informative only; the measurement stands
        if level:
            raise
        progress(f"could not read the model info from {path}: {first_line(exc)}")
        return
    if level:
        _check_onnx_level(model, path, level)
        meta = _metadata(model)
        res.variant = json.loads(meta["lodevem.variant"]) if "lodevem.variant" in meta else None
    if res.model["params"] is None:
        _fill_from_onnx(res.model, model)


# --- Entry point -------------------------------------------------------------------------------

class _ArgParser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting 2: errors must be JSON."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WorkerError("bad_request", f"bad command line: {message}")


def read_request(argv: list[str]) -> WorkerRequest:
    parser = _ArgParser(prog="python -m lodevem.worker", add_help=False)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--request", help="request JSON, or - for stdin")
    group.add_argument("--request-file", help="path of a request JSON file")
    args = parser.parse_args(argv)
    if args.request_file is not None:
        try:
            with open(args.request_file) as fh:
                return WorkerRequest.from_json(fh.read())
        except OSError as exc:
            raise WorkerError("bad_request", f"cannot read request file: {exc}") from None
    return WorkerRequest.from_json(sys.stdin.read() if args.request == "-" else args.request)


def main(argv: Optional[list[str]] = None) -> int:
    rss_start = proc_status_kb()["VmRSS"]  # before anything heavy is imported
    # The protocol line goes to a private copy of stdout; fd 1 now points at stderr so prints
    # from the model (Python or C++) cannot corrupt the result.
    result_out = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)
    progress("start")
    mem = MemoryPhases(rss_start)
    res = WorkerResult()
    code = EXIT_OK
    late: Late = None
    try:
        req = read_request(sys.argv[1:] if argv is None else argv)
        res.action = req.action
        late = run(req, res, mem)
        res.ok = True
    except WorkerError as exc:
        res.error, code = {"kind": exc.kind, "message": exc.message}, EXIT_ERROR
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        res.error, code = {"kind": "internal", "message": first_line(repr(exc))}, EXIT_ERROR
    res.memory = mem.finish()
    if late is not None:  # after the memory summary: its work must not count as the model's
        try:
            late()
        except WorkerError as exc:
            res.ok, res.error, code = False, {"kind": exc.kind, "message": exc.message}, EXIT_ERROR
        except Exception as exc:  # informative only; the measurement stands
            traceback.print_exc(file=sys.stderr)
            progress(f"a step after the measurement failed: {first_line(repr(exc))}")
    progress("done" if res.ok else f"error {res.error['kind']}: {res.error['message']}")
    sys.stdout.flush()
    result_out.write(res.to_json() + "\n")
    result_out.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
