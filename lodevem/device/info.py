"""What a phone says about itself, read over adb into typed records; every answer is hostile.

Why so strict: a phone's ``getprop`` values, ``/proc`` files and serial are whatever its firmware
(or a device farm, or an attacker) makes them. Each value is cut to a length cap, loses its
control characters, and must match the shape its fact has (a version is digits and dots, a clock
a whole number of kHz in a plausible range, a CPU part one the table below knows); a value that
does not is *unknown*, with the reason kept, never guessed.

Where each fact comes from (``DeviceInfo.sources`` says it per fact):
* model, manufacturer, ABI, Android version, Android Go: ``getprop`` (``ro.product.model``,
  ``ro.product.manufacturer``, ``ro.product.cpu.abi``/``abilist``, ``ro.build.version.release``/
  ``sdk``, ``ro.config.low_ram``: the flag Android Go devices set);
* the SoC: ``ro.soc.model`` (Android 12+), else ``ro.board.platform``, else ``ro.hardware``;
* each core's type: ``CPU implementer``/``CPU part`` in ``/proc/cpuinfo`` (the part numbers of
  Linux's ``arch/arm64/include/asm/cputype.h``); its clock:
  ``/sys/devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq`` (kHz);
* RAM: ``MemTotal`` of ``/proc/meminfo`` (the memory the kernel manages: a little below the
  marketed size, firmware carve-outs excluded).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from .adb import AdbClient

__all__ = ["CPU_PARTS", "CoreInfo", "DeviceInfo", "DeviceListing", "clean", "parse_cpuinfo", "parse_devices",
           "parse_getprop", "parse_meminfo", "read_device"]

VALUE_CHARS = 92  # Android's PROP_VALUE_MAX: a longer answer is not a property value
MAX_CORES = 64
PROPS = ("ro.product.model", "ro.product.manufacturer", "ro.soc.model", "ro.soc.manufacturer", "ro.board.platform",
         "ro.hardware", "ro.product.cpu.abi", "ro.product.cpu.abilist", "ro.build.version.release",
         "ro.build.version.sdk", "ro.config.low_ram")
ABIS = ("arm64-v8a", "armeabi-v7a", "armeabi", "x86_64", "x86")
# (CPU implementer, CPU part) -> core, from Linux arch/arm64/include/asm/cputype.h (ARM_CPU_PART_*,
# QCOM_CPU_PART_KRYO_*: Kryo 2xx/3xx/4xx "Silver" cores are Cortex-A53/A55/A55 derivatives,
# their "Gold" cores Cortex-A73/A75/A76 derivatives, per Qualcomm's product briefs).
CPU_PARTS: dict[tuple[int, int], str] = {
    (0x41, 0xC07): "Cortex-A7", (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35",
    (0x41, 0xD05): "Cortex-A55", (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD09): "Cortex-A73", (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD41): "Cortex-A78", (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710", (0x41, 0xC0D): "Cortex-A17", (0x41, 0xC0F): "Cortex-A15",
    (0x51, 0x800): "Cortex-A73", (0x51, 0x801): "Cortex-A53", (0x51, 0x802): "Cortex-A75",
    (0x51, 0x803): "Cortex-A55", (0x51, 0x804): "Cortex-A76", (0x51, 0x805): "Cortex-A55",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_VERSION = re.compile(r"^\d{1,3}(?:\.\d{1,3}){0,2}$")
_HEX = re.compile(r"^0x([0-9a-fA-F]{1,4})$")
_PROP_LINE = re.compile(r"^\[([A-Za-z0-9_.\-]{1,128})\]: \[(.*)\]$")
_DEVICE_LINE = re.compile(r"^(\S+)\s+(device|offline|unauthorized|recovery|sideload|bootloader|no permissions|"
                          r"authorizing|connecting|host|rescue)\b(.*)$")


def clean(value: object, cap: int = VALUE_CHARS) -> Optional[str]:
    """A device's text as lodevem keeps it: control and bidi characters removed, spaces trimmed,
    None when empty or longer than ``cap`` (a value that long is not the fact it claims to be)."""
    if not isinstance(value, str):
        return None
    text = _CONTROL.sub("", value).strip()
    return text if text and len(text) <= cap else None


@dataclass(frozen=True)
class DeviceListing:
    """One line of ``adb devices -l``: the serial, its state, and what adb says it is."""

    serial: str
    state: str
    model: Optional[str] = None
    product: Optional[str] = None
    transport: Optional[str] = None  # usb:1-1, or None for a network session


def parse_devices(text: str) -> list[DeviceListing]:
    """``adb devices -l``'s lines after ``List of devices attached``; a serial lodevem would not
    pass to ``-s`` is listed as it is shown (escaped) with state ``refused``."""
    from .adb import SERIAL_PATTERN

    found: list[DeviceListing] = []
    for line in text.splitlines()[:256]:
        match = _DEVICE_LINE.match(line.strip()[:1024])
        if not match or line.startswith(("List of devices", "*")):
            continue
        serial, state, rest = match.groups()
        attrs = dict(part.split(":", 1) for part in rest.split() if ":" in part)
        if not SERIAL_PATTERN.match(serial):
            found.append(DeviceListing(clean(serial, 128) or "?", "refused"))
            continue
        found.append(DeviceListing(serial, state, clean(attrs.get("model")), clean(attrs.get("product")),
                                   clean(attrs.get("usb"), 40)))
    return found


def parse_getprop(text: str) -> dict[str, str]:
    """``getprop``'s ``[name]: [value]`` lines, for the names in ``PROPS`` only, cleaned (``clean``)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        match = _PROP_LINE.match(line[: VALUE_CHARS * 4])
        if match and match.group(1) in PROPS:
            value = clean(match.group(2))
            if value is not None:
                props.setdefault(match.group(1), value)
    return props


@dataclass(frozen=True)
class CoreInfo:
    """One CPU core: its ``CPU part`` (``0x41:0xd03``), the core that part is (None: not in
    ``CPU_PARTS``), and its maximum clock in kHz (None: cpufreq unreadable or implausible)."""

    index: int
    part: Optional[str]
    core: Optional[str]
    max_khz: Optional[int] = None


def parse_cpuinfo(text: str) -> list[CoreInfo]:
    """The cores of ``/proc/cpuinfo``: one per ``processor : N`` block, in order, at most ``MAX_CORES``."""
    cores: list[CoreInfo] = []
    block: dict[str, str] = {}

    def close() -> None:
        index = block.get("processor", "")
        if index.isdigit() and len(cores) < MAX_CORES and int(index) < 1024:
            impl, part = _HEX.match(block.get("CPU implementer", "")), _HEX.match(block.get("CPU part", ""))
            key = (int(impl.group(1), 16), int(part.group(1), 16)) if impl and part else None
            cores.append(CoreInfo(int(index), f"0x{key[0]:x}:0x{key[1]:03x}" if key else None,
                                  CPU_PARTS.get(key) if key else None))
        block.clear()

    for line in text.splitlines()[:20000]:
        name, sep, value = line[:512].partition(":")
        if not sep:
            close()
            continue
        name, value = name.strip(), value.strip()
        if name == "processor" and "processor" in block:
            close()
        block[name] = value
    close()
    return cores


def parse_meminfo(text: str) -> Optional[int]:
    """``MemTotal`` in kB, when it is a whole number between 16 MB and 64 GB; else None."""
    for line in text.splitlines()[:200]:
        match = re.match(r"^MemTotal:\s+(\d{1,9}) kB$", line.strip()[:100])
        if match and 16 * 1024 <= int(match.group(1)) <= 64 * 2**20:
            return int(match.group(1))
    return None


def parse_khz(text: str) -> Optional[int]:
    """A ``cpuinfo_max_freq`` answer: kHz between 100 MHz and 5 GHz, else None."""
    value = text.strip()[:16]
    return int(value) if value.isdigit() and 100_000 <= int(value) <= 5_000_000 else None


@dataclass(frozen=True)
class DeviceInfo:
    """One phone as adb read it. A None fact is unknown; ``unknown`` says why for each."""

    serial: str
    model: Optional[str]
    manufacturer: Optional[str]
    soc: Optional[str]
    soc_property: Optional[str]  # which property the SoC was read from
    abi: Optional[str]
    abilist: tuple[str, ...]
    android_version: Optional[str]
    sdk: Optional[int]
    low_ram: Optional[bool]
    cores: tuple[CoreInfo, ...]
    mem_total_kb: Optional[int]
    unknown: tuple[str, ...] = ()

    @property
    def ram_mb(self) -> Optional[int]:
        return self.mem_total_kb // 1024 if self.mem_total_kb is not None else None

    @property
    def label(self) -> str:
        """``<model> (<SoC>)``: what a measured row says it was measured on."""
        return f"{self.model or 'unknown model'} ({self.soc or 'unknown SoC'})"

    def clusters(self) -> list[tuple[Optional[str], int, Optional[int]]]:
        """(core, count, max kHz) per group of identical cores, fastest clock first."""
        counts = Counter((c.core, c.max_khz) for c in self.cores)
        return sorted(((core, n, khz) for (core, khz), n in counts.items()), key=lambda g: -(g[2] or 0))

    @property
    def cores_label(self) -> str:
        return " + ".join(f"{n}x {(core or 'unknown').removeprefix('Cortex-')} @ "
                          + (f"{khz / 1e6:.2f} GHz" if khz else "? GHz") for core, n, khz in self.clusters()) or "?"

    def sources(self) -> list[str]:
        """Where each fact was read, one line each (the profile's ``sources``)."""
        lines = [f"adb getprop ro.product.model = {self.model!r}" if self.model else "",
                 f"adb getprop {self.soc_property} = {self.soc!r}" if self.soc else "",
                 f"adb getprop ro.product.cpu.abi = {self.abi!r}" if self.abi else "",
                 f"adb getprop ro.build.version.release = {self.android_version!r}" if self.android_version else "",
                 f"adb getprop ro.config.low_ram = {str(self.low_ram).lower()!r}" if self.low_ram is not None else "",
                 "/proc/cpuinfo CPU implementer:part per core: " + ", ".join(
                     f"cpu{c.index} {c.part or '?'} ({c.core or 'unknown part'})" for c in self.cores),
                 "/sys/devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq per core (kHz): " + ", ".join(
                     f"cpu{c.index} {c.max_khz or '?'}" for c in self.cores),
                 f"/proc/meminfo MemTotal = {self.mem_total_kb} kB" if self.mem_total_kb else ""]
        return [line for line in lines if line] + [f"unknown: {u}" for u in self.unknown]


def _first(props: dict[str, str], *names: str) -> tuple[Optional[str], Optional[str]]:
    for name in names:
        if props.get(name):
            return props[name], name
    return None, None


def read_device(client: AdbClient) -> DeviceInfo:
    """Everything ``DeviceInfo`` holds, read from the phone ``client`` names (one ``getprop``, one
    ``/proc/cpuinfo``, one ``/proc/meminfo``, one cpufreq read per core)."""
    assert client.serial is not None
    unknown: list[str] = []
    props = parse_getprop(client.shell(["getprop"]).stdout)
    soc, soc_property = _first(props, "ro.soc.model", "ro.board.platform", "ro.hardware")
    if soc is None:
        unknown.append("SoC: ro.soc.model, ro.board.platform and ro.hardware empty or unusable")
    abilist = tuple(a for a in (props.get("ro.product.cpu.abilist") or "").split(",") if a in ABIS)
    abi = props.get("ro.product.cpu.abi") if props.get("ro.product.cpu.abi") in ABIS else None
    if abi is None:
        unknown.append(f"ABI: ro.product.cpu.abi is not one of {', '.join(ABIS)}")
    version = props.get("ro.build.version.release")
    if version is not None and not _VERSION.match(version):
        unknown.append("Android version: ro.build.version.release is not a version number")
        version = None
    sdk_text = props.get("ro.build.version.sdk", "")
    sdk = int(sdk_text) if sdk_text.isdigit() and 1 <= int(sdk_text) <= 99 else None
    low_ram = {"true": True, "false": False}.get(props.get("ro.config.low_ram", "false"))
    cores = parse_cpuinfo(client.shell(["cat", "/proc/cpuinfo"]).stdout)
    if not cores:
        unknown.append("cores: /proc/cpuinfo lists no processor")
    with_clock = []
    for core in cores:
        answer = client.shell(["cat", f"/sys/devices/system/cpu/cpu{core.index}/cpufreq/cpuinfo_max_freq"],
                              check=False)
        khz = parse_khz(answer.stdout) if answer.code == 0 else None
        with_clock.append(CoreInfo(core.index, core.part, core.core, khz))
    for core in with_clock:
        if core.core is None:
            unknown.append(f"cpu{core.index}: CPU part {core.part or '(none)'} is not a core lodevem knows")
        if core.max_khz is None:
            unknown.append(f"cpu{core.index}: cpufreq cpuinfo_max_freq unreadable or implausible")
    mem = parse_meminfo(client.shell(["cat", "/proc/meminfo"]).stdout)
    if mem is None:
        unknown.append("RAM: /proc/meminfo has no plausible MemTotal")
    model = props.get("ro.product.model")
    if model is None:
        unknown.append("model: ro.product.model empty or unusable")
    return DeviceInfo(client.serial, model, props.get("ro.product.manufacturer"), soc, soc_property, abi, abilist,
                      version, sdk, low_ram, tuple(with_clock), mem, tuple(unknown))
