"""The one reader of the predictors' SoC-fold errors (what ``--predictor auto`` compares)."""

from __future__ import annotations

import json

from lodevem.latency.fold_errors import FoldedPredictor, lower_error_predictor, soc_fold_error


def _stored(predictor: FoldedPredictor, core, threads: str, precision: str, runtime) -> dict:
    kinds = json.loads(predictor.params_path.read_text())["uncertainty"]["per_kind"]
    return next(k for k in kinds if (k["core"], k["threads"], k["precision"], k["runtime"])
                == (core, threads, precision, runtime))


def test_both_params_files_state_soc_fold_errors_per_kind() -> None:
    for predictor in FoldedPredictor:
        assert json.loads(predictor.params_path.read_text())["uncertainty"]["folds"] == "soc"
        fig = soc_fold_error(predictor, "Cortex-A53", 1, "fp32", "ncnn")
        stored = _stored(predictor, "Cortex-A53", "1", "fp32", "ncnn")
        assert fig is not None and (fig.core, fig.rows, fig.mape_pct) == ("Cortex-A53", stored["rows"], stored["mape_pct"])


def test_a_kind_with_few_rows_states_the_pooled_figure() -> None:
    # 4 rows of the A7 under tflite: too few; the pooled multi-thread fp32 tflite figure instead
    fig = soc_fold_error(FoldedPredictor.ESTIMATOR, "Cortex-A7", 4, "fp32", "tflite")
    assert fig is not None and fig.core is None and fig.rows >= 8
    assert fig.mape_pct == _stored(FoldedPredictor.ESTIMATOR, None, "multi", "fp32", "tflite")["mape_pct"]


def test_lower_error_predictor_picks_the_smaller_figure() -> None:
    for cell in (("Cortex-A53", 1, "fp32", "ncnn"), ("Cortex-A72", 1, "fp32", "ncnn"), ("Cortex-A55", 4, "int8", "ncnn")):
        winner, figs = lower_error_predictor(*cell)
        known = {p: f.mape_pct for p, f in figs.items() if f is not None}
        assert winner is not None and known[winner] == min(known.values()), (cell, figs)
    assert lower_error_predictor("Cortex-A53", 1, "fp32", "ncnn", candidates=(FoldedPredictor.ESTIMATOR,))[0] \
        is FoldedPredictor.ESTIMATOR
