"""``--predictor armsim|auto`` in a ``start`` run: the one hook the runner calls.

``armsim_cells`` takes the run's latency cells (the estimator's / nn-Meter's) and, for each
model whose latency runtime is tflite or ncnn, replaces the cells armsim can fill: it converts the
measured file with the run's ConvertCache (the very files ``--runtime tflite|ncnn`` measures),
profiles it per ISA (cached) and applies the cost model.

* ``armsim``: every covered cell is armsim's; a cell it cannot fill says why (``latency_ms``
  None), never falls back silently. Uncovered cores (no Arm build of the runtime for the ISA)
  keep the estimator's cell, with a run warning naming them.
* ``auto``: armsim only for runtimes where the fit's default-predictor decision
  (``data/armsim_params.json`` ``default_predictor``, written by ``scripts/fit_armsim.py``) has
  armsim winning LODO on every pooled kind of that runtime, and only when its image and cost
  model are present. With the shipped fit armsim loses every pooled kind (e.g. 1-thread fp32
  43.5 % vs the estimator's 20.1 %), so ``auto`` runs no emulation: the per-core wins it has
  (5 of 43 kinds, by 0.1-6.5 points on 4-18 rows) are within fold noise, and emulating every
  tflite/ncnn cell would cost minutes for a worse number.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ...errors import LodevemError
from ...predict import LatencyPrediction
from ...profiles import Profile
from ...worker.precision import LEVEL_FILE_PRECISION
from .isa import runtime_isas
from .predictor import ArmsimPredictor, default_cost_model
from .profiler import ArmsimProfiler

if TYPE_CHECKING:
    from ...store.artifacts import ConvertCache, ExportCache
    from ...sandbox.client import WorkerClient

PREDICTOR_CHOICES = ("armsim",)  # added to lodevem.predict.MODES' choices by the CLI


def base_predictor_mode(mode: str) -> str:
    """The mode of the run's estimator/nn-Meter Predictor: ``armsim`` runs over the estimator
    (its fallback for cores armsim does not cover)."""
    return "estimator" if mode == "armsim" else mode


def armsim_profiler(mode: str, client: "WorkerClient", cache_dir: Path, timeout_s: float, use_cache: bool,
                    warnings: list[str]) -> Optional[ArmsimProfiler]:
    """The run's profiler when it uses armsim (see ``armsim_usable``), else None."""
    if not armsim_usable(mode, client, warnings):
        return None
    return ArmsimProfiler(client, cache_dir, timeout_s, use_cache=use_cache)


def armsim_usable(mode: str, client: "WorkerClient", warnings: list[str]) -> bool:
    """Whether this run uses armsim: asked for (``armsim``) or ``auto`` with the image and the
    cost model present. ``armsim`` without them is an error the user must see."""
    if mode not in ("armsim", "auto"):
        return False
    if mode == "auto" and not auto_prefers_armsim():
        return False
    problem = ""
    if default_cost_model() is None:
        problem = "the armsim cost model (lodevem/latency/armsim/costmodel.py) is not installed"
    else:
        try:
            client.backend.identity_for("armsim")
        except LodevemError as exc:
            problem = str(exc)
        except Exception as exc:  # a backend without images (process, slurm): no armsim there
            problem = f"the {client.backend.name} backend cannot run the armsim image ({type(exc).__name__})"
        if client.backend.name != "docker" and not problem:
            problem = f"armsim runs only under the Docker backend, not {client.backend.name}"
    if problem and mode == "armsim":
        raise LodevemError(f"--predictor armsim: {problem}")
    return not problem


def auto_prefers_armsim(runtime: Optional[str] = None) -> bool:
    """Whether the shipped fit chose armsim over the estimator for every pooled (all-core) kind,
    of ``runtime`` or of every runtime: the rule ``--predictor auto`` follows (module doc)."""
    import json

    from .costmodel import DEFAULT_PARAMS

    try:  # lodevem's own shipped data, not a user's file
        kinds = json.loads(DEFAULT_PARAMS.read_text())["default_predictor"]["kinds"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    pooled = [k for k in kinds if isinstance(k, dict) and k.get("core") is None
              and (runtime is None or k.get("runtime") in (runtime, None))]
    return bool(pooled) and all(k.get("default") == "armsim" for k in pooled)


def _conversion(converts: "ConvertCache", runtime: str, measured: tuple[Path, str], original: tuple[Path, str],
                level: Optional[str], shape: Optional[Sequence[int]]) -> Any:
    """The file armsim profiles. A level the runtime's own converter makes (fp16, int8,
    int8-static): the ORIGINAL float model converted at that level (``runner.converted_level``:
    what a tflite/ncnn row of the level measures, and what the phone runs: for int8-static
    XNNPACK's int8 kernels). Everything else: the measured file, converted as ``--runtime``
    converts it (a pruned variant is a smaller float model)."""
    if level in LEVEL_FILE_PRECISION:
        return converts.convert(original[0], original[1], runtime, shape, quantize=level)
    return converts.convert(measured[0], measured[1], runtime, shape)


def armsim_cells(mode: str, profiler: ArmsimProfiler, converts: "ConvertCache", exports: "ExportCache",
                 runtime: str, measured: tuple[Path, str], original: tuple[Path, str], level: Optional[str],
                 profiles: Sequence[Profile], threads: int, input_shape: Optional[Sequence[int]],
                 cells: dict[str, LatencyPrediction], warnings: list[str]) -> dict[str, LatencyPrediction]:
    """The run's cells for one model with armsim's where it can answer (see the module doc).
    ``measured``/``original``: (path, sha256) of the file the run measures (a level's variant)
    and of the user's file it came from."""
    if not runtime_isas(runtime):
        return cells
    predictor = ArmsimPredictor(profiler, runtime)
    covered = [p for p in profiles if predictor.covers(p)]
    uncovered = sorted({p.fastest_cluster.core for p in profiles if p not in covered})
    if uncovered and mode == "armsim":
        note = f"--predictor armsim: no {runtime} profile for {', '.join(uncovered)}: those cells are the estimator's"
        if note not in warnings:
            warnings.append(note)
    if not covered:
        return cells
    shape = input_shape
    if shape is None:  # ncnn files do not record their input shape: the ONNX export's
        shape = exports.export(measured[0], measured[1], None).model.input_shape
    conversion = _conversion(converts, runtime, measured, original, level, shape)
    out = dict(cells)
    for profile in covered:
        if conversion.path is None:
            cell = LatencyPrediction.unavailable(profile, f"{runtime} conversion failed: {conversion.error}",
                                                 threads, runtime)
        else:
            cell = predictor.predict_one(conversion.path, profile, threads, shape, level)
        if cell.latency_ms is not None or mode == "armsim":
            out[profile.id] = cell
    return out


def describe_armsim(profiler: Optional[ArmsimProfiler]) -> dict[str, Any]:
    """The manifest's ``armsim`` entry ({} when the run did not use it)."""
    from .profiler import describe

    return describe(profiler)
