"""``lodevem start``: the whole pipeline, every model file on every chosen device profile; and
``lodevem report``: its results folder as one page again."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import click

from . import TERMINAL, finish
from .options import (
    backend_option,
    calibrations_option,
    device_options,
    eval_data_options,
    input_shape_option,
    latency_runtime_option,
    model_code_options,
    nnmeter_data_option,
    parse_finite,
    parse_levels_option,
    predictor_option,
    profile_options,
    profiles_dir_option,
    runtime_option,
    slurm_options,
    threads_option,
    tier_choice,
    timeout_option,
    uncalibrated_option,
    verbose_option,
)


@click.command()
@click.argument("models", nargs=-1, type=click.Path(path_type=Path))
@click.option("--model", "extra_models", multiple=True, type=click.Path(path_type=Path),
              help="A model file (repeatable); same as a positional MODEL.")
@profile_options
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(0, 10_000),
              help="Untimed passes before the timed ones.")
@click.option("--runs", default=50, show_default=True, type=click.IntRange(1, 100_000),
              help="Timed passes in the memory measurement.")
@click.option("--output", "output", default=Path("results"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder for CSV, JSON, LaTeX, plots.")
@backend_option
@runtime_option
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Measurements run at once (with --backend slurm: jobs in flight). Default: CPU "
              "cores (each then uses 1 thread).")
@threads_option
@predictor_option
@latency_runtime_option
@nnmeter_data_option
@input_shape_option
@timeout_option
@model_code_options
@click.option("--find-floor", is_flag=True, help="Also bisect the smallest RAM limit each model runs in.")
@click.option("--levels", callback=parse_levels_option, default=None, metavar="LEVELS",
              help="Derive compression variants in the sandbox: any of fp32,fp16,int8,int8-static,pruned or 'all'.")
@eval_data_options
@click.option("--no-infer", "infer", is_flag=True, flag_value=False, default=True,
              help="Measure every RAM limit; by default a limit far above the largest limit's measured peak "
              "gets its row from that run (limit_enforcement says so; docs/measurement.md).")
@click.option("--no-cache", is_flag=True, help="Export, predict and measure again even when a cached result "
              "matches (the caches in --output/.cache are refreshed).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in the same --output folder "
              "(with --backend slurm: reattach to its jobs still running and collect finished ones).")
@click.option("--max-latency", type=click.FloatRange(0, min_open=True), default=None, metavar="MS",
              callback=parse_finite, help="Gate: exit 3 when a predicted latency exceeds MS.")
@click.option("--fail-on-oom", is_flag=True, help="Gate: exit 3 when a model does not run within a device's RAM.")
@click.option("--fail-on-tight", is_flag=True, help="Gate: exit 3 also when a model's peak RAM is above a device's "
              "app budget (verdict tight: the phone's low-memory killer would likely stop it).")
@click.option("--overwrite", is_flag=True, help="Replace the results of another run in --output (default: refuse).")
@click.option("--on", "gate_tiers", multiple=True, type=tier_choice,
              help="Apply the gates only to these tiers (repeatable).")
@calibrations_option
@uncalibrated_option
@click.option("--latex-marks", default="text", show_default=True, type=click.Choice(["text", "ding"]),
              help="Fits column in the .tex: yes/no, or \\ding{51}/\\ding{55} (needs pifont).")
@verbose_option
@slurm_options
@device_options
@profiles_dir_option
def start(models: tuple[Path, ...], extra_models: tuple[Path, ...], profile_ids: tuple[str, ...],
          tiers: tuple[str, ...], profiles_dirs: tuple[Path, ...], max_latency: Optional[float],
          fail_on_oom: bool, fail_on_tight: bool, gate_tiers: tuple[str, ...], latex_marks: str, verbose: bool,
          **options: Any) -> None:
    """Benchmark model files on device profiles: predicted latency, measured peak RAM.

    With --device adb:SERIAL, every model is also measured on that phone (one measured row each).

    Example:

        lodevem start models/*.pt --tier tier2
    """
    from ..gates import Budget
    from ..runner import RunConfig
    from ..runner import start as run_start

    paths = models + extra_models
    if not paths:
        raise click.UsageError("no model files given: lodevem start MODEL [MODEL ...] (or --model PATH)")
    config = RunConfig.from_options(paths, profile_ids, tiers, profiles_dirs, command_line=sys.argv, **options)
    budget = Budget(max_latency, fail_on_oom, gate_tiers, fail_on_tight=fail_on_tight)
    with TERMINAL.progress() as progress:
        result = run_start(config, budget, latex_marks, progress)
    TERMINAL.start(result, verbose=verbose)
    finish(result)


@click.command("report")
@click.argument("results_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="RESULTS_DIR...")
@click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write every output file (CSV, JSON, .tex, methods, figures, report.html) of the folders' rows "
              "here, as one table; needed for several folders (their settings must agree).")
def report_cmd(results_dirs: tuple[Path, ...], output: Optional[Path]) -> None:
    """Rebuild report.html in a results folder from its benchmark_results.json, or combine
    several folders of runs with the same settings into one table (--output).

    One self-contained page (no network: table, figures, methods and manifest inline) that
    sorts and filters in any browser; `start` writes it too. Folders whose settings differ
    (device profiles, passes, runtime, threads, predictor, input, backend, calibration or
    evaluation data) are refused in one line naming what differs (exit 2).

    Example:

        lodevem report results/fp32 results/int8 --output results/all
    """
    from ..runner import report_folders

    TERMINAL.wrote(report_folders(results_dirs, output))
