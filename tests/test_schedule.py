"""The memory stage's run order (``memory.schedule``) against a synthetic model whose peak is
known: no backend, no files, each run a function of its limit. The faces that use it
(``measure.measure_models`` / ``find_floor``) are tested against the fake backend elsewhere."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import pytest

from lodevem.memory.schedule import FloorSearch, LimitSchedule, by_content
from lodevem.results import MemoryMeasurement, ModelFile
from lodevem.results.measurements import MeasuredModel, PeakMemory, SandboxFacts
from lodevem.wire.verdict import Verdict


def run(limit: int, peak: float, verdict: Optional[Verdict] = None) -> MemoryMeasurement:
    fits = verdict or (Verdict.FITS if limit >= peak else Verdict.OOM)
    return MemoryMeasurement(
        verdict=fits, limit_mb=limit, runtime="torch", threads=1,
        peak=PeakMemory(rss_mb=peak if fits == Verdict.FITS else None),
        sandbox=SandboxFacts(backend="synthetic", limit_enforcement="", image_id="i", worker_version="w", wall_s=1.0),
        model=MeasuredModel(sha256="s"), error="worker failed" if fits == Verdict.ERROR else None)


def model(tmp_path: Path, name: str, content: bytes = b"x") -> ModelFile:
    (tmp_path / name).write_bytes(content)
    return ModelFile.from_path(tmp_path / name)


class Synthetic:
    """A model with a VmHWM of ``peak`` MiB; ``error_at``: limits at which the worker fails."""

    def __init__(self, peak: float, error_at: tuple[int, ...] = ()) -> None:
        self.peak, self.error_at, self.limits, self.references = peak, error_at, [], []

    def __call__(self, target: ModelFile, limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        self.limits.append(limit)
        self.references.append(reference_s)
        return run(limit, self.peak, Verdict.ERROR if limit in self.error_at else None)


def test_the_floor_is_within_tolerance_above_the_peak(tmp_path: Path) -> None:
    measure = Synthetic(peak=245.0)
    floor = FloorSearch(measure, model(tmp_path, "m.pt"), 8, None).search(64, 4096)
    assert floor.floor_mb is not None and floor.fails_at_mb is not None
    assert floor.fails_at_mb < 245.0 <= floor.floor_mb and floor.floor_mb - floor.fails_at_mb <= 8
    assert measure.limits[0] == 4096 and measure.references[0] is None
    assert all(r == 1.0 for r in measure.references[1:])  # every probe compares with the top run
    assert [limit for limit, _ in floor.probes] == measure.limits


@pytest.mark.parametrize("step, probe", [("bracket", 2), ("bisection", 3)])
def test_a_worker_error_stops_the_search_where_it_happens(step: str, probe: int, tmp_path: Path) -> None:
    first = Synthetic(peak=245.0)  # probes 4096, then the bracket 253 / 237, then the bisection 245
    FloorSearch(first, model(tmp_path, "m.pt"), 8, None).search(64, 4096)
    assert first.limits == [4096, 253, 237, 245]
    at = first.limits[probe]
    measure = Synthetic(peak=245.0, error_at=(at,))
    floor = FloorSearch(measure, model(tmp_path, "m.pt"), 8, None).search(64, 4096)
    assert floor.error == "worker failed" and floor.floor_mb is None and measure.limits[-1] == at
    assert floor.fails_at_mb == (237 if step == "bisection" else None)  # the bisection knew where it failed


def test_a_model_that_fits_at_the_lowest_limit(tmp_path: Path) -> None:
    floor = FloorSearch(Synthetic(peak=30.0), model(tmp_path, "m.pt"), 8, None).search(64, 4096)
    assert (floor.floor_mb, floor.fails_at_mb) == (64, None)


def test_references_first_then_the_limits_that_can_bite(tmp_path: Path) -> None:
    """Byte-identical files run once and both labels get the figures; a limit far above the
    reference's peak is inferred, not run; a limit near or under it runs with the reference's
    wall time."""
    same = [model(tmp_path, "a.pt", b"same"), model(tmp_path, "b.pt", b"same")]
    measure, seen = Synthetic(peak=270.0), []
    with ThreadPoolExecutor(max_workers=1) as pool:
        results = LimitSchedule(pool, measure, by_content(same), [4096, 2048, 256], True,
                                lambda label, limit, value: seen.append((label, limit))).run()
    assert measure.limits == [4096, 256] and measure.references == [None, 1.0]
    assert set(results) == {(m.label, limit) for m in same for limit in (4096, 2048, 256)}
    a, b = (m.label for m in same)
    assert results[(a, 256)].verdict == Verdict.OOM and results[(b, 2048)].verdict == Verdict.FITS
    assert results[(a, 2048)].sandbox.wall_s == 0 and results[(a, 2048)] == results[(b, 2048)]  # inferred from the reference
    assert len(seen) == 6
