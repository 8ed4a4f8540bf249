"""The default's one rule and one record (``lodevem.latency.selection``): the pick per (core family,
runtime) over the kinds every install has, and the nested held-out error a cell states.

Pure: held-out rows built here where the scenario needs a known answer, and the estimator's
shipped nested rows for what the product states."""

from __future__ import annotations

import json

import pytest

from lodevem.latency.estimator import DEFAULT_PARAMS, Estimator
from lodevem.latency.records import LatencyPrediction
from lodevem.latency.selection import (
    MIN_KIND_ROWS,
    CellKind,
    CoreFamily,
    DefaultSelection,
    HeldOutRow,
    family_of,
    held_out_error,
    with_band,
)


def rows(kind_error: float, soc: str, core: str, n: int = MIN_KIND_ROWS, runtime: str = "ncnn",
         arithmetic: str = "fp32", threads: int = 1) -> list[HeldOutRow]:
    return [HeldOutRow(f"{soc} board", soc, core, threads, arithmetic, runtime, f"m{i}", kind_error * (-1) ** i)
            for i in range(n)]


def test_every_profile_core_has_a_family() -> None:
    from lodevem.profiles import CORE_TYPES

    assert {family_of(c) for c in CORE_TYPES} == set(CoreFamily)
    assert family_of("Cortex-A55") is family_of("Cortex-A53") is CoreFamily.IN_ORDER_ARMV8


def test_a_kind_with_few_rows_states_its_family_then_all_cores_then_all_runtimes() -> None:
    data = rows(0.10, "s1", "Cortex-A53") + rows(0.30, "s2", "Cortex-A55", n=4) + rows(0.50, "s3", "Cortex-A76")
    own = held_out_error(data, CellKind("Cortex-A53", 1, "fp32", "ncnn"))
    assert (own.mape_pct, own.rows, own.scope) == (10.0, 8, "Cortex-A53")
    family = held_out_error(data, CellKind("Cortex-A55", 1, "fp32", "ncnn"))  # 4 own rows: too few
    assert (family.scope, family.rows, family.mape_pct) == ("in-order ARMv8 cores", 12, pytest.approx(16.7, abs=0.1))
    assert held_out_error(data, CellKind("Cortex-A7", 1, "fp32", "ncnn")).scope == "all cores"
    assert held_out_error(data, CellKind("Cortex-A53", 1, "fp32", "tflite")).scope == "all cores and runtimes"
    assert held_out_error(data, CellKind("Cortex-A53", 1, "int8", "ncnn")) is None  # no row of that arithmetic
    text = own.text()
    assert text.startswith("±10.0% held-out (leave-one-SoC-out) error (8 1-thread fp32 ncnn rows, Cortex-A53)")


def test_the_pick_is_per_family_and_runtime_and_nested_without_the_held_out_soc() -> None:
    """Kind "b" is better than "a" on the in-order ARMv8 cores only because of SoC s1: picked for
    the others' folds, but s1's own rows are priced by the pick made without s1 ("a")."""
    a = rows(0.20, "s1", "Cortex-A53") + rows(0.20, "s2", "Cortex-A55") + rows(0.20, "s3", "Cortex-A76")
    b = rows(0.01, "s1", "Cortex-A53") + rows(0.30, "s2", "Cortex-A55") + rows(0.40, "s3", "Cortex-A76")
    selection = DefaultSelection(("a", "b"), {"a": a, "b": b})
    assert selection.kind_for("Cortex-A53", "ncnn") == "b" == selection.kind_for("Cortex-A55", "ncnn")
    assert selection.kind_for("Cortex-A76", "ncnn") == "a"
    nested = {(r.soc, r.core): r.error for r in selection.nested_rows}
    assert abs(nested[("s1", "Cortex-A53")]) == 0.20  # without s1, a beats b (20 % vs 30 %)
    assert abs(nested[("s2", "Cortex-A55")]) == 0.30  # without s2, b still wins (1 % vs 20 %)
    band = selection.band(CellKind("Cortex-A53", 1, "fp32", "ncnn"))
    assert band.mape_pct == 20.0  # the nested default's error, not the picked kind's own 1 %
    assert DefaultSelection(("a",), {"a": a}).nested_rows == tuple(sorted(a, key=lambda r: (r.device, r.model)))


def test_a_band_replaces_the_cells_figure_and_bounds() -> None:
    cell = LatencyPrediction(100.0, "estimator:v3 tflite (Cortex-A53@2.0GHz)", 1, "Cortex-A53", 2.0, "tflite",
                             uncertainty="old", uncertainty_pct=30.0, latency_low_ms=70.0, latency_high_ms=130.0)
    data = rows(0.10, "s1", "Cortex-A53", runtime="tflite")
    band = held_out_error(data, CellKind("Cortex-A53", 1, "fp32", "tflite"))
    got = with_band(cell, band)
    assert (got.latency_low_ms, got.latency_high_ms, got.uncertainty_pct) == (90.0, 110.0, 10.0)
    assert got.uncertainty == band.text() and with_band(cell, None) is cell


def test_the_estimator_ships_its_nested_rows_and_states_from_them() -> None:
    unc = json.loads(DEFAULT_PARAMS.read_text())["uncertainty"]
    est = Estimator.load()
    assert unc["folds"] == "soc" and len(est.held_out_rows) == len(unc["held_out_rows"]) > 300
    assert {r.arithmetic for r in est.held_out_rows} <= {"fp32", "fp16", "int8"}
    fig = est.uncertainty_figure("Cortex-A53", "ncnn", 1, "fp32")
    mine = [r for r in est.held_out_rows if (r.core, r.threads, r.arithmetic, r.runtime) == ("Cortex-A53", 1, "fp32",
                                                                                             "ncnn")]
    assert fig.rows == len(mine) and fig.mape_pct == pytest.approx(100 * sum(abs(r.error) for r in mine) / len(mine),
                                                                   abs=0.05)


def test_the_band_is_a_finite_sample_p90_pooled_to_twenty_rows_widened_and_checked_on_held_out_socs() -> None:
    """Issue 44: per kind the MAPE and the 90 % band (p90 of |error|), each with rows and SoCs;
    fewer than MIN_BAND_ROWS rows pool (said) and never narrower than the kind's own rows."""
    from lodevem.latency.selection import MIN_BAND_ROWS, p90

    assert p90([0.01 * i for i in range(1, 11)]) == pytest.approx(10.0)  # n = 10: the largest (k = 10)
    assert p90([0.01 * i for i in range(1, 101)]) == pytest.approx(91.0)  # ceil(0.9 * 101) = 91
    own = [HeldOutRow("b", f"s{i % 2}", "Cortex-A55", 1, "fp32", "ncnn", f"m{i}", 0.5) for i in range(8)]
    family = [HeldOutRow("c", f"t{i % 4}", "Cortex-A53", 1, "fp32", "ncnn", f"m{i}", 0.1) for i in range(100)]
    fig = held_out_error(own + family, CellKind("Cortex-A55", 1, "fp32", "ncnn"))
    assert (fig.mape_pct, fig.rows, fig.socs, fig.scope) == (50.0, 8, 2, "Cortex-A55")
    assert fig.p90_rows == 108 >= MIN_BAND_ROWS and fig.p90_socs == 6 and fig.p90_scope == "in-order ARMv8 cores"
    assert fig.widened and fig.p90_pct == pytest.approx(50.0) == fig.band_pct  # the pool's p90 is 10 %
    assert "90% band ±50.0% (108 rows, 6 SoCs, in-order ARMv8 cores, widened" in fig.text()
    a53 = held_out_error(family, CellKind("Cortex-A53", 1, "fp32", "ncnn"))
    assert a53.p90_pct == pytest.approx(10.0) and a53.coverage_pct == 100.0 and not a53.widened


def test_coverage_counts_rows_outside_the_band_their_soc_never_shaped() -> None:
    rows_ = [HeldOutRow("b", f"s{i}", "Cortex-A53", 1, "fp32", "ncnn", f"m{j}", 0.1 if i else 0.9)
             for i in range(5) for j in range(6)]
    fig = held_out_error(rows_, CellKind("Cortex-A53", 1, "fp32", "ncnn"))
    assert fig.coverage_pct == pytest.approx(80.0)  # s0's 0.9 errors lie outside the others' 10 % band
