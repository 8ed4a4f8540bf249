"""What a predictor kind says about itself in a paper: its methods sentence, its limitation and the
references it cites, given what one run did with it.

Why here, beside the kinds: the report (``report.methodology``, the legends, the HTML report)
must render a kind it has never heard of, so it reads each kind's own words instead of knowing
estimator, nn-Meter and armsim by name. A kind provides, as class attributes next to ``name`` and
``title`` (``latency.kinds.PredictorKind``):

* ``mark``: the footnote mark its numbers carry in every table (``*``, ``†``, ``‡``);
* ``paper(use) -> KindPaper``: a static method; ``use`` (``KindUse``) is what the run's rows and
  manifest say about the kind: the profiles it gave latencies for, the held-out error figures
  its cells carry, and the manifest's predictor block (every kind's ``describe()``, as recorded,
  so a results folder re-rendered later says what was used then, not what lodevem ships now).

Text uses two tokens the renderers turn into Markdown or LaTeX: ``{cite:KEY}`` (a reference:
``lodevem/data/references.json``, or one of the kind's own ``KindPaper.references``) and
``{code:TEXT}``. The held-out error sentence is not the kind's to write: the report states every
kind's figures the same way, from the cells' ``uncertainty_pct``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Optional

__all__ = ["REFERENCES", "CellFigure", "KindPaper", "KindUse", "Reference", "and_join", "load_references"]

REFERENCES = Path(__file__).resolve().parent.parent / "data" / "references.json"


@dataclass(frozen=True)
class Reference:
    """One BibTeX entry: its key, type (``misc``, ``inproceedings``), fields, and where its fields
    were taken from (``source``: never written from memory alone)."""

    key: str
    entry_type: str
    fields: Mapping[str, str]
    source: str


def load_references(path: Path = REFERENCES) -> dict[str, Reference]:
    """Every entry of ``references.json``, by key."""
    entries = json.loads(Path(path).read_text(encoding="utf-8"))["entries"]
    return {key: Reference(key, str(e["type"]), MappingProxyType({str(k): str(v) for k, v in e["fields"].items()}),
                           str(e.get("source", ""))) for key, e in entries.items()}


@dataclass(frozen=True)
class CellFigure:
    """The held-out error one or more cells state, and the kind of cell it is the figure of."""

    pct: float
    core: str
    threads: int
    arithmetic: str
    runtime: str
    # its basis (latency.statement.basis_text): held-out rows, SoCs, the pool; None: not recorded
    rows: Optional[int] = None
    socs: Optional[int] = None
    pool: Optional[str] = None

    @property
    def basis(self) -> tuple[Optional[int], Optional[int], Optional[str]]:
        return (self.rows, self.socs, self.pool)


@dataclass(frozen=True)
class KindUse:
    """What one run did with one kind: the rows whose latency it made, read by the report.

    ``profiles``: ids of the profiles it served (``total_profiles``: how many the run had),
    ``cells`` of the run's ``total_cells`` latencies;
    ``figures``: the distinct held-out figures of its cells; ``described``: the manifest's
    predictor block; ``packages``: the manifest's package versions."""

    name: str
    profiles: tuple[str, ...]
    total_profiles: int
    cells: int = 0  # the latencies it made, of ``total_cells`` with a latency in the run
    total_cells: int = 0
    whole_profiles: bool = True  # every latency on its profiles is its own
    runtimes: tuple[str, ...] = ()
    cores: tuple[str, ...] = ()
    threads: tuple[int, ...] = ()
    figures: tuple[CellFigure, ...] = ()
    described: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    packages: Mapping[str, Optional[str]] = field(default_factory=lambda: MappingProxyType({}))

    def scope(self) -> str:
        """``every profile`` (every latency of the run is its), ``2 of the profiles (nokia_c1 and
        itel_p37)`` (every latency on those), else ``3 of the 4 latencies (on nokia_c1 and itel_p37)``."""
        if self.cells == self.total_cells and len(self.profiles) == self.total_profiles:
            return "every profile"
        if self.whole_profiles:
            return f"{len(self.profiles)} of the profiles ({and_join(self.profiles)})"
        return f"{self.cells} of the {self.total_cells} latencies (on {and_join(self.profiles)})"

    def block(self, key: str) -> Mapping[str, Any]:
        """One entry of the manifest's predictor block (a kind's own ``describe()`` key), or {}."""
        value = self.described.get(key)
        return value if isinstance(value, Mapping) else {}

    def version(self, package: str) -> str:
        """`` 2.13.0`` when the manifest recorded the package's version, else ``""``."""
        found = self.packages.get(package)
        return f" {found}" if found else ""


@dataclass(frozen=True)
class KindPaper:
    """A kind's own words for one run's methods section.

    ``name``: how the methods and the legends name it ("lodevem's offline estimator");
    ``sentence``: how it produced the latencies of ``KindUse.profiles``; ``pipeline``: a sentence
    several kinds share (the ONNX export and kernel split), written once however many use it;
    ``limitation``: what a reader must know about its figures; ``references``: entries it cites
    that ``references.json`` does not have (a kind of the user's own)."""

    name: str
    sentence: str
    limitation: Optional[str] = None
    pipeline: Optional[str] = None
    references: tuple[Reference, ...] = ()


def and_join(items: Any) -> str:
    """``a``, ``a and b``, ``a, b, and c``."""
    items = [str(i) for i in items]
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]
