"""Load nn-Meter's kernel-regressor pickles safely, including scikit-learn 0.23 ones.

nn-Meter ships one ``RandomForestRegressor`` per kernel type (``conv-bn-relu.pkl``, ``fc.pkl``,
...), pickled with scikit-learn 0.23.1. Two problems, both handled at load time without touching
the files:

- Plain unpickling runs whatever the file names: a hostile ``.pkl`` can call ``os.system``. So
  every file goes through :class:`_RestrictedUnpickler`, whose ``find_class`` hands out only the
  classes and functions in :data:`ALLOWED_GLOBALS` (what a pickled ``RandomForestRegressor``
  needs) and refuses anything else with an :class:`~lodevem.errors.InputError` naming the file
  and the refused ``module.name``. The loaded object must then be a forest (or single tree) whose
  trees are structurally sound: every child index and split feature in range, so scikit-learn's
  Cython code cannot be steered outside its arrays. Any other failure (truncated file, garbage,
  an allowed object that is no predictor) is a one-line ``InputError`` naming the file too. A
  hostile file can still cost memory and time while it loads, but it cannot name any code to run.
- On scikit-learn >= 1.3 the 0.23 trees do not load (``ValueError: node array from the pickle
  has an incompatible dtype``) because the node record gained a ``missing_go_to_left`` field,
  and the forest no longer matches what current code expects (``base_estimator`` was renamed
  ``estimator``; ``monotonic_cst`` appeared). See nn-Meter issue #131. The tree class the
  unpickler hands out widens the old node array (``missing_go_to_left = 0``: a 0.23 tree never
  saw missing values, so that branch is never taken), then the loaded estimators are given the
  attributes current code reads, with the values a 0.23 model implicitly had. Predictions are
  bit-for-bit those of the old model.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import types
import warnings
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Mapping, Union

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import InconsistentVersionWarning
from sklearn.tree import DecisionTreeRegressor
from sklearn.tree._tree import NODE_DTYPE, TREE_LEAF, Tree

from ..errors import InputError, PickleRefused, UnsoundPredictor

__all__ = ["ALLOWED_GLOBALS", "LoadInfo", "load_legacy_pickle", "load_predictor_file"]

PathOrFile = Union[str, "os.PathLike[str]", IO[bytes]]

ALLOWED_GLOBALS: Mapping[tuple[str, str], str] = types.MappingProxyType({
    # scikit-learn: what nn-Meter's builder pickles (nn_meter/builder/kernel_predictor_builder/
    # predictor_builder/predictor_lib.py and nn_meter/predictor/prediction/kernel_predictor.py
    # construct RandomForestRegressor and nothing else, random_state an int, oob_score=True).
    ("sklearn.ensemble._forest", "RandomForestRegressor"): "the kernel predictor itself",
    ("sklearn.tree._classes", "DecisionTreeRegressor"): "the forest's estimators_ and its "
        "estimator/base_estimator template",
    ("sklearn.tree._tree", "Tree"): "each tree's node and value arrays; handed out as "
        "_CheckedTree, which validates them and widens 0.23 node records",
    # numpy: arrays, their dtypes and scalars.
    ("numpy", "ndarray"): "the array type _reconstruct is given (protocols 0-4)",
    ("numpy", "dtype"): "every array's and scalar's dtype, incl. the tree's structured node record",
    ("numpy._core.multiarray", "_reconstruct"): "ndarray.__reduce__ (protocols 0-4; numpy 1.x "
        "wrote numpy.core.multiarray)",
    ("numpy._core.numeric", "_frombuffer"): "ndarray.__reduce_ex__ at protocol 5",
    ("numpy._core.multiarray", "scalar"): "numpy scalars: 0.23's oob_score_ is a numpy.float64 "
        "(r2_score) and nn-Meter trains with oob_score=True",
    # The standard library, for pickles written at protocols 0-2 (Python 2 era and pickle's
    # protocol=0/1/2); Python 3's defaults (3 up to 3.7, 4 since) need none of these.
    ("copyreg", "_reconstructor"): "protocols 0 and 1 rebuild every estimator object with it",
    ("builtins", "object"): "the base class copyreg._reconstructor is given (protocols 0/1)",
    ("_codecs", "encode"): "protocols 0-2 store bytes as _codecs.encode(text, 'latin1'); "
        "handed out as a stand-in that encodes latin-1 only",
})
"""Every ``(module, name)`` a predictor pickle may reference, with why it is there.

Read-only. Names are in today's spelling; ``_MODULE_RENAMES`` maps older spellings first. Found
by recording every ``find_class`` call while loading RandomForestRegressor pickles written at every
protocol (0-5) by the installed scikit-learn, and the 0.23-layout pickles the tests build
(``tests/test_sklearn_compat.py`` pins the list to exactly that set). Deliberately absent: gradient boosting (needs
``numpy.random``'s RandomState constructors, ``sklearn._loss`` and ``sklearn.dummy``), extra
trees and linear models, which nn-Meter never builds, and joblib's array wrappers (nn-Meter
writes with ``pickle.dump``)."""

_PREDICTOR_TYPES = (RandomForestRegressor, DecisionTreeRegressor)

# Old spellings of the modules above: scikit-learn 0.22 pickled under public module paths it made
# private later (the aliases were removed in 0.24); numpy 2 moved ``numpy.core`` to ``numpy._core``;
# Python 2 names (pickles below protocol 3). Anything not listed keeps its own name.
_MODULE_RENAMES = {
    "sklearn.ensemble.forest": "sklearn.ensemble._forest",
    "sklearn.tree.tree": "sklearn.tree._classes",
    "numpy.core.multiarray": "numpy._core.multiarray",
    "numpy.core.numeric": "numpy._core.numeric",
    "copy_reg": "copyreg",
    "__builtin__": "builtins",
}
_REFUSED = "refused to unpickle {} (predictor files may contain only scikit-learn/numpy objects)"


@dataclass
class LoadInfo:
    """What loading a predictor took, for callers that report it.

    ``legacy``: the file has scikit-learn 0.22/0.23 trees or module paths. ``sklearn_version`` is
    the version the pickle was written with (taken from the InconsistentVersionWarning we silence),
    ``None`` if it matches the running one. ``patched``: attributes set on the loaded estimators.
    """

    legacy: bool = False
    sklearn_version: str | None = None
    patched: list[str] = field(default_factory=list)


class _CheckedTree(Tree):
    """The ``Tree`` the unpickler hands out: checks the node records before scikit-learn copies
    them into C memory, and widens pre-1.3 records (no ``missing_go_to_left``).

    Used only while unpickling; ``_upgrade`` swaps every instance for a plain ``Tree`` so that
    nothing downstream ever sees this class.
    """

    def __setstate__(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("nodes"), np.ndarray):
            raise UnsoundPredictor("a tree without a node array")
        nodes = state["nodes"]
        if nodes.dtype.names and set(nodes.dtype.names) < set(NODE_DTYPE.names):
            nodes = _widen_nodes(nodes)
            self.widened = True
        _check_nodes(nodes, state.get("node_count"), self.n_features)
        super().__setstate__(dict(state, nodes=nodes))


def _widen_nodes(nodes: np.ndarray) -> np.ndarray:
    """Copy old node records into the current dtype; fields the old layout lacks stay 0."""
    widened = np.zeros(nodes.shape, dtype=NODE_DTYPE)
    for name in nodes.dtype.names or ():
        widened[name] = nodes[name]  # also casts 32-bit / other-endian indices
    return widened


def _check_nodes(nodes: np.ndarray, node_count: Any, n_features: int) -> None:
    """Refuse node records the Cython tree walk would follow out of its arrays or in a cycle.

    scikit-learn's ``Tree.__setstate__`` checks the dtype and the value array's shape, but not
    ``node_count`` against the records, child indices or split features; ``apply`` trusts them.
    Builders number children after their parent, so a child index above the parent's is also
    what rules out cycles.
    """
    n = len(nodes) if nodes.ndim == 1 else -1
    if not isinstance(node_count, (int, np.integer)) or node_count != n or n < 1:
        raise UnsoundPredictor(f"a tree whose node_count {node_count!r} does not match its {n} node records")
    if n_features < 1:
        raise UnsoundPredictor(f"a tree over {n_features} features")
    left, right = nodes["left_child"].astype(np.int64), nodes["right_child"].astype(np.int64)
    leaf = left == TREE_LEAF
    if not np.array_equal(leaf, right == TREE_LEAF):
        raise UnsoundPredictor("a tree node with only one child")
    idx = np.arange(n)[~leaf]
    left, right, feature = left[~leaf], right[~leaf], nodes["feature"][~leaf].astype(np.int64)
    if not (np.all(left > idx) and np.all(right > idx) and np.all(left < n) and np.all(right < n)):
        raise UnsoundPredictor("a tree node whose child index is out of order or out of range")
    if not (np.all(feature >= 0) and np.all(feature < n_features)):
        raise UnsoundPredictor(f"a tree split on a feature outside 0..{n_features - 1}")


def _latin1_bytes(text: str, encoding: str) -> bytes:
    """``_codecs.encode`` as pickle protocols 0-2 use it (``bytes`` stored as latin-1 text)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is admitted only as (str, 'latin1')")
    return text.encode("latin-1")


_STAND_INS: dict[tuple[str, str], Any] = {
    ("sklearn.tree._tree", "Tree"): _CheckedTree,
    ("_codecs", "encode"): _latin1_bytes,
}


def _sealed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A fresh callable that runs ``fn`` and has no attributes a pickle could set.

    The BUILD opcode sets attributes on whatever object is on the stack, including a function
    ``find_class`` returned (its ``__dict__``, ``__defaults__``...); on numpy's own
    ``_frombuffer`` that would change later loads in this process. Instances without a
    ``__dict__`` or slots refuse every such assignment; a new one per lookup keeps even
    ``__class__`` games local to one file.
    """
    sealed = type(f"sealed {fn.__name__}", (), {"__slots__": (), "__call__": staticmethod(fn)})
    return sealed()


def _resolve(module: str, name: str, original: str) -> Any:
    """Import an allowed global, falling back to the file's own spelling (numpy 1.x)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        if original == module:
            raise
        return getattr(importlib.import_module(original), name)


class _RestrictedUnpickler(pickle.Unpickler):
    """An unpickler whose ``find_class`` admits only :data:`ALLOWED_GLOBALS`.

    ``find_class`` is the only way a pickle can reach code (GLOBAL, STACK_GLOBAL, INST, OBJ and
    the extension registry all go through it; persistent ids are refused by default), so no other
    class or function can be constructed or called. Records in ``info`` whether the file used
    scikit-learn 0.22 module paths.
    """

    def __init__(self, file: IO[bytes], info: LoadInfo) -> None:
        super().__init__(file)
        self._info = info

    def find_class(self, module: str, name: str) -> Any:
        current = _MODULE_RENAMES.get(module, module)
        if (current, name) not in ALLOWED_GLOBALS:  # exact pair: no dotted names, no attributes
            raise PickleRefused(f"{module}.{name}")
        if current != module and module.startswith("sklearn."):
            self._info.legacy = True
        found = _STAND_INS.get((current, name)) or _resolve(current, name, module)
        return _sealed(found) if isinstance(found, types.FunctionType) else found


def _unpickle(file: IO[bytes], info: LoadInfo) -> Any:
    """Unpickle restrictedly, turning sklearn's version-mismatch warning into ``info.sklearn_version``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InconsistentVersionWarning)
        obj = _RestrictedUnpickler(file, info).load()
    for w in caught:
        if issubclass(w.category, InconsistentVersionWarning):
            info.sklearn_version = getattr(w.message, "original_sklearn_version", None)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return obj


def _real_tree(tree: _CheckedTree, info: LoadInfo) -> Tree:
    if getattr(tree, "widened", False):
        info.legacy = True
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
    # The file must not decide how many threads the host starts or what joblib prints per call.
    if isinstance(est, RandomForestRegressor):
        for name, host in (("n_jobs", None), ("verbose", 0)):
            if d.get(name, host) != host:
                set_(name, host, f"{host!r} (the host's choice)")


def _upgrade(obj: Any, info: LoadInfo) -> Any:
    """Walk estimators and their containers: swap checked trees for real ones, patch attributes."""
    if isinstance(obj, _CheckedTree):
        return _real_tree(obj, info)
    seen: set[int] = set()
    stack = [obj]
    while stack:
        cur = stack.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, BaseEstimator):
            for key, value in vars(cur).items():
                if isinstance(value, _CheckedTree):
                    vars(cur)[key] = _real_tree(value, info)
                else:
                    stack.append(value)
            _patch_estimator(cur, info)
        elif isinstance(cur, (list, dict)):
            items = cur.items() if isinstance(cur, dict) else enumerate(cur)
            for key, value in list(items):
                if isinstance(value, _CheckedTree):
                    cur[key] = _real_tree(value, info)
                else:
                    stack.append(value)
        elif isinstance(cur, tuple):  # trees never sit in one directly
            stack.extend(cur)
        elif isinstance(cur, np.ndarray) and cur.dtype == object:
            stack.extend(cur.ravel())
    return obj


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _check_predictor(obj: Any) -> None:
    """Refuse anything but a forest (or tree) whose parts agree on features and outputs.

    Ends with one prediction on a row of zeros, so that whatever else is inconsistent fails here,
    as a load error, rather than later in the middle of a run.
    """
    if type(obj) not in _PREDICTOR_TYPES:
        raise UnsoundPredictor(f"holds a {_describe(obj)}, not a RandomForestRegressor")
    d = vars(obj)
    n_features, n_outputs = d.get("n_features_in_"), d.get("n_outputs_")
    for attr, value in (("n_features_in_", n_features), ("n_outputs_", n_outputs)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise UnsoundPredictor(f"{type(obj).__name__}.{attr} is {value!r}, not a positive integer")
    trees = d.get("estimators_") if isinstance(obj, RandomForestRegressor) else [obj]
    if not isinstance(trees, list) or not trees:
        raise UnsoundPredictor(f"{type(obj).__name__}.estimators_ is not a non-empty list of trees")
    for tree in trees:
        if type(tree) is not DecisionTreeRegressor or type(vars(tree).get("tree_")) is not Tree:
            raise UnsoundPredictor(f"{type(obj).__name__}.estimators_ holds a {_describe(tree)} "
                             f"without a fitted tree")
        t = vars(tree)
        if (t.get("n_features_in_"), t["tree_"].n_features, t.get("n_outputs_"), t["tree_"].n_outputs) != (
                n_features, n_features, n_outputs, n_outputs):
            raise UnsoundPredictor("a tree whose feature or output count differs from the forest's")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj.predict(np.zeros((1, int(n_features))))


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception on one short line (its text may come from the file), typed unless our own."""
    text = " ".join(str(exc).split()) or "no details"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text if isinstance(exc, UnsoundPredictor) else f"{type(exc).__name__}: {text}"


def _load_checked(file: IO[bytes], label: str, info: LoadInfo) -> Any:
    """Restricted unpickling, upgrade and checks; every failure becomes a one-line InputError."""
    try:
        obj = _upgrade(_unpickle(file, info), info)
        _check_predictor(obj)
    except PickleRefused as exc:
        raise InputError(f"{label}: {_REFUSED.format(exc.qualname)}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the bytes made go wrong, it is the file's fault
        raise InputError(f"{label}: not a usable nn-Meter predictor ({_one_line(exc)})") from None
    return obj


def load_legacy_pickle(path_or_file: PathOrFile, *, info: LoadInfo | None = None) -> Any:
    """Load a predictor pickle (a path or an open binary file) so it predicts on current scikit-learn.

    The same restricted loader as :func:`load_predictor_file`, for callers holding a stream.
    Pass a ``LoadInfo`` to learn the pickle's original sklearn version and what was patched.
    """
    info = info if info is not None else LoadInfo()
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "rb") as f:
            return _load_checked(f, os.fspath(path_or_file), info)
    label = getattr(path_or_file, "name", None)
    return _load_checked(path_or_file, label if isinstance(label, str) else "<predictor stream>", info)


def load_predictor_file(path: str | os.PathLike[str], *, info: LoadInfo | None = None) -> Any:
    """Load an nn-Meter predictor pickle, old or new, through the restricted unpickler.

    Only :data:`ALLOWED_GLOBALS` can be referenced; the result must be a RandomForestRegressor
    (or a lone DecisionTreeRegressor) with sound trees. Old and new files alike go through the
    same attribute upgrade, which is a no-op on a current model. A refused or unloadable file
    raises a one-line ``InputError`` naming it; ``OSError`` (missing/unreadable file) propagates.
    """
    info = info if info is not None else LoadInfo()
    with open(path, "rb") as f:
        return _load_checked(f, os.fspath(path), info)
