"""Compression levels, derived in the sandbox right after loading (torch and torch_pruning
imported lazily): fp16, dynamic int8, FX static int8, structured pruning; the variant's size and
writing it for action ``derive``."""

from __future__ import annotations

import os
import platform
import time
import traceback
import warnings
from typing import Any, Callable

from ...wire.file_sections import DerivedFile, VariantSection
from ...wire.protocol import WorkerError, first_line, progress
from ...wire.replies import DeriveReply
from ...wire.requests import DeriveRequest, WorkerRequest
from ..load.formats import file_sha256, load_options, load_torch_model, make_torch_input, torch_model_info
from ..load.programs import exported_module, with_layers

PRUNING_RATIO = 0.5
CALIBRATION_BATCHES, CALIBRATION_SEED = 8, 0
NOTE_DYNAMIC = "dynamic int8: Linear/LSTM/GRU only, convolutions stay fp32"
NOTE_PRUNED = "pruned only, not fine-tuned (--eval-data shows its accuracy drop)"


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
    layers = (_quantized_layers(variant, "torch.ao.nn.quantized")
              + _quantized_layers(variant, "torch.ao.nn.intrinsic.quantized"))
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

    from ...zoo.macs import layer_macs  # the one counter (the zoo imports torch: here, not at import)

    macs, widths, order, produced = 0, {}, [], {}

    def hook(name: str) -> Callable[..., None]:
        def record(m: Any, _inp: Any, out: Any) -> None:
            nonlocal macs
            macs += layer_macs(m, out)
            widths[name] = m.out_features if isinstance(m, torch.nn.Linear) else m.out_channels
            order.append(name)
            produced[id(out)] = name
        return record

    layers = {name: m for name, m in module.named_modules()
              if isinstance(m, (torch.nn.Linear, torch.nn.modules.conv._ConvNd))}
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


def _derive(req: DeriveRequest, res: DeriveReply, kind: str, module: Any, example: Any, keep_original: bool
            ) -> tuple[Any, Any]:
    """Derive ``req.level``, fill ``res.variant`` and make ``res.model`` describe the variant;
    returns (variant, its input). The caller drops the original and calls ``_released``."""
    import torch

    level = req.level
    assert level is not None
    model = res.model
    assert model is not None  # filled by the load, before any derivation
    progress(f"deriving {level}")
    t0 = time.perf_counter()
    if model.format in ("torchscript", "exported_program"):  # the layers of its exported graph (programs)
        try:
            module = with_layers(exported_module(module, example, req.model_path), example)
        except WorkerError as exc:
            raise WorkerError("level_failed", f"level {level} is derived from the exported program of a "
                                              f"{model.format.replace('_', ' ')} file: {exc.message}") from None
        keep_original = False  # a new module already: the file's own is left as it was
    try:
        variant, notes, details = derive_variant(module, level, example, keep_original)
        info = torch_model_info(variant, model.shape)
        x = make_torch_input(model.shape, info.input_dtype)
        with torch.inference_mode():
            variant(x)
    except WorkerError:
        raise
    except Exception as exc:
        raise _level_failure(req, kind, level, exc, model.shape) from None
    derive_s = time.perf_counter() - t0
    res.model = model.updated(info)
    res.variant = VariantSection(level, model.params, info.params, model.param_bytes, info.param_bytes, model.dtype,
                                 info.dtype, derive_s=round(derive_s, 3), notes=tuple(notes), details=details)
    progress(f"derived {level} in {derive_s:.2f} s: {model.params} -> {info.params} params, "
             f"{model.param_bytes} -> {info.param_bytes} bytes")
    return variant, x


def _level_failure(req: WorkerRequest, kind: str, level: str, exc: BaseException, shape: list[int]
                   ) -> WorkerError:
    """Blame the input shape when the original model rejects it too (reloaded: derivation may have
    changed it in place), else the level, quoting the failing op's message."""
    import torch

    try:
        original, _, _ = load_torch_model(req.model_path, kind, load_options(req))
        x = make_torch_input(shape, torch_model_info(original, shape).input_dtype)
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
        torch.save(variant, counter)  # type: ignore[arg-type]  # a write-only file object: bytes counted
        return counter.n, "pickled_module"
    except Exception:
        return len(_trace(variant, example).save_to_buffer()), "torchscript"


def _trace(variant: Any, example: Any) -> Any:
    import torch

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about constants are expected here
        return torch.jit.trace(variant, example, check_trace=False)


def write_variant(variant: Any, example: Any, out: str) -> DerivedFile:
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
    return DerivedFile(os.path.abspath(out), fmt, os.path.getsize(out), file_sha256(out), reason,
                       "loaded back and ran one forward pass in the sandbox")


def _reload_check(path: str, fmt: str, example: Any) -> None:
    import torch

    loaded = (torch.jit.load(path, map_location="cpu") if fmt == "torchscript"
              else torch.load(path, map_location="cpu", weights_only=False))
    with torch.inference_mode():
        loaded(example)
