"""The paper kit: a methods paragraph and the references of one run, written beside its results.

Why: lodevem's outputs are meant for papers, and the methods text (which predictor, fitted on
what, how far off; how RAM was measured and limited) and the citations were left to the user,
where they are easy to get wrong. So ``write_paper_kit`` writes ``methodology.md``,
``methodology.tex`` and ``references.bib`` from what the run *recorded* - the rows' latency
sources, runtimes, backends and limit enforcement, and the manifest's predictor description,
settings, host and package versions - never from what lodevem can do in general: a runtime,
predictor, data source or limitation the run did not involve is not mentioned, and every
figure quoted comes from the run's records or the estimator's parameters file.

The facts are gathered once into a typed ``RunFacts`` (``run_facts``); the text is built as
sentences with two kinds of token, ``{cite:KEY}`` and ``{code:TEXT}``, and rendered to Markdown
(``[KEY]`` plus a reference list) or LaTeX (``\\cite{KEY}``, escaped text). The BibTeX entries
come from ``lodevem/data/references.json``, each with where its fields were taken from; only
the keys the text cites are written, lodevem's own always.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..memory.planning import ABSOLUTE_MB, RELATIVE
from ..results import PairResult
from ..store.files import write_atomic
from ..version import __version__
from ..worker.precision import LEVEL_ARITHMETIC
from ..worker.registry import on_device_runtimes
from ..worker.verdict import Verdict
from .cells import RunCounts, run_counts
from .files import latex_escape
from .manifest import Manifest, ManifestLike

__all__ = ["BIB_NAME", "MD_NAME", "TEX_NAME", "REFERENCES", "RunFacts", "bibtex", "cited_keys",
           "methodology_latex", "methodology_markdown", "run_facts", "write_paper_kit"]

MD_NAME = "methodology.md"
TEX_NAME = "methodology.tex"
BIB_NAME = "references.bib"
REFERENCES = Path(__file__).resolve().parent.parent / "data" / "references.json"

# A data source or latency-source token -> the reference that describes it. Data sources are
# matched by prefix (estimator_params.json provenance.data_sources); runtime words anywhere in a
# latency source (e.g. a runtime-aware ``estimator:v2 tflite``) by whole token.
_SOURCE_REFS: tuple[tuple[str, str, str], ...] = (
    ("Tencent/ncnn", "ncnn", "ncnn"),
    ("PaddlePaddle/Paddle-Lite", "paddlelite", "Paddle Lite"),
    ("google/XNNPACK", "xnnpack", "TFLite with XNNPACK"),
)
_RUNTIME_TOKENS: Mapping[str, tuple[str, str]] = {
    "ncnn": ("ncnn", "ncnn"), "paddle-lite": ("paddlelite", "Paddle Lite"), "paddlelite": ("paddlelite", "Paddle Lite"),
    "xnnpack": ("xnnpack", "XNNPACK"), "tflite-xnnpack": ("xnnpack", "TFLite with XNNPACK"),
    "tflite": ("litert", "TFLite"), "litert": ("litert", "LiteRT"),
}
_TOKEN = re.compile(r"\{(cite|code):([^{}]+)\}")


@dataclass(frozen=True)
class EstimatorFacts:
    """What the run's manifest says about the offline estimator it used."""

    version: str
    fit_date: Optional[str]
    lodo_mape_pct: Optional[float]
    lodo_within_10_pct: Optional[float]
    lodo_within_25_pct: Optional[float]
    lodo_rows: Optional[int]
    baseline_lodo_mape_pct: Optional[float]
    rows_used: Optional[int]
    data_sources: tuple[str, ...]
    data_sha256: Optional[str]
    params_sha256: Optional[str]
    same_core_spread: Optional[str]
    oneshot_mape_pct: Optional[float] = None
    runtime: Optional[str] = None


@dataclass(frozen=True)
class NnMeterFacts:
    """One nn-Meter predictor the run's latencies came from."""

    name: str
    reference_core: Optional[str]
    reference_clock_ghz: Optional[float]
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class RunFacts:
    """Everything the paper kit says, read from one run's rows and manifest (nothing else)."""

    lodevem_version: str
    git_commit: Optional[str]
    git_dirty: Optional[bool]
    models: tuple[str, ...]
    profiles: tuple[str, ...]
    devices: tuple[str, ...]  # "label (chipset, fastest core @ clock, RAM)" per profile
    tiers: tuple[str, ...]
    latency_sources: tuple[str, ...]
    estimator_profiles: tuple[str, ...]
    estimator: Optional[EstimatorFacts]
    nnmeter: tuple[NnMeterFacts, ...]
    latency_runtimes: tuple[tuple[str, str], ...]  # (reference key, name) named by latency sources
    derived_cores: tuple[str, ...]
    threads: tuple[int, ...]
    levels: tuple[str, ...]
    calibrations: tuple[str, ...]
    runtimes: tuple[str, ...]
    backends: tuple[str, ...]
    enforcements: tuple[str, ...]
    inferred_rows: int  # memory figures inferred from the run at a larger limit (memory.planning)
    measured_rows: int  # memory figures with a run at their own limit
    warmup: Optional[int]
    runs: Optional[int]
    verdicts: tuple[Verdict, ...]
    runtime_baseline_mb: tuple[float, ...]  # (min, max) over rows that ran, or ()
    image_id: Optional[str]
    docker_version: Optional[str]
    host_machine: Optional[str]
    host_cpu: Optional[str]
    cgroup_version: Optional[str]
    packages: Mapping[str, Optional[str]]
    counts: Optional[RunCounts] = None
    # (runtime the rows were measured under, runtime their latency was predicted for), per row group
    latency_for: tuple[tuple[str, str], ...] = ()
    images: tuple[tuple[str, str], ...] = ()  # (tag, id) of every image the run used
    # (runtime, its package version, converter, converter version) as pinned for the images
    runtime_versions: tuple[tuple[str, Optional[str], Optional[str], Optional[str]], ...] = ()
    baselines: tuple[tuple[str, float, float], ...] = ()  # (runtime, min, max) baseline MB over rows that ran
    input_shapes: tuple[str, ...] = ()  # "1x3x224x224 (default)" per distinct shape
    budgets: tuple[tuple[str, int], ...] = ()  # (profile label, app budget MB)
    user_precisions: tuple[str, ...] = ()  # precisions of the user's own files other than fp32
    # (runtime, level, converted precision, scheme) of each level a runtime's own converter made
    converted_levels: tuple[tuple[str, str, Optional[str], Optional[str]], ...] = ()
    fallbacks: tuple[str, ...] = ()  # memory_runtime of rows measured under torch because a converter refused
    memory_notes: tuple[str, ...] = ()  # each distinct row note on how the measured file was made
    evaluation: Optional[str] = None  # --eval-data as the manifest describes it (lodevem.accuracy)
    finetune: Optional[str] = None  # --finetune-data: "<epochs> epoch(s) on <data>" (worker.finetune)
    evaluated_rows: int = 0  # rows with a top-1 figure
    unevaluated_rows: int = 0  # rows of an evaluated run without one (accuracy_note says why)

    @property
    def predicted(self) -> bool:
        return bool(self.latency_sources)


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(v for v in values if v not in (None, "")))


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def run_facts(rows: Sequence[PairResult], manifest: ManifestLike) -> RunFacts:
    """Gather what the run used from its rows (per pair) and its manifest (per run: the typed
    record, or its JSON form read back from a results file)."""
    env = Manifest.coerce(manifest)
    sources = _distinct([r.latency_source for r in rows if r.latency_ms is not None])
    predictor = env.extra.get("predictor") or {}
    est = predictor.get("estimator") if isinstance(predictor, Mapping) else None
    estimator_profiles = _distinct([r.profile_id for r in rows
                                    if r.latency_ms is not None and r.latency_source.startswith("estimator:")])
    estimator = None
    if isinstance(est, Mapping) and (estimator_profiles or any(s.startswith("nn-meter:") for s in sources)):
        estimator = EstimatorFacts(
            version=str(est.get("version")), fit_date=est.get("fit_date"), lodo_mape_pct=est.get("lodo_mape_pct"),
            lodo_within_10_pct=est.get("lodo_within_10_pct"), lodo_within_25_pct=est.get("lodo_within_25_pct"),
            lodo_rows=est.get("lodo_rows"), baseline_lodo_mape_pct=est.get("baseline_lodo_mape_pct"),
            rows_used=est.get("rows_used"), data_sources=tuple(est.get("data_sources") or ()),
            data_sha256=est.get("data_sha256"), params_sha256=est.get("params_sha256"),
            same_core_spread=est.get("same_core_spread"), oneshot_mape_pct=est.get("oneshot_mape_pct"),
            runtime=est.get("runtime"))
    described = predictor.get("nnmeter_predictors") if isinstance(predictor, Mapping) else None
    nn: list[NnMeterFacts] = []
    for name in _distinct([s.split(":", 1)[1].split("\u2192", 1)[0] for s in sources if s.startswith("nn-meter:")]):
        ref = _get(described, name, "reference") or {}
        nn.append(NnMeterFacts(name, ref.get("core"), ref.get("clock_ghz"),
                               _distinct([r.profile_id for r in rows if r.latency_ms is not None
                                          and r.latency_source.startswith(f"nn-meter:{name}")])))
    tokens = [t.lower() for s in sources for t in re.split(r"[\s()\u2192,;]+", s)]
    runtimes_named = _distinct([_RUNTIME_TOKENS[t] for t in tokens if t in _RUNTIME_TOKENS])
    derived = _distinct([r.core for r in rows if r.latency_ms is not None and r.latency_uncertainty
                         and "not measured: derived" in r.latency_uncertainty])
    ran = [r.runtime_baseline_mb for r in rows if r.runtime_baseline_mb is not None]
    config = env.extra.get("config") or {}
    return RunFacts(
        lodevem_version=env.lodevem.version or __version__,
        git_commit=env.lodevem.git_commit,
        git_dirty=env.lodevem.git_dirty,
        models=_distinct([r.model_label for r in rows]),
        profiles=_distinct([r.profile_id for r in rows]),
        devices=_distinct([f"{r.profile_label} ({r.chipset}, {r.core} @ {r.clock_ghz:g} GHz, {r.ram_mb} MB)"
                           for r in rows]),
        tiers=_distinct([r.tier for r in rows]),
        latency_sources=sources,
        estimator_profiles=estimator_profiles,
        estimator=estimator,
        nnmeter=tuple(nn),
        latency_runtimes=runtimes_named,
        derived_cores=derived,
        threads=tuple(sorted(_distinct([r.threads for r in rows]))),
        levels=_distinct([r.level for r in rows]),
        calibrations=_distinct([c for r in rows for c in r.latency_calibrations]),
        runtimes=_distinct([r.runtime for r in rows if r.verdict != Verdict.ERROR or r.limit_enforcement]),
        backends=_distinct([r.backend for r in rows if r.limit_enforcement]),
        enforcements=_distinct([re.sub(r"=\d+MB", "", r.limit_enforcement) for r in rows
                                if r.memory_inferred_from_mb is None]),
        inferred_rows=sum(1 for r in rows if r.memory_inferred_from_mb is not None),
        measured_rows=sum(1 for r in rows if r.memory_inferred_from_mb is None and r.limit_enforcement),
        warmup=config.get("warmup") if isinstance(config, Mapping) else None,
        runs=config.get("runs") if isinstance(config, Mapping) else None,
        verdicts=_distinct([r.verdict for r in rows]),
        runtime_baseline_mb=(min(ran), max(ran)) if ran else (),
        image_id=env.backend.image_id,
        docker_version=env.backend.docker_server_version,
        host_machine=env.host.machine,
        host_cpu=env.host.cpu_model,
        cgroup_version=env.host.cgroup_version,
        packages=dict(env.packages),
        counts=run_counts(rows),
        latency_for=_distinct([(r.runtime, lr) for r in rows if r.latency_ms is not None
                               for lr in [latency_runtime_of(r.latency_source)] if lr]),
        images=tuple(sorted(env.backend.images.items())),
        runtime_versions=tuple((name, info.version, info.converter, info.converter_version)
                               for name, info in env.runtimes.items() if name in {r.runtime for r in rows}),
        baselines=tuple((rt, min(v), max(v)) for rt in _distinct([r.runtime for r in rows])
                        for v in [[r.runtime_baseline_mb for r in rows
                                   if r.runtime == rt and r.runtime_baseline_mb is not None]] if v),
        input_shapes=_distinct([f"{r.input_shape} ({r.input_shape_source})" if r.input_shape_source
                                else r.input_shape for r in rows if r.input_shape]),
        budgets=_distinct([(r.profile_label, r.app_budget_mb) for r in rows if r.app_budget_mb is not None]),
        user_precisions=_distinct([r.precision for r in rows if r.level is None and r.precision
                                   and r.precision != "fp32"]),
        converted_levels=_distinct([(r.runtime, r.level, r.converted_precision, r.converted_scheme) for r in rows
                                    if r.level and r.runtime in on_device_runtimes() and r.converted_mb is not None
                                    and not (r.memory_runtime or "").endswith("(fallback)")]),
        fallbacks=_distinct([r.model_label for r in rows if (r.memory_runtime or "").endswith("(fallback)")]),
        memory_notes=_distinct([part for r in rows if r.memory_note and not (r.memory_runtime or "").endswith(
                                "(fallback)") for part in r.memory_note.split("; ")]),
        evaluation=env.extra.get("evaluation"),
        finetune=env.extra.get("finetune"),
        evaluated_rows=sum(1 for r in rows if r.accuracy_top1_pct is not None),
        unevaluated_rows=sum(1 for r in rows if r.accuracy_top1_pct is None
                             and (r.accuracy_note or r.accuracy_samples is not None)),
    )


def latency_runtime_of(source: Optional[str]) -> Optional[str]:
    """The runtime a latency source says it predicts: ``estimator:v2 ncnn (...)`` and ``armsim:v2 ncnn
    armv8.2 (...)`` -> ncnn; nn-Meter's predictors model TFLite; None when the source does not say."""
    text = source or ""
    match = re.match(r"(?:estimator|armsim):\S+ ([a-z][a-z0-9-]*)", text)
    if match:
        return match.group(1)
    return "tflite" if text.startswith("nn-meter:") else None


# --- the text ------------------------------------------------------------------------------------

def _and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


def _pct(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:g} %"


def _version(facts: RunFacts, package: str) -> str:
    version = facts.packages.get(package)
    return f" {version}" if version else ""


def _data_refs(facts: RunFacts) -> list[tuple[str, str, str]]:
    """(data source, reference key, name) for each of the estimator's data sources."""
    found = []
    for source in facts.estimator.data_sources if facts.estimator else ():
        for prefix, key, name in _SOURCE_REFS:
            if source.startswith(prefix):
                found.append((source, key, name))
    return found


def _latency_paragraph(f: RunFacts) -> str:
    if not f.predicted:
        return "No latency could be predicted in this run (see the rows' latency notes)."
    threads = (f"{f.threads[0]} thread" + ("s" if f.threads[0] != 1 else "")) if len(f.threads) == 1 \
        else f"{_and([str(t) for t in f.threads])} threads"
    out = [f"Latency was not measured on the devices: it was predicted for {threads} on the fastest CPU cluster of "
           f"each of the {len(f.profiles)} device profiles. Each model was exported to ONNX (opset 13, "
           f"PyTorch{_version(f, 'torch')} {{cite:pytorch}}, simplified with onnxsim) and split into fused kernels by "
           "nn-Meter's kernel detector {cite:nnmeter} with "
           + ("its TFLite-CPU fusion rules." if not f.nnmeter else "the fusion rules of the predictor used.")]
    e = f.estimator
    if f.estimator_profiles and e is not None:
        refs = _data_refs(f)
        data = _and([f"{name} {{cite:{key}}}" for _, key, name in refs]) if refs else _and(list(e.data_sources))
        n = len(f.estimator_profiles)
        scope = "every profile" if n == len(f.profiles) else f"{n} of the profiles ({_and(list(f.estimator_profiles))})"
        out.append(
            f"For {scope}, lodevem's offline estimator {e.version} "
            f"(fitted {e.fit_date or 'on an unrecorded date'}) gave "
            "the latency: a kernel-level cost model that charges each kernel the multiply-accumulates of its kind "
            "(3x3 stride-1, GEMM-like and depthwise convolutions, fully connected layers), the bytes it moves and a "
            "fixed per-kernel overhead, with a compute and a memory scale per core type, divided by the clock. "
            f"It was fitted on {e.rows_used if e.rows_used is not None else 'the'} "
            "published latencies of common CNNs on "
            f"ARM boards measured with {data}, with efficiencies of its own for each runtime"
            + (f"; the latencies stand for {f.latency_for[0][1]}" if len({lr for _, lr in f.latency_for}) == 1
               else "")
            + f". Scored leave-one-SoC-out (the boards that share a SoC held out together) over {e.lodo_rows} "
            "single-thread fp32 rows, its mean absolute "
            f"percentage error is {_pct(e.lodo_mape_pct)}"
            + (f" ({_pct(e.lodo_within_10_pct)} of the predictions within 10 %, {_pct(e.lodo_within_25_pct)} within "
               f"25 %)" if e.lodo_within_10_pct is not None and e.lodo_within_25_pct is not None else "")
            + f" against {_pct(e.baseline_lodo_mape_pct)} for a MACs-only baseline; each latency is reported with the "
            "leave-one-SoC-out error of its own kind (core, threads, precision, runtime)"
            + (f", and a board calibrated with one measured model comes to {_pct(e.oneshot_mape_pct)} in the same "
               "simulation" if e.oneshot_mape_pct is not None else "") + ".")
    for nn in f.nnmeter:
        ref = (f"a {nn.reference_core} at {nn.reference_clock_ghz:g} GHz"
               if nn.reference_core and nn.reference_clock_ghz
               else "its reference device")
        out.append(f"For {_and(list(nn.profiles))}, nn-Meter's {{code:{nn.name}}} kernel regressors {{cite:nnmeter}}, "
                   f"which model {ref} running TFLite 2.1 {{cite:litert}} with one thread, gave each kernel's time, "
                   "carried to the profile's core and clock kernel by kernel with the estimator's time ratio "
                   "between the two cores; kernels nn-Meter has no regressor for are not counted.")
    if len({lr for _, lr in f.latency_for}) > 1:
        out.append("Each row's latency stands for one runtime: " + "; ".join(
            f"rows measured under {measured} show the latency predicted for {predicted}"
            for measured, predicted in f.latency_for) + ".")
    named = [(k, n) for k, n in f.latency_runtimes if not any(k == key for _, key, _ in _data_refs(f))]
    if named and len({lr for _, lr in f.latency_for}) <= 1:  # several: the sentence per row group says it
        out.append("The predictions model the " + _and([f"{n} {{cite:{k}}}" for k, n in named]) + " runtime"
                   + ("s" if len(named) > 1 else "") + ".")
    if any(t > 1 for t in f.threads):
        out.append("Multi-thread latency divides the single-thread figure by an Amdahl speed-up with a per-core "
                   "parallel fraction fitted on same-board 1- vs N-thread pairs, capped at the cluster's core count.")
    variants = [level for level in f.levels if level]
    if variants or f.user_precisions:
        parts = []
        if variants:
            parts.append(f"variants derived by lodevem from each model ({{code:--levels}}): {_and(list(variants))}")
        if f.user_precisions:
            parts.append(f"files the user quantized ({_and(list(f.user_precisions))}), predicted from the kernels' "
                         "own precisions")
        out.append("The files measured include " + " and ".join(parts) + ".")
    if any(LEVEL_ARITHMETIC.get(level or "fp32", "fp32") != "fp32" for level in f.levels):
        out.append("fp16 and int8 variants were predicted from the fp32 graph divided by per-core speed-up factors "
                   "fitted on paired ncnn measurements.")
    if f.calibrations:
        out.append("The predictions were then scaled by measurements on physical devices: "
                   + "; ".join(f"{{code:{c}}}" for c in f.calibrations) + ".")
    return " ".join(out)


def _memory_paragraph(f: RunFacts) -> str:
    if not f.backends:
        return "No memory measurement could be made in this run (see the rows' memory errors)."
    pinned = {name: (version, conv, conv_version) for name, version, conv, conv_version in f.runtime_versions}

    def converted(runtime: str) -> str:
        version, conv, conv_version = pinned.get(runtime, (None, None, None))
        head = f" {version}" if version else ""
        return head + (f" (converted with {conv} {conv_version})" if conv else "")

    names = {"torch": f"PyTorch{_version(f, 'torch')} {{cite:pytorch}}",
             "onnxruntime": f"ONNX Runtime{_version(f, 'onnxruntime')} {{cite:onnxruntime}} (on the ONNX export)",
             "tflite": f"LiteRT{converted('tflite')} {{cite:litert}}",
             "ncnn": f"ncnn{converted('ncnn')} {{cite:ncnn}}"}
    runtimes = _and([names.get(r, r) for r in f.runtimes])
    sandboxes = []
    for backend in f.backends:
        if backend == "docker":
            engine = f" (Docker engine {f.docker_version})" if f.docker_version else ""
            if f.images:
                image = ", images " + _and([f"{{code:{tag} {ident.removeprefix('docker:')[:19]}}}"
                                            for tag, ident in f.images])
            else:
                image = f", image {{code:{f.image_id.removeprefix('docker:')[:19]}}}" if f.image_id else ""
            sandboxes.append(f"a Docker container{engine} without network, with a read-only root file system and "
                             f"every capability dropped{image}")
        elif backend == "process":
            sandboxes.append("a child process (no file-system or network sandbox)")
        else:
            sandboxes.append(f"the {backend} backend")
    limits = _and([f"{{code:{e}}}" for e in f.enforcements if e])
    passes = (f"{f.warmup} untimed warm-up pass{'es' if f.warmup != 1 else ''} and {f.runs} timed inference "
              f"pass{'es' if f.runs != 1 else ''}" if f.warmup is not None and f.runs
              else "untimed warm-up and timed inference passes")
    host = (f" on an {f.host_machine} host" + (f" ({f.host_cpu})" if f.host_cpu else "")) if f.host_machine else ""
    out = [f"Peak RAM was measured, not predicted: each model was loaded and run with {runtimes}{host}, in "
           f"{_and(sandboxes)}, limited to each device's RAM ({limits}), for {passes}. Profiles with the same "
           "RAM share one measurement. The runtime's shared libraries were read once beforehand, outside the limited "
           "runs, so every run starts from the same page-cache state. The peak reported is the process's resident "
           "high-water mark ({code:VmHWM}); a model runs on a device only if the run completed and its VmHWM "
           "stayed within the limit."]
    if f.converted_levels:
        made = [f"{level} under {runtime}" + (f" ({scheme})" if scheme else f" ({precision})" if precision else "")
                for runtime, level, precision, scheme in f.converted_levels]
        out.append("A compression level measured under an on-device runtime is the file that runtime loads, made "
                   "by its own converter from the fp32 model (pruned: the pruned fp32 model, converted): "
                   f"{_and(made)}.")
    out += [f"{note[:1].upper()}{note[1:]}." for note in f.memory_notes]
    if f.fallbacks:
        out.append(f"The converter refused {len(f.fallbacks)} of the user's own quantized files "
                   f"({_and(list(f.fallbacks))}); their peak RAM was measured under PyTorch instead and is marked "
                   "{code:torch (fallback)}.")
    if f.input_shapes:
        out.append(f"Every model was run with input {_and(list(f.input_shapes))}.")
    if f.budgets:
        budgets = _and([f"{label} {mb} MB" for label, mb in f.budgets])
        out.append("The verdict compares the peak with each device's app budget, what one app can use before the "
                   f"OS's low-memory killer stops it ({budgets}; estimates per device class from published figures, "
                   "with their sources in the profiles): fits within the budget, tight above it but within the RAM, "
                   "OOM killed at the RAM limit.")
    if f.inferred_rows:
        total = f.inferred_rows + f.measured_rows
        out.append(f"{f.inferred_rows} of the {total} memory figures were not measured at their own limit: each "
                   "was inferred from the same model's run at the largest limit, whose peak was far below it "
                   f"(limit at least {1 + RELATIVE:g} x the peak + {ABSOLUTE_MB:g} MB, where a tighter limit does "
                   "not change the peak); "
                   "the rows say so in {code:limit_enforcement}.")
    if Verdict.THRASHING in f.verdicts:
        out.append("A run far slower than the same model unconstrained, with many major page faults, is reported "
                   "as thrashing (a phone's low-memory killer would have stopped it).")
    return " ".join(out)


def _limitations(f: RunFacts) -> list[str]:
    items = []
    if f.host_machine and f.host_machine not in ("aarch64", "arm64", "armv7l", "armv8l"):
        items.append(f"Memory was measured on an {f.host_machine} host, not on the phones' ARM CPUs: code size, "
                     "allocator behaviour and kernel choices of the ARM build differ, so peak RAM on a device "
                     "may differ.")
    if f.baselines:
        spans = [f"{rt} {lo:g} MB" if lo == hi else f"{rt} {lo:g}-{hi:g} MB" for rt, lo, hi in f.baselines]
        on_device = any(rt in on_device_runtimes() for rt, _, _ in f.baselines)
        items.append(f"Peak RAM includes the measurement runtime's own footprint before the model was loaded "
                     f"({_and(spans)})" + ("; an on-device runtime such as TFLite or ncnn has a smaller baseline of "
                                          "its own." if not on_device else ", so rows of different runtimes differ "
                                          "by that footprint as well as by the model."))
    if f.backends:
        budget = ("The app budgets are estimates per device class (Android, Android Go, KaiOS), not measurements on "
                  "each phone; " if f.budgets else "Device RAM is not all available to an app (the OS reserves a "
                  "share), so fitting is necessary, not sufficient; ")
        items.append(budget + "the phone's OS is not emulated (no thermal throttling or background apps).")
    e = f.estimator
    if f.estimator_profiles and e is not None:
        spread = f"; {e.same_core_spread}" if e.same_core_spread else "; a single device can be further off"
        items.append(f"The estimator's error is an average ({_pct(e.lodo_mape_pct)} MAPE leave-one-SoC-out over "
                     f"{e.lodo_rows} rows){spread}.")
    if f.derived_cores:
        items.append(f"{_and(list(f.derived_cores))}: no latency data in the estimator's fit; the core's speed is "
                     "derived from Arm's published per-clock figures.")
    if f.nnmeter:
        items.append("nn-Meter's regressors model one device and runtime; carrying them to other cores relies on the "
                     "estimator's ratios, so the estimator's error applies to the transfer.")
    if any(LEVEL_ARITHMETIC.get(level or "fp32") == "int8" for level in f.levels):
        items.append("int8 latency is the fp32 kernel graph scaled by fitted factors; real int8 speed depends on "
                     "the runtime's int8 kernels.")
    if "pruned" in f.levels and f.finetune:
        items.append("Pruned variants were fine-tuned briefly with one fixed recipe (see above), not trained to "
                     "convergence: a longer schedule may recover more accuracy {cite:depgraph}.")
    elif "pruned" in f.levels:
        items.append("Pruned variants are 50 % structured L1-norm channel pruning without fine-tuning: "
                     + ("their accuracy drop is the one measured above, which fine-tuning would reduce"
                        if f.evaluation else "their accuracy is not assessed, only their speed and memory")
                     + " {cite:depgraph}.")
    if not f.calibrations and f.predicted:
        items.append("No prediction was calibrated against a measurement on a physical device.")
    if "process" in f.backends:
        items.append("The process backend is not a security sandbox, and under RLIMIT_AS it limits virtual memory, "
                     "which is stricter than resident memory.")
    return items


def _accuracy_paragraph(f: RunFacts) -> Optional[str]:
    """The data set, N and preprocessing of ``--eval-data``, and where each row's figure comes from."""
    if not f.evaluation and not f.finetune:
        return None
    text = "Accuracy was not evaluated (no {code:--eval-data})."
    if f.evaluation:
        text = (f"Accuracy was evaluated on {f.evaluation} ({{code:--eval-data}}), in the same sandbox as the "
                "measurements and under each row's own runtime, on the very file whose memory was measured (the "
                "model or its derived variant under PyTorch, its ONNX export under onnxruntime, its conversion "
                "under LiteRT or ncnn), one sample per inference. Top-1 (and top-5 with more than five classes) is "
                "the share of samples whose label scores highest (among the five highest); ties count as errors. "
                "Each variant's drop is the fp32 row's top-1 minus its own, in percentage points, same runtime.")
    if f.finetune:
        from ..worker.finetune import RECIPE

        text += (f" The pruned variants were fine-tuned after pruning, in the sandbox, for {f.finetune} "
                 f"({{code:--finetune-data}}; {RECIPE}, seeded sample order).")
    if f.unevaluated_rows:
        text += (f" {f.unevaluated_rows} row(s) have no accuracy (their {{code:accuracy_note}} says why); their "
                 "latency and memory figures stand.")
    return text


def _paragraphs(f: RunFacts) -> tuple[str, str, list[str], str]:
    intro = (f"Results were produced with lodevem {f.lodevem_version} {{cite:lodevem}}"
             + (f" (commit {{code:{f.git_commit[:12]}}}" + (" with local changes" if f.git_dirty else "") + ")"
                if f.git_commit else "")
             + f" for {f.counts.text() if f.counts else f'{len(f.models)} models'} on {len(f.profiles)} device profile"
             + ("s" if len(f.profiles) != 1 else "") + f" ({_and(list(f.tiers))}): {'; '.join(f.devices)}.")
    provenance = ("Each device profile cites the sources of its specifications, and the run's manifest "
                  "({code:benchmark_results.json}, {code:environment}) records the command, package versions, "
                  "the sandbox images and the sha256 of every model and profile.")
    return intro + " " + _latency_paragraph(f), _memory_paragraph(f), _limitations(f), provenance


def cited_keys(facts: RunFacts) -> list[str]:
    """The reference keys the methodology text cites, in first-cited order, lodevem first."""
    intro, memory, limits, provenance = _paragraphs(facts)
    text = " ".join([intro, memory, *limits, provenance])
    return list(dict.fromkeys(["lodevem"] + [m.group(2) for m in _TOKEN.finditer(text) if m.group(1) == "cite"]))


def _render(text: str, latex: bool) -> str:
    out, last = [], 0
    for match in _TOKEN.finditer(text):
        plain = text[last:match.start()]
        out.append(latex_escape(plain) if latex else plain)
        kind, value = match.groups()
        if kind == "cite":
            out.append(f"\\cite{{{value}}}" if latex else f"[{value}]")
        else:
            out.append(f"\\texttt{{{latex_escape(value)}}}" if latex else f"`{value}`")
        last = match.end()
    tail = text[last:]
    out.append(latex_escape(tail) if latex else tail)
    rendered = "".join(out)
    return re.sub(r" +(?=\\cite)", "~", rendered) if latex else rendered


def _load_references() -> dict[str, Any]:
    return dict(json.loads(REFERENCES.read_text(encoding="utf-8"))["entries"])


def _fill(value: str, facts: RunFacts) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "version":
            return facts.lodevem_version
        return str(facts.packages.get(name) or "unrecorded")
    return re.sub(r"\{(version|torch|onnxruntime|torch-pruning|nn-meter)\}", one, value)


def _short_reference(entry: Mapping[str, Any], facts: RunFacts) -> str:
    fields = entry["fields"]
    author = str(fields.get("author", "")).strip("{}")
    first = author.split(" and ")[0].split(",")[0].strip("{}")
    who = f"{first} et al." if " and " in author else first
    where = fields.get("booktitle") or fields.get("howpublished", "").replace("\\url{", "").rstrip("}")
    tail = ", ".join(str(p) for p in (where, fields.get("year")) if p)
    return _fill(f"{who}: {fields['title']}." + (f" {tail}." if tail else ""), facts)


def methodology_markdown(facts: RunFacts) -> str:
    intro, memory, limits, provenance = _paragraphs(facts)
    refs = _load_references()
    lines = [f"<!-- lodevem {facts.lodevem_version}: generated from this run's records; re-run, do not edit. -->",
             "# Methods", "", "## Latency", "", _render(intro, False), "", "## Peak RAM", "",
             _render(memory, False), ""]
    accuracy = _accuracy_paragraph(facts)
    if accuracy:
        lines += ["## Accuracy", "", _render(accuracy, False), ""]
    lines += ["## Limitations", ""]
    lines += [f"- {_render(item, False)}" for item in limits]
    lines += ["", _render(provenance, False), "", "## References", ""]
    lines += [f"- [{key}] {_short_reference(refs[key], facts)}" for key in cited_keys(facts)]
    lines.append(f"\nBibTeX: `{BIB_NAME}`.")
    return "\n".join(lines) + "\n"


def methodology_latex(facts: RunFacts) -> str:
    """Paragraphs for ``\\input{}`` into a paper's methods section; cites ``references.bib``."""
    intro, memory, limits, provenance = _paragraphs(facts)
    lines = [f"% lodevem {facts.lodevem_version}: generated from this run's records; re-run, do not edit.",
             f"% \\input{{{TEX_NAME}}} inside your methods section; add \\bibliography{{references}} ({BIB_NAME}).",
             r"\paragraph{Latency.} " + _render(intro, True), "",
             r"\paragraph{Peak RAM.} " + _render(memory, True), ""]
    accuracy = _accuracy_paragraph(facts)
    if accuracy:
        lines += [r"\paragraph{Accuracy.} " + _render(accuracy, True), ""]
    lines += [r"\paragraph{Limitations.}", r"\begin{itemize}"]
    lines += [r"\item " + _render(item, True) for item in limits]
    lines += [r"\end{itemize}", _render(provenance, True)]
    return "\n".join(lines) + "\n"


def bibtex(facts: RunFacts) -> str:
    """The entries ``cited_keys`` names, fields as ``references.json`` gives them."""
    refs = _load_references()
    out = [f"% lodevem {facts.lodevem_version}: the references of this run's methodology.tex. Generated."]
    for key in cited_keys(facts):
        entry = refs[key]
        out.append(f"@{entry['type']}{{{key},")
        out += [f"  {name} = {{{_fill(str(value), facts)}}}," for name, value in entry["fields"].items()]
        out.append("}")
    return "\n".join(out) + "\n"


def write_paper_kit(rows: Sequence[PairResult], manifest: ManifestLike, out_dir: Path) -> list[Path]:
    """Write ``methodology.md``, ``methodology.tex`` and ``references.bib``; return their paths."""
    facts = run_facts(rows, manifest)
    out_dir = Path(out_dir)
    written = []
    for name, text in ((MD_NAME, methodology_markdown(facts)), (TEX_NAME, methodology_latex(facts)),
                       (BIB_NAME, bibtex(facts))):
        write_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written
