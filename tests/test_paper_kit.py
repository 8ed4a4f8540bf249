"""The paper kit (methodology.md/.tex, references.bib): says what the run used, and only that.

Rows are built from the shipped profiles; the manifest comes from the real ``collect_manifest``
and the real ``Predictor.describe()`` (the estimator's own parameters file), so every figure
the text quotes is checked against the file it must come from. No Docker, no torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import kinds_only, row_of, with_columns

from lodevem import __version__
from lodevem.latency.estimator import Estimator
from lodevem.predict import Predictor
from lodevem.profiles import Profile, load_profiles
from lodevem.report.environment import collect_manifest
from lodevem.report.methodology import cited_keys, run_facts
from lodevem.report.paperkit import REFERENCES, bibtex, methodology_latex, methodology_markdown, write_paper_kit
from lodevem.report.run_record import RunDescription
from lodevem.reporter import write_all
from lodevem.results import PairResult

PROFILE_IDS = ("nokia_8110_4g", "tecno_spark8", "nokia_c1")
NN_SOURCE = "nn-meter:cortexA76cpu_tflite21\u2192Cortex-A53@1.3GHz"


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    by_id = {p.id: p for p in load_profiles()}
    return [by_id[pid] for pid in PROFILE_IDS]


def make_row(profile: Profile, model: str = "mobilenet_v2.pt", **changes: Any) -> PairResult:
    cluster = profile.fastest_cluster
    row = row_of(
        model_label=model, model_path=f"models/{model}", model_sha256="ab" * 32, level=None,
        model_format="pickled_module", model_file_mb=13.6, params=3_504_872,
        profile_id=profile.id, profile_label=profile.label, tier=profile.tier, chipset=profile.chipset,
        ram_mb=profile.ram_mb, core=cluster.core, clock_ghz=cluster.clock_ghz, threads=1, latency_ms=150.0,
        latency_source=f"estimator:v1 ({cluster.core}@{cluster.clock_ghz}GHz)",
        latency_uncertainty="\u00b118% (LODO MAPE)", latency_note=None, verdict="fits", peak_rss_mb=270.0,
        runtime_baseline_mb=218.1, model_increment_mb=51.9, cgroup_peak_mb=182.5, limit_mb=profile.ram_mb,
        limit_enforcement=f"docker cgroup v1 memory+swap={profile.ram_mb}MB", backend="docker", runtime="torch",
        memory_error=None, memory_cached=False, latency_kind="estimator", latency_runtime="tflite",
        latency_held_out_pct=18.0,
    )
    if "latency_source" in changes and "latency_kind" not in changes:  # the kind the source names (shorthand)
        changes["latency_kind"] = changes["latency_source"].split(":")[0]
    return with_columns(row, **changes)


def manifest(profiles: list[Profile], backend: str = "docker", predictor: Predictor | None = None,
             **config: Any) -> dict[str, Any]:
    predictor = predictor or kinds_only("estimator")
    settings = {"warmup": 5, "runs": 50, "threads": 1, **config}
    # the JSON form, as a results file holds it (run_facts reads it back into a Manifest)
    return collect_manifest(["lodevem", "start"], profiles, [], image_id="docker:sha256:" + "9" * 64,
                            backend=backend, run=RunDescription.from_dict(
                                {"config": settings, "predictor": predictor.describe()}, "a test's manifest")).to_dict()


def kit(rows: list[PairResult], env: dict[str, Any]) -> tuple[str, str, str]:
    facts = run_facts(rows, env)
    return methodology_markdown(facts), methodology_latex(facts), bibtex(facts)


def bib_keys(bib: str) -> list[str]:
    return re.findall(r"^@\w+\{([^,]+),", bib, flags=re.M)


def test_estimator_docker_torch_run_names_what_it_used_and_nothing_else(profiles: list[Profile]) -> None:
    rows = [make_row(p) for p in profiles]
    md, tex, bib = kit(rows, manifest(profiles))
    params = Estimator.load().params
    unc, prov = params["uncertainty"], params["provenance"]
    # one statement of uncertainty (issue 46): the cells' held-out figure with its basis, not the
    # fit's overall MAPE, its baseline or the one-shot figure beside it
    for figure in (unc["lodo_mape_pct"], unc["baseline_lodo_mape_pct"], unc["oneshot_mape_pct"]):
        assert f" {figure:g} %" not in md.replace("18 %", "")
    assert "18 % (" in md and "That error is the predictor's mean absolute percentage error" in md
    assert f"fitted {prov['fit_date']}" in md
    assert f"on {prov['rows_used']} published latencies" in md
    # memory: runtime, backend, enforcement, passes, peak definition, host
    for text in ("PyTorch", "Docker container", "`docker cgroup v1 memory+swap`", "5 untimed warm-up passes",
                 "50 timed inference passes", "VmHWM", "218.1 MB"):
        assert text in md, text
    # the latencies stand for TFLite with XNNPACK (the default latency runtime), fitted on ncnn rows too
    assert sorted(bib_keys(bib)) == ["lodevem", "ncnn", "nnmeter", "pytorch", "xnnpack"]
    for unused in ("ONNX Runtime", "onnxruntime", "Paddle", "LiteRT", "TFLite 2.1", "process backend",
                   "pruning", "cortexA76cpu_tflite21", "Amdahl", "calibrated by"):
        assert unused not in md, unused
    assert "No prediction was calibrated against a measurement on a physical device." in md
    assert all(f"{p.label} ({p.chipset}" in md for p in profiles)  # the devices used, and no other
    assert not any(p.label in md for p in load_profiles() if p.id not in PROFILE_IDS)
    assert f"lodevem {__version__}" in md and f"Version {__version__}" in bib


def test_onnxruntime_process_multithread_run(profiles: list[Profile]) -> None:
    rows = [make_row(p, runtime="onnxruntime", backend="process", threads=4,
                     limit_enforcement=f"RLIMIT_AS={p.ram_mb}MB (virtual memory: stricter than RSS)") for p in profiles]
    md, tex, bib = kit(rows, manifest(profiles, backend="process", threads=4))
    assert "ONNX Runtime" in md and "onnxruntime" in bib_keys(bib)
    assert "PyTorch" in md  # the ONNX export is still made with torch
    assert "child process (no file-system or network sandbox)" in md and "Docker" not in md
    assert "process backend is not a security sandbox" in md
    assert "4 threads" in md and "Amdahl" in md


def test_nnmeter_profiles_cite_nnmeter_and_tflite(profiles: list[Profile]) -> None:
    kaios, spark, c1 = profiles
    rows = [make_row(kaios, latency_source=NN_SOURCE, latency_uncertainty="nn-Meter's own error ..."),
            make_row(spark), make_row(c1)]
    env = manifest(profiles, predictor=kinds_only("auto"))
    env["extra"]["predictor"]["nnmeter_predictors"] = {
        "cortexA76cpu_tflite21": {"folder": "/data/predictor/cortexA76cpu_tflite21", "kernels": ["conv-bn-relu"],
                                  "legacy_pickles": [], "reference": {"core": "Cortex-A76", "clock_ghz": 2.42}}}
    md, tex, bib = kit(rows, env)
    assert "`cortexA76cpu_tflite21`" in md and "Cortex-A76 at 2.42 GHz" in md and "TFLite 2.1" in md
    assert {"nnmeter", "litert", "ncnn"} <= set(bib_keys(bib))
    assert f"2 of the profiles ({spark.id} and {c1.id})" in md  # the estimator served only those
    assert "estimator's ratios" in md


def test_estimator_not_used_means_its_data_is_not_cited(profiles: list[Profile]) -> None:
    rows = [make_row(p, latency_source=NN_SOURCE) for p in profiles]
    md, _, bib = kit(rows, manifest(profiles, predictor=kinds_only("auto")))
    assert "ncnn" not in bib_keys(bib) and "offline estimator v1" not in md


def test_levels_and_calibrations_appear_only_when_used(profiles: list[Profile]) -> None:
    rows = [make_row(p, model="m.pt@pruned", level="pruned",
                     latency_calibrations=("itel_p37: x0.91 from 1 measurement (tflite, 1 thread)",)) for p in profiles]
    md, tex, bib = kit(rows, manifest(profiles))
    assert "without fine-tuning" in md and "depgraph" in bib_keys(bib)
    assert "itel_p37: x0.91 from 1 measurement" in md and "No prediction was calibrated" not in md
    plain = kit([make_row(p) for p in profiles], manifest(profiles))[2]
    assert "depgraph" not in bib_keys(plain)


def test_every_cite_in_the_tex_is_in_the_bib_and_every_entry_is_cited(profiles: list[Profile]) -> None:
    kaios, spark, c1 = profiles
    rows = [make_row(kaios, latency_source=NN_SOURCE), make_row(spark, runtime="onnxruntime", level="pruned"),
            make_row(c1, threads=2)]
    md, tex, bib = kit(rows, manifest(profiles))
    keys = bib_keys(bib)
    cited = set(re.findall(r"\\cite\{([^}]+)\}", tex))
    assert cited == set(keys) and len(keys) == len(set(keys))
    assert all(re.fullmatch(r"[a-z][a-z0-9_-]*", k) for k in keys)
    assert bib.count("{") == bib.count("}") and tex.count("{") == tex.count("}")
    assert set(re.findall(r"\[([a-z0-9_-]+)\]", md)) >= set(keys)  # markdown: inline keys + reference list
    for special in ("x86_64", "%"):  # escaped in the .tex
        assert special not in re.sub(r"\\_|\\%|^%.*$", "", tex, flags=re.M)


def test_every_reference_says_where_it_comes_from() -> None:
    entries = json.loads(REFERENCES.read_text())["entries"]
    assert {"lodevem", "nnmeter", "ncnn", "paddlelite", "xnnpack", "litert", "onnxruntime", "pytorch"} <= set(entries)
    for key, entry in entries.items():
        assert entry["source"] and entry["fields"]["title"], key
    assert entries["nnmeter"]["fields"]["doi"] == "10.1145/3458864.3467882"


def test_written_beside_the_results(profiles: list[Profile], tmp_path: Path) -> None:
    rows = [make_row(p) for p in profiles]
    written = write_all(rows, profiles, manifest(profiles), tmp_path, plots=False)
    names = {p.name for p in written}
    assert {"methodology.md", "methodology.tex", "references.bib"} <= names
    assert (tmp_path / "references.bib").read_text() == bibtex(run_facts(rows, manifest(profiles)))
    assert write_paper_kit(rows, manifest(profiles), tmp_path)[0].name == "methodology.md"
    assert cited_keys(run_facts(rows, manifest(profiles)))[0] == "lodevem"


def test_citation_cff_is_valid_and_has_what_a_citation_needs() -> None:
    """CITATION.cff passes cffconvert's schema check and names the authors, this version and its
    date; lodevem's BibTeX entry takes its url from the file's repository-code when it has one."""
    import shutil
    import subprocess
    import sys

    import yaml

    from lodevem.report.paperkit import CITATION_FILE, repository_url

    cffconvert = shutil.which("cffconvert") or str(Path(sys.executable).parent / "cffconvert")
    done = subprocess.run([cffconvert, "--validate", "-i", str(CITATION_FILE)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    cff = yaml.safe_load(CITATION_FILE.read_text())
    assert cff["version"] == __version__ and cff["authors"] and cff["title"] and cff["license"] == "MIT"
    assert str(cff["date-released"])[:4].isdigit()
    assert repository_url() == cff.get("repository-code")


def test_every_kind_of_the_run_is_in_the_methods_and_the_bib(profiles: list[Profile]) -> None:
    """Each registered kind whose cells a run has says how it predicted them, with its held-out
    figure, its limitation and every reference it cites: a kind dropped from the methods (or a
    citation from references.bib) fails here. The report learns the kinds from the registry only."""
    from lodevem.latency.armsim.paper import cost_model_facts
    from lodevem.latency.described import describe_kind
    from lodevem.latency.pool import KINDS
    from lodevem.report.paperkit import references

    kinds = list(KINDS)
    rows = [make_row(p, model=f"m{i}.pt", latency_kind=kind, latency_held_out_pct=10.0 + i)
            for i, kind in enumerate(kinds) for p in profiles]
    env = manifest(profiles, predictor=kinds_only("auto"))
    env["extra"]["predictor"]["armsim"] = cost_model_facts()
    facts = run_facts(rows, env)
    md, tex, bib = methodology_markdown(facts), methodology_latex(facts), bibtex(facts)
    assert [k.use.name for k in facts.latency.kinds] == kinds  # in the registry's order
    keys = set(bib_keys(bib))
    for i, kind in enumerate(kinds):
        paper = next(k.paper for k in facts.latency.kinds if k.use.name == kind)
        rendered = re.sub(r"\{cite:([^{}]+)\}", r"[\1]", re.sub(r"\{code:([^{}]+)\}", r"`\1`", paper.sentence))
        assert rendered in md, kind
        assert paper.limitation and re.sub(r"\{cite:([^{}]+)\}", r"[\1]", paper.limitation) in md, kind
        cited = set(re.findall(r"\{cite:([^{}]+)\}", paper.sentence + (paper.limitation or "")))
        assert cited and cited <= keys, (kind, cited - keys)
        assert f"{10.0 + i:g} %" in md  # its held-out figure, stated the same way for every kind
        assert describe_kind(kind).mark
    assert {"qemu", "llvmmca", "llvm"} <= keys  # armsim's emulator and pricing tool
    assert set(re.findall(r"\\cite\{([^}]+)\}", tex)) == keys
    assert all(references(facts)[k].source for k in keys)


def test_a_kind_left_out_of_the_methods_fails_the_check(profiles: list[Profile]) -> None:
    """The check above can fail: drop armsim's sentence and its references vanish from the bib."""
    rows = [make_row(profiles[0], latency_kind="armsim")]
    facts = run_facts(rows, manifest(profiles))
    assert "qemu" in bib_keys(bibtex(facts))
    stripped = replace(facts, latency=replace(facts.latency, kinds=()))
    assert "qemu" not in bib_keys(bibtex(stripped)) and "QEMU" not in methodology_markdown(stripped)


def test_the_lodevem_entry_carries_version_and_commit(profiles: list[Profile]) -> None:
    env = manifest(profiles)
    env["lodevem"]["git_commit"], env["lodevem"]["git_dirty"] = "0123456789abcdef" * 2 + "01234567", False
    bib = bibtex(run_facts([make_row(p) for p in profiles], env))
    entry = bib[bib.index("@misc{lodevem,"):].split("\n}\n")[0]
    assert f"version = {{{__version__}}}" in entry and "commit 0123456789ab" in entry
    env["lodevem"]["git_commit"] = None
    assert "commit not recorded" in bibtex(run_facts([make_row(p) for p in profiles], env))


def test_the_methods_say_what_the_user_did_in_their_words(profiles: list[Profile]) -> None:
    """Issue 46: the user's file names (not the store's copy), the true source of the input shape,
    no option names, and the converter's internals (weight-tensor counts) left to the CSV/manifest."""
    from lodevem.results import ConvertedFile, MeasuredModel, MemoryMeasurement, PeakMemory, SandboxFacts
    from lodevem.runner.state import in_user_words
    from lodevem.wire.shape_sources import SOURCE_EVAL_DATA, SOURCE_REQUEST, host_shape_source

    stored = "be78d08c8fa5" + "0" * 20 + "-256-calibration.npz"
    scheme = ("int8 per-channel symmetric weights, int8 activations (PT2E, litert-torch's quantizer, calibrated on "
              f"128 inputs from {stored}); weight tensors: int8 6, int32 2, 6 per-channel")
    memory = MemoryMeasurement(verdict="fits", limit_mb=512, runtime="tflite", threads=1,
                               peak=PeakMemory(rss_mb=40.0, runtime_baseline_mb=30.0, model_increment_mb=10.0),
                               sandbox=SandboxFacts(backend="docker", limit_enforcement="docker", image_id="",
                                                    worker_version="", wall_s=1.0),
                               model=MeasuredModel(""), converted=ConvertedFile(scheme=scheme),
                               note=f"int8-static scales come from 128 inputs from {stored}")
    mine = in_user_words(memory, {stored: "calib.npz"})
    assert mine.converted is not None and mine.converted.scheme
    assert stored not in (mine.note or "") + mine.converted.scheme and "calib.npz" in (mine.note or "")
    # the worker's word for a shape the request carried is the user's: where they gave it
    assert host_shape_source(SOURCE_REQUEST, SOURCE_EVAL_DATA) == SOURCE_EVAL_DATA
    assert host_shape_source(SOURCE_REQUEST, None) == "given"
    assert host_shape_source("recorded in the file", SOURCE_EVAL_DATA) == "recorded in the file"

    rows = [make_row(p, runtime="tflite", level="int8-static", input_shape="1x3x32x32",
                     input_shape_source=SOURCE_EVAL_DATA, memory_note=mine.note, converted_mb=0.1,
                     converted_precision="int8", converted_scheme=mine.converted.scheme) for p in profiles]
    md, tex, _ = kit(rows, manifest(profiles, evaluation="testset/ (an ImageFolder tree)"))
    assert "128 inputs from calib.npz" in md and "calib.npz" in tex
    assert "Every model was run with input 1x3x32x32 (the evaluation data's sample shape)." in md
    assert "(PT2E, litert-torch's quantizer)" in md  # the scheme, once, without its calibration clause
    assert "weight tensors" not in md and "weight tensors" not in tex
    assert not re.search(r"(?<![-\w])--[a-z]", md), re.findall(r"--[a-z-]+", md)  # no option names
    assert "-calibration.npz" not in md + tex
    from lodevem.results.row_parts import scheme_alone

    synthetic = ("int8 per-channel symmetric weights, int8 activations (PT2E, litert-torch's quantizer, calibrated on "
                 "32 synthetic inputs (standard normal, seed 0): scales not from real data); weight tensors: int8 53")
    assert scheme_alone(synthetic) == "int8 per-channel symmetric weights, int8 activations (PT2E, litert-torch's quantizer)"


def test_calibration_data_has_no_class_count() -> None:
    """--calib-data's labels are never read: the manifest says so instead of "0 classes"."""
    from lodevem.accuracy.data import CALIBRATION_OPTION, EvalData
    from lodevem.report.manifest import DataSetEntry

    data = EvalData(Path("calib.npz"), CALIBRATION_OPTION, Path("x.npz"), "0" * 64, 128, 128, (3, 32, 32), 0, 0)
    assert DataSetEntry.of(data).classes is None
    assert "0 classes" not in data.describe() and "labels not used" in data.describe()
    evaluation = replace(data, option="--eval-data", classes=10, max_label=9)
    assert DataSetEntry.of(evaluation).classes == 10 and "10 classes" in evaluation.describe()
