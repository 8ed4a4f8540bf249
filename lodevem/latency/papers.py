"""The methods sentences of the offline estimator and of nn-Meter (``latency.paper`` says why the
kinds write their own): each reads only the run's recorded facts (``KindUse``), so a results
folder re-rendered by a later lodevem still describes the estimator it was made with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from ..runtimes import ADAPTERS
from .paper import KindPaper, KindUse, and_join

__all__ = ["data_references", "estimator_paper", "export_pipeline", "nnmeter_paper", "unknown_paper"]

# The estimator's data sources (estimator_params.json provenance.data_sources, matched by prefix)
# -> the reference and the name the sentence gives them.
# A runtime's sources are its adapter's facts (``runtimes``); Paddle Lite is a source, not a runtime.
_DATA_REFS: tuple[tuple[str, str, str], ...] = (
    *((r.data_source_prefix, r.kernels_cited.key, r.kernels_cited.name) for r in ADAPTERS.values()
      if r.data_source_prefix and r.kernels_cited),
    ("PaddlePaddle/Paddle-Lite", "paddlelite", "Paddle Lite"),
)
# The runtime a cell stands for -> the reference and name of what its latency models.
_RUNTIME_REFS: Mapping[str, tuple[str, str]] = {
    name: (r.kernels_cited.key, r.kernels_cited.name) for name, r in ADAPTERS.items() if r.kernels_cited}


def export_pipeline(use: KindUse) -> str:
    """The export and kernel split every kind reading the ONNX export shares (written once)."""
    return (f"Each model was exported to ONNX (opset 13, PyTorch{use.version('torch')} {{cite:pytorch}}, simplified "
            "with onnxsim) and split into fused kernels by nn-Meter's kernel detector {cite:nnmeter}.")


def _pct(value: Any) -> str:
    return "?" if value is None else f"{value:g} %"


def data_references(sources: Any) -> list[tuple[str, str]]:
    """(reference key, name) of each of the estimator's data sources lodevem has a reference for."""
    return [(key, name) for source in sources or () for prefix, key, name in _DATA_REFS
            if str(source).startswith(prefix)]


def estimator_paper(use: KindUse) -> KindPaper:
    """lodevem's offline cost model: what it charges, what it was fitted on and how it scores."""
    e = use.block("estimator")
    refs = data_references(e.get("data_sources"))
    data = and_join([f"{name} {{cite:{key}}}" for key, name in refs]) if refs else and_join(e.get("data_sources") or [])
    stands = ""
    if len(use.runtimes) == 1:  # several: the report says which rows stand for which runtime
        key, name = _RUNTIME_REFS.get(use.runtimes[0], ("", use.runtimes[0]))
        stands = f"; the latencies stand for {name}" + (f" {{cite:{key}}}" if key and (key, name) not in refs else "")
    sentence = (
        f"For {use.scope()}, lodevem's offline estimator {e.get('version', '')} "
        f"(fitted {e.get('fit_date') or 'on an unrecorded date'}) gave the latency: a kernel-level cost model that "
        "charges each kernel the multiply-accumulates of its kind (3x3 stride-1, GEMM-like and depthwise "
        "convolutions, fully connected layers), the bytes it moves and a fixed per-kernel overhead, with a compute "
        "and a memory scale per core type, divided by the clock"
        + (", plus the bytes it must stream from the SoC's DRAM at the SoC's published peak bandwidth. "
           if e.get("dram") else ". ") +
        f"It was fitted on {e.get('rows_used') if e.get('rows_used') is not None else 'the'} published latencies of "
        f"common CNNs on ARM boards measured with {data}, with efficiencies of its own for each runtime{stands}. "
        + ("It is scored by nested leave-one-SoC-out (the boards that share a SoC held out together, every choice "
           "of the fit made without the held-out SoC)" if e.get("nested", True) else
           "It is scored by leave-one-SoC-out (the boards that share a SoC held out together; the width of its "
           "priors fixed before the folds, not re-chosen without each held-out SoC)")
        + "; its error is stated once, per kind of cell, below.")
    sentence += _scaling(use)
    # one statement of uncertainty (latency.statement): the cells' figures, not the fit's overall MAPE
    spread = f"; {e['same_core_spread']}" if e.get("same_core_spread") else "; a single device can be further off"
    limitation = f"The estimator's held-out error is an average over boards{spread}."
    return KindPaper("lodevem's offline estimator", sentence, limitation, export_pipeline(use))


def _scaling(use: KindUse) -> str:
    """How the cost model scales to threads and reduced arithmetic, when the cells needed it."""
    out = ""
    if any(t > 1 for t in use.threads):
        out += (" Multi-thread latency divides the single-thread figure by an Amdahl speed-up with a per-core "
                "parallel fraction fitted on same-board 1- vs N-thread pairs, capped at the cluster's core count.")
    if any(f.arithmetic != "fp32" for f in use.figures):
        out += (" fp16 and int8 cells are priced at the arithmetic the runtime executes (LiteRT runs an fp16-weights "
                "file in fp32, ncnn runs fp32 and fp16 models in fp16 on ARMv8.2 cores), with int8 speed-ups per "
                "runtime and int8 instruction-set group: ncnn's fitted on its int8 measurements, XNNPACK's bounded "
                "by its kernels' multiply-accumulates per instruction and anchored on a published ratio.")
    return out


def nnmeter_paper(use: KindUse) -> KindPaper:
    """nn-Meter's kernel regressors on their reference device, carried to the profile's core."""
    predictors = use.described.get("nnmeter_predictors")
    named: Mapping[str, Any] = predictors if isinstance(predictors, Mapping) else {}
    parts = []
    for name, facts in named.items():
        ref = facts.get("reference") if isinstance(facts, Mapping) else None
        core, clock = (ref.get("core"), ref.get("clock_ghz")) if isinstance(ref, Mapping) else (None, None)
        device = f"a {core} at {clock:g} GHz" if core and isinstance(clock, (int, float)) else "its reference device"
        parts.append(f"{{code:{name}}}, which models {device} running TFLite 2.1 {{cite:litert}} with one thread")
    which = f"nn-Meter's kernel regressors ({'; '.join(parts)}) {{cite:nnmeter}}" if parts else \
        "nn-Meter's kernel regressors {cite:nnmeter}"
    sentence = (f"For {use.scope()}, {which} gave each kernel's time (kernels split with the predictor's own fusion "
                "rules), carried to the profile's core, clock, threads and precision kernel by kernel with the "
                "offline estimator's time ratio between the two cores; kernels nn-Meter has no regressor for are "
                "not counted.")
    limitation = ("nn-Meter's regressors model one device and runtime; carrying them to other cores relies on the "
                  "estimator's ratios, so the estimator's error applies to the transfer.")
    return KindPaper("nn-Meter", sentence, limitation, export_pipeline(use))


def unknown_paper(name: str) -> Callable[[KindUse], KindPaper]:
    """The words for a kind this lodevem has not registered (a results file made elsewhere)."""
    def paper(use: KindUse) -> KindPaper:
        return KindPaper(f"the {name} predictor", f"For {use.scope()}, the latency came from the predictor kind "
                         f"{{code:{name}}}, which this lodevem has no description of.")
    return paper
