"""measure.py's logic without a Docker engine: cache keys, limit dedup and ordering, verdict
classification, the thrashing monitor and the floor bisection, against a fake backend."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Optional

import pytest
from fakes import FakeBackend, ok_result, outcome

from lodevem import measure
from lodevem.errors import InputError
from lodevem.measure import MeasureCache, MemoryMeasurement, cache_key, classify
from lodevem.results import ModelFile
from lodevem.sandbox import open_backend
from lodevem.sandbox.base import ThrashMonitor
from lodevem.sandbox.client import MeasureReply, MeasureSettings, SandboxRun, WorkerClient, parse_reply
from lodevem.store import ArtifactStore


def run_of(o) -> SandboxRun:
    return SandboxRun(o, parse_reply(o.stdout, None, MeasureReply))


def measure_models(models, limits, backend, **kw):
    return measure.measure_models(models, limits, client=WorkerClient(backend), **kw)


@pytest.fixture
def models(tmp_path: Path) -> list[Path]:
    paths = []
    for name, payload in (("a.pt", b"model-a"), ("b.pt", b"model-b")):
        path = tmp_path / name
        path.write_bytes(payload)
        paths.append(path)
    return paths


def test_cache_key_depends_on_every_field() -> None:
    args = dict(model_sha256="abc", limit_mb=512, runtime="torch", identity="docker:sha256:1", worker_version="1",
                warmup=5, runs=50, threads=1, input_shape=None)
    base = cache_key(**args)
    assert base == cache_key(**args)
    for name, other in (("model_sha256", "abd"), ("limit_mb", 1024), ("runtime", "onnxruntime"),
                        ("identity", "docker:sha256:2"), ("worker_version", "2"), ("warmup", 1), ("runs", 5),
                        ("threads", 2), ("input_shape", (1, 3, 96, 96))):
        assert cache_key(**{**args, name: other}) != base, name


def test_a_record_of_another_layout_is_a_miss_not_misread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The record's layout is in its key: a flat record of layout 1 is never found, let alone read
    as a measurement without a peak (its parts' fields have defaults)."""
    from lodevem.memory import cache

    args = dict(model_sha256="abc", limit_mb=512, runtime="torch", identity="i", worker_version="1", warmup=5,
                runs=50, threads=1, input_shape=None)
    now = cache_key(**args)
    monkeypatch.setattr(cache, "MEASUREMENT_LAYOUT", cache.MEASUREMENT_LAYOUT - 1)
    assert cache_key(**args) != now


def test_distinct_limits_run_once_largest_first(models: list[Path]) -> None:
    fake = FakeBackend()
    limits = [512, 1024, 512, 256, 1024, 2048, 2048]  # 7 profiles, 4 distinct limits
    results = measure_models(models, limits, fake, jobs=2, infer=False)
    assert len(fake.calls) == 2 * 4
    for name in ("a.pt", "b.pt"):
        mine = [c for c in fake.calls if c[0] == name]
        assert mine[0][1] == 2048 and mine[0][2] is None  # the reference run
        assert sorted(c[1] for c in mine[1:]) == [256, 512, 1024]
        assert all(c[2] == 2.0 for c in mine[1:])  # reference wall time handed to the monitor
    assert set(results) == {(str(p), lim) for p in models for lim in (256, 512, 1024, 2048)}
    assert results[(str(models[0]), 256)].verdict == "fits"


def test_identical_files_are_measured_once(tmp_path: Path) -> None:
    a, b = tmp_path / "x.pt", tmp_path / "copy" / "x.pt"
    b.parent.mkdir()
    a.write_bytes(b"same")
    b.write_bytes(b"same")
    fake = FakeBackend()
    specs = [ModelFile.from_path(a, "x"), ModelFile.from_path(b, "copy/x")]
    results = measure_models(specs, [512], fake, jobs=1)
    assert len(fake.calls) == 1
    assert results[("x", 512)] == results[("copy/x", 512)]


def test_cache_hit_and_no_cache(models: list[Path], tmp_path: Path) -> None:
    fake = FakeBackend()
    cache = tmp_path / "out" / ".cache" / "measure"
    first = measure_models(models[:1], [512, 1024], fake, cache_dir=cache, infer=False)
    assert len(fake.calls) == 2 and not any(m.cached for m in first.values())
    second = measure_models(models[:1], [512, 1024], fake, cache_dir=cache, infer=False)
    assert len(fake.calls) == 2 and all(m.cached for m in second.values())
    assert replace(second[(str(models[0]), 512)], cached=False) == first[(str(models[0]), 512)]
    measure_models(models[:1], [512], fake, cache_dir=cache, use_cache=False)
    assert len(fake.calls) == 3  # --no-cache measures again


def test_timeouts_are_not_cached(tmp_path: Path) -> None:
    cache = MeasureCache(ArtifactStore(tmp_path))
    value = measure.to_measurement(run_of(outcome(timed_out=True, exit_code=137)), identity="i", model_sha256="s",
                                   settings=MeasureSettings(), worker_version="w")
    cache.put("k", value)
    assert cache.get("k") is None


def test_a_measurement_with_every_part_round_trips_through_the_store(tmp_path: Path) -> None:
    from lodevem.results import ConvertedFile, Fallback, HostTimings, OomPhase

    value = measure.to_measurement(run_of(outcome(result=ok_result(300.0))), identity="i", model_sha256="s",
                                   settings=MeasureSettings(runtime="tflite"), worker_version="w")
    value = replace(value, phase=OomPhase.RSS_OVER_LIMIT, host=HostTimings(2.0, 0.1, 2.0, 2.2, 500.0),
                    converted=ConvertedFile(1234, "int8", "per-channel", 0.5), note="scales from synthetic inputs",
                    fallback=Fallback("tflite conversion failed: no", "torch"))
    cache = MeasureCache(ArtifactStore(tmp_path))
    cache.put("k", value)
    again = cache.get("k")
    assert again is not None and again.cached and replace(again, cached=False) == value
    assert again.phase is OomPhase.RSS_OVER_LIMIT and again.converted == ConvertedFile(1234, "int8", "per-channel", 0.5)
    assert again.fallback is not None and again.fallback.text == ("tflite conversion failed: no; measured under "
                                                                  "torch instead")
    assert len(fields(MemoryMeasurement)) <= 15 and all(len(fields(type(getattr(value, f.name)))) <= 6
                                                       for f in fields(MemoryMeasurement)
                                                       if is_dataclass(getattr(value, f.name)))


def test_measurement_round_trip() -> None:
    value = measure.to_measurement(run_of(outcome(result=ok_result(300.0))), identity="i", model_sha256="s",
                                   settings=MeasureSettings(), worker_version="w")
    assert MemoryMeasurement.from_dict(value.to_dict()) == value
    assert value.verdict == "fits" and value.peak.rss_mb == 300.0 and value.peak.runtime_baseline_mb == 200.0
    assert value.peak.model_increment_mb == 100.0 and value.host.mean_ms == 2.0


@pytest.mark.parametrize("kw, verdict, needle", [
    (dict(thrashing=True, thrash_evidence="900 major page faults/s", exit_code=137), "thrashing", "900 major"),
    (dict(timed_out=True, exit_code=137), "timeout", "timeout"),
    (dict(oom_killed=True, exit_code=137, stderr_tail="lodevem-worker: start\n"), "oom", "during runtime import"),
    (dict(oom_killed=True, exit_code=137, stderr_tail="lodevem-worker: warmup 1/5\n"), "oom", "during warm-up"),
    (dict(oom_killed=True, exit_code=137, stderr_tail="lodevem-worker: run 3/50\n"), "oom", "during inference"),
    (dict(exit_code=139, stderr_tail="Segmentation fault"), "error", "exit code 139"),
    (dict(exit_code=3, result={"ok": False, "error": {"kind": "not_a_model", "message": "x.pt is a PNG image"}}),
     "error", "PNG image"),
    (dict(result=ok_result(600.0)), "oom", "exceeds the 512 MB limit"),
    (dict(result=ok_result(500.0)), "fits", None),
])
def test_classify(kw: dict[str, Any], verdict: str, needle: Optional[str]) -> None:
    got, message, _ = classify(run_of(outcome(**kw)))
    assert got == verdict
    if needle is None:
        assert message is None
    else:
        assert needle in message


def test_thrash_monitor_needs_sustained_faults_at_the_limit() -> None:
    limit = 200 * 2**20
    calm = ThrashMonitor(limit, None)
    busy = ThrashMonitor(limit, None)
    roomy = ThrashMonitor(limit, None)
    for i in range(40):  # 20 s of samples every 0.5 s
        t = 100.0 + i * 0.5
        calm.add(t, limit, i)  # 2 faults/s at the limit: fine
        busy.add(t, limit, i * 200)  # 400 faults/s at the limit: thrashing
        roomy.add(t, limit // 2, i * 200)  # faults far from the limit: not memory pressure
    assert calm.check(120.0) is None
    assert roomy.check(120.0) is None
    evidence = busy.check(120.0)
    assert evidence is not None and "major page faults/s" in evidence


def test_find_floor_bisects_to_tolerance(models: list[Path]) -> None:
    fake = FakeBackend(need_mb=300.0)
    floor = measure.find_floor(models[0], client=WorkerClient(fake), lo_mb=64, hi_mb=4096, tolerance_mb=8)
    assert floor.floor_mb is not None and floor.fails_at_mb is not None
    assert 300 <= floor.floor_mb <= 308 and floor.floor_mb - floor.fails_at_mb <= 8
    assert floor.at_floor is not None and floor.at_floor.verdict == "fits"
    assert len(floor.probes) <= 2 + 10  # hi, lo, then log2((4096 - 64) / 8) bisection steps


def test_find_floor_reports_a_model_too_big_for_hi(models: list[Path]) -> None:
    floor = measure.find_floor(models[0], client=WorkerClient(FakeBackend(need_mb=5000.0)), hi_mb=4096)
    assert floor.floor_mb is None and "does not fit even at 4096 MB" in (floor.error or "")


def test_default_backend_choices() -> None:
    backend, warning = open_backend("process")
    assert backend.name == "process" and "without a filesystem or network sandbox" in (warning or "")
    with pytest.raises(InputError, match="--backend must be one of auto, docker, process"):
        open_backend("podman")
