"""``lodevem calibrate adb PROFILE_ID``: a few zoo models measured on the phone, recorded as
calibration records of the profile (and of every profile with its chipset). A face over the
device wing (adb, the benchmark binary) and the predictor, so it lives beside the predictor.

Why a fixed set: the few-shot fit (``latency.calibration.fit``) separates compute- and memory-bound
factors only from models that differ in that balance; ``CALIBRATION_MODELS`` are three zoo models
that do (an inverted-residual network, a squeeze-excite/hard-swish one, and SqueezeNet's wide 1x1
and 3x3 fire modules), small enough to convert and run in a few minutes on an entry-level phone.
Each is exported and converted as ``start`` does (the sandbox, the converter image), measured with
the runtime's own benchmark binary (``bench``), and recorded through the same path as ``calibrate
add`` (``predict.calibrate.calibrate_profile``), so the records, the fit and the notes are the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional, Sequence

from ..device.adb import AdbClient, check_serial
from ..device.bench import PhoneBench, binary_for
from ..device.info import parse_devices, read_device
from ..device.predictions import runtime_file
from ..errors import DeviceDisconnected, InputError
from ..latency.calibration import CalibrationOutcome, Measurement
from ..runtimes import ADAPTERS
from ..safe_io import printable

__all__ = ["CALIBRATION_MODELS", "calibrate_from_phone"]

CALIBRATION_MODELS = ("mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1")
# the runtime whose own benchmark binary measures on a phone (LiteRT's benchmark_model): the one
# adapter that names such a tool
RUNTIME = next(name for name, spec in ADAPTERS.items() if spec.benchmark_tool)

Busy = Callable[[str], ContextManager[Any]]


def calibrate_from_phone(serial: Optional[str], profile_id: str, binary: Optional[Path], *, models: Sequence[str] = (),
                         threads: int = 1, warmup: int = 5, runs: int = 50, note: str = "",
                         calibrations: Optional[Path] = None, profiles_dirs: Sequence[Path] = (),
                         busy: Busy = lambda _: contextlib.nullcontext(), **options: Any) -> CalibrationOutcome:
    """Measure ``models`` (default ``CALIBRATION_MODELS``) on the phone ``serial`` and record them
    for ``profile_id`` with scope same-chipset. A disconnect records the models measured before
    it and says so in the outcome's warnings; the phone is left as found."""
    from .. import zoo
    from . import Predictor
    from .calibrate import calibrate_profile

    chosen = tuple(models) or CALIBRATION_MODELS
    unknown = [m for m in chosen if m not in zoo.ZOO]
    if unknown:
        raise InputError(f"--model {', '.join(unknown)}: not a zoo model (expected one of {', '.join(zoo.names())})")
    predictor = Predictor(predictor="auto", calibrations=calibrations, profiles_dir=profiles_dirs, **options)
    profile = predictor.profile(profile_id)
    client = AdbClient(check_serial(serial) if serial else only_phone(),
                       timeout_s=float(options.get("timeout_s", 600.0)))
    device = read_device(client)
    checked = binary_for(RUNTIME, binary)
    warnings: list[str] = []
    if device.soc and device.soc.casefold() != profile.chipset.casefold():
        warnings.append(f"the phone's SoC is {printable(device.soc, 80)}, {profile.id}'s chipset is "
                        f"{profile.chipset}: recorded for {profile.id} as asked")
    measured: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="lodevem-calibrate-adb-") as tmp, predictor:
        with busy(f"exporting and converting {len(chosen)} zoo model(s) to {RUNTIME}"):
            files = [(name, *runtime_file(predictor, name, RUNTIME, Path(tmp))) for name in chosen]
        with busy(f"measuring {len(files)} model(s) on {device.label}"), \
                PhoneBench(client, device, checked, client.timeout_s) as bench:
            for name, _graph, converted_path in files:
                try:
                    found = bench.measure(converted_path, threads, warmup, runs, profile_ops=False)
                except DeviceDisconnected as exc:
                    warnings.append(f"{name}: the phone disconnected while it was measured ({exc}); "
                                    f"{len(measured)} model(s) measured before it are recorded")
                    break
                stats = found.run.stats
                measured.append(Measurement(str(Path(tmp) / f"{name}.pt"), stats.mean_ms, clip_by(
                    f"{found.measured_on}: benchmark_model mean of {stats.count} runs after {warmup} warm-up, "
                    f"min {stats.min_ms:.4g} max {stats.max_ms:.4g} ms, binary sha256 {found.binary_sha256[:12]}")))
        if not measured:
            raise DeviceDisconnected(warnings[-1] if warnings else f"adb -s {serial}: nothing was measured")
        outcome = calibrate_profile(predictor, profile.id, measured, runtime=RUNTIME, threads=threads,
                                    note=note or f"calibrate adb: {device.label}", same_chipset=True)
    return dataclasses.replace(outcome, warnings=tuple(dict.fromkeys([*warnings, *outcome.warnings])))


def only_phone() -> str:
    """The serial of the one phone adb lists as ``device``; ``InputError`` for none or several."""
    ready = [d.serial for d in parse_devices(AdbClient().run(["devices", "-l"]).stdout) if d.state == "device"]
    if len(ready) != 1:
        raise InputError(f"--device adb:SERIAL is needed: adb lists {len(ready)} ready phone(s)"
                         + (f" ({', '.join(ready[:5])})" if ready else " (connect one; docs/device.md)"))
    return ready[0]


def clip_by(text: str, cap: int = 600) -> str:
    """A record's ``measured_by`` within the record's cap (600 characters), escaped."""
    return printable(text, cap - 40, newlines=False)
