"""The order of the memory stage's runs: which (model, limit) runs when, and the floor's search.

Why apart from ``measure`` (the stage's face: its caches, files and worker calls) and from
``memory.planning`` (which limits can bite, from the physics): the schedule only orders runs,
each done by a ``MeasureFn`` it is handed, so the same logic serves any backend and reads whole.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Union

from ..results import FloorResult, MemoryMeasurement, ModelFile
from ..wire.verdict import Verdict
from .planning import floor_bracket, plan_limits
from .verdicts import inferred

# (model label, limit MiB, its figures): called as each figure arrives (the run's progress and journal)
ResultFn = Callable[[str, int, MemoryMeasurement], None]
# one run of a model at a limit (MiB), with the reference run's wall time (None: it is the reference)
MeasureFn = Callable[[ModelFile, int, Optional[float]], MemoryMeasurement]


def by_content(models: Iterable[ModelFile]) -> dict[str, list[ModelFile]]:
    """The models grouped by their measured file's content: byte-identical files (a model given
    twice, under two names) are measured once and their rows share the figures."""
    groups: dict[str, list[ModelFile]] = {}
    for model in models:
        groups.setdefault(model.measured_key, []).append(model)
    return groups


class LimitSchedule:
    """The runs of one ``measure_models`` call in flight: each model's reference run at the
    largest limit first, then, as each reference comes back, the smaller limits
    ``memory.planning`` says can bite (the others inferred from it).

    Why a schedule and not one run per (model, limit) up front: a smaller limit needs the
    reference's wall time (the thrashing detector's yardstick) and its peak (which limits can
    change the verdict at all), so it can only be planned once the reference has finished."""

    def __init__(self, pool: ThreadPoolExecutor, measure: MeasureFn, groups: dict[str, list[ModelFile]],
                 limits: list[int], infer: bool, on_result: Optional[ResultFn]) -> None:
        self.pool, self.measure, self.groups, self.limits = pool, measure, groups, limits
        self.infer, self.on_result = infer, on_result
        self.running: dict[Future, tuple[str, int]] = {}
        self.results: dict[tuple[str, int], MemoryMeasurement] = {}

    def submit(self, sha: str, limit: int, reference_s: Optional[float]) -> None:
        self.running[self.pool.submit(self.measure, self.groups[sha][0], limit, reference_s)] = (sha, limit)

    def record(self, sha: str, limit: int, value: MemoryMeasurement) -> None:
        """The figures of every model with this content at ``limit``, passed on as they come."""
        for model in self.groups[sha]:
            self.results[(model.label, limit)] = value
            if self.on_result is not None:
                self.on_result(model.label, limit, value)

    def follow_reference(self, sha: str, value: MemoryMeasurement) -> None:
        """After a reference run: measure the smaller limits that can bite, infer the rest."""
        reference = value.sandbox.wall_s if value.verdict == Verdict.FITS else None
        planned = plan_limits(self.limits[1:], self.limits[0], value.verdict, value.peak.rss_mb, infer=self.infer)
        for smaller in planned.measured:
            self.submit(sha, smaller, reference)
        for smaller in planned.inferred:
            self.record(sha, smaller, inferred(value, smaller))

    def run(self) -> dict[tuple[str, int], MemoryMeasurement]:
        for sha in self.groups:
            self.submit(sha, self.limits[0], None)
        while self.running:
            done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
            # in submission order (a set's order is arbitrary): the same run records its pairs
            # in the same order, so an interrupted run keeps the same rows every time
            for future in [f for f in self.running if f in done]:
                sha, limit = self.running.pop(future)
                value = future.result()
                self.record(sha, limit, value)
                if limit == self.limits[0]:
                    self.follow_reference(sha, value)
        return self.results

    def cancel(self) -> None:
        for future in self.running:
            future.cancel()


@dataclass
class FloorSearch:
    """One ``find_floor`` call's probes and the three steps of its search: the top limit (does it
    fit at all?), the bracket around the top run's peak, then bisection between the highest limit
    that failed and the lowest that fitted. A worker error ends the search at whichever step."""

    measure: MeasureFn
    target: ModelFile
    tolerance_mb: int
    on_probe: Optional[ResultFn]
    probes: list[tuple[int, str]] = field(default_factory=list)

    def probe(self, limit: int, reference_s: Optional[float]) -> MemoryMeasurement:
        value = self.measure(self.target, limit, reference_s)
        self.probes.append((limit, value.verdict))
        if self.on_probe is not None:
            self.on_probe(self.target.label, limit, value)
        return value

    def result(self, floor: Optional[int], fails_at: Optional[int], at_floor: Optional[MemoryMeasurement],
               error: Optional[str] = None) -> FloorResult:
        return FloorResult(self.target.label, floor, fails_at, self.tolerance_mb, tuple(self.probes), at_floor, error)

    def search(self, lo_mb: int, hi_mb: int) -> FloorResult:
        top = self.probe(hi_mb, None)
        if top.verdict == Verdict.ERROR:
            return self.result(None, None, None, top.error)
        if not top.fits:
            return self.result(None, hi_mb, None, f"does not fit even at {hi_mb} MB ({top.verdict})")
        bracket = self.bracket(top, lo_mb, hi_mb)
        if isinstance(bracket, FloorResult):
            return bracket
        good, good_value, bad = bracket
        if bad is None:
            low = self.probe(lo_mb, top.sandbox.wall_s)
            if low.verdict == Verdict.ERROR:
                return self.result(None, None, None, low.error)
            if low.fits:
                return self.result(lo_mb, None, low)
            bad = lo_mb
        return self.bisect(good, good_value, bad, top.sandbox.wall_s)

    def bracket(self, top: MemoryMeasurement, lo_mb: int,
                hi_mb: int) -> Union[FloorResult, tuple[int, MemoryMeasurement, Optional[int]]]:
        """Probe down from the top run's measured peak (fits needs VmHWM <= limit, so the floor
        is near it): the lowest limit that fitted with its figures, and the first that failed
        (None: every bracket limit fitted)."""
        good, good_value = hi_mb, top
        if top.peak.rss_mb is None:
            return good, good_value, None
        for limit in floor_bracket(top.peak.rss_mb, self.tolerance_mb, lo_mb, hi_mb):
            if limit >= good:
                continue
            value = self.probe(limit, top.sandbox.wall_s)
            if value.verdict == Verdict.ERROR:
                return self.result(None, None, None, value.error)
            if not value.fits:
                return good, good_value, limit
            good, good_value = limit, value
        return good, good_value, None

    def bisect(self, good: int, good_value: MemoryMeasurement, bad: int, reference_s: Optional[float]) -> FloorResult:
        """Halve the gap between a limit that fitted and one that failed to ``tolerance_mb``."""
        while good - bad > self.tolerance_mb:
            mid = (good + bad) // 2
            value = self.probe(mid, reference_s)
            if value.verdict == Verdict.ERROR:
                return self.result(None, bad, None, value.error)
            if value.fits:
                good, good_value = mid, value
            else:
                bad = mid
        return self.result(good, bad, good_value)
