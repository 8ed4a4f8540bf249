"""armsim's methods sentence and the cost-model facts the manifest keeps for it (``latency.paper``).

``cost_model_facts`` is what ``ArmsimKind.describe()`` records for every run (whether or not a
profile was made this time: cells served from the cache were priced by this cost model too), so
the sentence a later re-render writes names the cost model the cells came from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...runtimes import ADAPTERS
from ..cache import digest
from ..paper import KindPaper, KindUse, and_join
from ..papers import data_references
from .isa import QEMU_CPU

__all__ = ["armsim_paper", "cost_model_facts"]


def cost_model_facts() -> dict[str, Any]:
    """The shipped cost model as the methods cite it ({} when its parameters file is absent)."""
    from .costmodel import DEFAULT_PARAMS

    try:
        params = json.loads(DEFAULT_PARAMS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    provenance = params.get("provenance") or {}
    block = params.get("block_model") or {}
    categories = (params.get("uncertainty") or {}).get("categories") or {}
    return {"version": params.get("version"), "params_sha256": digest(params), "fit_date": provenance.get("fit_date"),
            "rows_used": provenance.get("rows_used"), "data_file": provenance.get("data_file"),
            "block_models": dict(block.get("models") or {}), "qemu_cpus": dict(QEMU_CPU),
            "lodo_1t_fp32_pct": (categories.get("1t_fp32") or {}).get("mape_pct"),
            # the dev rows' sources, as provenance.board_dates_source and board_dates name them
            "data_sources": ["Tencent/ncnn benchmark/README.md", "google/XNNPACK README.md"]
            if provenance.get("data_file") else []}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _cores(cores: Any) -> str:
    """``Cortex-A53 and Cortex-A55 cores``: only the core types the run priced (the CPU models
    behind them are converter internals: the manifest's ``block_models`` / ``qemu_cpus``)."""
    named = and_join(list(cores))
    return f"{named} core{'s' if len(cores) != 1 else ''}" if named else "cores"


def armsim_paper(use: KindUse) -> KindPaper:
    """The runtime's own Arm code run on an emulated core, its executed blocks priced by llvm-mca."""
    a = use.block("armsim")
    refs = data_references(a.get("data_sources"))
    data = and_join([f"{name} {{cite:{key}}}" for key, name in refs]) if refs else "ARM boards"
    runtimes = and_join([f"{ADAPTERS[r].cited.name} {{cite:{ADAPTERS[r].cited.key}}}" if r in ADAPTERS else r
                         for r in use.runtimes]) or "the runtime"
    sentence = (
        f"For {use.scope()}, armsim {a.get('version') or ''} gave the latency: the model was converted in the "
        f"sandbox to the file {runtimes} loads and run once with that runtime's Arm build under QEMU's user-mode "
        "emulation {cite:qemu} (its CPU model chosen by instruction set); a TCG plugin of lodevem's counted every "
        "executed translation block, and LLVM's machine-code analyzer llvm-mca {cite:llvmmca} {cite:llvm} priced "
        f"each block under a pipeline model for the family of the run's {_cores(use.cores)} (each family's model "
        "chosen by its held-out error; the CPU models are recorded in the run's manifest), scaled by one fitted "
        "constant per core and divided by the clock, with an Amdahl speed-up per core for several threads. "
        f"The cost model was fitted ({a.get('fit_date') or 'on an unrecorded date'}) on "
        f"{a.get('rows_used') if a.get('rows_used') is not None else 'the'} published latencies of {data} "
        "measured on ARM boards, with each of those models profiled the same way.")
    limitation = ("armsim emulates the instruction set, not the core: it has no cache or memory model (memory "
                  "stalls are folded into the fitted per-core constants), QEMU's CPU model is chosen by instruction "
                  "set (a Cortex-A55 runs as a Cortex-A76), a family's llvm-mca model may be another core's, and "
                  "its figures rest on a handful of boards per core.")
    return KindPaper("armsim emulated core", sentence, limitation)
