"""Model files themselves: ``zoo`` (reference models), ``derive`` (compressed variants) and
``inspect`` (what a file is), each loaded only in the sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from . import TERMINAL, finish
from .options import backend_option, input_shape_option, model_code_options, parse_levels_option, timeout_option


def _derivable(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> tuple[str, ...]:
    """``--levels`` of derive: the levels that make a file (fp32 is the file as given)."""
    from ..derive import derivable

    wanted = derivable(parse_levels_option(ctx, param, value))
    if not wanted:
        raise click.BadParameter("fp32 is the file as given: nothing to derive", param_hint="--levels")
    return wanted


def _zoo_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    from .. import zoo

    unknown = [n for n in value if n not in zoo.ZOO]
    if unknown:
        raise click.BadParameter(f"unknown model(s) {', '.join(unknown)}; expected any of {', '.join(zoo.names())}",
                                 param_hint="NAMES")
    return value


@click.command()
@click.argument("names", nargs=-1, callback=_zoo_names)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write each named model as a whole-module .pt file into this folder.")
def zoo(names: tuple[str, ...], out_dir: Optional[Path]) -> None:
    """List the reference models, or write some of them as .pt files.

    The zoo's architectures are defined in code (equal to torchvision's) with fixed-seed
    random weights: enough to benchmark latency and memory, no download needed.

    Example:

        lodevem zoo mobilenet_v2 resnet18 --out models/
    """
    from ..zoo import catalogue

    TERMINAL.zoo(catalogue(names, out_dir))


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--levels", callback=_derivable, required=True, metavar="LEVELS",
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
    from ..derive import derive_in_sandbox

    with TERMINAL.status(f"deriving {', '.join(levels)} from {model.name}", on_stdout=True):
        derived = derive_in_sandbox(model, levels, out_dir, backend=backend, loading=loading, input_shape=input_shape,
                                    timeout_s=timeout_s, on_warning=lambda text: TERMINAL.warn([text]))
    TERMINAL.derived(derived)


@click.command("inspect")
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
    from ..inspection import inspect_files

    with TERMINAL.status(f"inspecting {len(models)} file(s) in the sandbox"):
        report = inspect_files(list(models), backend=backend, loading=loading, input_shape=input_shape,
                               timeout_s=timeout_s, eval_data=eval_data, on_warning=lambda text: TERMINAL.warn([text]))
    TERMINAL.inspections(report, as_json)
    finish(report)
