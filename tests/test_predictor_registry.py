"""A predictor kind plugs in through the one registry alone (``latency.pool.KINDS`` plus its name
in the runtime registry's ``RuntimeSpec.predictors``): a kind defined in this test module, with no
other edit to lodevem, is a ``--predictor`` value, is what ``start`` (the runner) and the front door
(``lodevem.predict.Predictor``, under ``predict`` and the Python API) use, and takes part in
the default's choice (``latency.selection``) when every install has it and its nested held-out
error is lower; an optional kind never is the default. Real onnx exports, the real estimator, the
real process backend for ``start``.

The toy kind's number is the kernel count of the graph in milliseconds: a plumbing figure, named
as such in its source, never a latency shown to a user.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import pytest
from helpers import kinds_only

from lodevem import zoo
from lodevem.errors import InputError
from lodevem.latency import pool
from lodevem.latency.estimator import Estimator
from lodevem.latency.kernels import DEFAULT_RULES
from lodevem.latency.kinds import KindSetup, PredictionJob
from lodevem.latency.paper import KindPaper, KindUse, Reference
from lodevem.latency.records import LatencyPrediction, uncertainty_band
from lodevem.latency.selection import Availability, HeldOutError, HeldOutRow, pick
from lodevem.profiles import Profile, load_profiles
from lodevem.wire import registry

TOY_REFERENCE = Reference("toykind", "misc", {"author": "{lodevem tests}", "title": "A toy predictor kind",
                                               "year": "2026"}, "tests/test_predictor_registry.py")


class ToyKind:
    """A predictor kind that lives in this test module only."""

    name = "toy"
    title = "toy kind (plumbing test)"
    mark = "\u00b6"
    availability = Availability.EVERY_INSTALL
    figure: Optional[float] = 1.0  # its stated held-out MAPE (its band when named)
    # its nested held-out rows are the estimator's with the errors scaled by this factor (None: it
    # states none): what the default's pick compares; the tests move it around 1
    rows_scale: Optional[float] = 0.1

    @staticmethod
    def paper(use: KindUse) -> KindPaper:
        """Its own sentence, limitation and reference: the report knows nothing else of it."""
        return KindPaper("toy kind", f"For {use.scope()}, the toy kind counted kernels {{cite:toykind}}.",
                         "The toy kind's figure is a kernel count, not a latency.", references=(TOY_REFERENCE,))

    def __init__(self, setup: KindSetup) -> None:
        self.setup = setup
        self.cells = 0

    def check_runtime(self, runtime: str) -> None:
        if "toy" not in registry.RUNTIMES[runtime].predictors:
            raise InputError(f"--predictor toy does not serve {runtime}")

    def unavailable(self, profile: Profile, runtime: str) -> Optional[str]:
        return None

    def require(self, profile: Profile, load: bool) -> None:
        return None

    def held_out(self, profile: Profile, runtime: str, threads: int, arithmetic: str) -> Optional[HeldOutError]:
        return HeldOutError(self.figure, 50, "all cores") if self.figure is not None else None

    def held_out_rows(self) -> tuple[HeldOutRow, ...]:
        if self.rows_scale is None:
            return ()
        return tuple(dataclasses.replace(r, error=r.error * self.rows_scale) for r in Estimator.load().held_out_rows)

    def identity(self, profile: Profile) -> dict[str, Any]:
        return {"toy": 1}

    def evidence(self, profile: Profile) -> Any:
        return None

    def replay(self, profile: Profile, evidence: Any) -> None:
        return None

    def predict(self, job: PredictionJob, warn: Any) -> LatencyPrediction:
        graph = job.graph(DEFAULT_RULES)
        if isinstance(graph, InputError):
            return LatencyPrediction.unavailable(job.profile, str(graph), job.threads, job.runtime)
        self.cells += 1
        cluster = job.profile.fastest_cluster
        ms = float(len(graph.kernels))
        low, high = uncertainty_band(ms, self.figure)
        return LatencyPrediction(ms, f"toy:plumbing {job.runtime}", job.threads, cluster.core, cluster.clock_ghz,
                                 job.runtime, latency_low_ms=low, latency_high_ms=high, uncertainty_pct=self.figure)

    def describe(self) -> dict[str, Any]:
        return {"toy": {"cells": self.cells}}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> type[ToyKind]:
    """ToyKind registered: one KINDS entry, its name in tflite's and ncnn's predictors."""
    monkeypatch.setitem(pool.KINDS, "toy", ToyKind)
    for name in ("tflite", "ncnn"):
        spec = registry.RUNTIMES[name]
        monkeypatch.setitem(registry.RUNTIMES, name, dataclasses.replace(spec, predictors=(*spec.predictors, "toy")))
    monkeypatch.setattr(ToyKind, "figure", 1.0)
    monkeypatch.setattr(ToyKind, "rows_scale", 0.1)
    monkeypatch.setattr(ToyKind, "availability", Availability.EVERY_INSTALL)
    return ToyKind


@pytest.fixture(scope="module")
def onnx_file(zoo_onnx) -> Path:
    return zoo_onnx("tiny_cnn")


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    by_id = {p.id: p for p in load_profiles()}
    return [by_id["nokia_c1"], by_id["itel_p37"]]


def test_a_registered_kind_is_a_predictor_value_of_the_front_door(toy, onnx_file: Path, profiles) -> None:
    assert "toy" in pool.modes()
    cells = kinds_only("toy").cells(onnx_file, profiles)
    assert {c.latency_source for c in cells.values()} == {"toy:plumbing tflite"}
    assert all(c.latency_ms is not None and c.latency_ms > 0 for c in cells.values())


def test_without_the_registry_entry_it_is_no_choice(onnx_file: Path) -> None:
    assert "toy" not in pool.modes()
    with pytest.raises(InputError, match="unknown latency predictor 'toy'"):
        kinds_only("toy")


def test_the_default_takes_an_every_install_kind_with_a_lower_nested_error_and_says_so(
        toy, onnx_file: Path, profiles) -> None:
    cells = kinds_only("auto").cells(onnx_file, profiles)
    for cell in cells.values():
        assert cell.latency_source == "toy:plumbing tflite"
        assert "auto chose toy ±" in (cell.note or "") and "held-out (leave-one-SoC-out) error" in (cell.note or "")
        assert " over estimator ±" in (cell.note or "") and "for tflite on Cortex-A" in (cell.note or "")
        # its band: the nested default's held-out error (the toy's rows, picked without each SoC)
        assert cell.uncertainty_pct is not None and "held-out (leave-one-SoC-out) error" in (cell.uncertainty or "")
    toy.rows_scale = 10.0  # now the estimator's own error is lower: it keeps its cells, the manifest says why
    kept = kinds_only("auto")
    cells = kept.cells(onnx_file, profiles)
    for cell in cells.values():
        assert cell.latency_source.startswith("estimator") and "auto chose" not in (cell.note or "")
    choices = kept.describe()["auto_choices"]
    assert len(choices) == 2 and all(c.startswith("auto chose estimator ±") and " over toy ±" in c for c in choices)
    toy.rows_scale = None  # a kind stating no error never wins over one that states one
    cells = kinds_only("auto").cells(onnx_file, profiles)
    assert all(c.latency_source.startswith("estimator") and "auto chose" not in (c.note or "")
               for c in cells.values())


def test_an_optional_kind_is_never_the_default(toy, onnx_file: Path, profiles) -> None:
    """The same toy with the lowest error, but needing something an install may lack: opt-in only."""
    toy.availability = Availability.OPTIONAL
    auto = kinds_only("auto")
    cells = auto.cells(onnx_file, profiles)
    assert all(c.latency_source.startswith("estimator") and "toy" not in (c.note or "") for c in cells.values())
    assert "auto_choices" not in auto.describe()
    named = kinds_only("toy").cells(onnx_file, profiles)  # named, it serves
    assert {c.latency_source for c in named.values()} == {"toy:plumbing tflite"}
    # ... stating its own figure and why it is not the default, beside the default's (issue 46)
    for pid, cell in named.items():
        assert cell.uncertainty_pct == 1.0 and cell.held_out_rows == 50 and cell.held_out_pool == "all cores"
        assert "toy kind (plumbing test) is opt-in, not the default: it needs what not every install has" in (
            cell.uncertainty or "")
        default = cells[pid]
        assert f"the default for this kind of cell states \u00b1{default.uncertainty_pct:.1f}% " in cell.uncertainty


def test_the_kind_serves_only_the_runtimes_the_registry_names(toy, onnx_file: Path, profiles) -> None:
    spec = registry.RUNTIMES["ncnn"]
    registry.RUNTIMES["ncnn"] = dataclasses.replace(spec, predictors=tuple(p for p in spec.predictors if p != "toy"))
    cells = kinds_only("auto", runtime="ncnn").cells(onnx_file, profiles)
    assert all(c.latency_source.startswith("estimator") for c in cells.values())
    with pytest.raises(InputError, match="does not serve ncnn"):
        kinds_only("toy", runtime="ncnn")


def test_start_uses_a_registered_kind(toy, tmp_path: Path) -> None:
    from lodevem.profiles import select_profiles
    from lodevem.runner import RunConfig, run_benchmark

    model = zoo.write("tiny_cnn", tmp_path)
    chosen = tuple(select_profiles(load_profiles(), ids=["nokia_c1"]))
    outcome = run_benchmark(RunConfig.of(models=(model,), profiles=chosen, warmup=0, runs=1, output=tmp_path / "out",
                                      backend="process", predictor="toy", timeout_s=600))
    (row,) = outcome.rows
    assert row.latency.source == "toy:plumbing tflite" and row.latency.ms is not None
    assert row.latency.kind == "toy" and row.latency.runtime == "tflite" and row.latency.band.held_out_pct == 1.0
    assert (outcome.manifest.run.predictor or {})["toy"] == {"cells": 1}
    # the reports render the kind from its own words: mark and held-out figure, sentence, reference
    from rich.console import Console

    from lodevem.reporter import results_table, write_all

    console = Console(record=True, width=160)
    console.print(results_table(outcome.rows, chosen))
    shown = console.export_text()
    assert f"{row.latency.ms:.1f}\u00b6 (" in shown and "\u00b6 toy kind (plumbing test): \u00b11.0% (Cortex-A7, fp32)" in shown
    write_all(outcome.rows, chosen, outcome.manifest, tmp_path / "out", plots=False)
    methods = (tmp_path / "out" / "methodology.md").read_text()
    assert "the toy kind counted kernels [toykind]" in methods and "not a latency" in methods
    assert "@misc{toykind," in (tmp_path / "out" / "references.bib").read_text()
    assert r"\textsuperscript{\P}" in (tmp_path / "out" / "benchmark_results.tex").read_text()


def test_the_pick_rule_is_one_pure_function() -> None:
    """``selection.pick`` is what the pool applies per (core family, runtime), and what the
    benchmark scores: the lowest stated error; no figure never wins; ties keep registry order."""
    fig = {"a": HeldOutError(20.0, 58, "all cores"), "b": HeldOutError(19.0, 8, "Cortex-A55"), "c": None}
    assert pick(["a", "b"], fig) == "b"
    assert pick(["b", "a"], fig) == "b"
    assert pick(["c", "a", "b"], fig) == "b"  # a kind stating no figure never wins over one that states one
    assert pick(["c"], fig) == "c"  # ... unless no kind states one
    assert pick(["a", "b"], {**fig, "b": HeldOutError(20.0, 8, "x")}) == "a"  # a tie keeps the order


def test_armsim_is_a_registered_kind_that_says_where_it_cannot_run(onnx_file: Path, profiles, tmp_path: Path) -> None:
    """armsim is in the registry like the others, opt-in (``Availability.OPTIONAL``); under the
    process backend (no images) a named ``--predictor armsim`` is an error naming why, and the
    default never considers it (not a word in the cells)."""
    from lodevem.errors import LodevemError
    from lodevem.sandbox.session import Session
    from lodevem.store import ArtifactStore

    assert "armsim" in pool.KINDS and all("armsim" in registry.RUNTIMES[r].predictors for r in ("tflite", "ncnn"))
    assert pool.KINDS["armsim"].availability is Availability.OPTIONAL
    session = Session(ArtifactStore(tmp_path), "process")
    session.connect()
    with pytest.raises(LodevemError, match="--predictor armsim: armsim runs only under the Docker backend, not process"):
        kinds_only("armsim", session=session).require(profiles)
    auto = kinds_only("auto", session=session)
    cells = auto.cells(onnx_file, profiles)
    assert all(c.latency_source.startswith("estimator") and "armsim" not in (c.note or "") for c in cells.values())
    assert "auto_choices" not in auto.describe()


def test_a_named_kinds_fallbacks_are_one_warning_line(toy, onnx_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--predictor NAME`` whose kind cannot serve some cells: those cells are the estimator's and
    ONE run warning says which cells fell back to what and why (not one line per cell)."""
    monkeypatch.setattr(ToyKind, "unavailable", lambda self, profile, runtime: (
        f"toy has no build for {profile.fastest_cluster.core}" if profile.fastest_cluster.core == "Cortex-A7" else None))
    chosen = [p for p in load_profiles() if p.id in ("nokia_c1", "jiophone2", "itel_p37", "nokia_2720_flip")]
    named = kinds_only("toy")
    for level in (None, "fp16"):
        cells = named.cells(onnx_file, chosen, level=level)
    assert {pid: c.latency_source.split(":")[0] for pid, c in cells.items()} == {
        "nokia_c1": "estimator", "jiophone2": "estimator", "nokia_2720_flip": "estimator", "itel_p37": "toy"}
    lines = [w for w in named.warnings if "fell back" in w]
    a7 = ", ".join(p.id for p in chosen if p.fastest_cluster.core == "Cortex-A7")
    assert lines == [f"--predictor toy: cells fell back to the offline estimator: {a7} (toy has no build for "
                     "Cortex-A7)"], named.warnings


@pytest.mark.docker
def test_lodevem_check_lists_the_optional_armsim_image_with_its_hint(docker_backend) -> None:
    """``lodevem check`` has a line for armsim's images: ok when built, a failure with its build hint
    when not, never required (the default latency never needs it)."""
    from lodevem.doctor import run_checks

    line = next(c for c in run_checks("docker") if c.name == "armsim images")
    assert not line.required and line.status in ("ok", "fail")
    assert "lodevem-armsim" in line.detail
    if line.status == "fail":
        assert line.hint.endswith("lodevem build-image --runtime armsim") and "opt-in" in line.hint
