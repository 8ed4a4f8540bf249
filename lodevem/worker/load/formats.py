"""Model files: identify the format from content, load PyTorch files (torch imported lazily),
describe the loaded module, and the one-line messages for files that are not usable models."""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any, Optional

from ...wire.file_sections import ModelSection
from ...wire.protocol import WorkerError, first_line, progress
from ..export.quantized import FX_PICKLE_HINT, quantized_conv_unpickling
from .usercode import UserCode, build_arch, load_into, weights_of

HOW_TO_SAVE = ("save the whole module with torch.save(model, path), or "
               "torch.jit.save(torch.jit.script(model), path), or "
               "torch.export.save(torch.export.export(model, (example_input,)), path)")
CHECKPOINT_KEYS = {"state_dict", "model_state_dict", "model_state", "optimizer", "optimizer_state_dict",
                   "epoch", "global_step", "scheduler", "lr_scheduler", "model", "net", "args", "hyper_parameters"}
_TORCH_LEGACY_MAGIC = b"\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickled magic number of torch.save(legacy)


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


@dataclass
class LoadOptions:
    """How to load the user's file beyond its bytes: their code (``--code``) and, for a file
    holding only weights, the architecture to build (``--arch`` with JSON keyword arguments)."""

    code: UserCode = field(default_factory=lambda: UserCode([]))
    arch: Optional[str] = None
    arch_kwargs: Optional[dict[str, Any]] = None


def load_options(req: Any) -> LoadOptions:
    """The request's ``--code`` and ``--arch``; the code goes on ``sys.path`` here, once."""
    code = UserCode(list(req.code_paths))
    code.install()
    return LoadOptions(code=code, arch=req.arch, arch_kwargs=req.arch_kwargs)


def load_torch_model(path: str, kind: str, options: Optional[LoadOptions] = None
                     ) -> tuple[Any, str, Optional[list[int]]]:
    """Load a model file into an eval-mode module: (module, format, input-shape hint or None)."""
    import torch

    options = options or LoadOptions()
    try:
        if kind == "torchscript":
            return _eval(torch.jit.load(path, map_location="cpu")), "torchscript", None
        if kind == "exported_program":
            program = _load_exported(path)
            module = program.module()
            module.meta[EXPORTED_CLASS] = _exported_class(program)  # its GraphModule class says nothing
            return module, "exported_program", _exported_input_shape(program)
        with quantized_conv_unpickling():
            obj = _unpickle(path, options.code)
    except WorkerError:
        raise
    except (ImportError, AttributeError) as exc:  # class not importable where the worker runs
        if "no attribute '_modules'" in str(exc):  # torch's own quantized modules, not missing code
            raise WorkerError("unsupported_format", f"{path} could not be reloaded by torch itself "
                                                    f"({first_line(exc, 120)}): {FX_PICKLE_HINT}") from None
        raise WorkerError("unsupported_format", f"{path} is a pickled module whose code is not available in the "
                                                f"sandbox: {_missing_code(exc, options.code)}") from None
    except Exception as exc:
        what = _format_of(kind).replace("_", " ")
        if kind == "pickle" and not _looks_damaged(exc):
            # The pickle's own code ran and raised: the file is readable, its code failed.
            raise WorkerError("model_failed", f"loading {path} ran code from the file that raised "
                                              f"{type(exc).__name__}: {first_line(exc, 200)}") from None
        raise WorkerError("corrupt", f"{path} could not be read as a {what} file, it looks truncated or corrupt "
                                     f"({type(exc).__name__}: {first_line(exc, 200)}); {HOW_TO_SAVE}") from None
    if options.arch and not isinstance(obj, torch.nn.Module):
        return _eval(_module_from_weights(path, obj, options)), "state_dict", None
    if options.arch:
        progress(f"{os.path.basename(path)} holds a whole module: --arch {options.arch} is not needed for it")
    return _eval(_module_from_object(path, obj)), "pickled_module", None


def _load_exported(path: str) -> Any:
    """``torch.export.load``; a program calling an operator this torch does not have (a custom op
    registered in the saving process only) is one line naming the operator. torch says which only
    in a warning it logs, so the warnings of the load are read."""
    import logging

    import torch

    said: list[str] = []

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:  # the message and the exception it logs
            said.append(record.getMessage() + (logging.Formatter().formatException(record.exc_info)
                                               if record.exc_info else ""))

    try:  # registers torch.ops.quantized_decomposed: what a PT2E-quantized program calls
        import torch.ao.quantization.fx._decomposed  # noqa: F401
    except ImportError:
        pass
    handler, logger = Said(), logging.getLogger("torch.export")
    logger.addHandler(handler)
    try:
        return torch.export.load(path)
    except Exception:
        op = next((m.group(1) for text in said
                   for m in [re.search(r"resolve (torch\.ops\.[\w.]+) to an operator", text)] if m), None)
        if op is None:
            raise
        raise WorkerError("unsupported_format", f"{path} is an exported program that calls {op}, an operator "
                                                "this sandbox's torch does not have (a custom op): export the model "
                                                "without it, or give the model it was exported from") from None
    finally:
        logger.removeHandler(handler)


def _module_from_weights(path: str, obj: Any, options: LoadOptions) -> Any:
    """Build ``--arch`` and load the file's weights into it (state_dict or checkpoint)."""
    assert options.arch is not None
    state, where = weights_of(path, obj)
    try:
        module = build_arch(options.arch, options.arch_kwargs)
    except WorkerError as exc:  # name the file the architecture was wanted for
        raise WorkerError(exc.kind, f"{path}: {exc.message}") from None
    load_into(path, options.arch, module, state)
    progress(f"built {options.arch} and loaded {len(state)} tensors from {where}")
    return module


def _looks_damaged(exc: BaseException) -> bool:
    """Whether a failed load is the file's bytes (truncated zip or pickle stream, bad CRC) rather
    than code inside the pickle raising."""
    import pickle
    import zipfile

    if isinstance(exc, (EOFError, pickle.UnpicklingError, zipfile.BadZipFile, UnicodeDecodeError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(word in text for word in (
        "PytorchStreamReader", "zip archive", "central directory", "CRC", "unexpected EOF", "Invalid magic number"))


def _missing_code(exc: BaseException, code: UserCode) -> str:
    """Say which class/module the pickle needs and how to provide it; ``__main__`` means the user's
    training script."""
    found = re.search(r"Can't get attribute '([^']+)' on <module '([^']+)'", str(exc))
    worker = (__package__ or "").rpartition(".")[0]  # lodevem.worker: this module is its load/ job's
    if found and found.group(2) in ("__main__", worker, f"{worker}.__main__"):
        given = (f" (not found in {', '.join(os.path.basename(s) for s in code.scripts)})" if code.scripts else "")
        return (f"class {found.group(1)!r} was defined in the script that saved it (__main__){given}; pass that "
                f"script with --code")
    if found:
        return (f"class {found.group(1)!r} not found in module {found.group(2)!r}; pass the code that defines it "
                f"with --code")
    if isinstance(exc, ModuleNotFoundError):
        return f"module {exc.name!r} is not importable; pass the folder or file that defines it with --code"
    return f"{first_line(exc)}; pass the model's code with --code"


def _unpickle(path: str, code: UserCode) -> Any:
    """torch.save files (zip or legacy) via torch.load; other pickles via pickle with torch loaded.
    Either way classes pickled from ``__main__`` resolve against the ``--code`` scripts."""
    import torch

    pickle_module = code.pickle_module()
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"PK") or head[2:14] == _TORCH_LEGACY_MAGIC:
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=pickle_module)
    with open(path, "rb") as fh:
        return pickle_module.load(fh)


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
                                            f"tensors, e.g. {example}): weights, no architecture; pass --arch "
                                            f"MODULE:CALLABLE (with --code) to build it, or {HOW_TO_SAVE}")
        module_keys = [str(k) for k, v in obj.items() if isinstance(v, torch.nn.Module)]
        if module_keys or CHECKPOINT_KEYS & set(keys):
            shown = ", ".join(repr(k) for k in keys[:6])
            hint = (f"; it holds a whole nn.Module under key {module_keys[0]!r}: re-save that with "
                    f"torch.save(ckpt[{module_keys[0]!r}], path)" if module_keys else "")
            raise WorkerError("optimizer_checkpoint",
                              f"{path} is a training checkpoint (dict with keys {shown}){hint}; pass --arch "
                              f"MODULE:CALLABLE (with --code) to load its weights, or {HOW_TO_SAVE}")
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


EXPORTED_CLASS = "lodevem.exported_class"


def _exported_class(program: Any) -> Optional[str]:
    """The class of the module an ExportedProgram was exported from (its nodes' module stack)."""
    for node in program.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            kind = next(iter(stack.values()))[1]
            return kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
    return None


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


def torch_model_info(module: Any, input_shape: list[int]) -> ModelSection:
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
    cls = type(module)
    class_name = getattr(module, "original_name", None) if isinstance(module, torch.jit.ScriptModule) else None
    class_name = class_name or (getattr(module, "meta", None) or {}).get(EXPORTED_CLASS)
    return ModelSection(params=params, param_bytes=sum(by_dtype.values()),
                        class_name=class_name or f"{cls.__module__}.{cls.__qualname__}",
                        dtype=max(by_dtype, key=by_dtype.__getitem__) if by_dtype else "float32",
                        input_shape=tuple(input_shape), input_dtype=str(input_dtype).replace("torch.", ""))


def _script_packed_tensors(module: Any) -> list[Any]:
    """(weight, bias) of the packed params of quantized layers in a TorchScript module (e.g. an
    int8-static file written by ``derive``): they are opaque ScriptObjects, not state_dict entries."""
    import torch

    out: list[Any] = []
    for _, sub in module.named_modules():
        packed = getattr(sub, "_packed_params", None) if hasattr(sub, "_packed_params") else None
        if isinstance(packed, torch.ScriptObject) and "unpack" in packed._method_names():  # type: ignore[attr-defined]
            try:
                out += [t for t in packed.unpack() if torch.is_tensor(t)]  # type: ignore[attr-defined]
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


# An example input larger than this is a mistyped --input-shape, not a phone workload: refused
# before it is allocated (1,3,100000,100000 would be 120 GB of float32).
MAX_INPUT_BYTES = 2**30


def make_torch_input(shape: list[int], dtype_name: Optional[str]) -> Any:
    import torch

    dtype = getattr(torch, dtype_name or "float32")
    elements = 1
    for dim in shape:
        elements *= dim
    if elements * 4 > MAX_INPUT_BYTES:
        raise WorkerError("bad_input_shape", f"an input of shape {shape} would take {elements * 4 / 2**30:,.1f} GiB "
                                             f"(the cap is {MAX_INPUT_BYTES // 2**30} GiB): check --input-shape")
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return torch.zeros(shape, dtype=dtype)


def _format_of(kind: str) -> str:
    """Format name from the sniffed kind, without loading (a bare pickle is presumed a module)."""
    return "pickled_module" if kind == "pickle" else kind
