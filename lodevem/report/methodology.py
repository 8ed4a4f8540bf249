"""The paper kit's methods text: what one run did, said from what it *recorded*.

Why: lodevem's outputs are meant for papers, and the methods text (which predictor, fitted on
what, how far off; how RAM was measured and limited) and the citations were left to the user,
where they are easy to get wrong. So the text is made from the rows' latency kinds, runtimes,
backends and limit enforcement, and the manifest's predictor description, settings, host and
package versions - never from what lodevem can do in general: a runtime, predictor, data source
or limitation the run did not involve is not mentioned, and every figure quoted comes from the
run's records.

The facts are gathered once into a typed ``RunFacts`` (``report.run_facts``); the text is built as
``Section``s of sentences with two kinds of token, ``{cite:KEY}`` and ``{code:TEXT}``, which
``report.paperkit`` renders to ``methodology.md`` / ``.tex`` / ``references.bib`` and
``report.html`` to HTML. How each latency was predicted is each predictor kind's own sentence,
limitation and references (``latency.paper``: the kinds a run's rows name in ``latency_kind``),
so a kind this module has never heard of is described too; every kind's held-out error is
stated the same way, from its cells' figures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..latency.described import MEASURED
from ..latency.paper import KindUse, and_join
from ..latency.statement import DEFINITION, basis_text
from ..memory.planning import ABSOLUTE_MB, RELATIVE
from ..runtimes import ADAPTERS
from ..wire.registry import on_device_runtimes
from ..wire.verdict import Verdict
from .legend import HELD_OUT
from .run_facts import KindFacts, RunFacts, run_facts

__all__ = ["TOKEN", "KindFacts", "RunFacts", "Section", "cited_keys", "run_facts", "sections"]

# The two tokens of the methods text (``report.paperkit`` renders them): a citation, a code span.
TOKEN = re.compile(r"\{(cite|code):([^{}]+)\}")


# --- the text ------------------------------------------------------------------------------------

def _and(items: Sequence[str]) -> str:
    return and_join(items)


def _pct(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:g} %"


def _version(facts: RunFacts, package: str) -> str:
    version = facts.software.packages.get(package)
    return f" {version}" if version else ""


def _latency_paragraph(f: RunFacts) -> str:
    if not f.predicted:
        return "No latency could be predicted in this run (see the rows' latency notes)."
    threads = (f"{f.scope.threads[0]} thread" + ("s" if f.scope.threads[0] != 1 else "")) if len(f.scope.threads) == 1 \
        else f"{_and([str(t) for t in f.scope.threads])} threads"
    if any(k.use.name == MEASURED for k in f.latency.kinds):  # start --device: some rows were measured on a phone
        out = [f"Latency was predicted for {threads} on the fastest CPU cluster of each device profile without a "
               "phone in the run, by the predictor named with each figure; the phone's own rows were measured "
               "(below)."]
    else:
        out = [f"Latency was not measured on the devices: it was predicted for {threads} on the fastest CPU cluster "
               f"of each of the {len(f.scope.profiles)} device profiles, by the predictor named with each figure."]
    out += list(dict.fromkeys(k.paper.pipeline for k in f.latency.kinds if k.paper.pipeline))
    for kind in f.latency.kinds:
        out.append(kind.paper.sentence)
        if kind.use.figures:
            out.append(f"Its latencies are given as the prediction \u00b1 the {HELD_OUT} of their kind of cell: "
                       f"{_figures(kind.use)}.")
    out.append(f"That error is {DEFINITION}.")
    if len({lr for _, lr in f.latency.latency_for}) > 1:
        out.append("Each row's latency stands for one runtime: " + "; ".join(
            f"rows measured under {measured} show the latency predicted for {predicted}"
            for measured, predicted in f.latency.latency_for) + ".")
    variants = [level for level in f.scope.levels if level]
    if variants or f.scope.user_precisions:
        parts = []
        if variants:
            parts.append(f"variants derived by lodevem from each model: {_and(list(variants))}")
        if f.scope.user_precisions:
            parts.append(f"files the user quantized ({_and(list(f.scope.user_precisions))}), predicted from the "
                         "kernels' "
                         "own precisions")
        out.append("The files measured include " + " and ".join(parts) + ".")
    if f.latency.calibrations:
        out.append("The predictions were then scaled by measurements on physical devices: "
                   + "; ".join(f"{{code:{c}}}" for c in f.latency.calibrations) + ".")
    return " ".join(out)


def _figures(use: KindUse) -> str:
    """``9.1 % (Cortex-A53, 1 thread, fp32, ncnn: 27 held-out rows on Cortex-A53) and ...``: each
    distinct figure once, with its basis (``latency.statement.basis_text``, as every legend says it)."""
    by_pct: dict[tuple[float, Any], list[str]] = {}
    for fig in use.figures:
        what = ", ".join(x for x in (fig.core, f"{fig.threads} thread" + ("s" if fig.threads != 1 else ""),
                                      fig.arithmetic, fig.runtime) if x)
        by_pct.setdefault((round(fig.pct, 1), fig.basis), []).append(what)
    return _and([f"{pct:g} % ({'; '.join(dict.fromkeys(whats))}" + (f": {basis_text(*basis)}" if basis[0] is not None
                                                                      else "") + ")"
                 for (pct, basis), whats in sorted(by_pct.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))])


def _runtime_named(f: RunFacts, runtime: str) -> str:
    """A runtime as the methods cite it: its name, version (a converting runtime's with its
    converter's, as pinned for the images), reference and what it loads."""
    found = ADAPTERS.get(runtime)
    if found is None or not found.cited.name:
        return runtime
    if found.converts:
        pinned = {name: (version, conv, conv_version)
                  for name, version, conv, conv_version in f.software.runtime_versions}
        version, conv, conv_version = pinned.get(runtime, (None, None, None))
        named = (f" {version}" if version else "") + (f" (converted with {conv} {conv_version})" if conv else "")
    else:
        named = _version(f, found.spec.package)
    return (f"{found.cited.name}{named} {{cite:{found.cited.key}}}"
            + (" (on the ONNX export)" if found.runs_onnx_export else ""))


def _sandbox(f: RunFacts, backend: str) -> str:
    """What one backend isolated each measurement in."""
    software = f.software
    if backend == "docker":
        engine = f" (Docker engine {software.docker_version})" if software.docker_version else ""
        if software.images:
            image = ", images " + _and([f"{{code:{tag} {ident.removeprefix('docker:')[:19]}}}"
                                        for tag, ident in software.images])
        else:
            image = (f", image {{code:{software.image_id.removeprefix('docker:')[:19]}}}" if software.image_id
                     else "")
        return (f"a Docker container{engine} without network, with a read-only root file system and "
                f"every capability dropped{image}")
    if backend == "process":
        return "a child process (no file-system or network sandbox)"
    return f"the {backend} backend"


def _how_measured(f: RunFacts) -> str:
    """The paragraph's first sentences: under what, where, limited how, for how many passes."""
    memory, software = f.memory, f.software
    runtimes = _and([_runtime_named(f, r) for r in memory.runtimes])
    limits = _and([f"{{code:{e}}}" for e in memory.enforcements if e])
    passes = (f"{memory.warmup} untimed warm-up pass{'es' if memory.warmup != 1 else ''} and {memory.runs} timed "
              f"inference pass{'es' if memory.runs != 1 else ''}" if memory.warmup is not None and memory.runs
              else "untimed warm-up and timed inference passes")
    host = ((f" on an {software.host_machine} host" + (f" ({software.host_cpu})" if software.host_cpu else ""))
            if software.host_machine else "")
    return (f"Peak RAM was measured, not predicted: each model was loaded and run with {runtimes}{host}, in "
            f"{_and([_sandbox(f, b) for b in memory.backends])}, limited to each device's RAM ({limits}), for "
            f"{passes}. Profiles with the same "
            "RAM share one measurement. The runtime's shared libraries were read once beforehand, outside the limited "
            "runs, so every run starts from the same page-cache state. The peak reported is the process's resident "
            "high-water mark ({code:VmHWM}); a model runs on a device only if the run completed and its VmHWM "
            "stayed within the limit.")


def _what_was_measured(f: RunFacts) -> list[str]:
    """The files each level measured (a runtime's own conversions), their notes, the fallbacks, the input."""
    memory, out = f.memory, []
    if memory.converted_levels:
        made = [f"{level} under {runtime}" + (f" ({scheme})" if scheme
                                              else f" ({precision})" if precision else "")
                for runtime, level, precision, scheme in memory.converted_levels]
        out.append("A compression level measured under an on-device runtime is the file that runtime loads, made "
                   "by its own converter from the fp32 model (pruned: the pruned fp32 model, converted): "
                   f"{_and(made)}.")
    out += [f"{note[:1].upper()}{note[1:]}." for note in memory.memory_notes]
    if memory.fallbacks:
        out.append(f"The converter could not take {len(memory.fallbacks)} of the files "
                   f"({_and(list(memory.fallbacks))}); their peak RAM was measured under PyTorch instead and is marked "
                   "{code:torch (fallback)}.")
    if f.scope.input_shapes:
        out.append(f"Every model was run with input {_and(list(f.scope.input_shapes))}.")
    return out


def _how_judged(f: RunFacts) -> list[str]:
    """The verdicts: the budgets they compare with, the inferred figures, thrashing."""
    memory, out = f.memory, []
    if f.scope.budgets:
        budgets = _and([f"{label} {mb} MB" for label, mb in f.scope.budgets])
        out.append("The verdict compares the peak with each device's app budget, what one app can use before the "
                   f"OS's low-memory killer stops it ({budgets}; estimates per device class from published figures, "
                   "with their sources in the profiles): fits within the budget, tight above it but within the RAM, "
                   "OOM killed at the RAM limit.")
    if memory.inferred_rows:
        total = memory.inferred_rows + memory.measured_rows
        out.append(f"{memory.inferred_rows} of the {total} memory figures were not measured at their own limit: each "
                   "was inferred from the same model's run at the largest limit, whose peak was far below it "
                   f"(limit at least {1 + RELATIVE:g} x the peak + {ABSOLUTE_MB:g} MB, where a tighter limit does "
                   "not change the peak); "
                   "the rows say so in {code:limit_enforcement}.")
    if Verdict.THRASHING in memory.verdicts:
        out.append("A run far slower than the same model unconstrained, with many major page faults, is reported "
                   "as thrashing (a phone's low-memory killer would have stopped it).")
    return out


def _memory_paragraph(f: RunFacts) -> str:
    if not f.memory.backends:
        return "No memory measurement could be made in this run (see the rows' memory errors)."
    return " ".join([_how_measured(f), *_what_was_measured(f), *_how_judged(f)])


def _limitations(f: RunFacts) -> list[str]:
    items = []
    if f.software.host_machine and f.software.host_machine not in ("aarch64", "arm64", "armv7l", "armv8l"):
        items.append(f"Memory was measured on an {f.software.host_machine} host, not on the phones' ARM CPUs: "
                     "code size, "
                     "allocator behaviour and kernel choices of the ARM build differ, so peak RAM on a device "
                     "may differ.")
    if f.memory.baselines:
        spans = [f"{rt} {lo:g} MB" if lo == hi else f"{rt} {lo:g}-{hi:g} MB" for rt, lo, hi in f.memory.baselines]
        on_device = any(rt in on_device_runtimes() for rt, _, _ in f.memory.baselines)
        items.append(f"Peak RAM includes the measurement runtime's own footprint before the model was loaded "
                     f"({_and(spans)})" + ("; an on-device runtime such as TFLite or ncnn has a smaller baseline of "
                                          "its own." if not on_device else ", so rows of different runtimes differ "
                                          "by that footprint as well as by the model."))
    if f.memory.backends:
        budget = ("The app budgets are estimates per device class (Android, Android Go, KaiOS), not measurements on "
                  "each phone; " if f.scope.budgets else "Device RAM is not all available to an app (the OS reserves a "
                  "share), so fitting is necessary, not sufficient; ")
        items.append(budget + "the phone's OS is not emulated (no thermal throttling or background apps).")
    items += [k.paper.limitation for k in f.latency.kinds if k.paper.limitation]
    if f.latency.derived_cores:
        items.append(f"{_and(list(f.latency.derived_cores))}: no latency data in the estimator's fit; the core's "
                     "speed is "
                     "derived from Arm's published per-clock figures.")
    if "pruned" in f.scope.levels and f.accuracy.finetune:
        items.append("Pruned variants were fine-tuned briefly with one fixed recipe (see above), not trained to "
                     "convergence: a longer schedule may recover more accuracy {cite:depgraph}.")
    elif "pruned" in f.scope.levels:
        items.append("Pruned variants are 50 % structured L1-norm channel pruning without fine-tuning: "
                     + ("their accuracy drop is the one measured above, which fine-tuning would reduce"
                        if f.accuracy.evaluated_rows else "their accuracy is not assessed, only their speed and memory")
                     + " {cite:depgraph}.")
    if not f.latency.calibrations and f.predicted:
        items.append("No prediction was calibrated against a measurement on a physical device.")
    if "process" in f.memory.backends:
        items.append("The process backend is not a security sandbox, and under RLIMIT_AS it limits virtual memory, "
                     "which is stricter than resident memory.")
    return items


def _accuracy_paragraph(f: RunFacts) -> Optional[str]:
    """The data set, N and preprocessing of the evaluation data, and where each row's figure comes from
    (in the user's words: their file's name, no option names)."""
    if not f.accuracy.evaluation and not f.accuracy.finetune:
        return None
    text = "Accuracy was not evaluated."
    # asked for, but no row could be: no claim of an evaluation
    if f.accuracy.evaluation and not f.accuracy.evaluated_rows:
        text = (f"Accuracy was not evaluated: {f.accuracy.evaluation} could not be evaluated on any row (each row's "
                "{code:accuracy_note} says why).")
    elif f.accuracy.evaluation:
        text = (f"Accuracy was evaluated on {f.accuracy.evaluation}, in the same sandbox as the "
                "measurements and under each row's own runtime, on the very file whose memory was measured (the "
                "model or its derived variant under PyTorch, its ONNX export under onnxruntime, its conversion "
                "under LiteRT or ncnn), one sample per inference. Top-1 (and top-5 with more than five classes) is "
                "the share of samples whose label scores highest (among the five highest); ties count as errors. "
                "Each variant's drop is the fp32 row's top-1 minus its own, in percentage points, same runtime.")
    if f.accuracy.finetune:
        from ..worker.derive.finetune import RECIPE

        text += (f" The pruned variants were fine-tuned after pruning, in the sandbox, for {f.accuracy.finetune} "
                 f"({RECIPE}, seeded sample order).")
    if f.accuracy.unevaluated_rows and f.accuracy.evaluated_rows:
        text += (f" {f.accuracy.unevaluated_rows} row(s) have no accuracy (their {{code:accuracy_note}} says why); "
                 "their "
                 "latency and memory figures stand.")
    return text


def _paragraphs(f: RunFacts) -> tuple[str, str, list[str], str]:
    software, scope = f.software, f.scope
    intro = (f"Results were produced with lodevem {software.lodevem_version} {{cite:lodevem}}"
             + (f" (commit {{code:{software.git_commit[:12]}}}" + (" with local changes" if software.git_dirty else "")
                + ")" if software.git_commit else "")
             + f" for {scope.counts.text() if scope.counts else f'{len(scope.models)} models'} on "
             + f"{len(scope.profiles)} device profile"
             + ("s" if len(scope.profiles) != 1 else "") + f" ({_and(list(scope.tiers))}): {'; '.join(scope.devices)}.")
    provenance = ("Each device profile cites the sources of its specifications, and the run's manifest "
                  "({code:benchmark_results.json}, {code:environment}) records the command, package versions, "
                  "the sandbox images and the sha256 of every model and profile.")
    return intro + " " + _latency_paragraph(f), _memory_paragraph(f), _limitations(f), provenance


def cited_keys(facts: RunFacts) -> list[str]:
    """The reference keys the methodology text cites, in first-cited order, lodevem first."""
    intro, memory, limits, provenance = _paragraphs(facts)
    text = " ".join([intro, memory, *limits, provenance])
    return list(dict.fromkeys(["lodevem"] + [m.group(2) for m in TOKEN.finditer(text) if m.group(1) == "cite"]))


@dataclass(frozen=True)
class Section:
    """One part of the methods: a title, its paragraphs and (limitations) its items, as token text
    (``{cite:KEY}``, ``{code:TEXT}``); the Markdown, LaTeX and HTML renderings are made from these."""

    title: str
    paragraphs: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # paragraphs after the items


def sections(facts: RunFacts) -> list[Section]:
    """The methods of a run, in order: Latency, Peak RAM, (Accuracy), Limitations."""
    intro, memory, limits, provenance = _paragraphs(facts)
    out = [Section("Latency", (intro,)), Section("Peak RAM", (memory,))]
    accuracy = _accuracy_paragraph(facts)
    if accuracy:
        out.append(Section("Accuracy", (accuracy,)))
    out.append(Section("Limitations", items=tuple(limits), after=(provenance,)))
    return out
