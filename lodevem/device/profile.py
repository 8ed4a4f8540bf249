"""A device profile from a phone: the same YAML as ``profiles/``, each fact with where it was read.

Why refuse rather than fill in: a profile drives every prediction and verdict for that phone; a
core type or clock lodevem guessed would look like a fact. A phone whose cores are not a core the
estimator models, or whose clock or RAM cannot be read, gets no profile, and the one-line error
says which fact is missing (the user can still copy ``profiles/custom_template.yaml``).

The app budget is derived as the shipped profiles derive theirs (docs/verdicts.md): 40.6 % of RAM
on Android Go (``ro.config.low_ram=true``), 31.4 % on full Android.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import yaml

from ..errors import InputError, ProfileError
from ..profiles import CORE_TYPES, TIERS, Profile, load_profile_file
from ..store import atomic_path, write_atomic
from .info import DeviceInfo

__all__ = ["GO_SHARE", "FULL_SHARE", "device_profile", "profile_data", "profile_id_for", "write_profile"]

GO_SHARE, FULL_SHARE = 0.406, 0.314
_GO_SOURCE = ("Android Go: 40.6 % of RAM ({ram} x 0.406 = {budget} MB), the shipped Android Go profiles' rule "
              "(docs/verdicts.md: OS use on a 963 MB phone and lmkd's foreground kill threshold); RAM is MemTotal "
              "read from the phone")
_FULL_SOURCE = ("full Android: 31.4 % of RAM ({ram} x 0.314 = {budget} MB), the shipped full-Android profiles' "
                "rule (docs/verdicts.md: lmkd killed the foreground app at 1286 MB RSS on a 4 GB Moto G30); RAM is "
                "MemTotal read from the phone")


def profile_id_for(info: DeviceInfo) -> str:
    """``phone_<model>`` in the profile ID alphabet (lowercase, digits, ``_``), at most 48 characters."""
    base = re.sub(r"[^a-z0-9]+", "_", (info.model or "unknown").lower()).strip("_")[:40] or "unknown"
    return f"phone_{base}"


def profile_data(info: DeviceInfo, profile_id: Optional[str] = None, tier: Optional[str] = None) -> dict[str, object]:
    """The profile's fields from ``info``; ``ProfileError`` naming the first fact that is unknown."""
    missing = [fact for fact, ok in (("RAM (/proc/meminfo MemTotal)", info.ram_mb is not None),
                                     ("cores (/proc/cpuinfo)", bool(info.cores))) if not ok]
    for core in info.cores:
        if core.core not in CORE_TYPES:
            missing.append(f"cpu{core.index}'s core type (CPU part {core.part or 'unreadable'}"
                           + (f" is a {core.core}" if core.core else "") + f"; lodevem models {', '.join(CORE_TYPES)})")
        if core.max_khz is None:
            missing.append(f"cpu{core.index}'s clock (cpufreq cpuinfo_max_freq)")
    if missing:
        raise ProfileError(f"adb -s {info.serial}: cannot write a profile without {missing[0]}"
                           + (f" (and {len(missing) - 1} more unknown fact(s))" if len(missing) > 1 else "")
                           + "; copy profiles/custom_template.yaml and fill it in by hand")
    ram = info.ram_mb
    assert ram is not None
    go = bool(info.low_ram)
    share, source = (GO_SHARE, _GO_SOURCE) if go else (FULL_SHARE, _FULL_SOURCE)
    budget = int(ram * share)
    chosen_tier = tier or ("tier2" if go else "tier1")
    if chosen_tier not in TIERS:
        raise InputError(f"--tier {chosen_tier}: expected one of {', '.join(TIERS)}")
    name = " ".join(p for p in (info.manufacturer, info.model) if p) or "unknown phone"
    os_text = (f"Android {info.android_version}" if info.android_version else "Android (version unknown)") + (
        " (Go edition)" if go else "")
    return {
        "id": profile_id or profile_id_for(info), "name": name, "label": info.model or "unknown phone",
        "tier": chosen_tier, "os": os_text,
        "chipset": info.soc or "unknown SoC (ro.soc.model, ro.board.platform and ro.hardware unset)",
        "cpu": [{"core": core, "count": n, "clock_ghz": round((khz or 0) / 1e6, 2)}
                for core, n, khz in info.clusters()],
        "ram_mb": ram, "app_budget_mb": budget, "app_budget_source": source.format(ram=ram, budget=budget),
        "nnmeter_predictor": "cortexA76cpu_tflite21", "power_w": None,
        "power_source": "unknown: lodevem reads no power figure from a phone (cite a measurement to set power_w)",
        "sources": ["read from the phone over adb by `lodevem device profile`", *info.sources()],
    }


def device_profile(info: DeviceInfo, profile_id: Optional[str] = None, tier: Optional[str] = None) -> Profile:
    """The phone as a ``Profile`` in memory (what a measured row is labelled with)."""
    try:
        return Profile.model_validate(profile_data(info, profile_id, tier))
    except ValueError as exc:
        raise ProfileError(f"adb -s {info.serial}: the profile read from the phone does not validate: "
                           f"{str(exc).splitlines()[-1][:200]}") from None


def write_profile(info: DeviceInfo, folder: Path, profile_id: Optional[str] = None, tier: Optional[str] = None,
                  overwrite: bool = False) -> tuple[Path, Profile]:
    """``FOLDER/<id>.yaml`` (the file name is the checked profile ID, never a device's text),
    written atomically and loaded back with the profile loader before it is kept."""
    data = profile_data(info, profile_id, tier)
    device_profile(info, profile_id, tier)  # validates the ID and every field first
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{data['id']}.yaml"
    if target.exists() and not overwrite:
        raise InputError(f"{target}: exists (--overwrite replaces it)")
    header = (f"# {data['name']}: read from the phone over adb by `lodevem device profile` (every fact's\n"
              "# origin is in `sources`). Field meanings: profiles/custom_template.yaml.\n")
    text = header + yaml.safe_dump(data, sort_keys=False, allow_unicode=False, width=100)
    with atomic_path(target) as tmp:
        write_atomic(tmp, text)
        loaded = load_profile_file(tmp)  # the file a user keeps loads like a shipped one, or is not kept
    return target, loaded.model_copy(update={"path": target})
