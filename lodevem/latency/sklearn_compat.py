"""Load nn-Meter's scikit-learn 0.23 latency predictors on today's scikit-learn.

nn-Meter ships one ``RandomForestRegressor`` per kernel type (``conv-bn-relu.pkl``, ``fc.pkl``,
...), pickled with scikit-learn 0.23.1. On scikit-learn >= 1.3 ``pickle.load`` refuses them
(``ValueError: node array from the pickle has an incompatible dtype``) because the tree node
record gained a ``missing_go_to_left`` field, and the forest no longer matches what current code
expects (``base_estimator`` was renamed ``estimator``; ``monotonic_cst`` appeared). See
nn-Meter issue #131.

The fix here is done at load time only, without touching the files: an ``Unpickler`` widens the
old node array (``missing_go_to_left = 0``: a 0.23 tree never saw missing values, so that branch
is never taken), then the loaded estimators are given the attributes current code reads, with
the values a 0.23 model implicitly had. Predictions are bit-for-bit those of the old model.

Only load files you trust: unpickling runs arbitrary code, legacy loader or not.
"""

from __future__ import annotations

import inspect
import io
import os
import pickle
import warnings
from dataclasses import dataclass, field
from typing import IO, Any, Union

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import InconsistentVersionWarning
from sklearn.tree._tree import NODE_DTYPE, Tree

__all__ = ["LoadInfo", "load_legacy_pickle", "load_predictor_file"]

PathOrFile = Union[str, "os.PathLike[str]", IO[bytes]]

# Modules scikit-learn 0.22 pickled under and later made private (the public aliases were
# removed in 0.24); numpy 2 moved ``numpy.core`` to ``numpy._core``.
_MODULE_RENAMES = {
    "sklearn.ensemble.forest": "sklearn.ensemble._forest",
    "sklearn.ensemble.base": "sklearn.ensemble._base",
    "sklearn.ensemble.bagging": "sklearn.ensemble._bagging",
    "sklearn.ensemble.gradient_boosting": "sklearn.ensemble._gb",
    "sklearn.ensemble.weight_boosting": "sklearn.ensemble._weight_boosting",
    "sklearn.tree.tree": "sklearn.tree._classes",
    "numpy.core.multiarray": "numpy._core.multiarray",
    "numpy.core.numeric": "numpy._core.numeric",
}


@dataclass
class LoadInfo:
    """What loading a predictor took, for callers that report it.

    ``sklearn_version`` is the version the pickle was written with (taken from the
    InconsistentVersionWarning we silence), ``None`` if it matches the running one.
    """

    legacy: bool = False
    sklearn_version: str | None = None
    patched: list[str] = field(default_factory=list)


class _LegacyTree(Tree):
    """A ``Tree`` whose ``__setstate__`` accepts the pre-1.3 node record (no missing_go_to_left).

    Used only while unpickling; ``_upgrade`` swaps every instance for a plain ``Tree`` so that
    nothing downstream ever sees this class.
    """

    def __setstate__(self, state: dict[str, Any]) -> None:
        nodes = state.get("nodes")
        if isinstance(nodes, np.ndarray) and nodes.dtype.names and (
            set(nodes.dtype.names) < set(NODE_DTYPE.names)
        ):
            state = dict(state, nodes=_widen_nodes(nodes))
        super().__setstate__(state)


def _widen_nodes(nodes: np.ndarray) -> np.ndarray:
    """Copy old node records into the current dtype; fields the old layout lacks stay 0."""
    widened = np.zeros(nodes.shape, dtype=NODE_DTYPE)
    for name in nodes.dtype.names:
        widened[name] = nodes[name]  # also casts 32-bit / other-endian indices
    return widened


class _LegacyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "sklearn.tree._tree" and name == "Tree":
            return _LegacyTree
        renamed = _MODULE_RENAMES.get(module)
        if renamed is not None:
            try:
                return super().find_class(renamed, name)
            except (ImportError, AttributeError):
                pass  # e.g. numpy 1.x has no numpy._core: use the original path
        return super().find_class(module, name)


def _load(file: IO[bytes], unpickler: type[pickle.Unpickler], info: LoadInfo) -> Any:
    """Unpickle, turning sklearn's version-mismatch warning into ``info.sklearn_version``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InconsistentVersionWarning)
        obj = unpickler(file).load()
    for w in caught:
        if issubclass(w.category, InconsistentVersionWarning):
            info.sklearn_version = w.message.original_sklearn_version
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return obj


def _real_tree(tree: _LegacyTree) -> Tree:
    cls, args, state = Tree.__reduce__(tree)
    real = cls(*args)
    real.__setstate__(state)
    return real


def _patch_estimator(est: BaseEstimator, info: LoadInfo) -> None:
    """Give a 0.23-era estimator the attributes current scikit-learn reads."""
    d = vars(est)
    cls = type(est).__name__

    def set_(attr: str, value: Any, why: str) -> None:
        d[attr] = value
        entry = f"{cls}.{attr} = {why}"
        if entry not in info.patched:  # once per class, not once per tree
            info.patched.append(entry)

    # 1.2 renamed base_estimator -> estimator; forest predict() reads self.estimator (tags).
    for old, new in (("base_estimator", "estimator"), ("base_estimator_", "estimator_")):
        if old in d and new not in d:
            set_(new, d[old], old)
    # Constructor parameters added since (monotonic_cst): repr()/get_params()/clone() read them.
    # Their defaults are the behaviour the old model had (no monotonicity constraint).
    for name, param in inspect.signature(type(est).__init__).parameters.items():
        if name not in d and name != "self" and param.default is not inspect.Parameter.empty:
            if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                set_(name, param.default, f"{param.default!r} (default)")
    # Without n_features_in_ predict() skips the width check and the Cython tree code reads past
    # the row on a too-narrow X. 0.23 stored the same number as n_features_ (trees in a forest
    # had no n_features_in_ at all).
    if "n_features_in_" not in d:
        if isinstance(d.get("n_features_"), (int, np.integer)):
            set_("n_features_in_", int(d["n_features_"]), "n_features_")
        elif isinstance(d.get("tree_"), Tree):
            set_("n_features_in_", int(d["tree_"].n_features), "tree_.n_features")


def _upgrade(obj: Any, info: LoadInfo) -> Any:
    """Walk estimators and their containers: swap legacy trees for real ones, patch attributes."""
    if isinstance(obj, _LegacyTree):
        return _real_tree(obj)
    seen: set[int] = set()
    stack = [obj]
    while stack:
        cur = stack.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, BaseEstimator):
            for key, value in vars(cur).items():
                if isinstance(value, _LegacyTree):
                    vars(cur)[key] = _real_tree(value)
                else:
                    stack.append(value)
            _patch_estimator(cur, info)
        elif isinstance(cur, (list, dict)):
            items = cur.items() if isinstance(cur, dict) else enumerate(cur)
            for key, value in list(items):
                if isinstance(value, _LegacyTree):
                    cur[key] = _real_tree(value)
                else:
                    stack.append(value)
        elif isinstance(cur, tuple):  # e.g. Pipeline steps; trees never sit in one directly
            stack.extend(cur)
        elif isinstance(cur, np.ndarray) and cur.dtype == object:  # gradient boosting estimators_
            stack.extend(cur.ravel())
    return obj


def load_legacy_pickle(path_or_file: PathOrFile, *, info: LoadInfo | None = None) -> Any:
    """Unpickle a scikit-learn 0.22/0.23 model so that it predicts on current scikit-learn.

    Pass a ``LoadInfo`` to learn the pickle's original sklearn version and what was patched.
    """
    info = info if info is not None else LoadInfo()
    info.legacy = True
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "rb") as f:
            obj = _load(f, _LegacyUnpickler, info)
    else:
        obj = _load(path_or_file, _LegacyUnpickler, info)
    return _upgrade(obj, info)


def _needs_legacy(exc: BaseException) -> bool:
    if isinstance(exc, ValueError):
        return "incompatible dtype" in str(exc)
    return isinstance(exc, (AttributeError, ImportError))  # ModuleNotFoundError: old paths


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"


def load_predictor_file(path: str | os.PathLike[str], *, info: LoadInfo | None = None) -> Any:
    """Load an nn-Meter predictor pickle, old or new.

    Plain ``pickle.load`` first (fresh pickles need nothing else), the legacy loader only when
    that fails the way old scikit-learn pickles fail. Either way the result goes through the
    same attribute upgrade, which is a no-op on a current model. A file neither can load raises
    a one-line ``ValueError`` naming it; ``OSError`` (missing/unreadable file) propagates as is.
    """
    info = info if info is not None else LoadInfo()
    with open(path, "rb") as f:
        data = f.read()
    try:
        obj = _load(io.BytesIO(data), pickle.Unpickler, info)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is reported as bad file
        if not _needs_legacy(exc):
            raise ValueError(f"{os.fspath(path)}: not a loadable pickle ({_one_line(exc)})") from exc
        try:
            obj = load_legacy_pickle(io.BytesIO(data), info=info)
        except Exception as exc2:  # noqa: BLE001
            raise ValueError(
                f"{os.fspath(path)}: cannot load with this scikit-learn, even with the legacy "
                f"loader ({_one_line(exc2)})"
            ) from exc2
        return obj
    return _upgrade(obj, info)
