"""The measurement cache: one record per measurement, keyed by everything it depends on.

Why in the memory wing: the key and the rule of what is kept (no timeouts, no errors) are the
memory stage's logic; ``measure`` (the face) runs the measurements and asks here first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ..results import MEASUREMENT_LAYOUT, MemoryMeasurement
from ..store import ArtifactStore, digest
from ..wire.verdict import Verdict

__all__ = ["MeasureCache", "cache_key"]


def cache_key(model_sha256: str, limit_mb: int, runtime: str, identity: str, worker_version: str, warmup: int,
              runs: int, threads: int, input_shape: Optional[Sequence[int]], *level: str) -> str:
    """Everything a measurement depends on; ``identity`` is the image id (or the host python),
    ``worker_version`` the version the worker reports (the client refuses any other), ``level``
    the level a tflite/ncnn conversion makes from the file (none: the file as it is). The record's
    layout (``MEASUREMENT_LAYOUT``) is part of it: a record of another layout is a miss, not misread."""
    return digest([f"measurement-layout-{MEASUREMENT_LAYOUT}", model_sha256, limit_mb, runtime, identity,
                   worker_version, warmup, runs, threads,
                   list(input_shape) if input_shape else None, *level])


class MeasureCache:
    """One record per measurement, kind ``measure`` of the artifact store."""

    KIND = "measure"

    def __init__(self, store: Optional[ArtifactStore]) -> None:
        self.store = store

    def get(self, key: str) -> Optional[MemoryMeasurement]:
        # typed and range-checked; a bad record (a peak of "x") is set aside and measured again
        record = self.store.get_record(self.KIND, key, MemoryMeasurement.from_dict) if self.store is not None else None
        return replace(record, cached=True) if record is not None else None

    def put(self, key: str, value: MemoryMeasurement) -> None:
        # Timeouts say more about the machine than the model, and errors can be fixed without
        # changing the file (permissions, a worker bug): neither is cached. Both are quick to redo
        # or deserve a retry.
        if self.store is None or value.verdict in (Verdict.TIMEOUT, Verdict.ERROR):
            return
        self.store.put_record(self.KIND, key, value.to_dict())
