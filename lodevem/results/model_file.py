"""``ModelFile``: one model file from the command line to its rows.

Why a module of its own: a file's identity (path, label, digest, level, precision) is settled
once, before any stage runs, and every later record points back at it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..sandbox.client import ModelSection, SparsitySection
from ..store import file_digest as file_sha256


@dataclass(frozen=True)
class ModelFile:
    """One model to benchmark: a user's file as given, or a variant derived from it (``level``).

    ``path``/``sha256`` are the user's file (what rows and the manifest name). The run fills the
    rest as it learns it (``dataclasses.replace``): ``variant_path`` is the file derived in the
    sandbox for a level (what is measured: the variant alone, not the original's load),
    ``graph_path`` the ONNX export the latency is predicted from, ``unusable`` why the model
    cannot be measured at all (a derivation failed). ``size_bytes``, ``format`` and ``params``
    describe the file that is measured.
    """

    path: Path
    label: str
    sha256: str
    size_bytes: int
    level: Optional[str] = None
    variant_path: Optional[Path] = None
    variant_sha256: Optional[str] = None
    note: str = ""
    graph_path: Optional[Path] = None
    graph_error: str = ""
    unusable: Optional[str] = None
    format: Optional[str] = None
    params: Optional[int] = None
    runtime: Optional[str] = None  # what measures it (with several --runtime values: one model per runtime)
    class_name: Optional[str] = None
    sparsity: Optional[SparsitySection] = None  # zeros in the Conv/Linear weights (pruned files)
    channels_removed_graph: Optional[Path] = None  # the export with the all-zero channels removed
    precision: Optional[str] = None  # fp32 | fp16 | int8-dynamic | int8-static | mixed (the worker's twin)
    quantization: Optional[str] = None  # "scheme, backend", e.g. "static, onnxruntime QDQ"
    input_shape: Optional[tuple[int, ...]] = None  # what it is exported, measured and predicted with
    # wire.shape_sources: "given" | "evaluation data" | "fine-tuning data" | "recorded in the file" | "default"
    input_shape_source: Optional[str] = None
    precision_by_class: tuple[tuple[str, str, int], ...] = ()  # (kernel kind, precision, count), from the export
    # tflite/ncnn rows of fp16/int8/int8-static: the level the runtime's own converter makes from the
    # fp32 source while converting (not a PyTorch-derived variant: ``runner.models.derive``)
    convert_level: Optional[str] = None
    classes: Optional[int] = None  # the model's outputs (its export's last output dimension), None: unknown
    # the float file of the same network this compressed file of the user's sits beside (its label;
    # ``with_levels``), None: a float file, or no float file of the run is the same network
    variant_of: Optional[str] = None

    @classmethod
    def from_path(cls, path: Path, label: Optional[str] = None, level: Optional[str] = None) -> "ModelFile":
        """Hash (never load) the file; reading it also warms its page cache on the host."""
        path = Path(path)
        return cls(path, label or str(path), file_sha256(str(path)), path.stat().st_size,
                   None if level == "fp32" else level)

    @property
    def measured_path(self) -> Path:
        """The file the memory measurement loads: the derived variant, else the user's file."""
        return self.variant_path or self.path

    @property
    def measured_sha256(self) -> str:
        return self.variant_sha256 or self.sha256

    @property
    def measured_key(self) -> str:
        """What one measurement stands for: the measured file's content, and the level its
        conversion makes (the fp32 source converted at fp16 is another file to measure)."""
        return f"{self.measured_sha256}@{self.convert_level}" if self.convert_level else self.measured_sha256

    @property
    def runs_as_is(self) -> bool:
        """Whether torch (onnxruntime for an ``.onnx``) runs the very file this row measures: the
        user's file, or a derived variant (pruned). Where a tflite/ncnn converter cannot take such a
        file, its rows are measured under torch instead (``torch (fallback)``, issue 38), never an
        error row; a level the converter itself makes (``convert_level``) has no torch form."""
        return self.convert_level is None


def label_models(paths: Sequence[Path], levels: Sequence[str] = ()) -> list[ModelFile]:
    """Check the files exist and give each a row label: its file name, made unambiguous.

    Two files named ``model.pt`` in different folders become ``a/model.pt`` and ``b/model.pt``
    (the shortest distinguishing parent path). The same file given twice is benchmarked once.
    With ``levels``, each file yields one model per level, labelled ``<label>@<level>``
    (``fp32`` is the file as given).
    """
    unique: dict[Path, Path] = {}
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: model file not found")
        if not path.is_file():
            raise InputError(f"{path}: not a file (expected a model file such as model.pt)")
        unique.setdefault(path.resolve(), path)
    resolved = list(unique)
    labels = {p: p.name for p in resolved}
    depth = 1
    while len(set(labels.values())) < len(labels) and depth < 32:
        depth += 1
        clashing = {lab for lab in labels.values() if list(labels.values()).count(lab) > 1}
        for p in resolved:
            if labels[p] in clashing:
                labels[p] = "/".join(p.parts[-depth:])
    models = []
    for p in resolved:
        model = ModelFile.from_path(p, labels[p])
        if not levels:
            models.append(model)
        for level in levels:
            models.append(dataclasses.replace(model, label=f"{labels[p]}@{level}",
                                              level=None if level == "fp32" else level))
    return models


_EMPTY = ModelSection()


def compressed(found: ModelSection) -> Optional[str]:
    """What makes a user's file already compressed, as its export found it (``int8-static``,
    ``fp16``, ``pruned``...), or None for a float file: levels are derived from float files only."""
    if found.precision not in (None, "fp32"):
        return found.precision
    return "pruned" if found.sparsity is not None and found.sparsity.pruned else None


def _network(found: ModelSection) -> tuple[object, ...]:
    """What the files say about the network they hold: the input and output they take and give
    (the layer shapes behind them are the same when one file is the other quantized)."""
    return (found.input_shape, found.output_shape)


def with_levels(files: Sequence[ModelFile], levels: Sequence[str],
                found: Mapping[Path, ModelSection]) -> list[ModelFile]:
    """The run's models from the user's files (``label_models``, one each) and what their exports
    found (``found``, by path): a float file yields one model per ``--levels`` level, labelled
    ``<label>@<level>``; a file that is already compressed (``compressed``: a PT2E int8 program, a
    quantize_dynamic TorchScript, an fp16 or pruned file) is one row under its own name, never
    derived again (its ``@fp32`` would mislabel it, its ``@int8`` quantize int8 twice), placed right
    after the float file of the same network (``_network``; the closest name when several match),
    whose label it carries in ``variant_of``."""
    floats = [f for f in files if compressed(found.get(f.path) or _EMPTY) is None]
    out: dict[str, list[ModelFile]] = {}
    for file in floats:
        out[file.label] = ([file] if not levels else
                           [dataclasses.replace(file, label=f"{file.label}@{level}",
                                                level=None if level == "fp32" else level) for level in levels])
    orphans = []
    for file in files:
        if file in floats:
            continue
        network = _network(found.get(file.path) or _EMPTY)
        same = [f for f in floats if network[1] is not None and _network(found.get(f.path) or _EMPTY) == network]
        if not same:
            orphans.append(file)
            continue
        sibling = max(same, key=lambda f: (len(os.path.commonprefix([f.path.name, file.path.name])), -floats.index(f)))
        out[sibling.label].append(dataclasses.replace(file, variant_of=sibling.label))
    return [m for group in out.values() for m in group] + orphans


# --- what the sandbox runs produced (one record per run kind) ---------------------------------
