"""Measure on the phone: push a runtime file and the runtime's own benchmark binary, run it, read
its log back, remove what was pushed.

Why the runtime's own binary: its statistics (count, mean, min, max, std), its peak footprint and
its per-operator profile are what the runtime's developers publish and what a paper can cite;
lodevem parses them (the runtime's folder reads its own log: ``runtimes.<name>.log.parse_run``)
and recomputes nothing. The phone is left as found: everything goes into one folder of
lodevem's own under ``/data/local/tmp`` (named with a random token, never with a file's or the
phone's text), removed at the end; the CPU governor is not touched.

Two runs per model: the timed one (``--report_peak_memory_footprint``), then a short one with
``--enable_op_profiling`` for the per-operator table (the profiler's overhead stays out of the
timed figures).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import DeviceError, InputError
from ..runtimes import adapter
from ..runtimes.logs import BenchmarkRun, OpTime
from ..safe_io import LOG_LINE_CHARS, MODEL_FILE, bounded_lines, clip, printable, regular_fd, sha256_file
from .adb import AdbClient
from .info import DeviceInfo

__all__ = ["BenchmarkBinary", "DeviceMeasurement", "PhoneBench", "binary_for"]

REMOTE_ROOT = "/data/local/tmp"
_ELF_ABIS = {(2, 183): "arm64-v8a", (1, 40): "armeabi-v7a", (2, 62): "x86_64", (1, 3): "x86"}
PROFILE_RUNS = 10  # timed runs of the op-profiling pass


@dataclass(frozen=True)
class BenchmarkBinary:
    """A runtime's benchmark binary the user supplied: its path, digest and the ABI its ELF
    header says it is built for."""

    runtime: str
    path: Path
    sha256: str
    abi: str


def binary_for(runtime: str, path: Optional[Path]) -> BenchmarkBinary:
    """``--benchmark-binary PATH`` checked: a regular file whose ELF header names an Android ABI;
    ``InputError`` saying where to get one when it is missing or is not one."""
    spec = adapter(runtime)
    if spec.read_run is None or spec.benchmark_tool is None:
        raise InputError(f"runtime {runtime}: lodevem cannot measure it on a phone yet (no benchmark binary reader); "
                         "use --runtime tflite")
    if path is None:
        raise InputError(f"--benchmark-binary PATH is required to measure {runtime} on a phone: "
                         f"{spec.benchmark_source}")
    header = _head(path)
    abi = _ELF_ABIS.get((header[4], int.from_bytes(header[18:20], "little"))) if header[:4] == b"\x7fELF" else None
    if abi is None:
        raise InputError(f"--benchmark-binary {path}: not an Android executable (an ELF file for arm64-v8a, "
                         f"armeabi-v7a, x86_64 or x86); get {spec.benchmark_tool}: {spec.benchmark_source}")
    return BenchmarkBinary(runtime, path, sha256_file(path, MODEL_FILE), abi)


def _head(path: Path) -> bytes:
    """The first 64 bytes (an ELF header) of a regular file, read through safe_io."""
    fd = regular_fd(path, MODEL_FILE)
    try:
        return os.read(fd, 64).ljust(64, b"\0")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class DeviceMeasurement:
    """One model measured on one phone: the binary's own figures and what they were made with."""

    device: DeviceInfo
    runtime: str
    threads: int
    warmup: int
    runs: int
    run: BenchmarkRun
    binary_sha256: str
    file_sha256: str

    @property
    def measured_on(self) -> str:
        return f"measured on {self.device.label}"

    @property
    def op_profile(self) -> tuple[OpTime, ...]:
        return self.run.op_profile


class PhoneBench:
    """One phone and one benchmark binary, for several models (``with``: the folder is made and
    the binary pushed on entry; everything removed on exit, disconnect or not)."""

    def __init__(self, client: AdbClient, device: DeviceInfo, binary: BenchmarkBinary, timeout_s: float = 600.0):
        self.client, self.device, self.binary, self.timeout_s = client, device, binary, timeout_s
        self.folder = f"{REMOTE_ROOT}/lodevem-{secrets.token_hex(6)}"
        self.remote_binary = f"{self.folder}/{adapter(binary.runtime).benchmark_tool}"

    def __enter__(self) -> "PhoneBench":
        abis = self.device.abilist or ((self.device.abi,) if self.device.abi else ())
        if abis and self.binary.abi not in abis:
            raise InputError(f"--benchmark-binary {self.binary.path} is built for {self.binary.abi}; the phone runs "
                             f"{', '.join(abis)} (get the build for {abis[0]}: "
                             f"{adapter(self.binary.runtime).benchmark_source})")
        self.client.shell(["mkdir", "-p", self.folder])
        self.client.push(self.binary.path.resolve(), self.remote_binary, self.timeout_s)
        self.client.shell(["chmod", "755", self.remote_binary])
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def remove(self) -> None:
        """Remove lodevem's folder from the phone (best effort: a phone that is gone keeps it;
        docs/device.md says how to remove it by hand)."""
        try:
            self.client.shell(["rm", "-rf", self.folder], timeout_s=60, check=False)
        except DeviceError:
            pass

    def measure(self, model_file: Path, threads: int, warmup: int, runs: int,
                profile_ops: bool = True) -> DeviceMeasurement:
        """Push ``model_file`` (lodevem's own conversion), run the binary twice (timed; op
        profile, unless ``profile_ops`` is False), parse both logs, remove the file.
        ``DeviceDisconnected`` when the phone goes."""
        remote = f"{self.folder}/model{''.join(model_file.suffixes[-1:]) or '.bin'}"
        self.client.push(model_file.resolve(), remote, self.timeout_s)
        try:
            timed = self._run(remote, threads, warmup, runs, "--report_peak_memory_footprint=true")
            profiled = (self._run(remote, threads, 1, min(runs, PROFILE_RUNS), "--enable_op_profiling=true")
                        if profile_ops else None)
        finally:
            self.client.shell(["rm", "-f", remote], check=False)
        run = BenchmarkRun(timed.tool, timed.threads, timed.stats, timed.peak_memory_mb,
                           profiled.op_profile if profiled else (),
                           timed.version or (profiled.version if profiled else None))
        return DeviceMeasurement(self.device, self.binary.runtime, threads, warmup, runs, run, self.binary.sha256,
                                 sha256_file(model_file, MODEL_FILE))

    def _run(self, remote: str, threads: int, warmup: int, runs: int, extra: str) -> BenchmarkRun:
        words = [self.remote_binary, f"--graph={remote}", f"--num_threads={threads}", f"--warmup_runs={warmup}",
                 "--warmup_min_secs=0", f"--num_runs={runs}", "--min_secs=0", extra]
        answer = self.client.shell(words, timeout_s=self.timeout_s, check=False)
        lines, _ = bounded_lines(answer.stdout + "\n" + answer.stderr, LOG_LINE_CHARS)
        reader = adapter(self.binary.runtime).read_run
        assert reader is not None
        found = reader(lines) if answer.code == 0 else None
        if found is None:
            tail = " ".join(line.strip() for line in lines[-3:] if line.strip())
            raise DeviceError(f"{self.client.where}: {adapter(self.binary.runtime).benchmark_tool} failed (exit "
                              f"{answer.code}): {clip(printable(tail, None, newlines=False), 300)}")
        return found

