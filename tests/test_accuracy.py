"""Accuracy beside latency and RAM on real data (issue 30), against the REAL Docker engine.

The data is scikit-learn's ``load_digits`` (1,797 real 8x8 handwritten digits) and the model a small
CNN trained on 1,200 of them in the session (``tests/digits.py``); the other 597 are the
``--eval-data``. Every figure is computed in the sandbox under the row's runtime and compared with a
plain torch evaluation done here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from lodevem.profiles import load_profiles, select_profiles
from lodevem.reporter import write_all
from lodevem.runner import RunConfig, run_benchmark

pytestmark = pytest.mark.docker


@pytest.fixture(scope="session")
def digits(digits_files) -> tuple[Path, Path, float]:
    """(cnn.pt, digits.npz, its top-1 in % by a plain torch evaluation, one sample at a time);
    the 1,200 training samples are ``train.npz`` beside them (the fine-tuning data)."""
    return digits_files.pickled, digits_files.npz, digits_files.plain_top1


def _config(model: Path, data: Path, out: Path, runtime: str, levels: tuple[str, ...], **more) -> RunConfig:
    profiles = tuple(select_profiles(load_profiles(), ids=["nokia_8110_4g"]))
    return RunConfig.of(models=(model,), profiles=profiles, warmup=0, runs=1, output=out, backend="docker",
                     runtime=runtime, jobs=1, predictor="estimator", timeout_s=300, levels=levels, eval_data=data,
                     **more)


def test_accuracy_of_every_row_under_its_runtime_reaches_every_output(app_backend, digits, tmp_path: Path) -> None:
    model, data, plain = digits
    out = tmp_path / "out"
    config = _config(model, data, out, "torch,tflite,ncnn", ("fp32", "pruned"))
    outcome = run_benchmark(config, backend=app_backend)
    written = write_all(outcome.rows, config.profiles, outcome.manifest, out)  # as `lodevem start` does
    rows = {(r.model.level or "fp32", r.memory.runtime): r for r in outcome.rows}
    assert set(rows) == {(lvl, rt) for lvl in ("fp32", "pruned") for rt in ("torch", "tflite", "ncnn")}
    fp32 = rows[("fp32", "torch")]
    assert fp32.accuracy.top1_pct == round(plain, 2) and fp32.accuracy.samples == 597  # exactly the plain figure
    assert fp32.accuracy.drop_pts == 0.0 and fp32.accuracy.top5_pct is not None
    for runtime in ("tflite", "ncnn"):  # the .tflite under LiteRT, the ncnn model under ncnn
        row = rows[("fp32", runtime)]
        assert row.accuracy.top1_pct is not None, row.accuracy.note
        assert abs(row.accuracy.top1_pct - fp32.accuracy.top1_pct) <= 2.0
    for runtime in ("torch", "tflite", "ncnn"):  # 50 % of the channels gone, no fine-tuning: worse
        pruned = rows[("pruned", runtime)]
        assert pruned.accuracy.top1_pct is not None, pruned.accuracy.note
        assert pruned.accuracy.top1_pct < rows[("fp32", runtime)].accuracy.top1_pct
        assert pruned.accuracy.drop_pts == round(rows[("fp32", runtime)].accuracy.top1_pct
                                                 - pruned.accuracy.top1_pct, 2)
        assert "without fine-tuning" in (pruned.accuracy.note or "")
        assert pruned.memory.peak_rss_mb is not None and pruned.latency.ms is not None  # the trade-off's other half
    # every output carries it
    with open(out / "benchmark_results.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert {r["accuracy_top1_pct"] for r in table} == {str(r.accuracy.top1_pct) for r in outcome.rows}
    assert all(r["accuracy_drop_pts"] != "" for r in table)
    payload = json.loads((out / "benchmark_results.json").read_text())
    assert all(r["accuracy_top1_pct"] is not None for r in payload["results"])
    assert "digits.npz" in payload["environment"]["extra"]["evaluation"]
    tex = (out / "benchmark_results.tex").read_text()
    assert "Top-1" in tex and f"{fp32.accuracy.top1_pct:.1f}" in tex
    methods = (out / "methodology.md").read_text()
    assert "## Accuracy" in methods and "597 of 597 samples" in methods
    assert out / "accuracy_tradeoff.png" in written and out / "accuracy_tradeoff.pdf" in written
    # a rerun reads every figure from the store: the same numbers, no evaluation in the sandbox
    again = run_benchmark(_config(model, data, tmp_path / "again", "torch,tflite,ncnn", ("fp32", "pruned")),
                          backend=app_backend)
    assert [r.accuracy.top1_pct for r in again.rows] != [] and all(
        a.accuracy.top1_pct == b.accuracy.top1_pct for a, b in zip(again.rows, outcome.rows))


def test_int8_under_the_app_runtimes_stays_within_two_points(app_backend, digits, tmp_path: Path) -> None:
    """Full-integer int8 under LiteRT and ncnn, made by each runtime's own toolchain from the fp32
    file and calibrated on synthetic inputs: within a couple of points of the fp32 figure."""
    model, data, plain = digits
    outcome = run_benchmark(_config(model, data, tmp_path / "out", "tflite,ncnn", ("int8-static",)),
                            backend=app_backend)
    assert {row.memory.runtime for row in outcome.rows} == {"tflite", "ncnn"}
    for row in outcome.rows:
        assert row.accuracy.top1_pct is not None, row.accuracy.note
        assert row.memory.converted.precision == "int8-static", (row.memory.runtime, row.memory.converted.precision)
        assert abs(row.accuracy.top1_pct - plain) <= 2.0, (row.memory.runtime, row.accuracy.top1_pct, plain)


def test_a_label_outside_the_outputs_is_refused_before_any_memory_run(app_backend, digits, tmp_path: Path) -> None:
    """Issue 46: data that cannot work with the model (a label beyond its outputs) is refused in one
    line naming the file, once the export knows the outputs, before anything is measured."""
    from lodevem.errors import InputError

    model, data, _ = digits
    with np.load(data) as loaded:
        x, y = loaded["inputs"], loaded["labels"].copy()
    y[5] = 12  # the CNN has 10 outputs
    bad = tmp_path / "labels12.npz"
    np.savez(bad, inputs=x, labels=y)
    bad.chmod(0o644)
    with pytest.raises(InputError, match=r"labels12\.npz: label 12 is outside .*10 outputs") as refused:
        run_benchmark(_config(model, bad, tmp_path / "out", "torch", ()), backend=app_backend)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "out" / "benchmark_results.csv").exists()  # nothing measured


def test_fine_tuning_recovers_what_pruning_took(app_backend, digits, tmp_path: Path) -> None:
    """--finetune-data: the pruned level fine-tuned in the sandbox on the training split beats the
    same pruning without it, and comes back near fp32; the methods name the optimizer and lr."""
    model, data, plain = digits
    train = data.with_name("train.npz")
    plain_run = run_benchmark(_config(model, data, tmp_path / "plain", "torch", ("fp32", "pruned")),
                              backend=app_backend)
    tuned_config = _config(model, data, tmp_path / "tuned", "torch", ("fp32", "pruned"), finetune_data=train,
                           finetune_epochs=3)
    tuned_run = run_benchmark(tuned_config, backend=app_backend)
    write_all(tuned_run.rows, tuned_config.profiles, tuned_run.manifest, tmp_path / "tuned", plots=False)
    untuned = {r.model.level: r for r in plain_run.rows}["pruned"]
    tuned = {r.model.level: r for r in tuned_run.rows}["pruned"]
    assert untuned.accuracy.note == "pruned without fine-tuning" and tuned.accuracy.note.startswith("pruned and fine-tuned")
    assert tuned.accuracy.top1_pct > untuned.accuracy.top1_pct, (tuned.accuracy.top1_pct, untuned.accuracy.top1_pct)
    assert tuned.accuracy.drop_pts is not None and tuned.accuracy.drop_pts <= 3.0, tuned.accuracy.drop_pts
    assert tuned.memory.peak_rss_mb is not None and tuned.latency.ms is not None
    methods = (tmp_path / "tuned" / "methodology.md").read_text()
    assert "fine-tuned after pruning" in methods and "lr 0.01" in methods and "train.npz" in methods
