"""SoC memory systems: caches and DRAM per SoC, with sources, read from ONE table (``data/socs.yaml``).

Why a table keyed by SoC and not fields in each profile: two phones on the same SoC have the same
caches and memory controller, the latency fit's dev rows name SoCs, not phones, and a fact typed
twice drifts. Profiles keep their own YAML fields and resolve their ``chipset:`` (or an explicit
``soc:``) here; ``lodevem.latency.memory`` turns a SoC's facts into the bytes a kernel must
stream from DRAM and the time that takes.

A fact nobody publishes is ``unknown`` in the table (``None`` here) with what was searched in its
source string; the reader never fills it in. ``benchmarks/data/soc-memory-new.csv`` rows (one per
SoC and cluster) can be read with ``socs_from_csv`` and are merged where the table has no entry.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import yaml

from .errors import ProfileError
from .safe_io import PROFILE, UnsafeInput, read_text
from .safe_io.yaml_loader import ProfileYamlLoader

__all__ = ["DEFAULT_TABLE", "ClusterCache", "Dram", "SocMemory", "SocTable", "load_table", "markdown",
           "socs_from_csv"]

DEFAULT_TABLE: Path = Path(__file__).resolve().parent / "data" / "socs.yaml"
UNKNOWN = "unknown"
CSV_COLUMNS = ("soc", "cluster_core", "l1d_kib", "l2_kib", "l2_shared", "l3_kib", "dram_type", "dram_channels",
               "dram_bus_bits", "dram_mts", "peak_dram_gbs", "source")


@dataclass(frozen=True)
class ClusterCache:
    """One CPU cluster's caches: ``l1d_kib`` per core; ``l2_kib`` per cluster when ``l2_shared``,
    else per core (DynamIQ cores). None: not published."""

    core: str
    count: Optional[int]
    l1d_kib: Optional[float]
    l2_kib: Optional[float]
    l2_shared: Optional[bool]


@dataclass(frozen=True)
class Dram:
    """The DRAM interface: type, channels, total bus width, data rate and peak bandwidth (GB/s)."""

    type: Optional[str]
    channels: Optional[int]
    bus_bits: Optional[int]
    data_rate_mts: Optional[float]
    peak_gbs: Optional[float]


@dataclass(frozen=True)
class SocMemory:
    """One SoC's memory system with the sources of its cache and its DRAM facts."""

    soc: str
    aliases: tuple[str, ...]
    clusters: tuple[ClusterCache, ...]
    l3_kib: Optional[float]
    cache_source: str
    dram: Dram
    dram_source: str

    def cluster(self, core: str) -> Optional[ClusterCache]:
        """The (first) cluster of ``core`` on this SoC (None: the SoC has no such cluster)."""
        return next((c for c in self.clusters if c.core == core), None)

    def summary(self) -> str:
        """One line for ``lodevem show`` and the docs: caches per cluster, L3, DRAM."""
        def kib(v: Optional[float]) -> str:
            return "?" if v is None else (f"{v / 1024:g} MiB" if v >= 1024 else f"{v:g} KiB")
        parts = [f"{c.core}: L1d {kib(c.l1d_kib)}, L2 {kib(c.l2_kib)}"
                 f"{'' if c.l2_shared is None else ' shared' if c.l2_shared else ' per core'}" for c in self.clusters]
        parts.append(f"L3 {'none' if self.l3_kib == 0 else kib(self.l3_kib)}")
        d = self.dram
        bus = f"{d.channels or '?'}ch {d.bus_bits or '?'}-bit" if (d.channels or d.bus_bits) else "width ?"
        rate = f"{d.data_rate_mts:g} MT/s" if d.data_rate_mts else "rate ?"
        peak = f"{d.peak_gbs:g} GB/s" if d.peak_gbs else "peak ?"
        parts.append(f"DRAM {d.type or '?'} {bus} {rate} = {peak}")
        return "; ".join(parts)


def _opt_num(value: Any, where: str, integer: bool = False) -> Optional[float]:
    if value is None or (isinstance(value, str) and value.strip().lower() in (UNKNOWN, "")):
        return None
    if isinstance(value, bool):
        raise ProfileError(f"{where}: expected a number or 'unknown', got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ProfileError(f"{where}: expected a number or 'unknown', got {value!r}") from None
    if number < 0:
        raise ProfileError(f"{where}: expected a non-negative number, got {value!r}")
    return float(int(number)) if integer else number


def _opt_bool(value: Any, where: str) -> Optional[bool]:
    if value is None or (isinstance(value, str) and value.strip().lower() in (UNKNOWN, "")):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    raise ProfileError(f"{where}: expected true, false or 'unknown', got {value!r}")


def _opt_text(value: Any) -> Optional[str]:
    text = str(value).strip() if value is not None else ""
    return None if text.lower() in (UNKNOWN, "") else text


def _int(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(value)


def _entry(raw: Mapping[str, Any], where: str) -> SocMemory:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("soc"), str):
        raise ProfileError(f"{where}: each entry needs a 'soc' name")
    name = raw["soc"]
    here = f"{where}: {name}"
    clusters = []
    for i, c in enumerate(raw.get("clusters") or ()):
        if not isinstance(c, Mapping) or not isinstance(c.get("core"), str):
            raise ProfileError(f"{here}: cluster {i + 1} needs a 'core'")
        clusters.append(ClusterCache(c["core"], _int(_opt_num(c.get("count"), f"{here} count", True)),
                                     _opt_num(c.get("l1d_kib"), f"{here} l1d_kib"),
                                     _opt_num(c.get("l2_kib"), f"{here} l2_kib"),
                                     _opt_bool(c.get("l2_shared"), f"{here} l2_shared")))
    if not clusters:
        raise ProfileError(f"{here}: no clusters")
    d = raw.get("dram") or {}
    if not isinstance(d, Mapping):
        raise ProfileError(f"{here}: 'dram' must be a mapping")
    dram = Dram(_opt_text(d.get("type")), _int(_opt_num(d.get("channels"), f"{here} channels", True)),
                _int(_opt_num(d.get("bus_bits"), f"{here} bus_bits", True)),
                _opt_num(d.get("data_rate_mts"), f"{here} data_rate_mts"),
                _opt_num(d.get("peak_gbs"), f"{here} peak_gbs"))
    if dram.peak_gbs is not None and dram.bus_bits and dram.data_rate_mts:
        expected = dram.bus_bits / 8 * dram.data_rate_mts / 1000
        if abs(expected - dram.peak_gbs) > 0.05 * expected:
            raise ProfileError(f"{here}: peak_gbs {dram.peak_gbs:g} is not bus_bits / 8 x MT/s ({expected:.1f})")
    for key in ("cache_source", "dram_source"):
        if not str(raw.get(key) or "").strip():
            raise ProfileError(f"{here}: '{key}' is required (where the facts come from)")
    aliases = tuple(str(a) for a in raw.get("aliases") or ())
    return SocMemory(name, aliases, tuple(clusters), _opt_num(raw.get("l3_kib"), f"{here} l3_kib"),
                     str(raw["cache_source"]), dram, str(raw["dram_source"]))


def _key(name: str) -> str:
    return " ".join(name.lower().replace("(", " ").replace(")", " ").split())


class SocTable:
    """Every SoC's memory system, found by its name or an alias (case and spacing ignored)."""

    def __init__(self, entries: Iterable[SocMemory]) -> None:
        self.entries: tuple[SocMemory, ...] = tuple(entries)
        self._index: dict[str, SocMemory] = {}
        for e in self.entries:
            for name in (e.soc, *e.aliases):
                if _key(name) in self._index and self._index[_key(name)] is not e:
                    raise ProfileError(f"{DEFAULT_TABLE.name}: '{name}' names two SoCs")
                self._index[_key(name)] = e

    def find(self, name: Optional[str]) -> Optional[SocMemory]:
        """The SoC ``name`` (or an alias) names; also tries the name without a vendor prefix."""
        if not name:
            return None
        key = _key(name)
        if key in self._index:
            return self._index[key]
        tail = key.split(" ", 1)[1] if " " in key else key
        return self._index.get(tail)

    def merged(self, extra: Iterable[SocMemory]) -> "SocTable":
        """This table plus the SoCs of ``extra`` it has no entry for (the table wins)."""
        return SocTable([*self.entries, *(e for e in extra if self.find(e.soc) is None)])


def _read(path: Path) -> Any:
    try:
        return yaml.load(read_text(path, PROFILE), Loader=ProfileYamlLoader)  # noqa: S506 - strict SafeLoader
    except (OSError, UnsafeInput) as exc:
        raise ProfileError(f"{path}: cannot read the SoC table ({getattr(exc, 'strerror', None) or exc})") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not a valid SoC table ({type(exc).__name__})") from None


@lru_cache(maxsize=4)
def load_table(path: Optional[Path] = None) -> SocTable:
    """The SoC table (``data/socs.yaml`` by default), read once per process."""
    path = Path(path) if path is not None else DEFAULT_TABLE
    data = _read(path)
    if not isinstance(data, Mapping) or not isinstance(data.get("socs"), list):
        raise ProfileError(f"{path}: expected a mapping with a 'socs' list")
    return SocTable(_entry(raw, str(path.name)) for raw in data["socs"])


def socs_from_csv(text: str, where: str = "soc-memory CSV") -> list[SocMemory]:
    """SoCs from a CSV with ``CSV_COLUMNS`` (one row per SoC and cluster; DRAM and L3 columns
    repeat per row); the ``source`` column is both the cache and the DRAM source."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ProfileError(f"{where}: missing columns {', '.join(missing)}")
    grouped: dict[str, list[dict[str, str]]] = {}
    for row in reader:
        grouped.setdefault(row["soc"].strip(), []).append(row)
    out = []
    for soc, rows in grouped.items():
        first = rows[0]
        raw = {"soc": soc, "clusters": [{"core": r["cluster_core"].strip(), "l1d_kib": r["l1d_kib"],
                                          "l2_kib": r["l2_kib"], "l2_shared": r["l2_shared"]} for r in rows],
               "l3_kib": first["l3_kib"], "cache_source": first["source"], "dram_source": first["source"],
               "dram": {"type": first["dram_type"], "channels": first["dram_channels"],
                        "bus_bits": first["dram_bus_bits"], "data_rate_mts": first["dram_mts"],
                        "peak_gbs": first["peak_dram_gbs"]}}
        out.append(_entry(raw, where))
    return out


def markdown(table: Optional[SocTable] = None) -> str:
    """``docs/socs.md``: every SoC's memory system and sources (a test checks the file equals it)."""
    table = table or load_table()
    lines = ["# SoC memory systems", "",
             "Generated from `lodevem/data/socs.yaml` by `python -m lodevem.socs > docs/socs.md` (a test checks it).",
             "`?` = not published (the source says what was searched); the latency model then uses the median of",
             "the SoCs that publish it (`lodevem/latency/memory.py`) and the prediction's note says so.", "",
             "| SoC | caches and DRAM | cache source | DRAM source |", "|---|---|---|---|"]
    for e in table.entries:
        cells = [e.soc, e.summary(), e.cache_source, e.dram_source]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
