"""Device profiles: load, validate and select the YAML files that describe each phone.

A profile is data, not code: a researcher adds a phone by dropping a YAML file (start from
``profiles/custom_template.yaml``) into a folder passed with ``--profiles-dir`` or listed in
``LODEVEM_PROFILES``. Validation is strict because a typo in ``ram_mb`` silently changes every
verdict; each error is one line naming the file, the field and what was expected.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ProfileError

TIERS: dict[str, str] = {
    "tier1": "Budget Android (2-4 GB)",
    "tier2": "Android Go (512 MB - 2 GB)",
    "tier3": "KaiOS / feature phones (256-512 MB)",
}

# The CPU cores lodevem's latency estimator has parameters for (see lodevem/data/).
CORE_TYPES: tuple[str, ...] = (
    "Cortex-A7",
    "Cortex-A53",
    "Cortex-A55",
    "Cortex-A72",
    "Cortex-A73",
    "Cortex-A75",
    "Cortex-A76",
)

ENV_VAR = "LODEVEM_PROFILES"


def tier_rank(tier: str) -> int:
    """0 for tier1 ... 2 for tier3 (most constrained last); an unknown tier sorts after all."""
    return list(TIERS).index(tier) if tier in TIERS else len(TIERS)


_TIER_FOLDER = re.compile(r"^tier\d+$")


class Cluster(BaseModel):
    """One CPU cluster: ``count`` cores of one type at one maximum clock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    core: str
    count: int = Field(gt=0, le=64)
    clock_ghz: float = Field(gt=0.0, le=5.0)

    @field_validator("core", mode="before")
    @classmethod
    def _known_core(cls, value: object) -> str:
        text = str(value).strip()
        name = text if text.startswith("Cortex-") else f"Cortex-{text}"
        if name not in CORE_TYPES:
            raise ValueError(f"expected one of {', '.join(CORE_TYPES)}, got {text!r}")
        return name

    @property
    def short(self) -> str:
        """``4x A53 @ 2.0 GHz`` style label for tables."""
        return f"{self.count}x {self.core.removeprefix('Cortex-')} @ {self.clock_ghz:.1f} GHz"


class Profile(BaseModel):
    """A low-resource device: what lodevem needs to emulate its RAM and predict its CPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    name: str = Field(min_length=1)
    label: str = Field(min_length=1)
    tier: Literal["tier1", "tier2", "tier3"]
    os: Optional[str] = None
    chipset: str = Field(min_length=1)
    cpu: list[Cluster] = Field(min_length=1)
    ram_mb: int = Field(gt=0, le=65536)
    nnmeter_predictor: str = "cortexA76cpu_tflite21"
    power_w: Optional[float] = Field(default=None, gt=0.0, le=20.0)
    sources: list[str] = Field(min_length=1)

    # Set by the loader, not by the YAML file.
    path: Optional[Path] = Field(default=None, exclude=True)
    sha256: Optional[str] = Field(default=None, exclude=True)

    @property
    def fastest_cluster(self) -> Cluster:
        """The cluster a single-threaded app is scheduled on: highest clock, then most cores."""
        order = {core: i for i, core in enumerate(CORE_TYPES)}
        return max(self.cpu, key=lambda c: (order[c.core], c.clock_ghz, c.count))

    @property
    def cores_label(self) -> str:
        return " + ".join(f"{c.count}x {c.core.removeprefix('Cortex-')}" for c in self.cpu)

    @property
    def clock_label(self) -> str:
        clocks = sorted({c.clock_ghz for c in self.cpu}, reverse=True)
        return " / ".join(f"{c:.1f} GHz" for c in clocks)

    @property
    def ram_label(self) -> str:
        return f"{self.ram_mb // 1024} GB" if self.ram_mb % 1024 == 0 else f"{self.ram_mb} MB"


def builtin_profiles_dir() -> Path:
    """Where the shipped profiles are: package data in a wheel, ``profiles/`` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_profiles", here.parent / "profiles"):
        if (candidate / "tier1").is_dir():
            return candidate
    raise ProfileError(
        f"built-in profiles not found (looked in {here / '_profiles'} and {here.parent / 'profiles'}); "
        "reinstall lodevem"
    )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"field '{field}' is missing"
    if err["type"] == "extra_forbidden":
        return f"unknown field '{field}' (see profiles/custom_template.yaml for the fields)"
    return f"field '{field}': {message} (got {err.get('input')!r})"


def load_profile_file(path: Path) -> Profile:
    """Parse and validate one YAML file; every failure is a one-line ``ProfileError``."""
    try:
        raw_bytes = path.read_bytes()
        data = yaml.safe_load(raw_bytes)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        raise ProfileError(f"{path}: empty file, expected a mapping of profile fields")
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping of profile fields, got {type(data).__name__}")
    folder = path.parent.name
    if _TIER_FOLDER.match(folder):
        if folder not in TIERS:
            raise ProfileError(f"{path}: unknown tier folder '{folder}', expected one of {', '.join(TIERS)}")
        data.setdefault("tier", folder)
        if data["tier"] != folder:
            raise ProfileError(f"{path}: field 'tier' is {data['tier']!r} but the file is in folder '{folder}'")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"{path}: {_first_error(exc)}") from None
    return profile.model_copy(update={"path": path, "sha256": hashlib.sha256(raw_bytes).hexdigest()})


def profile_dirs(extra_dirs: Sequence[Path | str] = ()) -> list[Path]:
    """Built-in folder, then ``LODEVEM_PROFILES`` (os.pathsep-separated), then ``--profiles-dir``."""
    dirs = [builtin_profiles_dir()]
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path(p) for p in extra_dirs]
    return dirs


def _yaml_files(folder: Path) -> Iterable[Path]:
    if not folder.is_dir():
        raise ProfileError(f"{folder}: profiles folder does not exist or is not a directory")
    for path in sorted(folder.rglob("*.y*ml")):
        if path.suffix in (".yaml", ".yml") and "template" not in path.stem:
            yield path


def load_profiles(extra_dirs: Sequence[Path | str] = ()) -> list[Profile]:
    """All profiles from every folder, in tier then file order. Duplicate IDs are an error."""
    seen: dict[str, Profile] = {}
    for folder in profile_dirs(extra_dirs):
        for path in _yaml_files(folder):
            profile = load_profile_file(path)
            if profile.id in seen:
                raise ProfileError(
                    f"{path}: duplicate profile id '{profile.id}' (already defined in {seen[profile.id].path})"
                )
            seen[profile.id] = profile
    return sorted(seen.values(), key=lambda p: tier_rank(p.tier))


def select_profiles(
    profiles: Sequence[Profile], ids: Sequence[str] = (), tiers: Sequence[str] = ()
) -> list[Profile]:
    """Profiles matching any given ID or tier; all of them when neither is given."""
    for tier in tiers:
        if tier not in TIERS:
            raise ProfileError(f"unknown tier '{tier}', expected one of {', '.join(TIERS)}")
    by_id = {p.id: p for p in profiles}
    for pid in ids:
        if pid not in by_id:
            raise ProfileError(f"unknown profile '{pid}', expected one of {', '.join(by_id)}")
    if not ids and not tiers:
        return list(profiles)
    return [p for p in profiles if p.id in ids or p.tier in tiers]
