"""The run manifest: everything needed to say where a results file came from and to redo it.

Stored as the ``environment`` block of ``benchmark_results.json``: typed records here, with
``to_dict``/``from_dict``; collected by ``report.environment`` (cheap, side-effect free, every
failed probe ``None``: a missing fact must never cost the user their results).

How to reproduce a run from a manifest:

1. Check out ``lodevem.git_commit`` (``git_dirty: true`` means the tree had local edits, so the
   commit alone is not the code that ran) and install the ``packages`` versions listed, on a
   host of the same ``host.cgroup_version``; predicted latencies depend only on the code, the
   model and the profiles, peak RAM also on the runtime in the image.
2. Rebuild or load the benchmark image and compare its id with ``backend.image_id``.
3. Check the inputs against their hashes: ``sha256sum`` each model (``models[].sha256``) and
   each profile YAML (``profiles[].sha256``; custom profiles are listed with their path).
4. Run ``command`` (the exact command line, shell-quoted) from the same working directory.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from ..safe_io import fields
from ..worker.evaluate.images import Preprocessing
from .run_record import RunDescription

if TYPE_CHECKING:
    from ..accuracy.data import EvalData

__all__ = ["MANIFEST_VERSION", "BackendInfo", "DataSetEntry", "HostInfo", "LodevemSource", "Manifest",
           "ManifestLike", "ProfileEntry", "PythonInfo", "RuntimeEntry", "manifest_dict"]

MANIFEST_VERSION = 1


def _text(data: Mapping[str, Any], key: str) -> Optional[str]:
    return fields.text(data.get(key))


def _int(data: Mapping[str, Any], key: str) -> Optional[int]:
    return fields.integer(data.get(key))


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return fields.mapping(data.get(key))


@dataclass(frozen=True)
class LodevemSource:
    """The lodevem code that ran: version, and the git commit of an editable install."""

    version: str
    git_commit: Optional[str]
    git_dirty: Optional[bool]
    source: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LodevemSource":
        dirty = data.get("git_dirty")
        return cls(_text(data, "version") or "", _text(data, "git_commit"),
                   dirty if isinstance(dirty, bool) else None, _text(data, "source") or "")


@dataclass(frozen=True)
class PythonInfo:
    version: str
    implementation: str
    executable: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PythonInfo":
        return cls(_text(data, "version") or "", _text(data, "implementation") or "", _text(data, "executable") or "")


@dataclass(frozen=True)
class HostInfo:
    """The machine the memory was measured on (the latency is predicted, not measured here)."""

    cpu_model: Optional[str]
    cpu_count: Optional[int]
    cpu_affinity: Optional[int]
    mem_total_mb: Optional[int]
    machine: Optional[str]
    kernel: Optional[str]
    os: Optional[str]
    cgroup_version: Optional[str]  # "v1", "v2"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "HostInfo":
        return cls(_text(data, "cpu_model"), _int(data, "cpu_count"), _int(data, "cpu_affinity"),
                   _int(data, "mem_total_mb"), _text(data, "machine"), _text(data, "kernel"), _text(data, "os"),
                   _text(data, "cgroup_version"))


@dataclass(frozen=True)
class BackendInfo:
    """What measured: the backend, its measurement image, every image the run used (tag -> id)."""

    name: str
    image_id: Optional[str]
    images: Mapping[str, str] = field(default_factory=dict)
    docker_server_version: Optional[str] = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BackendInfo":
        images = _section(data, "images")
        return cls(_text(data, "name") or "", _text(data, "image_id"), {str(k): str(v) for k, v in images.items()},
                   _text(data, "docker_server_version"))


@dataclass(frozen=True)
class ProfileEntry:
    """A profile the run used, with the digest of its YAML (custom ones with their path)."""

    id: str
    tier: str
    ram_mb: Optional[int]
    path: Optional[str]
    sha256: Optional[str]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ProfileEntry":
        return cls(_text(data, "id") or "", _text(data, "tier") or "", _int(data, "ram_mb"), _text(data, "path"),
                   _text(data, "sha256"))


@dataclass(frozen=True)
class RuntimeEntry:
    """A measured runtime: its pinned package and converter versions, and what measured it."""

    package: Optional[str]
    version: Optional[str]
    converter: Optional[str]
    converter_version: Optional[str]
    measured_in: Optional[str]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RuntimeEntry":
        return cls(*(_text(data, k) for k in ("package", "version", "converter", "converter_version",
                                              "measured_in")))


@dataclass(frozen=True)
class DataSetEntry:
    """A data set the run read (``--eval-data``, ``--finetune-data``, ``--calib-data``): what every
    figure made from it stands for. ``samples_sha256`` is the digest of the normalised samples the
    sandbox read, the one every accuracy record of the run is keyed on (a changed data set gives
    another digest and a fresh figure, issue 38); ``source_sha256`` the user's own file's (an
    ImageFolder tree's: its class names and every used image's label, path and content).
    ``preprocessing``: how a tree's images became inputs (None: an .npz's inputs as given)."""

    option: str
    path: str
    format: str  # "npz" | "imagefolder"
    source_sha256: str
    samples_sha256: str
    samples: int
    available: int
    sample_shape: tuple[int, ...]
    classes: Optional[int]  # a tree's class folders, else the distinct labels used
    selection: str
    preprocessing: Optional[Preprocessing]
    preprocessing_text: str  # the preprocessing in words, as the methods paragraph states it

    @classmethod
    def of(cls, data: "EvalData") -> "DataSetEntry":
        return cls(data.option, str(data.source), data.fmt, data.source_sha256, data.sha256, data.samples,
                   data.available, tuple(data.sample_shape), data.class_count, data.selection,
                   data.preprocessing, data.how_preprocessed())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sample_shape": list(self.sample_shape),
                "preprocessing": self.preprocessing.to_dict() if self.preprocessing else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DataSetEntry":
        shape = data.get("sample_shape")
        try:
            prep = Preprocessing.from_dict(data["preprocessing"]) if isinstance(data.get("preprocessing"),
                                                                                Mapping) else None
        except (ValueError, TypeError):
            prep = None
        return cls(_text(data, "option") or "", _text(data, "path") or "", _text(data, "format") or "",
                   _text(data, "source_sha256") or "", _text(data, "samples_sha256") or "",
                   _int(data, "samples") or 0, _int(data, "available") or 0,
                   tuple(d for d in shape if fields.integer(d) is not None) if isinstance(shape, list) else (),
                   _int(data, "classes"), _text(data, "selection") or "", prep,
                   _text(data, "preprocessing_text") or "")


@dataclass(frozen=True)
class Manifest:
    """The ``environment`` block of a results file, typed (see the module docstring for how to
    reproduce a run from it). ``models`` are stored as the runner gives them; ``run`` is the
    run's own description (its options, settings and components, ``report.run_record``), the
    JSON's ``extra`` block."""

    created_utc: str
    command_line: tuple[str, ...]
    working_directory: str
    lodevem: LodevemSource
    python: PythonInfo
    packages: Mapping[str, Optional[str]]
    host: HostInfo
    backend: BackendInfo
    profiles: tuple[ProfileEntry, ...]
    models: tuple[Mapping[str, Any], ...]
    runtimes: Mapping[str, RuntimeEntry]
    run: RunDescription
    manifest_version: int = MANIFEST_VERSION
    datasets: tuple[DataSetEntry, ...] = ()  # the data sets read, by option (--eval-data first)

    @property
    def command(self) -> str:
        """The exact command line, shell-quoted (to paste into a shell)."""
        return shlex.join(self.command_line)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the order a reader expects (``command`` included)."""
        return {
            "manifest_version": self.manifest_version,
            "created_utc": self.created_utc,
            "command_line": list(self.command_line),
            "command": self.command,
            "working_directory": self.working_directory,
            "lodevem": asdict(self.lodevem),
            "python": asdict(self.python),
            "packages": dict(self.packages),
            "host": asdict(self.host),
            "backend": {**asdict(self.backend), "images": dict(self.backend.images)},
            "profiles": [asdict(p) for p in self.profiles],
            "models": [dict(m) for m in self.models],
            "runtimes": {name: asdict(entry) for name, entry in self.runtimes.items()},
            "datasets": [d.to_dict() for d in self.datasets],
            "extra": self.run.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "a results file's manifest",
                  prefix: str = "") -> "Manifest":
        """A manifest read back from a results file (``where``). The environment facts read
        leniently: a missing or mistyped one reads as empty or None (an older file, or one edited
        by hand; they only describe). The run's own description (``extra``), which the report
        compares runs by and quotes, is typed: a mistyped field there is a ``BadRecord`` naming
        ``where`` and the field (``prefix``: ``environment.``)."""
        argv = data.get("command_line")
        profiles = data.get("profiles")
        models = data.get("models")
        version = data.get("manifest_version")
        datasets = data.get("datasets")
        return cls(
            created_utc=_text(data, "created_utc") or "",
            command_line=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
            working_directory=_text(data, "working_directory") or "",
            lodevem=LodevemSource.from_dict(_section(data, "lodevem")),
            python=PythonInfo.from_dict(_section(data, "python")),
            packages={str(k): None if v is None else str(v) for k, v in _section(data, "packages").items()},
            host=HostInfo.from_dict(_section(data, "host")),
            backend=BackendInfo.from_dict(_section(data, "backend")),
            profiles=tuple(ProfileEntry.from_dict(p) for p in profiles if isinstance(p, Mapping))
            if isinstance(profiles, list) else (),
            models=tuple(dict(m) for m in models if isinstance(m, Mapping)) if isinstance(models, list) else (),
            runtimes={str(k): RuntimeEntry.from_dict(v) for k, v in _section(data, "runtimes").items()
                      if isinstance(v, Mapping)},
            run=RunDescription.from_dict(data.get("extra"), where, prefix=f"{prefix}extra."),
            manifest_version=version if isinstance(version, int) else MANIFEST_VERSION,
            datasets=tuple(DataSetEntry.from_dict(d) for d in datasets if isinstance(d, Mapping))
            if isinstance(datasets, list) else (),
        )

    @classmethod
    def coerce(cls, manifest: "ManifestLike") -> "Manifest":
        """``manifest`` as a ``Manifest``: itself, or read from its JSON form."""
        return manifest if isinstance(manifest, Manifest) else cls.from_dict(manifest)


# What writers accept: the typed record, or its JSON form read back from a results file.
ManifestLike = Union[Manifest, Mapping[str, Any]]


def manifest_dict(manifest: ManifestLike) -> dict[str, Any]:
    """The JSON form of ``manifest`` (typed or already a mapping)."""
    return manifest.to_dict() if isinstance(manifest, Manifest) else dict(manifest)
