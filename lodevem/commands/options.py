"""The options more than one command takes, declared once as decorators.

Why here: a flag must mean the same thing (name, type, default, help) wherever it appears, as
sqlite-utils' ``output_options`` does. An option whose meaning differs between commands (check's
``--backend``, fetch-predictors' ``--timeout``) is declared on its command instead, with a help
text that says how it differs. The callbacks only parse (a shape, a level list, a runtime list):
what the values mean is the library's.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..errors import InputError
from ..latency.pool import MODES
from ..profiles import TIERS
from ..sandbox.image import image_targets
from ..wire.registry import DEFAULT_LATENCY_RUNTIME, RUNTIMES, latency_runtimes


def parse_shape(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[tuple[int, ...]]:
    if value is None:
        return None
    try:
        dims = tuple(int(v) for v in value.replace("x", ",").split(","))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise click.BadParameter(f"expected comma-separated positive integers like 1,3,224,224, got {value!r}")
    from ..worker.load.shapes import input_shape_problem

    problem = input_shape_problem(dims)  # before any container: rank, batch, size
    if problem:
        raise click.BadParameter(problem)
    return dims


def parse_finite(ctx: click.Context, param: click.Parameter, value: Optional[float]) -> Optional[float]:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number of milliseconds, got {value}")
    return value


def parse_levels_option(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> tuple[str, ...]:
    from ..levels import parse_levels

    if not value:
        return ()
    try:
        return parse_levels(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_runtimes(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> tuple[str, ...]:
    """A runtime or a comma list of them, as a tuple (``"torch, tflite"`` -> ``("torch", "tflite")``);
    not given: ``()``, the runtime latencies are predicted for (``RunConfig.runtimes``)."""
    if value is None:
        return ()
    known = image_targets() if ctx.info_name == "build-image" else tuple(RUNTIMES)
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
        callback=parse_runtimes,
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
        callback=parse_shape,
        default=None,
        metavar="N,C,H,W",
        help="Model input shape, batch of one first (1,C,H,W; 2 to 8 dimensions), also the example input "
        "for tracing, calibration and pruning when deriving levels. Default: recorded in the model, else "
        "1,3,224,224.",
    )(fn)


def verbose_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``-v/--verbose`` (start, predict): the detail under the table."""
    return click.option("-v", "--verbose", is_flag=True,
                        help="Per-cell detail under the table: every note, what each runtime loaded, the full "
                             "legends (the CSV and JSON always have it all).")(fn)


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
        from ..sandbox.usercode import ModelLoading

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


def profile_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--profile ID`` and ``--tier T`` (both repeatable): which device profiles (start, predict)."""
    fn = click.option("--tier", "tiers", multiple=True, type=tier_choice,
                      help="Every profile of a tier (repeatable).")(fn)
    return click.option("--profile", "profile_ids", multiple=True, metavar="ID",
                        help="Device profile ID (repeatable). Default: every profile.")(fn)


def eval_data_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--eval-data / --eval-limit: accuracy beside latency and RAM (lodevem.accuracy)."""
    from ..accuracy.data import DEFAULT_EVAL_LIMIT, DEFAULT_FINETUNE_EPOCHS, MAX_EVAL_LIMIT, MAX_FINETUNE_EPOCHS

    fn = click.option("--preprocess", "preprocessing", default=None, metavar="SPEC", callback=_preprocessing,
                      help="How the images of an ImageFolder tree (given as --eval-data, --finetune-data or "
                      "--calib-data) become inputs, decoded with Pillow in the sandbox: 'imagenet' (resize 256, "
                      "centre crop 224, RGB, ImageNet mean/std) or key=value pairs, e.g. 'resize=256,crop=224,"
                      "mean=0.485/0.456/0.406,std=0.229/0.224/0.225,color=rgb'. Default: the images as they are, "
                      "scaled to [0, 1], greyscale when every image is, else RGB.")(fn)
    fn = click.option("--calib-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                      help="Inputs (.npz with 'inputs' N x C x H x W; labels ignored; or an ImageFolder tree) that "
                      "calibrate the int8 activation scales of tflite/ncnn int8 and int8-static files; without it "
                      "32 seeded synthetic inputs do, and those rows say so.")(fn)
    fn = click.option("--finetune-epochs", type=click.IntRange(1, MAX_FINETUNE_EPOCHS),
                      default=DEFAULT_FINETUNE_EPOCHS, show_default=True, metavar="N",
                      help="Epochs of fine-tuning with --finetune-data.")(fn)
    fn = click.option("--finetune-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                      help="Labelled samples (as --eval-data: an .npz or an ImageFolder tree) to fine-tune the "
                      "derived pruned level "
                      "on, in the sandbox (SGD lr 0.01, momentum 0.9, batch 32); without it the pruned level is "
                      "not fine-tuned.")(fn)
    fn = click.option("--eval-limit", type=click.IntRange(1, MAX_EVAL_LIMIT), default=DEFAULT_EVAL_LIMIT,
                      show_default=True, metavar="N", help="Evaluate on the first N samples of --eval-data.")(fn)
    return click.option("--eval-data", type=click.Path(path_type=Path), default=None, metavar="PATH",
                        help="Labelled samples (.npz with 'inputs' N x C x H x W and 'labels' N, or an ImageFolder "
                        "tree: one folder of PNG/JPEG images per class, see --preprocess): top-1/top-5 accuracy of "
                        "every row under its own runtime, and the drop against fp32 (in the sandbox; without "
                        "--input-shape the samples' shape is the input shape).")(fn)


def _preprocessing(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Any:
    """``--preprocess SPEC`` as the typed record (``worker.evaluate.images.Preprocessing``); a bad one is
    the usual one-line usage error."""
    from ..worker.evaluate.images import Preprocessing

    try:
        return Preprocessing.parse(value) if value else Preprocessing()
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


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


def device_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--device adb:SERIAL`` and ``--benchmark-binary PATH``: measure on a phone (start, predict)."""
    fn = click.option(
        "--benchmark-binary", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
        metavar="PATH",
        help="With --device: the runtime's own benchmark binary for the phone's ABI, pushed and run there. LiteRT's "
        "benchmark_model: the prebuilt nightly for android_aarch64 / android_arm, or built from the TensorFlow/LiteRT "
        "sources (docs/device.md).")(fn)
    return click.option(
        "--device", default=None, metavar="adb:SERIAL",
        help="Measure on this phone over adb (a serial `lodevem device` lists, or HOST:PORT of a remote session): "
        "the runtime's own file and benchmark binary are pushed, run with --threads, --warmup and --runs, and "
        "removed. start: one measured row per model besides the profiles' rows, nothing predicted in it "
        "(docs/device.md).")(fn)
