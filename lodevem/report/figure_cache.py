"""Draw a figure only when its inputs changed; otherwise keep the PNG/PDF already written.

Why: importing matplotlib and drawing three figures is ~0.5 s, a large share of a rerun whose
every pair was a cache hit. Each figure's inputs (the rows with every field but
``memory_cached``, which says only whether the measurement was redone; the profiles it is laid
out by; the lodevem and matplotlib versions; the source of the drawing code) are digested
without importing matplotlib, and the digest is kept beside the figure in
``.<stem>.inputs.json`` together with the sha256 of the PNG and the PDF it produced. The files
are reused only when the digest matches and both files are still the ones written; anything
else (a changed row or profile, a new matplotlib, an edited or deleted PNG) draws again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..latency.cache import digest, file_digest
from ..profiles import Profile
from ..results import PairResult
from ..safe_io import CACHE_RECORD, read_text
from ..safe_io.records import parse_json
from ..store.files import write_json_file
from ..version import __version__
from .cells import ACCURACY, HEATMAP, MIN_RAM, SCATTER

EXTENSIONS = ("png", "pdf")
_HERE = Path(__file__).resolve().parent
# the code that draws a figure (profiles.py: TIERS' captions; legend.py: the marks' lines): a change to
# it redraws the figures
_DRAWING_CODE = (_HERE / "figure_kit.py", _HERE / "plots.py", _HERE / "scatter.py", _HERE / "cells.py",
                 _HERE / "legend.py", _HERE / "tradeoff.py", _HERE.parent / "profiles.py")


# Row fields that say how this run got a figure (from the cache, converted just now), not what
# it is: a rerun served from the caches draws the same figures
_RUN_FACTS = ("memory_cached", "conversion_s")


@dataclass(frozen=True)
class FigureOutcome:
    """The files of one figure and whether they were drawn in this run or kept from the last."""

    stem: str
    paths: tuple[Path, ...]
    reused: bool


def _matplotlib_version() -> Optional[str]:
    try:
        return metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        return None


def inputs_digest(stem: str, rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]]) -> str:
    """The digest of everything that decides what figure ``stem`` looks like."""
    row_data = []
    for row in rows:
        data = row.to_dict()
        for run_fact in _RUN_FACTS:
            data.pop(run_fact, None)
        row_data.append(data)
    return digest({
        "figure": stem,
        "lodevem": __version__,
        "matplotlib": _matplotlib_version(),
        "code": [file_digest(p) for p in _DRAWING_CODE],
        "rows": row_data,
        "profiles": [p.model_dump(mode="json", exclude={"path", "sha256"}) for p in profiles or ()],
    })


def _record_path(out_dir: Path, stem: str) -> Path:
    return Path(out_dir) / f".{stem}.inputs.json"


def kept_files(out_dir: Path, stem: str, key: str) -> Optional[tuple[Path, ...]]:
    """The figure's files when the last drawing had these inputs and they are unchanged."""
    try:
        record = parse_json(read_text(_record_path(out_dir, stem), CACHE_RECORD, follow=False), stem)  # bounded
        if record.get("inputs_sha256") != key:
            return None
        paths = tuple(Path(out_dir) / f"{stem}.{ext}" for ext in EXTENSIONS)
        if any(file_digest(p) != record["files"][p.name] for p in paths):
            return None
    except (InputError, OSError, ValueError, KeyError, TypeError, AttributeError):  # UnsafeInput, BadRecord
        return None
    return paths


def remember(out_dir: Path, stem: str, key: str, paths: Sequence[Path]) -> None:
    """Record the inputs of a figure just drawn, with the digest of each file it wrote."""
    record = {"inputs_sha256": key, "lodevem": __version__, "files": {p.name: file_digest(p) for p in paths}}
    write_json_file(_record_path(out_dir, stem), record, indent=1)


def write_figures(rows: Sequence[PairResult], profiles: Optional[Sequence[Profile]],
                  out_dir: Path) -> list[FigureOutcome]:
    """Every figure the rows call for, each drawn only if its inputs changed (see the module)."""
    out_dir = Path(out_dir)
    wanted = [(HEATMAP, profiles), (SCATTER, profiles)]
    if any(r.memory.min_ram_mb is not None for r in rows):
        wanted.append((MIN_RAM, None))
    if any(r.accuracy.top1_pct is not None for r in rows):  # --eval-data
        wanted.append((ACCURACY, profiles))
    outcomes = []
    for stem, laid_out_by in wanted:
        key = inputs_digest(stem, rows, laid_out_by)
        kept = kept_files(out_dir, stem, key)
        if kept is not None:
            outcomes.append(FigureOutcome(stem, kept, True))
            continue
        from . import plots  # matplotlib: only when something is drawn

        if stem == HEATMAP:
            paths = plots.latency_heatmap(rows, profiles, out_dir)
        elif stem == SCATTER:
            from .scatter import latency_vs_ram

            paths = latency_vs_ram(rows, profiles, out_dir)
        elif stem == ACCURACY:
            from .tradeoff import accuracy_tradeoff

            paths = accuracy_tradeoff(rows, profiles, out_dir)
        else:
            paths = plots.min_ram_bar(rows, out_dir)
        if paths:
            remember(out_dir, stem, key, paths)
        outcomes.append(FigureOutcome(stem, tuple(paths), False))
    return outcomes
