"""``predict --device adb:SERIAL``: each model also measured on the phone, as a latency cell
(``ModelLatency``) beside the predicted ones; and ``runtime_file``, the one way a model (a file or
a zoo name) becomes the runtime's own file for the phone (``calibrate adb`` uses it too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import DeviceDisconnected, InputError
from ..latency.records import ModelGraph, ModelLatency
from ..safe_io import printable
from .adb import AdbClient
from .bench import PhoneBench, binary_for
from .info import read_device
from .profile import device_profile
from .rows import device_latency

__all__ = ["PREDICT_RUNS", "PREDICT_WARMUP", "measure_models", "runtime_file"]

PREDICT_WARMUP, PREDICT_RUNS = 5, 50  # start's defaults: predict has no --warmup/--runs


def runtime_file(predictor: Any, model: Any, runtime: str, scratch: Path) -> tuple[ModelGraph, Path]:
    """``model`` exported and converted to ``runtime``'s own file as ``start`` does (the sandbox,
    the converter image); a zoo name is written to ``scratch`` as a file first (a zoo graph has no
    file to convert). ``InputError`` when no file can be made."""
    from .. import zoo

    if isinstance(model, str) and not Path(model).is_file() and model in zoo.ZOO:
        model = zoo.write(model, scratch)
    graph = predictor.graph(model)
    convert = predictor.graphs.converter(graph, runtime)
    converted = convert() if convert is not None else None
    if converted is None or converted.path is None:
        raise InputError(f"{printable(str(model), 200)}: no {runtime} file to measure on the phone "
                         f"({converted.error if converted is not None else 'nothing to convert'})")
    return graph, converted.path


def measure_models(predictor: Any, models: Sequence[Any], serial: str, binary: Optional[Path], threads: int,
                   runtime: str) -> tuple[list[ModelLatency], list[str]]:
    """Each model measured on the phone: one cell each on the phone's own profile; after a
    disconnect the cells measured are kept and one warning names the model it stopped at."""
    import tempfile

    client = AdbClient(serial, timeout_s=predictor.session.timeout_s)
    info = read_device(client)
    checked = binary_for(runtime, binary)
    profile = device_profile(info)
    cells: list[ModelLatency] = []
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lodevem-predict-device-") as tmp:
        files = [runtime_file(predictor, model, runtime, Path(tmp)) for model in models]
        with PhoneBench(client, info, checked, client.timeout_s) as bench:
            for graph, path in files:
                try:
                    found = bench.measure(path, threads, PREDICT_WARMUP, PREDICT_RUNS, profile_ops=False)
                except DeviceDisconnected as exc:
                    warnings.append(f"{graph.label}: the phone disconnected while it was measured ({exc}); the "
                                    "cells measured before it are kept")
                    break
                cells.append(ModelLatency(graph, profile, device_latency(found, profile)))
    return cells, warnings
