"""One statement of uncertainty (issue 46): every output words a held-out figure with its basis
through ``latency.statement``, from the record ``latency.selection`` computes; no other figure."""

from __future__ import annotations

from helpers import row_of, with_columns

from lodevem.latency.records import LatencyPrediction
from lodevem.latency.selection import MIN_KIND_ROWS, CellKind, HeldOutError, HeldOutRow, held_out_error
from lodevem.latency.statement import BAND_DEFINITION, OPT_IN_REASON, basis_text, not_default, statement, with_figure
from lodevem.report.legend import mark_notes, row_cell


def _rows(n: int, core: str, socs: int, error: float = 0.2) -> list[HeldOutRow]:
    return [HeldOutRow(f"board{i}", f"soc{i % socs}", core, 1, "fp32", "tflite", f"m{i}", error) for i in range(n)]


def test_a_figure_names_its_rows_and_the_pool_it_borrowed() -> None:
    own = held_out_error(_rows(MIN_KIND_ROWS, "Cortex-A53", 3), CellKind("Cortex-A53", 1, "fp32", "tflite"))
    assert own is not None and statement(own).startswith(
        f"\u00b120.0% held-out (leave-one-SoC-out) error of 1-thread fp32 tflite cells ({MIN_KIND_ROWS} held-out "
        "rows from 3 SoCs on Cortex-A53); 90 % band \u00b1")
    # the 90 % band rests on at least 20 rows: fewer of the kind's own, it borrows a wider pool and says so
    assert "pooled over all cores and runtimes" in statement(own)
    # too few rows of the A55's own: the figure is the family's, and it says so
    few = _rows(1, "Cortex-A55", 1) + _rows(MIN_KIND_ROWS, "Cortex-A53", 3, 0.1)
    pooled = held_out_error(few, CellKind("Cortex-A55", 1, "fp32", "tflite"))
    assert pooled is not None and "pooled over in-order ARMv8 cores" in statement(pooled)
    assert f"fewer than {MIN_KIND_ROWS} held-out rows" in BAND_DEFINITION and "leave-one-SoC-out" in BAND_DEFINITION
    # a record that knows its SoCs (latency.selection may add them) is stated with them
    assert basis_text(27, 5, "Cortex-A53") == "27 held-out rows from 5 SoCs on Cortex-A53"


def test_a_cell_carries_the_figure_and_its_basis_into_the_row_and_the_legend() -> None:
    err = HeldOutError(31.0, 8, "all cores", "1-thread fp32 tflite")
    cell = with_figure(LatencyPrediction(10.0, "estimator", 1, "Cortex-A53", 1.8, "tflite", kind="estimator"), err)
    assert (cell.uncertainty_pct, cell.held_out_rows, cell.held_out_pool) == (31.0, 8, "all cores")
    assert cell.latency_low_ms is not None and abs(cell.latency_low_ms - 6.9) < 1e-9
    assert cell.uncertainty == statement(err)
    row = row_of(model_label="m.pt", model_path="m.pt", model_sha256="0" * 64, level=None, model_format="x",
                     model_file_mb=1.0, params=1, profile_id="p", profile_label="P", tier="tier2", chipset="c",
                     ram_mb=512, core="Cortex-A53", clock_ghz=1.8, threads=1, latency_ms=10.0, latency_source="e",
                     latency_uncertainty=cell.uncertainty, latency_note=None, verdict="fits", peak_rss_mb=40.0,
                     runtime_baseline_mb=30.0, model_increment_mb=10.0, cgroup_peak_mb=None, limit_mb=512,
                     limit_enforcement="docker", backend="docker", runtime="tflite", memory_error=None,
                     memory_cached=False, latency_kind="estimator", latency_runtime="tflite", latency_held_out_pct=31.0,
                     latency_held_out_rows=8, latency_held_out_pool="all cores")
    (note,) = mark_notes([row_cell(row)])
    assert note.text() == "* offline estimator: \u00b131.0% (Cortex-A53, fp32: 8 held-out rows, pooled over all cores)"
    assert row.to_dict()["latency_held_out_rows"] == 8  # the CSV/JSON carry the basis as facts
    # a row without a recorded basis (an older results file) keeps its figure, no invented basis
    (old,) = mark_notes([row_cell(with_columns(row, latency_held_out_rows=None, latency_held_out_pool=None))])
    assert old.text() == "* offline estimator: \u00b131.0% (Cortex-A53, fp32)"


def test_an_opt_in_kind_says_why_it_is_not_the_default() -> None:
    default = HeldOutError(31.0, 8, "all cores", "1-thread fp32 tflite")
    why = not_default("armsim emulated core", OPT_IN_REASON, default)
    assert why.startswith("armsim emulated core is opt-in, not the default: it needs what not every install has")
    assert "the default for this kind of cell states \u00b131.0% (8 held-out rows, pooled over all cores)" in why
    own = HeldOutError(25.0, 58, "all cores and runtimes", "1-thread fp32")
    cell = with_figure(LatencyPrediction(10.0, "armsim", 1, "Cortex-A53", 1.8, "tflite", kind="armsim"), own, why)
    assert cell.uncertainty == f"{statement(own)}; {why}" and cell.uncertainty_pct == 25.0


def test_a_record_with_a_90_percent_band_states_it_with_its_own_basis() -> None:
    """latency.selection's record may carry SoCs and a 90 % band pooled on its own (issue 44): the
    statement says both bases; a record without them says neither (read with fallbacks)."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class WithBand(HeldOutError):
        socs: int = 0
        p90_pct: float | None = None
        p90_rows: int = 0
        p90_socs: int = 0
        p90_scope: str = ""
        widened: bool = False
        coverage_pct: float | None = None

    err = WithBand(9.1, 27, "Cortex-A53", "1-thread fp32 ncnn", socs=5, p90_pct=24.0, p90_rows=41, p90_socs=7,
                   p90_scope="in-order ARMv8 cores", widened=True, coverage_pct=88.0)
    assert statement(err) == (
        "\u00b19.1% held-out (leave-one-SoC-out) error of 1-thread fp32 ncnn cells (27 held-out rows from 5 SoCs on "
        "Cortex-A53); 90 % band \u00b124.0% (41 held-out rows from 7 SoCs, pooled over in-order ARMv8 cores, widened "
        "to its own core's rows; 88 % of held-out SoCs' rows inside it)")
    assert "90 %" not in statement(HeldOutError(9.1, 27, "Cortex-A53", "1-thread fp32 ncnn"))
