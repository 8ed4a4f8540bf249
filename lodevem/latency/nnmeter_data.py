"""nn-Meter's kernel regressors, loaded from a local data folder, never downloaded on the side.

nn-Meter's own ``load_latency_predictor`` downloads a zip from GitHub with no timeout whenever the
files are missing, and its ``.pkl`` files no longer unpickle on scikit-learn >= 1.3. So lodevem
reads the same folder layout nn-Meter uses (``<data>/predictor/<name>/<kernel>.pkl`` +
``fusion_rules.json``), loads each regressor once per run through
:func:`lodevem.latency.sklearn_compat.load_predictor_file`, and calls it on the feature vectors nn-Meter's
own ``get_predict_features`` builds (see :mod:`lodevem.latency.kernels`), grouped by type exactly like
``nn_predict``. Doing the per-kernel calls here, instead of ``nnMeterPredictor.predict``, keeps the
per-kernel figures the transfer to a phone's core needs; the sum is the same (a test checks it).

A download happens only in :func:`fetch_predictors` (``lodevem fetch-predictors``).
The ``.pkl`` files are unpickled on the host, but only by ``sklearn_compat``'s restricted unpickler:
a file may name nothing but the scikit-learn/numpy classes a RandomForestRegressor is made of, and
its trees are checked before use. Anything else (a file that asks for ``os.system``, a truncated or
garbage file, an array instead of a forest) is an ``InputError`` naming the file, not a traceback.
A hostile file can still cost memory and time while it loads, but it cannot make the host call
anything outside that allow-list (``sklearn_compat.ALLOWED_GLOBALS``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import yaml

from ..errors import InputError, LodevemError
from .kernels import Kernel

if TYPE_CHECKING:
    pass


ENV_VAR = "LODEVEM_NNMETER_DATA"
# nn-Meter predictors lodevem can carry to a phone core: name -> the core and clock it models.
# cortexA76cpu_tflite21: Pixel 4 Cortex-A76 big core at 2.42 GHz, TFLite 2.1, 1 thread (nn-Meter
# README and its profiler settings, see docs/runtimes.md). GPU/VPU predictors
# model other hardware and cannot be transferred to a CPU core.
CPU_PREDICTORS: dict[str, tuple[str, float]] = {"cortexA76cpu_tflite21": ("Cortex-A76", 2.42)}
_NN_METER_SETTINGS = Path("~/.nn_meter/config/settings.yaml")
_NN_METER_DEFAULT_DATA = Path("~/.nn_meter/data")
FUSION_RULES = "fusion_rules.json"


def _nn_meter_configs() -> list[dict[str, Any]]:
    """The predictor list shipped in the nn_meter package (read directly: nn-Meter's own
    ``load_config_file`` writes ``~/.nn_meter/config`` as a side effect)."""
    import importlib.util

    spec = importlib.util.find_spec("nn_meter")
    if spec is None or not spec.submodule_search_locations:
        raise LodevemError("the nn-meter package is not installed (pip install nn-meter==2.0)")
    path = Path(list(spec.submodule_search_locations)[0]) / "configs" / "predictors.yaml"
    with open(path) as f:
        return list(yaml.safe_load(f) or [])


def _config(name: str) -> dict[str, Any]:
    configs = _nn_meter_configs()
    for entry in configs:
        if entry.get("name") == name:
            return entry
    known = ", ".join(e.get("name", "?") for e in configs)
    raise InputError(f"unknown nn-Meter predictor '{name}'; nn-Meter knows: {known}")


def expected_kernels(name: str) -> tuple[str, ...]:
    """Kernel types the predictor's nn-Meter config lists (one ``<kernel>.pkl`` each)."""
    return tuple(str(k) for k in _config(name).get("kernel_predictors", []))


def default_data_dir(explicit: Optional[Path | str] = None) -> Path:
    """``--nnmeter-data``, else ``$LODEVEM_NNMETER_DATA``, else nn-Meter's configured folder."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    settings = _NN_METER_SETTINGS.expanduser()
    try:
        with open(settings) as f:
            folder = (yaml.safe_load(f) or {}).get("data_folder")
        if folder:
            return Path(folder).expanduser()
    except (OSError, yaml.YAMLError):
        pass
    return _NN_METER_DEFAULT_DATA.expanduser()


def predictor_dir(data_dir: Path, name: str) -> Path:
    """Where nn-Meter keeps a predictor's files: ``<data>/predictor/<name>``."""
    return Path(data_dir) / "predictor" / name


def is_available(data_dir: Path, name: str) -> bool:
    """A usable set: the fusion rules and at least one kernel regressor."""
    folder = predictor_dir(data_dir, name)
    return (folder / FUSION_RULES).is_file() and any(folder.glob("*.pkl"))


def describe_data(data_dir: Optional[Path | str] = None, name: str = "cortexA76cpu_tflite21") -> tuple[str, bool]:
    """One line for ``lodevem check`` about the predictor folder, and whether it is usable.
    Looks at file names only: loading a 500 MB pickle is not a health check."""
    folder = predictor_dir(default_data_dir(data_dir), name)
    if not is_available(folder.parent.parent, name):
        return f"no {name} predictor data in {folder}", False
    present = {p.stem for p in folder.glob("*.pkl")}
    missing = [k for k in expected_kernels(name) if k not in present]
    detail = f"{name}: {len(present)} kernel predictors in {folder}"
    if missing:
        detail += f" (missing {', '.join(missing)}: those kernels are skipped with a warning)"
    return detail, True


@dataclass(frozen=True)
class KernelPredictions:
    """nn-Meter's per-kernel milliseconds (``None``: no regressor) and what it could not cover."""

    ms: tuple[Optional[float], ...]
    uncovered: dict[str, int]

    def warning(self) -> Optional[str]:
        """One line naming the kernel types nn-Meter skipped, with counts (None if all covered)."""
        if not self.uncovered:
            return None
        parts = ", ".join(f"{n} {t}" for t, n in sorted(self.uncovered.items()))
        total = sum(self.uncovered.values())
        return f"nn-Meter has no predictor for {total} kernel{'s' if total != 1 else ''} ({parts}); not counted"


@dataclass
class NnMeterPredictorSet:
    """One predictor's regressors, loaded once. ``regressors`` maps kernel type -> model."""

    name: str
    folder: Path
    fusion_rules: Path
    regressors: dict[str, Any]
    legacy_files: tuple[str, ...] = ()

    @classmethod
    def load(cls, name: str, data_dir: Path) -> "NnMeterPredictorSet":
        """Load every ``<kernel>.pkl`` of the folder through the restricted unpickler.

        ``InputError`` naming the folder if it holds no predictor, or naming the file if one is
        unreadable, refused (it references anything but scikit-learn/numpy objects) or unusable.
        """
        from .sklearn_compat import LoadInfo, load_predictor_file

        folder = predictor_dir(data_dir, name)
        rules = folder / FUSION_RULES
        if not is_available(data_dir, name):
            raise InputError(
                f"no nn-Meter predictor '{name}' in {folder} (need {FUSION_RULES} and <kernel>.pkl files); "
                f"run 'lodevem fetch-predictors' or unzip the predictor there, or use --predictor estimator"
            )
        regressors: dict[str, Any] = {}
        legacy: list[str] = []
        for path in sorted(folder.glob("*.pkl")):
            info = LoadInfo()
            try:  # refused or unusable files raise InputError naming the file themselves
                regressors[path.stem] = load_predictor_file(path, info=info)
            except OSError as exc:
                raise InputError(f"{path}: cannot read nn-Meter predictor ({exc.strerror or exc})") from None
            if info.legacy:
                legacy.append(path.name)
        return cls(name=name, folder=folder, fusion_rules=rules, regressors=regressors, legacy_files=tuple(legacy))

    def predict(self, kernels: Sequence[Kernel]) -> KernelPredictions:
        """Per-kernel ms, one ``predict`` call per kernel type as nn-Meter's ``nn_predict`` does."""
        by_type: dict[str, list[int]] = {}
        uncovered: Counter[str] = Counter()
        for i, kernel in enumerate(kernels):
            if kernel.features is None or kernel.nnmeter_type not in self.regressors:
                uncovered[kernel.nnmeter_type] += 1
            else:
                by_type.setdefault(kernel.nnmeter_type, []).append(i)
        ms: list[Optional[float]] = [None] * len(kernels)
        for ktype in sorted(by_type):
            idx = by_type[ktype]
            preds = self.regressors[ktype].predict([list(kernels[i].features or ()) for i in idx])
            for i, value in zip(idx, preds):
                ms[i] = max(float(value), 0.0)  # a regressor may extrapolate below zero
        return KernelPredictions(ms=tuple(ms), uncovered=dict(sorted(uncovered.items())))


@dataclass
class NnMeterCache:
    """Loaded predictor sets of one run, by name: each folder is read at most once."""

    data_dir: Path
    _sets: dict[str, Optional[NnMeterPredictorSet]] = field(default_factory=dict)
    _available: dict[str, bool] = field(default_factory=dict)

    def available(self, name: str) -> bool:
        """Whether the folder holds a usable set (checked once per run, like the loading)."""
        if name not in self._available:
            self._available[name] = is_available(self.data_dir, name)
        return self._available[name]

    def get(self, name: str) -> NnMeterPredictorSet:
        """The loaded set (``InputError`` if the folder lacks it)."""
        if self._sets.get(name) is None:
            self._sets[name] = NnMeterPredictorSet.load(name, self.data_dir)
        loaded = self._sets[name]
        assert loaded is not None
        return loaded

    def loaded(self) -> list[NnMeterPredictorSet]:
        return [s for s in self._sets.values() if s is not None]


# ---------------------------------------------------------------------------------------------
# Download (only on request)
# ---------------------------------------------------------------------------------------------

def _offline_message(url: str, target: Path, reason: str) -> str:
    host = url.split("/")[2] if "://" in url else url
    return (f"cannot reach {host}: {reason}; download {url} on a connected machine and unzip it into "
            f"{target} (the zip holds a {target.name}/ folder: unzip it inside {target.parent} so that "
            f"{target / FUSION_RULES} exists)")


def _safe_extract(archive: zipfile.ZipFile, dest: Path) -> None:
    root = dest.resolve()
    for member in archive.infolist():
        target = (dest / member.filename).resolve()
        if root != target and root not in target.parents:
            raise LodevemError(f"refusing to extract '{member.filename}': it points outside {dest}")
    archive.extractall(dest)


def fetch_predictors(name: str, data_dir: Optional[Path | str], timeout_s: float = 600.0) -> Path:
    """Download nn-Meter's published predictor ``name`` into ``<data_dir>/predictor/<name>``
    (``data_dir`` None: ``default_data_dir``).

    The URL is the one nn-Meter's own config lists. ``timeout_s`` bounds connecting, each read and
    the whole transfer. Offline, the error is one line telling how to install the zip by hand.
    Returns the predictor folder.
    """
    import requests

    url = str(_config(name).get("download") or "")
    if not url:
        raise InputError(f"nn-Meter predictor '{name}' has no download URL in nn-Meter's config")
    target = predictor_dir(default_data_dir(data_dir), name)
    target.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}.") as tmp:
        zip_path = Path(tmp) / f"{name}.zip"
        try:
            with requests.get(url, stream=True, timeout=(min(timeout_s, 30.0), timeout_s)) as response:
                response.raise_for_status()
                with open(zip_path, "wb") as out:
                    for chunk in response.iter_content(chunk_size=1 << 20):
                        out.write(chunk)
                        if time.monotonic() > deadline:
                            raise LodevemError(_offline_message(url, target, f"download exceeded {timeout_s:g} s"))
        except requests.exceptions.ConnectionError as exc:
            reason = "DNS lookup failed" if "resolve" in str(exc).lower() or "name or service" in str(exc).lower() \
                else "connection failed"
            raise LodevemError(_offline_message(url, target, reason)) from None
        except requests.exceptions.Timeout:
            raise LodevemError(_offline_message(url, target, f"no answer within {timeout_s:g} s")) from None
        except requests.exceptions.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            raise LodevemError(_offline_message(url, target, f"HTTP {status}")) from None
        unpacked = Path(tmp) / "unpacked"
        try:
            with zipfile.ZipFile(zip_path) as archive:
                _safe_extract(archive, unpacked)
        except zipfile.BadZipFile:
            raise LodevemError(f"{url}: the download is not a zip file; try again or install it by hand") from None
        found = sorted(unpacked.rglob(FUSION_RULES))
        if not found:
            raise LodevemError(f"{url}: the zip holds no {FUSION_RULES}; not an nn-Meter predictor")
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(found[0].parent), str(target))
    return target
