"""The compression table users expect, under the runtimes an app ships (issue 28, part 5).

One zoo model (mobilenet_v2, at 1x3x96x96), under tflite and ncnn, through the real Docker
engine and the real converters: the smaller file must give the smaller peak. int8 and
int8-static peaks are below fp32 by at least half the weights' saving (the file-size difference:
what the runtime no longer holds), and pruned is below fp32. One run serves every test of the
module: the conversions are the slow part (about a minute each on 2 loaded cores), so fp16,
whose peak the table does not order, is left to benchmarks/compression_table.py.
"""

from __future__ import annotations

import pytest

from lodevem import zoo
from lodevem.profiles import load_profiles, select_profiles
from lodevem.results import PairResult
from lodevem.runner import RunConfig, run_benchmark

pytestmark = pytest.mark.docker

RUNTIMES = ("tflite", "ncnn")
SHAPE = (1, 3, 96, 96)


@pytest.fixture(scope="module")
def table(docker_backend, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], PairResult]:
    """(level, runtime) -> the row on a 4 GB tier-1 phone (a limit far above every peak)."""
    root = tmp_path_factory.mktemp("compression")
    model = zoo.write("mobilenet_v2", root / "models")
    profiles = tuple(p for p in select_profiles(load_profiles(), tiers=("tier1",)) if p.ram_mb >= 3000)[:1]
    config = RunConfig.of(models=(model,), profiles=profiles, output=root / "out", runtimes=RUNTIMES,
                       levels=("fp32", "int8", "int8-static", "pruned"), warmup=1, runs=3, jobs=2,
                       predictor="estimator", input_shape=SHAPE)
    rows = run_benchmark(config, backend=docker_backend).rows
    return {(r.model.level or "fp32", r.memory.runtime): r for r in rows}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_level_has_a_peak(table: dict[tuple[str, str], PairResult], runtime: str) -> None:
    missing = {level: row.memory.error for (level, rt), row in table.items() if rt == runtime and not row.ran}
    assert missing == {}
    assert {row.memory.runtime_shown for (_, rt), row in table.items() if rt == runtime} == {runtime}


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("level", ["int8", "int8-static"])
def test_int8_peaks_below_fp32_by_roughly_the_weights_saving(table: dict[tuple[str, str], PairResult],
                                                             runtime: str, level: str) -> None:
    fp32, quantized = table[("fp32", runtime)], table[(level, runtime)]
    assert fp32.memory.converted.mb and quantized.memory.converted.mb and quantized.memory.converted.mb < 0.5 * fp32.memory.converted.mb
    saving = fp32.memory.converted.mb - quantized.memory.converted.mb
    assert fp32.memory.peak_rss_mb - quantized.memory.peak_rss_mb >= 0.5 * saving, (fp32.memory.peak_rss_mb, quantized.memory.peak_rss_mb,
                                                                       saving)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_pruned_peaks_below_fp32(table: dict[tuple[str, str], PairResult], runtime: str) -> None:
    assert table[("pruned", runtime)].memory.peak_rss_mb < table[("fp32", runtime)].memory.peak_rss_mb


def test_int8_static_rows_say_where_their_scales_come_from(table: dict[tuple[str, str], PairResult]) -> None:
    for runtime in RUNTIMES:
        assert "int8-static scales come from" in (table[("int8-static", runtime)].memory.note or "")
        assert "scales" not in (table[("fp32", runtime)].memory.note or "")
