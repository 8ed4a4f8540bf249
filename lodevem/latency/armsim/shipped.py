"""armsim profiles shipped with lodevem: the zoo models under the shipped phone profiles' core views
(``data/armsim_zoo_profiles.json``, made by ``scripts/profile_armsim_zoo.py``).

Why: a profile emulates a whole inference (tens of seconds to minutes); the zoo models are what
the demo and the tests run, so their profiles are made once and read by the converted file's
digest (the product's own key, ``profiler.converted_sha256``), the runtime, the core view and the
thread count. A user's file, or a zoo model converted differently, never matches and is emulated.
The records are data the host reads through ``InstructionProfile.parse`` (bounded, type-checked).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional

from ...store import bytes_digest
from ...wire.profile_section import InstructionProfile

SHIPPED_PROFILES: Path = Path(__file__).resolve().parents[2] / "data" / "armsim_zoo_profiles.json"
_MAX_BYTES = 64 << 20


def as_profile(record: Mapping[str, Any]) -> Optional[InstructionProfile]:
    """A stored (dev-format) profile record as the predictor's record; None when malformed."""
    counts = dict(record.get("counts") or {})
    counts.setdefault("total", record.get("total_instructions"))
    counts.setdefault("bytes_loaded", 0)
    counts.setdefault("bytes_stored", 0)
    per_thread = [dict(t.get("counts", {}), total=t.get("total"), bytes_loaded=0, bytes_stored=0)
                  for t in record.get("per_thread") or [] if isinstance(t, Mapping)]
    cycles = record.get("block_cycles") or {}
    blocks = ({"distinct": record.get("blocks_distinct"), "instructions": record.get("blocks_instructions"),
               "llvm": record.get("block_llvm", ""), "cycles": cycles} if cycles else None)
    return InstructionProfile.parse({
        "runtime": record.get("runtime"), "runtime_version": record.get("runtime_version"), "isa": record.get("isa"),
        "qemu_cpu": record.get("qemu_cpu"), "uarch": record.get("uarch"), "precision": record.get("precision"),
        "threads": record.get("threads"), "counts": counts, "per_thread": per_thread,
        "inferences": record.get("inferences"), "seconds": record.get("seconds"),
        "plugin_digest": record.get("plugin_digest"), "model_sha256": record.get("converted_sha256"),
        "options": record.get("runtime_options"), "blocks": blocks, "identity": record.get("identity"),
        "kernels": record.get("kernels")})


def _load(path: str) -> tuple[tuple[InstructionProfile, Mapping[str, Any]], ...]:
    """The file read every time (a few MB), parsed once per content: a file rewritten within the
    same second (or restored with its old mtime) is never answered from a stale parse."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size > _MAX_BYTES:
        return ()
    try:
        raw = p.read_bytes()
    except OSError:
        return ()
    return _parsed(bytes_digest(raw), raw)


@lru_cache(maxsize=2)
def _parsed(sha256: str, raw: bytes) -> tuple[tuple[InstructionProfile, Mapping[str, Any]], ...]:
    try:
        records = json.loads(raw).get("profiles", [])
    except (ValueError, AttributeError):
        return ()
    out = []
    for rec in records if isinstance(records, list) else []:
        prof = as_profile(rec) if isinstance(rec, Mapping) else None
        if prof is not None and isinstance(rec.get("converted_sha256"), str):
            out.append((prof, rec))
    return tuple(out)


def shipped_records(path: Path = SHIPPED_PROFILES) -> tuple[tuple[InstructionProfile, Mapping[str, Any]], ...]:
    """Every shipped profile with its stored record (model, level, digests, input shape); its
    ``model_sha256`` is the converted file's digest the product keys profiles by."""
    return _load(str(path))
