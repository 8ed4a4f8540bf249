"""Device profiles: load, validate and select the YAML files that describe each phone.

A profile is data, not code: a researcher adds a phone by dropping a YAML file (start from
``profiles/custom_template.yaml``) into a folder passed with ``--profiles-dir`` or listed in
``LODEVEM_PROFILES``. Validation is strict because a typo in ``ram_mb`` silently changes every
verdict; each error is one line naming the file, the field and what was expected.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ProfileError, RefusedYaml
from .safe_io import PROFILE, UnsafeInput, read_bytes
from .safe_io.yaml_loader import ProfileYamlLoader, clip, escaped, quote, yaml_problem
from .store import bytes_digest

if TYPE_CHECKING:
    from .socs import SocMemory

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

# Limits for files from folders anyone can drop a profile into. A real profile is about 1 kB and
# three levels deep (mapping > cpu list > cluster); safe_io.yaml_loader bounds the rest (depth, aliases,
# tags, duplicate keys) and cuts a quoted value to QUOTE_CHARS.
MAX_PROFILE_BYTES = PROFILE.max_bytes  # 1 MiB, read through safe_io


def tier_rank(tier: str) -> int:
    """0 for tier1 ... 2 for tier3 (most constrained last); an unknown tier sorts after all."""
    return list(TIERS).index(tier) if tier in TIERS else len(TIERS)


_TIER_FOLDER = re.compile(r"^tier\d+$")


def _where(path: Path) -> str:
    """The file name as the start of an error line."""
    return escaped(str(path))


def _reject_bool(value: object) -> object:
    """YAML reads ``yes``/``true`` as a boolean, and pydantic would take it as the number 1."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return value


class Cluster(BaseModel):
    """One CPU cluster: ``count`` cores of one type at one maximum clock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    core: str
    count: int = Field(gt=0, le=64)
    clock_ghz: float = Field(gt=0.0, le=5.0)

    @field_validator("core", mode="before")
    @classmethod
    def _known_core(cls, value: object) -> str:
        text = value.strip() if isinstance(value, str) else None
        name = text if text is None or text.startswith("Cortex-") else f"Cortex-{text}"
        if name not in CORE_TYPES:
            got = quote(value if text is None else text)
            raise ValueError(f"expected one of {', '.join(CORE_TYPES)}, got {got}")
        return name

    @field_validator("count", "clock_ghz", mode="before")
    @classmethod
    def _not_bool(cls, value: object) -> object:
        return _reject_bool(value)

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
    # The SoC's name in lodevem/data/socs.yaml where ``chipset`` does not name it (its caches and
    # DRAM, with sources, live there once: ``memory_system``); None: ``chipset`` is looked up.
    soc: Optional[str] = Field(default=None, min_length=1)
    cpu: list[Cluster] = Field(min_length=1)
    ram_mb: int = Field(gt=0, le=65536)
    # What one foreground app can use before the OS's low-memory killer stops it: less than
    # ram_mb, because the kernel, the OS's services and the killer's free-memory reserve come
    # first. None (a user's profile without it): verdicts compare with ram_mb only.
    app_budget_mb: Optional[int] = Field(default=None, gt=0, le=65536)
    app_budget_source: Optional[str] = Field(default=None, min_length=1)
    nnmeter_predictor: str = "cortexA76cpu_tflite21"
    # Active power of the fastest core under load, in watts, for the energy proxy (energy per
    # inference = predicted latency x power_w, CSV energy_mj): a published measurement, cited in
    # power_source; without one, power_w stays null and power_source says why.
    power_w: Optional[float] = Field(default=None, gt=0.0, le=20.0)
    power_source: Optional[str] = Field(default=None, min_length=1)
    sources: list[str] = Field(min_length=1)

    # Set by the loader, not by the YAML file.
    path: Optional[Path] = Field(default=None, exclude=True)
    sha256: Optional[str] = Field(default=None, exclude=True)

    @field_validator("ram_mb", "power_w", "app_budget_mb", mode="before")
    @classmethod
    def _not_bool(cls, value: object) -> object:
        return _reject_bool(value)

    @model_validator(mode="after")
    def _budget_within_ram(self) -> "Profile":
        """A budget is a share of the RAM, and a number without its source is not a fact."""
        if self.app_budget_mb is not None:
            if self.app_budget_mb > self.ram_mb:
                raise ValueError(f"field 'app_budget_mb': {self.app_budget_mb} MB is more than ram_mb "
                                 f"({self.ram_mb} MB); an app can use at most the device's RAM")
            if not self.app_budget_source:
                raise ValueError("field 'app_budget_source' is missing: say where app_budget_mb comes from")
        elif self.app_budget_source:
            raise ValueError("field 'app_budget_source' given without 'app_budget_mb'")
        if self.power_w is not None and not self.power_source:
            raise ValueError("field 'power_source' is missing: cite the published measurement power_w comes from")
        return self

    @property
    def fastest_cluster(self) -> Cluster:
        """The cluster a single-threaded app is scheduled on: highest clock, then most cores."""
        order = {core: i for i, core in enumerate(CORE_TYPES)}
        return max(self.cpu, key=lambda c: (order[c.core], c.clock_ghz, c.count))

    @property
    def soc_name(self) -> str:
        """The name its memory system is looked up by (``soc`` if given, else ``chipset``)."""
        return self.soc or self.chipset

    @property
    def memory_system(self) -> "Optional[SocMemory]":
        """Its SoC's caches and DRAM with sources (``lodevem.socs``); None: the SoC is not in the table."""
        from .socs import load_table

        return load_table().find(self.soc_name)

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
    err = exc.errors(include_url=False)[0]
    field = clip(".".join(str(p) for p in err["loc"])) if err["loc"] else "(top level)"  # a key may be ""
    message = clip(err["msg"].removeprefix("Value error, "), 300)
    if err["type"] == "missing":
        return f"field '{field}' is missing"
    if err["type"] == "extra_forbidden":
        return f"unknown field '{field}' (see profiles/custom_template.yaml for the fields)"
    if err["type"] == "value_error":  # lodevem's own validators, which quote the value themselves
        return message if not err["loc"] else f"field '{field}': {message}"  # a whole-profile check names its field
    return f"field '{field}': {message} (got {quote(err.get('input'))})"


def _read_regular_file(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (or a symlink to one) of at most
    ``MAX_PROFILE_BYTES``, read through ``safe_io`` (a FIFO, socket or device matching ``*.yaml``
    is never opened for a blocking read); anything else is a ``ProfileError``."""
    try:
        return read_bytes(path, PROFILE)
    except UnsafeInput as exc:
        raise ProfileError(f"{_where(path)}: {exc.detail}") from None


def load_profile_file(path: Path) -> Profile:
    """Parse and validate one YAML file; every failure is a one-line ``ProfileError``."""
    raw_bytes = _read_regular_file(path)
    try:
        loader = ProfileYamlLoader(raw_bytes)  # already decodes the start of the file
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except (yaml.YAMLError, RefusedYaml) as exc:
        raise ProfileError(f"{_where(path)}: {yaml_problem(exc)}") from None
    if data is None:
        raise ProfileError(f"{_where(path)}: empty file, expected a mapping of profile fields")
    if not isinstance(data, dict):
        raise ProfileError(f"{_where(path)}: expected a mapping of profile fields, got {type(data).__name__}")
    folder = path.parent.name
    if _TIER_FOLDER.match(folder):
        if folder not in TIERS:
            raise ProfileError(f"{_where(path)}: unknown tier folder '{clip(folder)}', "
                               f"expected one of {', '.join(TIERS)}")
        data.setdefault("tier", folder)
        if data["tier"] != folder:
            raise ProfileError(f"{_where(path)}: field 'tier' is {quote(data['tier'])} "
                               f"but the file is in folder '{folder}'")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(f"{_where(path)}: {_first_error(exc)}") from None
    return profile.model_copy(update={"path": path, "sha256": bytes_digest(raw_bytes)})


def profile_dirs(extra_dirs: Sequence[Path | str] = ()) -> list[Path]:
    """Built-in folder, then ``LODEVEM_PROFILES`` (os.pathsep-separated), then ``--profiles-dir``."""
    dirs = [builtin_profiles_dir()]
    env = os.environ.get(ENV_VAR, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += [Path(p) for p in extra_dirs]
    return dirs


def _yaml_files(folder: Path) -> Iterable[Path]:
    """The profile files under ``folder``. ``rglob`` silently skips a folder it cannot list, so the
    top folder is listed once here first: a typo or a permission problem is an error, not an empty
    result."""
    if not folder.exists():
        raise ProfileError(f"{_where(folder)}: profiles folder does not exist")
    if not folder.is_dir():
        raise ProfileError(f"{_where(folder)}: profiles folder is not a directory (pass the folder that "
                           "holds the YAML files)")
    try:
        with os.scandir(folder):
            pass
    except OSError as exc:
        raise ProfileError(f"{_where(folder)}: cannot read profiles folder: {exc.strerror or exc}") from None
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
    wanted = {match_profile_id(by_id, pid) for pid in ids}
    if not ids and not tiers:
        return list(profiles)
    return [p for p in profiles if p.id in wanted or p.tier in tiers]


def choose_profiles(dirs: Sequence[Path | str] = (), ids: Sequence[str] = (),
                    tiers: Sequence[str] = ()) -> list[Profile]:
    """The profiles a command names (``--profile``, ``--tier``) among every one it can read."""
    return select_profiles(load_profiles(dirs), ids=ids, tiers=tiers)


def match_profile_id(known: Sequence[str] | dict[str, Profile], given: str) -> str:
    """The profile ID ``given`` means: exact, else the one ID equal ignoring case (``Nokia_C1``
    is ``nokia_c1``: IDs are typed from labels like "Nokia C1"); anything else is a
    ``ProfileError`` with the closest IDs as a did-you-mean, since a list of every ID hides
    a one-letter typo."""
    if given in known:
        return given
    folded = [k for k in known if k.casefold() == given.casefold()]
    if len(folded) == 1:
        return folded[0]
    by_fold = {k.casefold(): k for k in known}
    close = [by_fold[c] for c in difflib.get_close_matches(given.casefold(), list(by_fold), n=3, cutoff=0.6)]
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise ProfileError(f"unknown profile {quote(given)}, {hint}expected one of {', '.join(known)}")
