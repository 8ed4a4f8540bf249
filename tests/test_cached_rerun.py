"""A fully cached rerun computes nothing and imports nothing heavy, and never serves stale results.

* the latency cache (real ``Predictor``, real ONNX exports of zoo models): a hit equals the
  computed prediction and replays its warnings; a changed model, profile, option, estimator
  parameters or ``use_cache=False`` is a miss;
* figures: kept when their inputs are unchanged (also when only ``memory_cached`` flips),
  redrawn when a row or profile changes or a file was edited;
* end to end: ``lodevem start`` twice through the real process backend; in the rerun's own
  interpreter ``sys.modules`` holds no torch, nn_meter, matplotlib, onnx or scikit-learn.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import kinds_only, with_columns
from test_paper_kit import make_row

from lodevem import zoo
from lodevem.latency.estimator import Estimator
from lodevem.predict import Predictor
from lodevem.profiles import Profile, load_profiles
from lodevem.report.figure_cache import HEATMAP, SCATTER, write_figures

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "nn_meter", "matplotlib", "onnx", "sklearn", "scipy")


@pytest.fixture(scope="module")
def onnx_files(zoo_onnx) -> dict[str, Path]:
    return {name: zoo_onnx(name) for name in ("tiny_cnn", "mobilenet_v3_small")}


@pytest.fixture(scope="module")
def two_profiles() -> list[Profile]:
    by_id = {p.id: p for p in load_profiles()}
    return [by_id["nokia_c1"], by_id["itel_p37"]]


def test_a_hit_equals_the_computed_prediction_and_replays_warnings(onnx_files: dict[str, Path],
                                                                   two_profiles: list[Profile], tmp_path: Path) -> None:
    nowhere = tmp_path / "no-nnmeter-data"
    first = kinds_only("auto", nnmeter_data=nowhere, cache_dir=tmp_path / "latency", breakdown=True)
    computed = first.cells(onnx_files["tiny_cnn"], two_profiles)
    assert (first.pool.cache_hits, first.pool.cache_misses) == (0, 2)
    again = kinds_only("auto", nnmeter_data=nowhere, cache_dir=tmp_path / "latency", breakdown=True)
    cached = again.cells(onnx_files["tiny_cnn"], two_profiles)
    assert (again.pool.cache_hits, again.pool.cache_misses) == (2, 0)
    assert cached == computed and cached["nokia_c1"].kernels  # every field, the per-kernel breakdown too
    assert again.warnings == first.warnings  # the default kinds every install has: whatever they warned, again
    assert again.describe()["latency_cache"] == {"hits": 2, "misses": 0}


def test_whatever_determines_a_prediction_is_in_its_key(onnx_files: dict[str, Path], two_profiles: list[Profile],
                                                        tmp_path: Path) -> None:
    cache = tmp_path / "latency"
    profile = two_profiles[:1]
    kinds_only("estimator", cache_dir=cache).cells(onnx_files["tiny_cnn"], profile)

    def misses(predictor: Predictor, onnx: Path = onnx_files["tiny_cnn"], profiles: list[Profile] = profile,
               **options: object) -> int:
        predictor.cells(onnx, profiles, **options)
        return predictor.pool.cache_misses

    assert misses(kinds_only("estimator", cache_dir=cache)) == 0
    assert misses(kinds_only("estimator", cache_dir=cache), threads=4) == 1
    assert misses(kinds_only("estimator", cache_dir=cache), level="int8") == 1
    assert misses(kinds_only("estimator", cache_dir=cache, breakdown=True)) == 1
    assert misses(kinds_only("estimator", cache_dir=cache, use_cache=False)) == 1
    faster = profile[0].model_copy(update={"cpu": [c.model_copy(update={"clock_ghz": c.clock_ghz + 0.1})
                                                   for c in profile[0].cpu]})
    assert misses(kinds_only("estimator", cache_dir=cache), profiles=[faster]) == 1
    # another model written over the same file name: keyed by content, not path
    moved = tmp_path / "model.onnx"
    moved.write_bytes(onnx_files["tiny_cnn"].read_bytes())
    assert misses(kinds_only("estimator", cache_dir=cache), onnx=moved) == 0
    moved.write_bytes(onnx_files["mobilenet_v3_small"].read_bytes())
    assert misses(kinds_only("estimator", cache_dir=cache), onnx=moved) == 1
    # refitted estimator parameters: same version string, other numbers
    params = json.loads(json.dumps(Estimator.load().params))
    params["terms"]["kernels"]["cycles_per_unit"] *= 1.1
    refit = kinds_only("estimator", cache_dir=cache, estimator=Estimator(params))
    before = kinds_only("estimator", cache_dir=cache).cells(onnx_files["tiny_cnn"], profile)
    after = refit.cells(onnx_files["tiny_cnn"], profile)
    assert refit.pool.cache_misses == 1
    assert after[profile[0].id].latency_ms != before[profile[0].id].latency_ms


def test_a_corrupt_cache_entry_is_a_miss(onnx_files: dict[str, Path], two_profiles: list[Profile],
                                        tmp_path: Path) -> None:
    cache = tmp_path / "store"
    expected = kinds_only("estimator", cache_dir=cache).cells(onnx_files["tiny_cnn"], two_profiles[:1])
    for entry in (cache / "latency").glob("*.json"):
        entry.write_text('{"cache_format": 1, "value": {"prediction": {"latency_ms": "x"}}}')
    predictor = kinds_only("estimator", cache_dir=cache)
    assert predictor.cells(onnx_files["tiny_cnn"], two_profiles[:1]) == expected
    assert predictor.pool.cache_misses == 1


def test_figures_are_kept_until_their_inputs_change(two_profiles: list[Profile], tmp_path: Path) -> None:
    rows = [make_row(p) for p in two_profiles]
    drawn = write_figures(rows, two_profiles, tmp_path)
    assert [f.reused for f in drawn] == [False, False]
    stamps = {p: p.stat().st_mtime_ns for f in drawn for p in f.paths}
    # a rerun whose measurements all came from the cache: same figures
    kept = write_figures([with_columns(r, memory_cached=True) for r in rows], two_profiles, tmp_path)
    assert [f.reused for f in kept] == [True, True]
    assert {p: p.stat().st_mtime_ns for f in kept for p in f.paths} == stamps
    # a changed latency redraws both; a changed profile (its label) too
    changed = [with_columns(rows[0], latency_ms=99.0), rows[1]]
    assert [f.reused for f in write_figures(changed, two_profiles, tmp_path)] == [False, False]
    relabelled = [two_profiles[0].model_copy(update={"label": "Renamed"}), two_profiles[1]]
    assert [f.reused for f in write_figures(changed, relabelled, tmp_path)] == [False, False]
    # an edited or deleted file is redrawn, the other figure kept
    (tmp_path / f"{HEATMAP}.png").write_bytes(b"not the figure")
    (tmp_path / f"{SCATTER}.pdf").unlink()
    again = write_figures(changed, relabelled, tmp_path)
    assert [f.reused for f in again] == [False, False]
    assert (tmp_path / f"{HEATMAP}.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / f"{SCATTER}.pdf").is_file()
    assert [f.reused for f in write_figures(changed, relabelled, tmp_path)] == [True, True]


_RUN = """
import json, sys
from lodevem.cli import cli
try:
    cli(sys.argv[1:], prog_name="lodevem", standalone_mode=False)
finally:
    heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY_NAMES))
    print("HEAVY=" + json.dumps(heavy))
""".replace("HEAVY_NAMES", repr(HEAVY))


def _start(models: list[Path], out: Path) -> list[str]:
    args = [sys.executable, "-c", _RUN, "start", *map(str, models), "--profile", "nokia_c1", "--profile", "itel_p37",
            "--backend", "process", "--runs", "1", "--warmup", "0", "--output", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, env={**_env(), "COLUMNS": "200"}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("HEAVY=")][-1]
    return json.loads(line.removeprefix("HEAVY="))


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_cached_rerun_imports_nothing_heavy(tmp_path: Path) -> None:
    models = [zoo.write("tiny_cnn", tmp_path / "models")]
    out = tmp_path / "results"
    first = _start(models, out)
    assert "nn_meter" in first  # the first run did extract kernels on the host
    assert _start(models, out) == []
    payload = json.loads((out / "benchmark_results.json").read_text())
    assert all(r["memory_cached"] for r in payload["results"])
    assert payload["environment"]["extra"]["predictor"]["latency_cache"] == {"hits": 2, "misses": 0}
    assert (out / "methodology.md").is_file() and (out / "latency_heatmap.png").is_file()


@pytest.mark.docker
def test_the_engine_socket_answers_as_docker_py_does(docker_backend) -> None:
    """The stdlib questions a cached rerun asks instead of importing docker-py."""
    import docker

    from lodevem.sandbox.engine import EngineAPI
    from lodevem.sandbox.image import IMAGE_TAG

    engine = EngineAPI.from_env()
    assert engine is not None
    client = docker.from_env()
    try:
        assert engine.image_id(IMAGE_TAG) == client.images.get(IMAGE_TAG).id == docker_backend.image_id
        assert engine.image_id("lodevem-no-such-image:0") is None
        assert engine.version() == client.version()["Version"]
        listed = {c.id for c in engine.containers("lodevem=1")}
        assert listed == {c.id for c in client.containers.list(all=True, filters={"label": "lodevem=1"})}
    finally:
        client.close()
