"""Measurement planning (issue 24) as pure logic: which limits are run, which rows inferred.
No Docker: the scheduler and the bisection are driven by the fake backend of ``fakes``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeBackend

from lodevem import measure
from lodevem.memory.planning import (
    ABSOLUTE_MB,
    RELATIVE,
    floor_bracket,
    inferred_note,
    plan_limits,
    reference_limit,
    safe_above,
)
from lodevem.sandbox.client import MeasureSettings, WorkerClient

LIMITS = (256, 512, 1024, 2048, 3072, 4096)  # the 16 profiles' distinct RAM limits


def test_far_above_the_peak_is_inferred_near_and_below_is_measured() -> None:
    plan = plan_limits(LIMITS, 4096, "fits", 270.9)
    assert plan.reference_mb == 4096
    assert plan.inferred == (3072, 2048, 1024, 512) and plan.measured == (256,)


def test_the_margin_decides_a_limit_just_above_the_peak() -> None:
    peak = 400.0
    edge = safe_above(peak)
    assert edge == pytest.approx(peak * (1 + RELATIVE) + ABSOLUTE_MB)
    plan = plan_limits((int(edge) - 1, int(edge) + 1, 4096), 4096, "fits", peak)
    assert plan.measured == (int(edge) - 1,) and plan.inferred == (int(edge) + 1,)


@pytest.mark.parametrize("verdict", ["oom", "thrashing", "timeout", "error"])
def test_a_reference_that_did_not_fit_infers_nothing(verdict: str) -> None:
    plan = plan_limits(LIMITS, 4096, verdict, None if verdict != "oom" else 5000.0)
    assert plan.inferred == () and plan.measured == (3072, 2048, 1024, 512, 256)


def test_no_infer_measures_every_limit() -> None:
    plan = plan_limits(LIMITS, 4096, "fits", 100.0, infer=False)
    assert plan.inferred == () and plan.measured == (3072, 2048, 1024, 512, 256)


def test_reference_is_the_largest_limit_needed() -> None:
    assert reference_limit([512, 2048, 1024]) == 2048 and reference_limit([]) is None


def test_inferred_note_names_the_run_and_the_peak() -> None:
    assert inferred_note(4096, 270.94, 1024) == "inferred from the 4096 MB run: peak 270.9 MB ≪ 1024 MB"


def test_floor_bracket_straddles_the_peak() -> None:
    assert floor_bracket(270.9, 8, 64, 4096) == (279, 262)
    assert floor_bracket(40.0, 8, 64, 4096) == (64, 64)  # clamped to the search range


def _client(need_mb: float) -> tuple[FakeBackend, WorkerClient]:
    fake = FakeBackend(need_mb)
    return fake, WorkerClient(fake)


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.pt"
    path.write_bytes(b"weights")
    return path


def test_the_scheduler_runs_the_reference_then_only_the_limits_that_can_bite(model: Path) -> None:
    fake, client = _client(250.0)
    results = measure.measure_models([model], LIMITS, client=client, jobs=1)
    assert sorted(c[1] for c in fake.calls) == [256, 4096]
    row = results[(str(model), 1024)]
    assert row.fits and row.inferred_from_mb == 4096 and row.limit_mb == 1024 and row.sandbox.wall_s == 0.0
    assert row.sandbox.limit_enforcement.startswith("inferred from the 4096 MB run: peak ")
    assert row.peak.rss_mb == results[(str(model), 4096)].peak.rss_mb
    assert results[(str(model), 256)].inferred_from_mb is None


def test_no_infer_runs_every_limit(model: Path) -> None:
    fake, client = _client(250.0)
    results = measure.measure_models([model], LIMITS, client=client, jobs=1, infer=False)
    assert sorted(c[1] for c in fake.calls) == sorted(LIMITS)
    assert all(v.inferred_from_mb is None for v in results.values())


def test_inferred_and_measured_verdicts_agree_for_the_fake(model: Path) -> None:
    """The fake's peak does not depend on the limit (as the real one does not, far above it)."""
    for need in (100.0, 250.0, 480.0, 900.0, 2500.0):
        inferred = measure.measure_models([model], LIMITS, client=_client(need)[1], jobs=1)
        measured = measure.measure_models([model], LIMITS, client=_client(need)[1], jobs=1, infer=False)
        assert {k: v.verdict for k, v in inferred.items()} == {k: v.verdict for k, v in measured.items()}, need


def test_find_floor_starts_from_the_measured_peak(model: Path) -> None:
    fake, client = _client(250.0)
    floor = measure.find_floor(model, client=client, settings=MeasureSettings(), lo_mb=64, hi_mb=4096, tolerance_mb=8)
    assert floor.floor_mb is not None and floor.fails_at_mb is not None
    assert floor.floor_mb - floor.fails_at_mb <= 8
    assert len(fake.calls) <= 5  # 4096, the bracket around the peak, then at most 2 halvings


def test_the_table_caption_and_the_methodology_count_the_inferred_figures(tmp_path: Path) -> None:
    from lodevem.profiles import load_profiles, select_profiles
    from lodevem.report.methodology import run_facts
    from lodevem.report.paperkit import methodology_markdown
    from lodevem.reporter import results_table
    from lodevem.runner import RunConfig, run_benchmark

    model = tmp_path / "small.pt"
    model.write_bytes(b"small")
    profiles = tuple(select_profiles(load_profiles(), ids=("nokia_8110_4g", "jiophone2", "nokia_c1")))
    outcome = run_benchmark(RunConfig.of(models=(model,), profiles=profiles, output=tmp_path / "out", jobs=1,
                                      runtimes=("torch",)),
                            backend=FakeBackend(240.0))
    caption = str(results_table(outcome.rows, list(profiles)).caption)
    assert "1 of 3 peaks come from the model's run at its largest RAM limit" in caption
    assert "inferred from" not in caption  # the enforcement list names how limits were enforced only
    text = methodology_markdown(run_facts(outcome.rows, outcome.manifest))
    assert "1 of the 3 memory figures were not measured at their own limit" in text
