"""``lodevem derive``: write a model's compression variants as files the user then owns.

The host never loads the model (``.pt`` files are pickles): each level is one run of the worker's
``derive`` action through an isolation backend, unconstrained in memory, which loads the model,
derives the variant in the sandbox, writes it atomically, loads it back and runs it once. Docker
runs see the output folder as a scratch ``/output`` mount and the backend copies the file into
place, so the file belongs to the user, not to the container's uid.

Output names are ``<stem>_<level>.pt`` (e.g. ``mobilenet_v2_int8-static.pt``). Formats: a
whole-module ``torch.save`` (loading it needs the model's classes, like the input file) for fp16,
int8 and pruned; int8-static FX-quantized modules do not pickle, so they are written as traced
TorchScript (self-contained). A derived file is benchmarked like any other file; ``start --levels``
derives each variant once here (``derive_cached``, no memory limit) and measures the derived file,
so the variant's peak RAM does not include loading the original or the derivation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .errors import InputError, LodevemError
from .levels import LEVELS
from .measure import classify, file_sha256
from .results import write_atomic
from .worker import WORKER_VERSION, WorkerRequest

DERIVABLE = tuple(level for level in LEVELS if level != "fp32")
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class DerivedFile:
    """One written variant. ``params`` counts packed int8 weights too; ``note`` says what was
    done and what was not (e.g. "pruned only, not fine-tuned")."""

    level: str
    path: Path
    format: str  # "pickled_module" (torch.save of the module) or "torchscript"
    params: Optional[int]
    size_bytes: int
    note: str


class DeriveFailed(LodevemError):
    """Some levels could not be derived; ``written`` holds the ones that were."""

    def __init__(self, model: Path, failures: dict[str, str], written: list[DerivedFile]) -> None:
        self.failures, self.written = failures, written
        detail = "; ".join(f"{level}: {message}" for level, message in failures.items())
        super().__init__(f"{model}: could not derive {', '.join(failures)} ({detail})")


def output_path(model: Path, level: str, out_dir: Path) -> Path:
    return Path(out_dir) / f"{Path(model).stem}_{level}.pt"


def derive_variants(model: Path, levels: Sequence[str], out_dir: Path, backend: Any,
                    input_shape: Optional[Sequence[int]] = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[DerivedFile]:
    """Derive each level of ``model`` into ``out_dir`` through ``backend``, one sandbox run each.

    ``backend`` is an isolation backend (``lodevem.measure.default_backend()[0]``). Levels run in
    the order given; a level that fails does not stop the others, and ``DeriveFailed`` (with the
    files written) is raised at the end. Raises ``InputError`` for a missing model, an unknown
    level, fp32 (the file as given: nothing to derive) or an output that would be the input.
    """
    model = Path(model)
    if not model.is_file():
        raise InputError(f"{model}: model file not found")
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise InputError(f"unknown level(s) {', '.join(unknown)}; derivable levels: {', '.join(DERIVABLE)}")
    if "fp32" in levels:
        raise InputError(f"fp32 is the file as given, nothing to derive; derivable levels: {', '.join(DERIVABLE)}")
    if not levels:
        raise InputError(f"no level given; derivable levels: {', '.join(DERIVABLE)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[DerivedFile] = []
    failures: dict[str, str] = {}
    for level in dict.fromkeys(levels):
        target = output_path(model, level, out_dir)
        if target.resolve() == model.resolve():
            raise InputError(f"{target} would overwrite the input file; choose another --out folder")
        request = WorkerRequest(action="derive", model_path=str(model), level=level, derive_out=str(target),
                                input_shape=list(input_shape) if input_shape else None)
        outcome = backend.run(request, None, timeout_s)
        derived, error = _read_outcome(outcome, level, target)
        if derived is None:
            failures[level] = error
        else:
            written.append(derived)
    if failures:
        raise DeriveFailed(model, failures, written)
    return written


def _read_outcome(outcome: Any, level: str, target: Path) -> tuple[Optional[DerivedFile], str]:
    """(DerivedFile, "") for a run that wrote ``target``, else (None, one-line reason)."""
    result = outcome.result or {}
    if result.get("ok") and target.is_file():
        variant, derived = result.get("variant") or {}, result.get("derived") or {}
        notes = list(variant.get("notes") or [])
        if derived.get("format_reason"):
            notes.append(derived["format_reason"])
        return DerivedFile(level=level, path=target, format=derived.get("format") or "",
                           params=variant.get("params_after"), size_bytes=target.stat().st_size,
                           note="; ".join(notes)), ""
    if result.get("ok"):
        return None, f"the worker reported success but {target} was not written"
    return None, classify(outcome)[1] or "the worker failed without a message"


def derive_cached(model: Path, level: str, cache_dir: Path, backend: Any,
                  input_shape: Optional[Sequence[int]] = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  model_sha256: Optional[str] = None) -> DerivedFile:
    """The ``level`` variant of ``model`` as a file in ``cache_dir``, derived once per (content,
    level, input shape, worker version); raises ``DeriveFailed`` / ``InputError`` like
    ``derive_variants``.

    For measuring a level exactly: derive here (no memory limit), then measure the returned file
    as given (level None) under each RAM limit. Deriving inside the measured sandbox instead
    charges loading the original and the derivation to the variant's peak; on mobilenet_v2 that
    was +110 MB for int8-static (FX quantization imports torch._dynamo, sympy, networkx, which
    stay resident) and +97 MB for pruned (an autograd-traced forward), see the worker's
    ``hwm_after_derive_kb`` / ``peak_phase``.
    """
    model = Path(model)
    if level not in DERIVABLE:
        raise InputError(f"level {level!r} cannot be derived; derivable levels: {', '.join(DERIVABLE)}")
    sha = model_sha256 or file_sha256(model)
    shape = "x".join(map(str, input_shape)) if input_shape else "auto"
    stem = f"{sha[:24]}-{shape}-{level}-w{WORKER_VERSION}"
    cache_dir = Path(cache_dir)
    file, sidecar = cache_dir / f"{stem}.pt", cache_dir / f"{stem}.json"
    try:
        info = json.loads(sidecar.read_text())
        if file.is_file() and file.stat().st_size == info["size_bytes"]:
            return DerivedFile(**{**info, "path": file})
    except (OSError, ValueError, KeyError, TypeError):
        pass
    cache_dir.mkdir(parents=True, exist_ok=True)
    request = WorkerRequest(action="derive", model_path=str(model), level=level, derive_out=str(file),
                            input_shape=list(input_shape) if input_shape else None)
    derived, error = _read_outcome(backend.run(request, None, timeout_s), level, file)
    if derived is None:
        raise DeriveFailed(model, {level: error}, [])
    write_atomic(sidecar, json.dumps({**asdict(derived), "path": str(file)}))
    return derived


