"""A JSON cache for latency work, so that a rerun of unchanged inputs imports no nn-Meter.

Why: extracting a model's kernels needs ``nn_meter`` (~1.2 s to import, with scikit-learn and
scipy) and ``onnx``; for a rerun whose every (model, profile) pair is unchanged that is most of
the command's time although nothing new is computed. So the predictor stores each finished
prediction here, one JSON file per key under ``<output>/.cache/latency`` (never pickle: the
host must not unpickle what a run wrote), and looks it up before doing any work.

The cache knows nothing of what it stores: the caller builds the key from *everything* that
determines the value (``digest`` of a JSON-able description) and converts its records to and
from plain dicts. A key part forgotten is a stale hit, so ``PredictorPool.cache_identity`` lists
them in one place. Entries are written atomically; an unreadable or foreign entry is a miss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

from ..safe_io import CACHE_RECORD, UnsafeInput, read_bytes
from ..safe_io.records import BadRecord, parse_json
from ..store import digest, file_digest, write_json_file

__all__ = ["CACHE_FORMAT", "JsonCache", "digest", "file_digest"]

# Bump when the stored layout changes (the key includes it, so old entries become misses).
CACHE_FORMAT = 1


# ``digest`` / ``file_digest``: the one digest helper, the artifact store's (re-exported here).


class JsonCache:
    """``key -> dict`` in ``<directory>/<key>.json``; ``enabled=False`` never reads (but writes).

    ``directory=None`` is a cache that neither reads nor writes (library users without an
    output folder).
    """

    def __init__(self, directory: Optional[Path], enabled: bool = True) -> None:
        self.dir = Path(directory) if directory is not None else None
        self.enabled = enabled and self.dir is not None

    def get(self, key: str) -> Optional[dict[str, Any]]:
        if not self.enabled or self.dir is None:
            return None
        try:  # bounded: a record nested 100,000 deep (a shared armsim folder) is a miss, not a RecursionError
            payload = parse_json(read_bytes(self.dir / f"{key}.json", CACHE_RECORD, follow=False), key)
        except (UnsafeInput, BadRecord):  # missing, not a regular file, too big, not JSON, too deep, NaN: a miss
            return None
        if not isinstance(payload, dict) or payload.get("cache_format") != CACHE_FORMAT:
            return None
        value = payload.get("value")
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        if self.dir is None:
            return
        write_json_file(self.dir / f"{key}.json", {"cache_format": CACHE_FORMAT, "value": dict(value)}, indent=1,
                   default=str)


def prediction_sources() -> list[Path]:
    """The source files a prediction's number comes from: the facade, the latency wing, and the
    vocabulary and registry it reads (an edited cost model must not be served from the cache)."""
    package = Path(__file__).resolve().parent.parent
    return [*sorted((package / "predict").glob("*.py")), *sorted((package / "latency").rglob("*.py")),
            package / "wire" / "precision.py", package / "wire" / "registry.py"]
