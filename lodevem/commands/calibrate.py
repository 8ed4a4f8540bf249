"""``lodevem calibrate``: make a profile yours with latencies measured on the real device."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..latency.calibration import MEASURED_RUNTIMES
from . import TERMINAL
from .legacy import CalibrateGroup
from .options import (
    backend_option,
    calibrations_option,
    device_options,
    input_shape_option,
    model_code_options,
    profiles_dir_option,
    timeout_option,
)


@click.group(cls=CalibrateGroup)
def calibrate() -> None:
    """Make a profile yours: record a model's latency measured on the real device.

    A record holds a model's measured milliseconds on a profile's device beside lodevem's
    prediction for it; from then on start and predict scale that profile's latencies: one
    measurement gives one factor (measured / predicted), three or more separate factors for the
    compute- and the memory-bound parts of each prediction. Works for custom profiles
    (--profiles-dir): copy the template, measure one model on your phone, calibrate; or let
    `calibrate adb` measure on a phone over adb.

    \b
    Example:
        lodevem calibrate add jiophone2 mobilenet_v2=412.5 --runtime tflite
        lodevem calibrate from-log benchncnn.txt my_phone --profiles-dir phones/
        lodevem calibrate adb nokia_c1 --device adb:0123456789ABCDEF \\
            --benchmark-binary ./benchmark_model
        lodevem calibrate list
        lodevem calibrate remove jiophone2--20261201155000--0a1b2c3d4e5f
    """


def measurement_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What ``calibrate add`` and ``calibrate from-log`` share: how the measurement was made and
    how lodevem exports and predicts the models for the record."""
    for option in reversed([
        click.option("--note", default="", help="Free-text note kept in the record (board, firmware, governor...)."),
        click.option("--same-chipset", is_flag=True, help="The new records also calibrate every profile with the "
                     "same chipset and core (e.g. jiophone2 -> nokia_2720_flip, both Snapdragon 205); without it "
                     "such profiles stay uncalibrated, with a note."),
        calibrations_option, input_shape_option, backend_option, timeout_option, model_code_options,
        profiles_dir_option,
    ]):
        fn = option(fn)  # type: ignore[assignment, arg-type]  # click decorators of mixed types in one list
    return fn


@calibrate.command("add")
@click.argument("profile_id")
@click.argument("measurements", nargs=-1, metavar="MODEL=MS...")
@click.option("--runtime", type=click.Choice(list(MEASURED_RUNTIMES)), default=None,
              help="Runtime the device measurement was made with (required).")
@click.option("--threads", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Threads the device measurement used.")
@measurement_options
def calibrate_add(profile_id: str, measurements: tuple[str, ...], runtime: Optional[str], threads: int, note: str,
                  same_chipset: bool, calibrations: Optional[Path], input_shape: Optional[tuple[int, ...]],
                  backend: str, timeout_s: float, profiles_dirs: tuple[Path, ...], loading: Any) -> None:
    """Record MODEL=MS measurements made on PROFILE_ID's device.

    MODEL is a model file (its sha256 is recorded; exported in the sandbox) or a zoo model name;
    MS its measured milliseconds.

    \b
    Example:
        lodevem calibrate add jiophone2 mobilenet_v2=412.5 --runtime tflite \\
            --note "stock governor"
    """
    from ..predict.calibrate import add_from_args

    outcome = add_from_args(profile_id, measurements, runtime, threads, note, same_chipset, calibrations=calibrations,
                            profiles_dirs=profiles_dirs, busy=TERMINAL.status, input_shape=input_shape,
                            backend=backend, timeout_s=timeout_s, loading=loading)
    TERMINAL.calibration(outcome, same_chipset)


@calibrate.command("from-log")
@click.argument("log_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="LOG")
@click.argument("profile_id")
@click.argument("models", nargs=-1, metavar="[MODEL[=ENTRY]...]")
@click.option("--runtime", type=click.Choice(list(MEASURED_RUNTIMES)), default=None,
              help="Runtime the device measurement was made with. Default: the log's tool's (it must agree).")
@click.option("--threads", type=click.IntRange(1, 16), default=None,
              help="Threads the device measurement used. Default: the log's (num_threads), else 1.")
@measurement_options
def calibrate_from_log(log_file: Path, profile_id: str, models: tuple[str, ...], runtime: Optional[str],
                       threads: Optional[int], note: str, same_chipset: bool, calibrations: Optional[Path],
                       input_shape: Optional[tuple[int, ...]], backend: str, timeout_s: float,
                       profiles_dirs: tuple[Path, ...], loading: Any) -> None:
    """Record the times of a device benchmark LOG for PROFILE_ID.

    LOG is a TFLite/LiteRT benchmark_model log (Inference (avg); one MODEL per run in it, in
    order) or an ncnn benchncnn log (avg per model: MODEL found by its zoo name or file stem,
    MODEL=ENTRY names the log's entry; no MODEL takes every entry that is a zoo model).

    \b
    Example:
        lodevem calibrate from-log benchncnn.txt my_phone --profiles-dir phones/
    """
    from ..predict.calibrate import add_from_log

    outcome = add_from_log(log_file, profile_id, models, runtime, threads, note, same_chipset,
                           calibrations=calibrations, profiles_dirs=profiles_dirs, busy=TERMINAL.status,
                           input_shape=input_shape, backend=backend, timeout_s=timeout_s, loading=loading)
    TERMINAL.calibration(outcome, same_chipset)


@calibrate.command("adb")
@click.argument("profile_id")
@device_options
@click.option("--model", "models", multiple=True, metavar="ZOO_NAME",
              help="A zoo model to measure (repeatable). Default: mobilenet_v2, mobilenet_v3_small, squeezenet1_1.")
@click.option("--threads", type=click.IntRange(1, 16), default=1, show_default=True, help="Threads on the phone.")
@click.option("--warmup", type=click.IntRange(0, 10_000), default=5, show_default=True,
              help="Untimed runs before the timed ones.")
@click.option("--runs", type=click.IntRange(1, 100_000), default=50, show_default=True, help="Timed runs per model.")
@click.option("--note", default="", help="Free-text note kept in the records (default: the phone and its SoC).")
@calibrations_option
@backend_option
@timeout_option
@profiles_dir_option
def calibrate_adb(profile_id: str, device: Optional[str], benchmark_binary: Optional[Path], models: tuple[str, ...],
                  threads: int, warmup: int, runs: int, note: str, calibrations: Optional[Path], backend: str,
                  timeout_s: float, profiles_dirs: tuple[Path, ...]) -> None:
    """Measure a few zoo models on a phone over adb and calibrate PROFILE_ID (and every profile
    with its chipset) from them.

    Each model is converted to .tflite as start does, pushed with LiteRT's benchmark_model
    (--benchmark-binary, for the phone's ABI), timed on the phone and removed; three or more give
    separate compute- and memory-bound factors. --device adb:SERIAL: default, the one phone adb
    lists. docs/device.md.

    \b
    Example:
        lodevem device profile 0123456789ABCDEF --output phones/
        lodevem calibrate adb phone_nokia_c1 --device adb:0123456789ABCDEF \\
            --benchmark-binary ./benchmark_model --profiles-dir phones/
    """
    from ..device import parse_device_option
    from ..predict.phone import calibrate_from_phone

    serial = parse_device_option(device) if device else None
    outcome = calibrate_from_phone(serial, profile_id, benchmark_binary, models=models, threads=threads,
                                   warmup=warmup, runs=runs, note=note, calibrations=calibrations,
                                   profiles_dirs=profiles_dirs, busy=TERMINAL.status, backend=backend,
                                   timeout_s=timeout_s)
    TERMINAL.calibration(outcome, True)


@calibrate.command("list")
@click.argument("profile_id", required=False)
@calibrations_option
@profiles_dir_option
def calibrate_list(profile_id: Optional[str], calibrations: Optional[Path], profiles_dirs: tuple[Path, ...]) -> None:
    """Show the calibration records (of PROFILE_ID, if given) with their IDs and files.

    Example:

        lodevem calibrate list jiophone2
    """
    from ..predict.calibrate import list_records

    TERMINAL.calibration_records(list_records(profile_id, calibrations, profiles_dirs))


@calibrate.command("remove")
@click.argument("target", metavar="ID|PROFILE_ID")
@calibrations_option
def calibrate_remove(target: str, calibrations: Optional[Path]) -> None:
    """Delete one record (its ID, as `calibrate list` shows it) or every record of a profile.

    Example:

        lodevem calibrate remove jiophone2--20261201155000--0a1b2c3d4e5f
    """
    from ..predict.calibrate import remove

    TERMINAL.removed(*remove(target, calibrations))
