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
so the variant's peak RAM does not include loading the original or the derivation. Each variant
is returned as the same ``ModelFile`` record the rest of the run uses, with ``variant_path`` set.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .errors import DeriveFailed, InputError
from .levels import LEVELS
from .results import ModelFile
from .sandbox.artifacts import loading_sha256, shape_text
from .sandbox.client import SandboxRun, WorkerClient
from .sandbox.session import Session
from .sandbox.usercode import ModelLoading
from .store import ArtifactStore
from .store import file_digest as file_sha256

DERIVABLE = tuple(level for level in LEVELS if level != "fp32")
DEFAULT_TIMEOUT_S = 600.0


def output_path(model: Path, level: str, out_dir: Path) -> Path:
    return Path(out_dir) / f"{Path(model).stem}_{level}.pt"


def derivable(levels: Sequence[str]) -> tuple[str, ...]:
    """The levels of ``levels`` that make a new file (fp32 is the file as given)."""
    return tuple(level for level in levels if level in DERIVABLE)


def _check_levels(levels: Sequence[str]) -> None:
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise InputError(f"unknown level(s) {', '.join(unknown)}; derivable levels: {', '.join(DERIVABLE)}")
    if "fp32" in levels:
        raise InputError(f"fp32 is the file as given, nothing to derive; derivable levels: {', '.join(DERIVABLE)}")
    if not levels:
        raise InputError(f"no level given; derivable levels: {', '.join(DERIVABLE)}")


def derive_in_sandbox(model: Path, levels: Sequence[str], out_dir: Path, *, backend: str = "auto",
                      loading: Optional[ModelLoading] = None, input_shape: Optional[Sequence[int]] = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S,
                      on_warning: Callable[[str], None] = lambda _: None) -> list[ModelFile]:
    """``lodevem derive``: open the sandbox ``backend`` names (its warning, if any, goes to
    ``on_warning`` before any work) and derive each level there (``derive_variants``)."""
    with Session.scratch(backend, loading=loading, timeout_s=timeout_s) as session:
        session.connect()
        for warning in session.warnings:
            on_warning(warning)
        return derive_variants(model, levels, out_dir, session.client, input_shape=input_shape, timeout_s=timeout_s)


def derive_variants(model: Path, levels: Sequence[str], out_dir: Path, client: WorkerClient,
                    input_shape: Optional[Sequence[int]] = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> list[ModelFile]:
    """Derive each level of ``model`` into ``out_dir`` through ``client``, one sandbox run each.

    Levels run in the order given; a level that fails does not stop the others, and
    ``DeriveFailed`` (with the files written) is raised at the end. Raises ``InputError`` for a
    missing model, an unknown level, fp32 (the file as given: nothing to derive) or an output
    that would be the input.
    """
    model = Path(model)
    if not model.is_file():
        raise InputError(f"{model}: model file not found")
    _check_levels(levels)
    source = ModelFile.from_path(model, model.name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[ModelFile] = []
    failures: dict[str, str] = {}
    for level in dict.fromkeys(levels):
        target = output_path(model, level, out_dir)
        if target.resolve() == model.resolve():
            raise InputError(f"{target} would overwrite the input file; choose another --out folder")
        run = client.derive(model, level, target, input_shape, timeout_s)
        variant, error = _variant(dataclasses.replace(source, level=level), run, target)
        if variant is None:
            failures[level] = error
        else:
            written.append(variant)
    if failures:
        raise DeriveFailed(model, failures, written)
    return written


def _variant(model: ModelFile, run: SandboxRun, target: Path) -> tuple[Optional[ModelFile], str]:
    """(``model`` with its variant file, "") for a run that wrote ``target``, else (None, reason)."""
    derived = run.reply.derived_variant() if run.reply is not None else None
    if run.ok and derived is not None and target.is_file():
        return dataclasses.replace(model, variant_path=target, variant_sha256=file_sha256(str(target)),
                                   size_bytes=target.stat().st_size, format=derived.format,
                                   params=derived.params_after, note="; ".join(derived.notes)), ""
    if run.ok:
        return None, f"the worker reported success but {target} was not written"
    return None, run.failure_message()


_SIDECAR_FIELDS = ("variant_sha256", "size_bytes", "format", "params", "note")


@dataclasses.dataclass(frozen=True)
class FineTune:
    """``--finetune-data`` for the pruned level: the normalised samples (``accuracy.data``),
    their digest (part of the variant's key) and the number of epochs (``worker.derive.finetune``)."""

    data_path: Path
    data_sha256: str
    epochs: int
    describe: str = ""  # the data as the methods paragraph names it


def derive_cached(model: ModelFile, store: ArtifactStore, client: WorkerClient,
                  input_shape: Optional[Sequence[int]] = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                  finetune: Optional[FineTune] = None) -> ModelFile:
    """``model`` (a user's file with a ``level``) with its variant file in the store (kind
    ``derived``), derived once per (content, loading, level, input shape, worker version, sandbox
    identity); raises ``DeriveFailed`` / ``InputError`` like ``derive_variants``. The variant is
    published from the run's staging folder only when the derivation succeeded.

    For measuring a level exactly: derive here (no memory limit), then measure the variant file
    under each RAM limit. Deriving inside the measured sandbox instead charges loading the
    original and the derivation to the variant's peak; on mobilenet_v2 that was +110 MB for
    int8-static (FX quantization imports torch._dynamo, sympy, networkx, which stay resident)
    and +97 MB for pruned (an autograd-traced forward).
    """
    level = model.level
    if level not in DERIVABLE:
        raise InputError(f"level {level!r} cannot be derived; derivable levels: {', '.join(DERIVABLE)}")
    tuned = finetune if level == "pruned" else None
    suffix = f"-ft{tuned.epochs}-{tuned.data_sha256[:12]}" if tuned else ""
    name = f"{loading_sha256(model.sha256, client.cache_key)[:24]}-{shape_text(input_shape)}-{level}{suffix}.pt"
    maker: dict[str, Any] = {"model_sha256": model.sha256, "loading": client.cache_key, "level": level,
             "input_shape": list(input_shape) if input_shape else None, "worker_version": client.worker_version,
             "identity": client.backend.identity}
    if tuned:  # only then: existing variants keep their makers
        maker["finetune"] = [tuned.data_sha256, tuned.epochs]
    kept = store.lookup("derived", [name], maker)
    if kept is not None:
        try:
            return dataclasses.replace(model, variant_path=kept.path, **{k: kept.info[k] for k in _SIDECAR_FIELDS})
        except (KeyError, TypeError):
            pass
    with store.staging() as staged:
        run = client.derive(model.path, level, staged / name, input_shape, timeout_s,
                            (tuned.data_path, tuned.epochs) if tuned else None)
        variant, error = _variant(model, run, staged / name)
        if variant is None:
            raise DeriveFailed(model.path, {level: error}, [])
        artifact, error = store.publish("derived", staged, [name], maker,
                                        {k: getattr(variant, k) for k in _SIDECAR_FIELDS})
    if artifact is None:
        raise DeriveFailed(model.path, {level: error}, [])
    return dataclasses.replace(variant, variant_path=artifact.path)
