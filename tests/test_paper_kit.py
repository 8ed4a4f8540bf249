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
from helpers import kinds_only

from lodevem import __version__
from lodevem.latency.estimator import Estimator
from lodevem.predict import Predictor
from lodevem.profiles import Profile, load_profiles
from lodevem.report.manifest import collect_manifest
from lodevem.report.methodology import (
    REFERENCES,
    bibtex,
    cited_keys,
    methodology_latex,
    methodology_markdown,
    run_facts,
    write_paper_kit,
)
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
    row = PairResult(
        model_label=model, model_path=f"models/{model}", model_sha256="ab" * 32, level=None,
        model_format="pickled_module", model_file_mb=13.6, params=3_504_872,
        profile_id=profile.id, profile_label=profile.label, tier=profile.tier, chipset=profile.chipset,
        ram_mb=profile.ram_mb, core=cluster.core, clock_ghz=cluster.clock_ghz, threads=1, latency_ms=150.0,
        latency_source=f"estimator:v1 ({cluster.core}@{cluster.clock_ghz}GHz)",
        latency_uncertainty="\u00b118% (LODO MAPE)", latency_note=None, verdict="fits", peak_rss_mb=270.0,
        runtime_baseline_mb=218.1, model_increment_mb=51.9, cgroup_peak_mb=182.5, limit_mb=profile.ram_mb,
        limit_enforcement=f"docker cgroup v1 memory+swap={profile.ram_mb}MB", backend="docker", runtime="torch",
        memory_error=None, memory_cached=False,
    )
    return replace(row, **changes)


def manifest(profiles: list[Profile], backend: str = "docker", predictor: Predictor | None = None,
             **config: Any) -> dict[str, Any]:
    predictor = predictor or kinds_only("estimator")
    settings = {"warmup": 5, "runs": 50, "threads": 1, **config}
    # the JSON form, as a results file holds it (run_facts reads it back into a Manifest)
    return collect_manifest(["lodevem", "start"], profiles, [], image_id="docker:sha256:" + "9" * 64,
                            backend=backend, extra={"config": settings, "predictor": predictor.describe()}).to_dict()


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
    # the estimator's accuracy and data, as its parameters file states them
    for figure in (unc["lodo_mape_pct"], unc["baseline_lodo_mape_pct"], unc["oneshot_mape_pct"]):
        assert f"{figure:g} %" in md
    assert f"fitted {prov['fit_date']}" in md and f"over {unc['lodo_rows']} rows" in md
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


def test_citation_cff_in_the_repository() -> None:
    text = (Path(__file__).resolve().parent.parent / "CITATION.cff").read_text()
    assert "cff-version:" in text and f"version: {__version__}" in text and "title:" in text
