"""``lodevem predict``: latency only, no memory run and no results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from . import TERMINAL, finish
from .options import (
    backend_option,
    calibrations_option,
    device_options,
    input_shape_option,
    latency_runtime_option,
    model_code_options,
    nnmeter_data_option,
    predictor_option,
    profile_options,
    profiles_dir_option,
    threads_option,
    timeout_option,
    uncalibrated_option,
    verbose_option,
)


@click.command()
@click.argument("models", nargs=-1, metavar="MODEL...")
@profile_options
@threads_option
@latency_runtime_option
@predictor_option
@nnmeter_data_option
@input_shape_option
@backend_option
@timeout_option
@model_code_options
@calibrations_option
@uncalibrated_option
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON instead of a table.")
@click.option("--layers", is_flag=True, help="Also print where the time goes: a summary by node type per "
              "(model, profile), shaped like LiteRT's benchmark_model --enable_op_profiling.")
@click.option("--layers-csv", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the per-node-type summaries to this CSV (implies --layers).")
@verbose_option
@device_options
@profiles_dir_option
def predict(models: tuple[str, ...], profile_ids: tuple[str, ...], tiers: tuple[str, ...], threads: int,
            latency_runtime: Optional[str], predictor: str, nnmeter_data: Optional[Path],
            input_shape: Optional[tuple[int, ...]], backend: str, timeout_s: float, calibrations: Optional[Path],
            uncalibrated: bool, as_json: bool, layers: bool, layers_csv: Optional[Path], verbose: bool,
            profiles_dirs: tuple[Path, ...], loading: Any, device: Optional[str],
            benchmark_binary: Optional[Path]) -> None:
    """Predict latency only: no memory run, no results folder.

    MODEL is a model file (exported to ONNX in the sandbox, like start; the export is cached in
    $XDG_CACHE_HOME/lodevem/onnx) or a zoo model name (see `lodevem zoo`). Latencies of a
    profile with calibration records (lodevem calibrate) are scaled to the device.

    With --device adb:SERIAL each model is also measured on that phone (5 warm-up, 50 timed runs
    of the runtime's own benchmark binary): one measured cell each, on the phone's own profile.

    Example:

        lodevem predict models/mobilenet_v2.pt resnet18 --tier tier3
    """
    from ..predict.batch import predict_models

    with TERMINAL.status("exporting and predicting"):
        report = predict_models(models, profile_ids, tiers, threads=threads, runtime=latency_runtime,
                                input_shape=input_shape, predictor=predictor, nnmeter_data=nnmeter_data,
                                calibrations=calibrations, use_calibrations=not uncalibrated,
                                profiles_dir=profiles_dirs, backend=backend, timeout_s=timeout_s, loading=loading,
                                device=device, benchmark_binary=benchmark_binary,
                                breakdown=layers or layers_csv is not None, layers_csv=layers_csv)
    TERMINAL.warn(report.warnings)
    TERMINAL.predictions(report.items, as_json, verbose=verbose, layers=layers or layers_csv is not None)
    finish(report)
