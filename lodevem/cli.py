"""The ``lodevem`` command line: options in, one library call, results out.

Only this module turns lodevem's own exceptions into exit codes (see ``EXIT_CODES``); the
library never prints and never exits, so it stays usable from notebooks and tests.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import click
from rich.console import Console
from rich.markup import escape

from . import __version__
from .errors import InputError, Interrupted, LodevemError
from .latency.calibration import MEASURED_RUNTIMES
from .latency.pool import MODES
from .profiles import TIERS, load_profiles, select_profiles
from .safe_io import ENTRY_CHARS, json_text, printable
from .sandbox.image import DEFAULT_DEBIAN_MIRROR
from .worker.registry import DEFAULT_LATENCY_RUNTIME, RUNTIMES, latency_runtimes

EXIT_CODES = {
    0: "success (and every budget gate passed)",
    1: "runtime failure (Docker, a worker crash, an I/O error)",
    2: "usage error or bad input (option, profile file, model file)",
    3: "a budget gate broke (--max-latency / --fail-on-oom / --fail-on-tight)",
    130: "interrupted (Ctrl-C); the pairs finished so far are kept (start --resume continues)",
    143: "terminated (SIGTERM); the pairs finished so far are kept (start --resume continues)",
}

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def _output_width() -> Optional[int]:
    """$COLUMNS, else the terminal's (None: rich asks the terminal), else 120: rich assumes 80
    columns when stdout is not a terminal, and results tables piped into a file or a CI log
    read better wider. Read on every command, not at import, so a caller that sets $COLUMNS
    (a test, a script) gets that width."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else 120


class LodevemClickError(click.ClickException):
    """A ``LodevemError`` shown as ``Error: <one line>`` with the error's own exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class; ours is per error


class LodevemGroup(click.Group):
    """Click group that maps library errors and Ctrl-C to lodevem's documented exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        console.width = _output_width()  # type: ignore[assignment]  # None: the terminal's own width
        try:
            with _signals_unwind():
                return super().invoke(ctx)
        except LodevemError as exc:  # may quote a record, a log or a model's message: escaped, capped
            raise LodevemClickError(printable(exc, newlines=False), exc.exit_code) from None
        except OSError as exc:  # the file system said no (read-only, full, permissions): name the path
            where = f"{exc.filename}: " if exc.filename else ""
            raise LodevemClickError(f"{where}{exc.strerror or exc}", 1) from None
        except KeyboardInterrupt as exc:  # a command that saves partial results says what (see start)
            stopped = exc if isinstance(exc, Interrupted) else Interrupted.from_interrupt(
                exc, Interrupted.NOTHING_SAVED)
            # the cleanup is done and the process is about to exit: a further Ctrl-C must not turn
            # the documented exit code into a kill by SIGINT (an uncaught KeyboardInterrupt)
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_IGN)
            err_console.print("[yellow]Interrupted.[/] " + escape(stopped.note), markup=True, highlight=False)
            ctx.exit(128 + stopped.signum)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM unwind as ``Interrupted``, so the same cleanup runs
    (containers removed, scratch folders deleted, partial results kept); any later signal is
    ignored until the block is left, so a second Ctrl-C cannot cut the cleanup short. Signal
    handlers belong to the process: only the entry point installs them, from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = (signal.SIGINT, signal.SIGTERM)

    def interrupt(signum: int, frame: Any) -> None:
        for other in caught:
            signal.signal(other, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _shape(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[tuple[int, ...]]:
    if value is None:
        return None
    try:
        dims = tuple(int(v) for v in value.replace("x", ",").split(","))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise click.BadParameter(f"expected comma-separated positive integers like 1,3,224,224, got {value!r}")
    return dims


def _finite(ctx: click.Context, param: click.Parameter, value: Optional[float]) -> Optional[float]:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of milliseconds, got {value}")
    return value


def _levels(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> tuple[str, ...]:
    from .levels import parse_levels

    if not value:
        return ()
    try:
        return parse_levels(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None


# build-image also takes ``armsim``: the emulated-Arm-core latency predictor's image (docs/armsim.md)
IMAGE_RUNTIMES = (*RUNTIMES, "armsim")


def _runtimes(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> tuple[str, ...]:
    """A runtime or a comma list of them, as a tuple (``"torch, tflite"`` -> ``("torch", "tflite")``);
    not given: ``()``, the runtime latencies are predicted for (``RunConfig.resolved_runtimes``)."""
    if value is None:
        return ()
    known = IMAGE_RUNTIMES if ctx.info_name == "build-image" else RUNTIMES
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or repr(value)}: expected one of {', '.join(known)} "
                                 "or a comma list of them")
    return tuple(dict.fromkeys(names))


# Options more than one command takes are declared once, here, so a flag means the same thing
# (name, type, default, help) wherever it appears. An option whose meaning differs between
# commands (check's --backend, fetch-predictors' --timeout) is declared on its command instead,
# with a help text that says how it differs.


def profiles_dir_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--profiles-dir DIR`` (repeatable), shared by every command that reads profiles."""
    return click.option(
        "--profiles-dir",
        "profiles_dirs",
        multiple=True,
        type=click.Path(path_type=Path),
        help="Extra folder of profile YAML files (repeatable), read after the shipped profiles and "
        "the folders in $LODEVEM_PROFILES (':'-separated). A profile ID defined twice is an error.",
    )(fn)


def backend_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--backend auto|docker|process``: where a model file is loaded and run (start, derive)."""
    return click.option(
        "--backend",
        default="auto",
        show_default=True,
        type=click.Choice(["auto", "docker", "process", "slurm"]),
        help="Sandbox the model file is loaded and run in (the file is code). auto and docker: a "
        "locked-down container (auto never falls back to an unsandboxed process); process: a child "
        "process under a memory limit only, no filesystem or network sandbox (with a warning); "
        "slurm: one Slurm job per run, limited by the job's memory cgroup only (see --slurm-workdir).",
    )(fn)


def runtime_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--runtime torch|onnxruntime|tflite|ncnn`` or a comma list (start, build-image); the
    default is the runtime latencies are predicted for, so both figures of a row describe it."""
    return click.option(
        "--runtime",
        "runtimes",
        default=None,
        callback=_runtimes,
        metavar="RUNTIMES",
        help="What runs the model in the memory measurement: tflite (LiteRT, converted with "
        "litert-torch), ncnn (converted with pnnx), torch, onnxruntime (its ONNX export), or a comma "
        "list: one row per runtime. Default: the --latency-runtime (tflite), the runtime a phone app "
        "ships; torch and onnxruntime are comparisons. A level (--levels) is made by the runtime's "
        "own converter. Conversions run in the sandbox's converter image and are cached.",
    )(fn)
def slurm_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--slurm-*``: where ``--backend slurm`` submits its jobs (start)."""
    for option in reversed([
        click.option("--slurm-partition", default=None, metavar="NAME",
                     help="--backend slurm: partition to submit to (default: the cluster's default)."),
        click.option("--slurm-account", default=None, metavar="NAME",
                     help="--backend slurm: account to charge the jobs to."),
        click.option("--slurm-time", type=click.IntRange(1), default=None, metavar="MINUTES",
                     help="--backend slurm: each job's time limit (default: --timeout plus 2 minutes)."),
        click.option("--slurm-workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     metavar="DIR",
                     help="--backend slurm: folder every node sees (shared file system) for the model "
                     "copies, requests, results and submitit logs. Default: OUTPUT/.slurm. The nodes "
                     "need the same lodevem install and python path as this machine. Slurm's client "
                     "commands read $SLURM_CONF (default /etc/slurm/slurm.conf)."),
    ]):
        fn = option(fn)
    return fn


def input_shape_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--input-shape N,C,H,W``: the model's example input (start, derive)."""
    return click.option(
        "--input-shape",
        callback=_shape,
        default=None,
        metavar="N,C,H,W",
        help="Model input shape, also the example input for tracing, calibration and pruning when "
        "deriving levels. Default: recorded in the model, else 1,3,224,224.",
    )(fn)


def timeout_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--timeout S`` per sandbox run (start, derive); fetch-predictors' bounds a download instead."""
    return click.option(
        "--timeout",
        "timeout_s",
        default=600.0,
        show_default=True,
        type=click.FloatRange(1),
        help="Wall-clock seconds allowed for each sandbox run (an ONNX export, a derivation, one "
        "measurement), not for the whole command.",
    )(fn)


def nnmeter_data_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--nnmeter-data DIR``: nn-Meter's predictor data folder (start, fetch-predictors).

    ``$LODEVEM_NNMETER_DATA`` is read in one place, ``latency.nnmeter.default_data_dir``, which
    ``check`` and library callers go through too; so no ``envvar=`` here.
    """
    return click.option(
        "--nnmeter-data",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        metavar="DIR",
        help="Folder of nn-Meter predictor data: DIR/predictor/<name>/ holds fusion_rules.json "
        "and one .pkl per kernel type. Default: $LODEVEM_NNMETER_DATA, else nn-Meter's configured "
        "data_folder, else ~/.nn_meter/data. The .pkl files are loaded through an allow-list of "
        "scikit-learn/numpy classes; anything else is refused.",
    )(fn)


def threads_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--threads N`` the latency is predicted for (start, predict)."""
    return click.option("--threads", default=1, show_default=True, type=click.IntRange(1, 16),
                        help="Threads for the latency prediction (capped by the cluster's cores).")(fn)


def predictor_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--predictor auto|estimator|nn-meter|armsim`` (start, predict)."""
    return click.option("--predictor", default="auto", show_default=True,
                        # the predictor kinds: the one registry, latency.pool.KINDS
                        type=click.Choice(list(MODES)),
                        help="Latency predictor. auto: the default, the same on every install: chosen per core "
                        "family and runtime among the kinds every install has (the offline estimator today) by "
                        "their nested held-out (leave-one-SoC-out) error (docs/predictors.md). Opt-in: armsim, the "
                        "runtime's own Arm code run on an emulated core, its executed blocks priced by LLVM's "
                        "pipeline model (needs `lodevem build-image --runtime armsim`, docs/armsim.md); nn-meter "
                        "(needs `lodevem fetch-predictors`).")(fn)


def calibrations_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--calibrations DIR`` (start, predict, calibrate).

    ``$LODEVEM_CALIBRATIONS`` is read in one place, ``latency.calibration.default_calibrations_dir``,
    which library callers go through too; so no ``envvar=`` here.
    """
    return click.option(
        "--calibrations",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        metavar="DIR",
        help="Folder of calibration records (lodevem calibrate): a profile with records has its "
        "predicted latencies scaled to the device's measurements. Default: $LODEVEM_CALIBRATIONS, "
        "else $XDG_CONFIG_HOME/lodevem/calibrations (default ~/.config/lodevem/calibrations).",
    )(fn)


def uncalibrated_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--uncalibrated`` (start, predict)."""
    return click.option("--uncalibrated", is_flag=True,
                        help="Ignore the calibration records: the predictor's own figures.")(fn)


def model_code_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--code``, ``--arch``, ``--arch-kwargs``: how the sandbox loads the user's own variants
    (start, derive, predict, calibrate). The command receives them as one ``loading`` (``ModelLoading``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, code: tuple[Path, ...], arch: Optional[str], arch_kwargs: Optional[str],
                **kwargs: Any) -> Any:
        from .sandbox.usercode import ModelLoading

        from_env = [p for p in os.environ.get("LODEVEM_CODE", "").split(os.pathsep) if p]
        return fn(*args, loading=ModelLoading.from_options([*code, *from_env], arch, arch_kwargs), **kwargs)

    wrapper = click.option(
        "--arch-kwargs", default=None, metavar="JSON",
        help="Keyword arguments for --arch as a JSON object, e.g. '{\"width\": 32}'.")(wrapper)
    wrapper = click.option(
        "--arch", default=None, metavar="MODULE:CALLABLE",
        help="For files that hold only weights (a state_dict or a training checkpoint: state_dict, "
        "model_state_dict, model, net, ema... keys; a DataParallel 'module.' prefix is removed): "
        "the callable that builds the module, from --code (cocoa.model:CocoaNet) or zoo:NAME. "
        "Files holding a whole module ignore it.")(wrapper)
    return click.option(
        "--code", multiple=True, type=click.Path(path_type=Path), metavar="PATH",
        help="Your model's code: a package folder or a .py file (repeatable; also $LODEVEM_CODE, "
        "':'-separated). Mounted read-only into the sandbox and put on sys.path before the model "
        "is loaded; classes pickled from __main__ are looked up in the given scripts, imported under "
        "their own names (their __main__ block does not run). The host never imports it.")(wrapper)


tier_choice = click.Choice(list(TIERS))


def eval_data_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--eval-data / --eval-limit: accuracy beside latency and RAM (lodevem.accuracy)."""
    from .accuracy.data import DEFAULT_EVAL_LIMIT, DEFAULT_FINETUNE_EPOCHS, MAX_EVAL_LIMIT, MAX_FINETUNE_EPOCHS

    fn = click.option("--calib-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                      help="Inputs (.npz with 'inputs' N x C x H x W; labels ignored) that calibrate the int8 "
                      "activation scales of tflite/ncnn int8 and int8-static files; without it 32 seeded "
                      "synthetic inputs do, and those rows say so.")(fn)
    fn = click.option("--finetune-epochs", type=click.IntRange(1, MAX_FINETUNE_EPOCHS),
                      default=DEFAULT_FINETUNE_EPOCHS, show_default=True, metavar="N",
                      help="Epochs of fine-tuning with --finetune-data.")(fn)
    fn = click.option("--finetune-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                      help="Labelled samples (same format as --eval-data) to fine-tune the derived pruned level "
                      "on, in the sandbox (SGD lr 0.01, momentum 0.9, batch 32); without it the pruned level is "
                      "not fine-tuned.")(fn)
    fn = click.option("--eval-limit", type=click.IntRange(1, MAX_EVAL_LIMIT), default=DEFAULT_EVAL_LIMIT,
                      show_default=True, metavar="N", help="Evaluate on the first N samples of --eval-data.")(fn)
    return click.option("--eval-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                        help="Labelled samples (.npz with 'inputs' N x C x H x W and 'labels' N): top-1/top-5 "
                        "accuracy of every row under its own runtime, and the drop against fp32 (in the sandbox; "
                        "without --input-shape the samples' shape is the input shape).")(fn)


def latency_runtime_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--latency-runtime``: the runtime latencies are predicted for (start, predict).

    The default is TFLite (with XNNPACK): nn-Meter's predictors are TFLite 2.1, so with the default
    both latency paths of a table describe one runtime; ncnn goes through the estimator only.
    """
    return click.option(
        "--latency-runtime",
        "latency_runtime",
        default=DEFAULT_LATENCY_RUNTIME,
        show_default=True,
        type=click.Choice(list(latency_runtimes())),  # only runtimes with a latency model (the registry)
        help="Runtime the predicted latencies stand for: tflite (TFLite with XNNPACK, what nn-Meter "
        "models) or ncnn (estimator only). Every latency source names it.",
    )(fn)


@click.group(cls=LodevemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="lodevem")
def cli() -> None:
    """lodevem: will this model run on an entry-level phone?

    Predicts single-thread CPU latency for each device profile and measures real peak RAM
    inside a container limited to the device's memory.

    Exit codes: 0 ok, 1 runtime failure (or no pair produced any figure), 2 usage/bad
    input, 3 budget gate broken, 130 interrupted, 143 terminated.

    \b
    Environment variables:
      LODEVEM_PROFILES       extra profile folders, ':'-separated
                             (see --profiles-dir)
      LODEVEM_NNMETER_DATA   nn-Meter predictor data folder (see --nnmeter-data)
      LODEVEM_CALIBRATIONS   calibration records folder (see --calibrations)
      LODEVEM_CODE           your model code for the sandbox, ':'-separated (see --code)
      XDG_CONFIG_HOME        default calibrations folder is
                             $XDG_CONFIG_HOME/lodevem/calibrations
                             (default ~/.config/lodevem/calibrations)
      LODEVEM_DEBIAN_MIRROR  mirror for build-image's offline base image
                             (see build-image --debian-mirror)
      LODEVEM_ARMSIM_ROOT    inside the armsim image only: where its Arm guests
                             live (set by the image, docs/armsim.md)
      DOCKER_HOST            the Docker daemon (default: the local socket), read
                             by docker-py with its other DOCKER_* variables
      SLURM_CONF             the Slurm cluster of --backend slurm, read by
                             sbatch/sacct/scancel (default /etc/slurm/slurm.conf)
      XDG_CACHE_HOME         build-image's cache is $XDG_CACHE_HOME/lodevem/build,
                             predict's exports $XDG_CACHE_HOME/lodevem/onnx and
                             /zoo (default ~/.cache/lodevem)
      COLUMNS                width of printed output (default: the terminal's,
                             or 120 when output is not a terminal)
    """


@cli.command("list")
@click.option("--tier", "tiers", multiple=True, type=tier_choice, help="Only this tier (repeatable).")
@profiles_dir_option
def list_cmd(tiers: tuple[str, ...], profiles_dirs: tuple[Path, ...]) -> None:
    """List the device profiles.

    Example:

        lodevem list --tier tier3
    """
    from .reporter import profiles_table

    profiles = select_profiles(load_profiles(profiles_dirs), tiers=tiers)
    console.print(profiles_table(profiles))


@cli.command()
# Not backend_option: this chooses which readiness checks are required, it runs no model.
@click.option(
    "--backend",
    type=click.Choice(["docker", "process"]),
    default="docker",
    show_default=True,
    help="The backend start will run with, which decides what must be ready: with process, "
    "the Docker daemon and image are reported but not required.",
)
def check(backend: str) -> None:
    """Check that what `start` needs is ready: Docker, cgroups, nn-Meter, torch.

    Exits 0 only when everything required is ready; each ✗ comes with a hint. The Docker
    daemon is the one $DOCKER_HOST names (default: the local socket); nn-Meter's data is looked
    for where `start` looks: $LODEVEM_NNMETER_DATA, else nn-Meter's configured folder.

    Example:

        lodevem check
    """
    from .doctor import run_checks

    checks = run_checks(backend)
    for item in checks:
        mark = {"ok": "[green]✓[/]", "warn": "[yellow]![/]", "fail": "[red]✗[/]"}[item.status]
        console.print(f"{mark} [bold]{item.name}[/]: {item.detail}")
        if item.hint and item.status != "ok":
            console.print(f"    [dim]hint:[/] {item.hint}")
    failed = [c for c in checks if c.status == "fail" and c.required]
    if failed:
        raise LodevemClickError(
            f"{len(failed)} required check(s) failed: {', '.join(c.name for c in failed)}", 1
        )


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write each named model as a whole-module .pt file into this folder.")
def zoo(names: tuple[str, ...], out_dir: Optional[Path]) -> None:
    """List the reference models, or write some of them as .pt files.

    The zoo's architectures are defined in code (equal to torchvision's) with fixed-seed
    random weights: enough to benchmark latency and memory, no download needed.

    Example:

        lodevem zoo mobilenet_v2 resnet18 --out models/
    """
    from . import zoo as zoo_lib
    from .reporter import zoo_table

    unknown = [n for n in names if n not in zoo_lib.ZOO]
    if unknown:
        raise click.BadParameter(
            f"unknown model(s) {', '.join(unknown)}; expected any of {', '.join(zoo_lib.names())}",
            param_hint="NAMES",
        )
    if not names:
        console.print(zoo_table(zoo_lib.describe_all()))
        return
    if out_dir is None:
        console.print(zoo_table(zoo_lib.describe_all(names)))
        return
    for name in names:
        path = zoo_lib.write(name, out_dir)
        console.print(f"[green]✓[/] wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


@cli.command()
@click.argument("models", nargs=-1, type=click.Path(path_type=Path))
@click.option("--model", "extra_models", multiple=True, type=click.Path(path_type=Path),
              help="A model file (repeatable); same as a positional MODEL.")
@click.option("--profile", "profile_ids", multiple=True, metavar="ID",
              help="Device profile ID (repeatable). Default: every profile.")
@click.option("--tier", "tiers", multiple=True, type=tier_choice, help="Every profile of a tier (repeatable).")
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
@click.option("--levels", callback=_levels, default=None, metavar="LEVELS",
              help="Derive compression variants in the sandbox: any of fp32,fp16,int8,int8-static,pruned or 'all'.")
@eval_data_options
@click.option("--no-infer", "infer", is_flag=True, flag_value=False, default=True,
              help="Measure every RAM limit; by default a limit far above the largest limit's measured peak "
              "gets its row from that run (limit_enforcement says so; docs/measurement.md).")
@click.option("--no-cache", is_flag=True, help="Export, predict and measure again even when a cached result "
              "matches (the caches in --output/.cache are refreshed).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in the same --output folder "
              "(with --backend slurm: reattach to its jobs still running and collect finished ones).")
@click.option("--max-latency", type=click.FloatRange(0, min_open=True), default=None, metavar="MS", callback=_finite,
              help="Gate: exit 3 when a predicted latency exceeds MS.")
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
@slurm_options
@profiles_dir_option
def start(models: tuple[Path, ...], extra_models: tuple[Path, ...], profile_ids: tuple[str, ...],
          tiers: tuple[str, ...], profiles_dirs: tuple[Path, ...], max_latency: Optional[float],
          fail_on_oom: bool, fail_on_tight: bool, gate_tiers: tuple[str, ...], latex_marks: str,
          **options: Any) -> None:
    """Benchmark model files on device profiles: predicted latency, measured peak RAM.

    Example:

        lodevem start models/*.pt --tier tier2
    """
    from .gates import Budget, check_budget, no_figures
    from .progress import RichProgress
    from .reporter import model_summaries, results_table, write_all
    from .results import OutputClaim
    from .runner import RunConfig, run_benchmark

    paths = models + extra_models
    if not paths:
        raise click.UsageError("no model files given: lodevem start MODEL [MODEL ...] (or --model PATH)")
    profiles = select_profiles(load_profiles(profiles_dirs), ids=profile_ids, tiers=tiers)
    config = RunConfig.from_cli(paths, profiles, command_line=sys.argv, **options)
    with OutputClaim(config.output):
        started = time.time()
        try:
            with RichProgress(err_console) as progress:
                outcome = run_benchmark(config, progress)
        except KeyboardInterrupt as exc:
            raise Interrupted.from_interrupt(exc, _interrupted_note(config.output, started)) from None
        _warn(outcome.warnings)
        console.print(results_table(outcome.rows, profiles))
        for line in model_summaries(outcome.rows):
            console.print(line, markup=False)
        written = write_all(outcome.rows, profiles, outcome.manifest, config.output, latex_marks=latex_marks)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]")
    nothing = no_figures(outcome.rows)
    if nothing:
        raise LodevemClickError(nothing, 1)
    broken = check_budget(outcome.rows, Budget(max_latency, fail_on_oom, gate_tiers, fail_on_tight=fail_on_tight))
    if broken:
        for line in broken:
            err_console.print(f"[red]budget:[/] {line}", highlight=False)
        raise LodevemClickError(f"{len(broken)} pair(s) broke the budget", 3)


def _interrupted_note(output: Path, started: float) -> str:
    """What an interrupted ``start`` kept: the pairs saved in this run's state file, and how to go on."""
    from .report.runstate import STATE_FILE, RunState

    state_path = output / STATE_FILE
    try:
        state = RunState.load(state_path) if state_path.stat().st_mtime >= started else None
    except (OSError, LodevemError):
        state = None
    if state is None or not state.rows:
        return "No pair had finished: nothing was saved; run the same command again to start over."
    return (f"{len(state.rows)} pair(s) finished and saved in {output}; continue with the same command and "
            "--resume.")


@cli.command()
@click.argument("models", nargs=-1, metavar="MODEL...")
@click.option("--profile", "profile_ids", multiple=True, metavar="ID",
              help="Device profile ID (repeatable). Default: every profile.")
@click.option("--tier", "tiers", multiple=True, type=tier_choice, help="Every profile of a tier (repeatable).")
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
@profiles_dir_option
def predict(models: tuple[str, ...], profile_ids: tuple[str, ...], tiers: tuple[str, ...], threads: int,
            latency_runtime: Optional[str], predictor: str, nnmeter_data: Optional[Path],
            input_shape: Optional[tuple[int, ...]], backend: str, timeout_s: float, calibrations: Optional[Path],
            uncalibrated: bool, as_json: bool, profiles_dirs: tuple[Path, ...], loading: Any) -> None:
    """Predict latency only: no memory run, no results folder.

    MODEL is a model file (exported to ONNX in the sandbox, like start; the export is cached in
    $XDG_CACHE_HOME/lodevem/onnx) or a zoo model name (see `lodevem zoo`). Latencies of a
    profile with calibration records (lodevem calibrate) are scaled to the device.

    Example:

        lodevem predict models/mobilenet_v2.pt resnet18 --tier tier3
    """

    from .predict.api import LatencyPredictor
    from .reporter import latency_legend, latency_table

    if not models:
        raise InputError("no models given: lodevem predict MODEL [MODEL ...] (a file or a zoo name)")
    if predictor == "armsim":
        raise InputError("--predictor armsim: only `lodevem start` profiles on emulated cores (it converts the "
                         "file and runs the armsim image); predict takes auto, nn-meter or estimator")
    session = LatencyPredictor(threads=threads, runtime=latency_runtime, input_shape=input_shape,
                               predictor=predictor, nnmeter_data=nnmeter_data, calibrations=calibrations,
                               use_calibrations=not uncalibrated, profiles_dir=profiles_dirs, backend=backend,
                               timeout_s=timeout_s, loading=loading)
    with session:
        profiles = session.profiles(ids=profile_ids, tiers=tiers)
        calibration_warnings = session.calibrations.check()
        with err_console.status("exporting and predicting"):
            items = session.predict_all(list(models), profiles)
    _warn([*calibration_warnings, *session.warnings, *session.core.warnings])
    if as_json:
        click.echo(json_text([item.to_dict() for item in items], indent=1))
    else:
        console.print(latency_table(items))
        for line in latency_legend(items):
            console.print(line, markup=False, style="dim")
    if all(i.latency.latency_ms is None for i in items):
        raise LodevemClickError("no latency could be predicted for any (model, profile) pair", 1)


class CalibrateGroup(click.Group):
    """``calibrate``'s subcommands; the flag forms of lodevem 0.1 (``calibrate PROFILE MODEL=MS``,
    ``--list``, ``--remove ID``, ``PROFILE MODEL --from-log FILE``) still work for this release:
    rewritten to the subcommand, with a deprecation line on stderr."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = _legacy_calibrate(args)
        return super().parse_args(ctx, args)


def _legacy_calibrate(args: list[str]) -> list[str]:
    """The subcommand form of a 0.1 ``calibrate`` command line (see ``CalibrateGroup``)."""

    def take(flag: str) -> Optional[tuple[list[str], Optional[str]]]:
        for i, arg in enumerate(args):
            if arg == flag:
                return args[:i] + args[i + 2:], args[i + 1] if i + 1 < len(args) else None
            if arg.startswith(flag + "="):
                return args[:i] + args[i + 1:], arg.split("=", 1)[1]
        return None

    if "--list" in args:
        name, rest = "list", [a for a in args if a != "--list"]
    elif (removed := take("--remove")) is not None:
        name, rest = "remove", removed[0] + ([removed[1]] if removed[1] is not None else [])
    elif (logged := take("--from-log")) is not None:
        name, rest = "from-log", ([logged[1]] if logged[1] is not None else []) + logged[0]
    else:
        name, rest = "add", args
    err_console.print(f"[yellow]deprecated:[/] the flag form of calibrate goes in the next release; use "
                      f"`lodevem calibrate {name}` (lodevem calibrate --help)", highlight=False, soft_wrap=True)
    return [name, *rest]


@cli.group(cls=CalibrateGroup)
def calibrate() -> None:
    """Make a profile yours: record a model's latency measured on the real device.

    A record holds a model's measured milliseconds on a profile's device beside lodevem's
    prediction for it; from then on start and predict scale that profile's latencies: one
    measurement gives one factor (measured / predicted), three or more separate factors for the
    compute- and the memory-bound parts of each prediction. Works for custom profiles
    (--profiles-dir): copy the template, measure one model on your phone, calibrate.

    \b
    Example:
        lodevem calibrate add jiophone2 mobilenet_v2=412.5 --runtime tflite
        lodevem calibrate from-log benchncnn.txt my_phone --profiles-dir phones/
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


def _calibration_session(calibrations: Optional[Path], profiles_dirs: tuple[Path, ...], *,
                         input_shape: Optional[tuple[int, ...]] = None, backend: str = "auto",
                         timeout_s: float = 600.0, loading: Any = None) -> Any:
    from .predict.api import LatencyPredictor

    return LatencyPredictor(input_shape=input_shape, predictor="auto", calibrations=calibrations,
                            profiles_dir=profiles_dirs, backend=backend, timeout_s=timeout_s, loading=loading)


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
    from .predict.calibrate import arg_measurements

    session = _calibration_session(calibrations, profiles_dirs, input_shape=input_shape, backend=backend,
                                   timeout_s=timeout_s, loading=loading)
    session.profile(profile_id)  # an unknown profile first: its error suggests the near names
    found = arg_measurements(measurements)
    if runtime is None:
        raise InputError("--runtime is required: the runtime the measurement was made with (tflite, ncnn or other)")
    _calibrate(session, profile_id, found, runtime, threads, note, same_chipset)


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
    from .predict.calibrate import log_measurements, threads_of

    session = _calibration_session(calibrations, profiles_dirs, input_shape=input_shape, backend=backend,
                                   timeout_s=timeout_s, loading=loading)
    session.profile(profile_id)
    log = log_measurements(session, log_file, models, runtime)
    _calibrate(session, profile_id, log.measurements, log.runtime, threads_of(threads, log.threads, log_file),
               note, same_chipset)


def _calibrate(session: Any, profile_id: str, found: Sequence[Any], runtime: str, threads: int, note: str,
               same_chipset: bool) -> None:
    """Store the records and print them, the profile's fit and its chipset siblings."""
    from .predict.calibrate import calibrate_profile

    with err_console.status(f"exporting and predicting {len(found)} model(s) on {profile_id}"):
        outcome = calibrate_profile(session, profile_id, found, runtime=runtime, threads=threads, note=note,
                                    same_chipset=same_chipset)
    _warn(outcome.warnings)
    profile = escape(outcome.profile_id)
    for path, record in outcome.written:
        label = escape(printable(record.model_label, ENTRY_CHARS))
        console.print(f"[green]✓[/] {profile}: {label} measured "
                      f"{record.measured_ms:.4g} ms ({record.runtime}, {record.threads} thread(s)), predicted "
                      f"{record.predicted_ms:.4g} ms by {escape(printable(record.predictor))}: x{record.ratio:.3f}; "
                      f"[dim]{escape(str(path))}[/]")
    if outcome.fit is not None:
        console.print(f"{profile} is now calibrated for {runtime}, {threads} thread(s): {escape(outcome.fit)}"
                      + (f" [yellow]({escape(outcome.mismatch)})[/]" if outcome.mismatch else ""))
    if outcome.siblings:
        state = ("calibrated by these records too" if same_chipset else
                 "not calibrated by them (add --same-chipset to apply them there)")
        console.print(f"same chipset ({escape(outcome.chipset)}) and core: {escape(', '.join(outcome.siblings))}: "
                      f"{state}")


@calibrate.command("list")
@click.argument("profile_id", required=False)
@calibrations_option
@profiles_dir_option
def calibrate_list(profile_id: Optional[str], calibrations: Optional[Path], profiles_dirs: tuple[Path, ...]) -> None:
    """Show the calibration records (of PROFILE_ID, if given) with their IDs and files.

    Example:

        lodevem calibrate list jiophone2
    """
    session = _calibration_session(calibrations, profiles_dirs)
    if profile_id is not None:
        session.profile(profile_id)
    _warn(session.calibrations.check())
    records = session.calibrations.store.records(profile_id)
    folder = session.calibrations.folder
    if not records:
        console.print(f"no calibration records in {escape(str(folder))}"
                      + (f" for {escape(profile_id)}" if profile_id else ""))
        return
    console.print(f"{len(records)} calibration record(s) in {escape(str(folder))} (file: ID.json; times in ms)")

    def cell(text: str, limit: int = ENTRY_CHARS) -> str:  # every field comes from the user's file
        return escape(printable(text, limit, newlines=False))

    for path, r in records:
        note = f"; note: {cell(r.note)}" if r.note else ""
        scope = "; also same-chipset profiles" if r.scope == "same-chipset" else ""
        console.print(f"{cell(path.stem)}: {cell(r.profile_id)} {cell(r.model_label)} measured {r.measured_ms:.4g}, "
                      f"predicted {r.predicted_ms:.4g} (x{r.ratio:.3f}), {r.runtime}, {r.threads} thread(s), "
                      f"{cell(r.date[:10])}{scope}{note}", soft_wrap=True)


@calibrate.command("remove")
@click.argument("target", metavar="ID|PROFILE_ID")
@calibrations_option
def calibrate_remove(target: str, calibrations: Optional[Path]) -> None:
    """Delete one record (its ID, as `calibrate list` shows it) or every record of a profile.

    Example:

        lodevem calibrate remove jiophone2--20261201155000--0a1b2c3d4e5f
    """
    from .predict.calibrate import remove_records

    session = _calibration_session(calibrations, ())
    _warn(session.calibrations.check())
    for item in remove_records(session, target):
        record = item.record
        console.print(f"removed {escape(item.record_id)} ({escape(record.profile_id)}, "
                      f"{escape(printable(record.model_label, ENTRY_CHARS))} {record.measured_ms:.4g} ms)")


def _warn(warnings: Sequence[str]) -> None:
    """Warnings on stderr, one line each, escaped (they may quote a record, a log or a model)."""
    for warning in dict.fromkeys(warnings):
        err_console.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False, soft_wrap=True)


@cli.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--levels", callback=_levels, required=True, metavar="LEVELS",
              help="Variants to write: any of fp16,int8,int8-static,pruned or 'all'.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for the variant files (<stem>_<level>.pt).")
@backend_option
@input_shape_option
@timeout_option
@model_code_options
def derive(model: Path, levels: tuple[str, ...], out_dir: Path, backend: str,
           input_shape: Optional[tuple[int, ...]], timeout_s: float, loading: Any) -> None:
    """Write compressed variants of a model as files you own.

    The variants are made inside the sandbox (the model file is code): fp16 = model.half();
    int8 = dynamic quantization of Linear/LSTM/GRU; int8-static = FX static quantization
    calibrated on random inputs; pruned = 50 % structured L1 channel pruning, not fine-tuned.

    Example:

        lodevem derive models/mobilenet_v2.pt --levels int8-static,pruned --out models/
    """
    from .derive import derive_in_sandbox

    wanted = tuple(level for level in levels if level != "fp32")
    if not wanted:
        raise click.BadParameter("fp32 is the file as given: nothing to derive", param_hint="--levels")
    with console.status(f"deriving {', '.join(wanted)} from {model.name}"):
        derived = derive_in_sandbox(model, wanted, out_dir, backend=backend, loading=loading, input_shape=input_shape,
                                    timeout_s=timeout_s, on_warning=lambda text: _warn([text]))
    for item in derived:
        note = f" [dim]({escape(item.note)})[/]" if item.note else ""
        params = f"{item.params:,}" if item.params is not None else "?"
        console.print(f"[green]✓[/] {item.level}: {escape(str(item.variant_path))} ({item.size_bytes / 1e6:.1f} MB, "
                      f"{params} params){note}")


@cli.command("inspect")
@click.argument("models", nargs=-1, required=True, type=click.Path(path_type=Path))
@backend_option
@input_shape_option
@timeout_option
@model_code_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of text.")
@click.option("--eval-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Also check labelled samples (.npz, as for start --eval-data) against each model: read and "
              "validated on the host, their shape compared with the model's input (and used as the input shape "
              "when --input-shape is not given).")
def inspect_cmd(models: tuple[Path, ...], backend: str, input_shape: Optional[tuple[int, ...]], timeout_s: float,
                loading: Any, as_json: bool, eval_data: Optional[Path]) -> None:
    """What a model file is: format, class, parameters, MACs, input, precision, sparsity, kernels.

    The file is loaded and exported in the sandbox, like every load; run it first on a file
    lodevem did not write. A file that cannot be inspected gets one ✗ line ({"path", "error"}
    with --json) and the next file is inspected; the exit code is 2 if any failed.

    Example:

        lodevem inspect models/*.pt --code cocoa/
    """
    from .inspection import InspectionFailure, inspect_in_sandbox
    from .reporter import inspection_lines

    data = _inspect_data(eval_data) if eval_data is not None else None  # bad data: exit 2 before any container
    if data is not None and input_shape is None:
        input_shape = data.input_shape
    with err_console.status(f"inspecting {len(models)} file(s) in the sandbox"):
        found = inspect_in_sandbox(list(models), backend=backend, loading=loading, input_shape=input_shape,
                                   timeout_s=timeout_s, on_warning=lambda text: _warn([text]))
    failed = [item for item in found if isinstance(item, InspectionFailure)]
    if as_json:
        click.echo(json_text([item.to_dict() for item in found], indent=1))
    else:
        for item in found:
            if isinstance(item, InspectionFailure):
                err_console.print(f"[red]✗[/] {escape(printable(item.error))}", soft_wrap=True)
                continue
            for line in inspection_lines(item):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
            if data is not None:
                from .accuracy.data import check_model_shape

                mismatch = check_model_shape(data, item.model.input_shape)
                console.print(f"  eval data: {data.describe()}: " + (mismatch or "the model's input shape"),
                              markup=False, highlight=False, soft_wrap=True)
    if failed:
        raise LodevemClickError(f"{len(failed)} of {len(found)} file(s) could not be inspected: "
                                f"{', '.join(str(f.path) for f in failed)}", 2)


def _inspect_data(path: Path) -> Any:
    """--eval-data of ``inspect``: validated through the same reader as ``start`` (its normalised
    copy goes to a throw-away store: inspect keeps no cache)."""
    import tempfile

    from .accuracy.data import DEFAULT_EVAL_LIMIT, prepare_eval_data
    from .store import ArtifactStore

    with tempfile.TemporaryDirectory(prefix="lodevem-inspect-") as scratch:
        return prepare_eval_data(path, DEFAULT_EVAL_LIMIT, ArtifactStore(Path(scratch)))


@cli.command("build-image")
@runtime_option
@click.option("--force", is_flag=True,
              help="Rebuild even when the image exists and its recipe (Dockerfile, pins, sources) is unchanged.")
@click.option("--debian-mirror", default=DEFAULT_DEBIAN_MIRROR, show_default=True, metavar="URL",
              envvar="LODEVEM_DEBIAN_MIRROR", show_envvar=True,
              help="Debian mirror debootstrap uses when no registry answers and the debian:bookworm "
              "base image is made offline (it then also serves the image's apt-get).")
def build_image_cmd(runtimes: tuple[str, ...], force: bool, debian_mirror: str) -> None:
    """Build the Docker images the measurements of --runtime run in (offline base image if needed).

    Default: the images `start` needs without --runtime (tflite).
    Always the benchmark image (torch + onnxruntime: exports, derivations); tflite adds
    lodevem-litert (LiteRT only) and the converter image lodevem-convert (litert-torch and pnnx
    layered on the benchmark image's torch: ~1.3 GB of its own), ncnn adds lodevem-ncnn and the
    converter image, armsim the emulated-Arm-core
    profiler lodevem-armsim (qemu-user + arm64/armhf LiteRT and ncnn) and the converter image. The Python wheels and the
    build contexts are cached in $XDG_CACHE_HOME/lodevem/build (default ~/.cache/lodevem/build),
    so an unchanged rebuild takes seconds.

    Example:

        lodevem build-image --runtime torch,tflite,ncnn
    """
    from .sandbox.image import build_image, image_is_current, image_status, specs_for_runtimes

    bench_rebuilt = False
    for spec in specs_for_runtimes(runtimes or (DEFAULT_LATENCY_RUNTIME,)):
        status = image_status(spec=spec)
        # a layered image is rebuilt on top of a base rebuilt in this call
        layered_on_new = spec.layered_on is not None and bench_rebuilt
        if status.present and not force and not layered_on_new and image_is_current(spec):
            console.print(f"[green]✓[/] {status.tag} already built ({status.short_id}); --force rebuilds")
            continue
        if status.present and not force:
            console.print(f"[yellow]![/] {status.tag} was built from another recipe (Dockerfile, pins or "
                          "sources changed): rebuilding")
        bench_rebuilt = bench_rebuilt or spec.name == "bench"
        with console.status(f"building {spec.tag}") as spinner:
            info = build_image(lambda line: spinner.update(f"[dim]{line[:100]}[/]"), debian_mirror=debian_mirror,
                               spec=spec)
        console.print(f"[green]✓[/] built {info.tag} ({info.short_id}, {info.size_mb:,.0f} MB, {info.build_s:.0f} s)")


@cli.command("fetch-predictors")
@click.option("--name", default="cortexA76cpu_tflite21", show_default=True,
              help="nn-Meter predictor to download.")
@nnmeter_data_option
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Seconds allowed for the whole download (connecting, every read, the transfer); "
              "unlike start's --timeout, not per measurement.")
def fetch_predictors_cmd(name: str, nnmeter_data: Optional[Path], timeout_s: float) -> None:
    """Download nn-Meter's published predictor data (the only command that downloads).

    `start` never downloads; without this data it uses lodevem's offline estimator.

    Example:

        lodevem fetch-predictors --nnmeter-data ~/nnmeter-data
    """
    from .latency.nnmeter import default_data_dir, fetch_predictors

    with console.status(f"downloading nn-Meter predictor {name}"):
        folder = fetch_predictors(name, default_data_dir(nnmeter_data), timeout_s)
    console.print(f"[green]✓[/] {name} predictor data in {folder}")


if __name__ == "__main__":  # pragma: no cover - the console script is lodevem.cli:cli
    cli(prog_name="lodevem")
