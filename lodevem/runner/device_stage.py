"""``start --device adb:SERIAL``: every model also measured on the phone, one row each.

Why a stage after the others: the phone runs the runtime's own file (the ``.tflite`` the run's
conversion cache made for its rows), so the conversions are done by then; and a phone that goes
away must cost only its own rows. The phone is checked before anything slow starts (``open_phone``:
adb answers, the facts make a profile, the binary's ABI is one the phone runs); its rows are not
part of ``--resume``'s state (a resumed run measures on the phone again).

A disconnect keeps the rows measured so far and adds one warning naming the model it stopped at;
a binary that fails on one file costs that row only (one warning quoting the phone's answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..device import AdbClient, device_profile, parse_device_option, read_device
from ..device.bench import BenchmarkBinary, PhoneBench, binary_for
from ..device.rows import device_row
from ..errors import DeviceDisconnected, DeviceError, InputError
from ..predict import converted_file
from ..profiles import Profile
from ..results import ModelFile, PairResult
from ..runtimes import adapter
from ..safe_io import printable
from .run import Run
from .stages import Stage

__all__ = ["DeviceStage", "Phone", "open_phone"]


@dataclass(frozen=True)
class Phone:
    """The phone of ``--device``: its client, what it said about itself, its profile, the binary."""

    client: AdbClient
    profile: Profile
    binary: BenchmarkBinary
    bench: PhoneBench


def open_phone(device: Optional[str], binary: Optional[object], runtimes: Sequence[str],
               timeout_s: float) -> Optional[Phone]:
    """The phone ``--device`` names, read and checked (None without ``--device``)."""
    if device is None:
        return None
    runtime = next((r for r in runtimes if adapter(r).read_run is not None), None)
    if runtime is None:
        raise InputError(f"--device: the phone runs the runtime's own file; --runtime {','.join(runtimes)} makes "
                         "none (use --runtime tflite)")
    client = AdbClient(parse_device_option(device))
    info = read_device(client)
    checked = binary_for(runtime, binary)  # type: ignore[arg-type]  # a Path from the option
    profile = device_profile(info)
    return Phone(client, profile, checked, PhoneBench(client, info, checked, timeout_s))


class DeviceStage(Stage[ModelFile, Optional[PairResult]]):
    """Each usable model of the phone's runtime, measured on the phone in order (one phone, one
    binary run at a time); after a disconnect the remaining ones are skipped, one warning says so."""

    title = "measuring on the phone"

    def __init__(self, models: Sequence[ModelFile], phone: Optional[Phone]) -> None:
        self.models, self.phone = models, phone
        self.gone: Optional[str] = None

    def heading(self, run: Run) -> str:
        return f"measuring on {self.phone.bench.device.label} over adb" if self.phone else ""

    def plan(self, run: Run) -> list[ModelFile]:
        if self.phone is None:
            return []
        runtime = self.phone.binary.runtime
        return [m for m in self.models if m.unusable is None and (m.runtime or run.config.runtimes[0]) == runtime]

    def start(self, run: Run, jobs: Sequence[ModelFile]) -> None:
        if self.phone is not None and jobs:
            self.phone.bench.__enter__()

    def run(self, run: Run, job: ModelFile) -> Optional[PairResult]:
        phone = self.phone
        assert phone is not None
        if self.gone is not None:
            return None
        converted = converted_file(run.session.converts, job, phone.binary.runtime)()
        if converted.path is None:
            run.warnings.append(f"{job.label}: not measured on the phone: no {phone.binary.runtime} file "
                                f"({converted.error})")
            return None
        memory = run.config.memory
        run.progress.working_on(f"{job.label} on {phone.profile.label}")
        try:
            found = phone.bench.measure(converted.path, memory.threads, memory.warmup, memory.runs)
        except DeviceDisconnected as exc:
            self.gone = job.label
            run.warnings.append(f"{job.label}: the phone disconnected while it was measured "
                                f"({printable(exc, 200, newlines=False)}); the rows measured before it are kept")
            return None
        except DeviceError as exc:  # the binary failed on this file: the run's other rows are not lost
            run.warnings.append(f"{job.label}: not measured on the phone: {printable(exc, 300, newlines=False)}")
            return None
        return device_row(job, phone.profile, found)

    def finish(self) -> None:
        """Remove what was pushed (best effort when the phone is gone)."""
        if self.phone is not None:
            self.phone.bench.remove()
