"""The script the EMULATED Arm python runs (``qemu-aarch64``/``qemu-arm`` + lodevem's counting
plugin): load a converted model in the real runtime's Arm build, run warm-up inferences, then
mark the start and the end of the counted inferences with a marker system call the plugin
watches, so the counts it snapshots hold steady-state inferences only (python start, imports,
model load and the first inference's weight packing are outside the markers).

Why a separate script: it runs under the guest's python (Debian's arm64/armhf python3.11 with
the runtime's aarch64/armv7l wheel), which has neither the worker package's dependencies nor a
reason to import them; stdlib + the runtime only. It reads one JSON argument and writes one JSON
file (the host side, ``armsim_worker``, parses it with a bounded, type-checked reader).

The marker: ``sched_get_priority_max(MAGIC + id)``, a syscall nothing else makes with such an
argument; the kernel answers EINVAL, which is ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MARKER_MAGIC = 0x4C4F0000  # "LO": the plugin's magic=...; marker id = argument - MAGIC
MARK_BEGIN, MARK_END, MARK_LOADED = 1, 2, 3


def mark(marker_id: int) -> None:
    try:
        os.sched_get_priority_max(MARKER_MAGIC + marker_id)
    except OSError:
        pass


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # lodevem/


def arm_half(runtime: str) -> Any:
    """The Arm half of ``runtime``: ``runtimes/<runtime>/arm.py`` beside this script's package,
    loaded by path (this python has no lodevem to import). It is the runtime's folder that says
    how its Arm build loads and runs a file, as ``worker.guest`` finds its container half."""
    import importlib.util

    path = os.path.join(_PACKAGE, "runtimes", runtime, "arm.py")
    if not runtime.replace("_", "").isalnum() or not os.path.isfile(path):
        raise RuntimeError(f"runtime {runtime!r} has no Arm half (runtimes/<name>/arm.py)")
    found = importlib.util.spec_from_file_location(f"arm_{runtime}", path)
    assert found is not None and found.loader is not None, path
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


# Linux hwcap bit names (arch/arm64/include/uapi/asm/hwcap.h; arch/arm/include/uapi/asm/hwcap.h)
_HWCAP64 = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop "
            "sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg").split()
_HWCAP2_64 = ("dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svef32mm svef64mm "
              "svebf16 i8mm bf16 dgh rng bti mte").split()
_HWCAP32 = ("swp half thumb 26bit fastmult fpa vfp edsp java iwmmxt crunch thumbee neon vfpv3 vfpv3d16 tls "
            "vfpv4 idiva idivt vfpd32 lpae evtstrm").split()
_HWCAP2_32 = "aes pmull sha1 sha2 crc32".split()


def identity() -> dict:
    """The core as the runtime's process sees it: the HWCAPs qemu's -cpu model reports, the
    MIDR fields of /proc/cpuinfo and sysfs (the view's), and on AArch64 the MIDR_EL1 register
    read (qemu's -cpu midr=): what XNNPACK's cpuinfo and ncnn pick kernels by."""
    import ctypes
    import platform

    out: dict = {}
    try:
        libc = ctypes.CDLL(None)
        libc.getauxval.restype = ctypes.c_ulong
        a64 = platform.machine() == "aarch64"
        names, names2 = (_HWCAP64, _HWCAP2_64) if a64 else (_HWCAP32, _HWCAP2_32)
        hw, hw2 = libc.getauxval(16), libc.getauxval(26)
        out["hwcap"] = [n for i, n in enumerate(names) if hw >> i & 1]
        out["hwcap2"] = [n for i, n in enumerate(names2) if hw2 >> i & 1]
        with open("/proc/cpuinfo") as fh:
            for line in fh.read(65536).splitlines():
                key, _, value = line.partition(":")
                if key.strip() in ("CPU part", "CPU variant", "CPU implementer") and key.strip() not in out:
                    out[key.strip()] = value.strip()
        with open("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1") as fh:
            out["sysfs_midr"] = fh.read(64).strip()
        if a64 and "cpuid" in out["hwcap"]:
            import mmap

            page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            page.write(bytes.fromhex("000038d5c0035fd6"))  # mrs x0, midr_el1 ; ret
            address = ctypes.addressof(ctypes.c_char.from_buffer(page))
            out["mrs_midr"] = f"0x{ctypes.CFUNCTYPE(ctypes.c_uint64)(address)():016x}"
    except (OSError, AttributeError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


_MAX_MAPS_BYTES = 1 << 20
_MAX_MAPS = 2000


def code_maps() -> list:
    """The guest's executable file mappings ([start, end, file offset, path], from qemu's
    /proc/self/maps): the host maps each executed block to the shared object, and the symbol,
    it ran in (which micro-kernels the runtime selected)."""
    out: list = []
    try:
        with open("/proc/self/maps") as fh:
            text = fh.read(_MAX_MAPS_BYTES)
    except OSError:
        return out
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
            start, _, end = fields[0].partition("-")
            out.append([int(start, 16), int(end, 16), int(fields[2], 16), fields[5][:300]])
            if len(out) >= _MAX_MAPS:
                break
    return out


def main() -> int:
    spec = json.loads(sys.argv[1])
    report: dict[str, Any] = {"ok": False}
    started = time.perf_counter()
    try:
        infer, distribution, precision, options = arm_half(str(spec["runtime"])).load(spec)
        version = f"{distribution} {_version(distribution)}"
        mark(MARK_LOADED)
        loaded = time.perf_counter()
        for _ in range(int(spec["warmup"])):
            infer()
        mark(MARK_BEGIN)
        begin = time.perf_counter()
        for _ in range(int(spec["inferences"])):
            infer()
        mark(MARK_END)
        end = time.perf_counter()
        # where the emulation time goes (guest clock): start + import + load, warm-up, counted
        phases = {"load_s": round(loaded - started, 3), "warmup_s": round(begin - loaded, 3),
                  "counted_s": round(end - begin, 3)}
        report = {"ok": True, "runtime_version": version, "precision": precision, "options": options,
                  "phases": phases, "code_maps": code_maps(), "identity": identity()}
    except Exception as exc:  # reported to the host as a typed error, never a traceback
        report = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    report["seconds"] = round(time.perf_counter() - started, 3)
    with open(spec["report"], "w") as fh:
        json.dump(report, fh)
    return 0 if report["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
