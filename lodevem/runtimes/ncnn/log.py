"""ncnn ``benchncnn`` logs: the device benchmark that calibrates an ncnn profile."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from ...errors import InputError
from ..logs import NUMBER, LogEntry, ParsedLog

__all__ = ["parse_log"]

# "        mobilenet_v2  min =   23.45  max =   25.67  avg =   24.12"
_LINE = re.compile(r"^\s*(\S+)\s+min\s*=\s*" + NUMBER + r"\s+max\s*=\s*" + NUMBER + r"\s+avg\s*=\s*" + NUMBER)
_SETTING = re.compile(r"^\s*(loop_count|num_threads|powersave|gpu_device|cooling_down)\s*=\s*(-?\d+)\s*$")


def parse_log(lines: Sequence[str], where: str) -> Optional[ParsedLog]:
    """The log's per-model averages (ms), or None when it is not a benchncnn log; a GPU run is
    refused naming ``where`` (lodevem predicts CPU latency)."""
    entries: list[LogEntry] = []
    settings: dict[str, int] = {}
    for line in lines:
        setting = _SETTING.match(line)
        if setting:
            settings[setting.group(1)] = int(setting.group(2))
            continue
        match = _LINE.match(line)
        if match:
            entries.append(LogEntry(match.group(1), float(match.group(4))))
    if not entries:
        return None
    if settings.get("gpu_device", -1) != -1:
        raise InputError(f"{where}: benchncnn ran on GPU device {settings['gpu_device']}; lodevem predicts "
                         "CPU latency (rerun with gpu_device = -1)")
    return ParsedLog("ncnn", "benchncnn", settings.pop("num_threads", None), tuple(entries),
                     ", ".join(f"{k}={v}" for k, v in settings.items()))
