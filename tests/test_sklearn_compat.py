"""Loading nn-Meter-style scikit-learn 0.23 predictor pickles on current scikit-learn.

No real nn-Meter file is downloaded: the tests write pickles in the 0.23 layout themselves
(node records without ``missing_go_to_left``, ``base_estimator`` instead of ``estimator``, no
``monotonic_cst``, ``_sklearn_version = "0.23.1"``, numpy 1.x module paths) from a forest
trained here, so the expected predictions are known exactly.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree._tree import NODE_DTYPE, Tree

from lodevem.errors import InputError
from lodevem.latency.sklearn_compat import ALLOWED_GLOBALS, LoadInfo, load_legacy_pickle, load_predictor_file

OLD_NODE_DTYPE = np.dtype(
    [(name, NODE_DTYPE.fields[name][0]) for name in NODE_DTYPE.names if name != "missing_go_to_left"]
)


@pytest.fixture(scope="module")
def forest() -> tuple[RandomForestRegressor, np.ndarray, np.ndarray]:
    """A small forest on nn-Meter's 7 conv features (HW, CIN, COUT, KS, STRIDE, FLOPs, params)."""
    rng = np.random.RandomState(0)
    hw, cin, cout = rng.choice([7, 14, 28, 56, 112], 200), rng.randint(3, 512, 200), rng.randint(8, 512, 200)
    ks, stride = rng.choice([1, 3, 5, 7], 200), rng.choice([1, 2], 200)
    flops = hw * hw * cin * cout * ks * ks / stride**2 / 1e6
    params = cin * cout * ks * ks / 1e6
    X = np.column_stack([hw, cin, cout, ks, stride, flops, params]).astype(float)
    y = flops * 0.01 + rng.rand(200)
    model = RandomForestRegressor(n_estimators=5, max_depth=8, random_state=0).fit(X, y)
    return model, X, model.predict(X)


class _Sklearn023Pickler(pickle.Pickler):
    """Writes estimators and trees the way scikit-learn 0.23 laid them out."""

    def reducer_override(self, obj):
        if isinstance(obj, Tree):
            cls, args, state = obj.__reduce__()
            old_nodes = np.empty(state["nodes"].shape, dtype=OLD_NODE_DTYPE)
            for name in OLD_NODE_DTYPE.names:
                old_nodes[name] = state["nodes"][name]
            return cls, args, dict(state, nodes=old_nodes)
        if isinstance(obj, BaseEstimator):
            state = dict(vars(obj), _sklearn_version="0.23.1")
            for new, old in (("estimator", "base_estimator"), ("estimator_", "base_estimator_")):
                if new in state:
                    state[old] = state.pop(new)
            for gone in ("monotonic_cst", "_n_samples", "_n_samples_bootstrap", "_sample_weight"):
                state.pop(gone, None)
            state["min_impurity_split"] = None  # 0.23 parameters since removed
            if "tree_" in state:  # a forest's trees: 0.23 had n_features_, and no n_features_in_
                state["presort"] = "deprecated"
                state["n_features_"] = state.pop("n_features_in_")
            elif "estimators_" in state:
                state["n_features_"] = state["n_features_in_"]
            return copyreg.__newobj__, (type(obj),), state
        return NotImplemented


def _replace(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new)


def sklearn023_pickle(model: RandomForestRegressor, *, sklearn022_paths: bool = False) -> bytes:
    """Protocol 3 (Python 3.6/3.7 default), whose GLOBAL opcodes are plain "module\\nname\\n"."""
    buf = io.BytesIO()
    _Sklearn023Pickler(buf, protocol=3).dump(model)
    data = _replace(buf.getvalue(), b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    if sklearn022_paths:
        data = _replace(data, b"sklearn.ensemble._forest\n", b"sklearn.ensemble.forest\n")
        data = _replace(data, b"sklearn.tree._classes\n", b"sklearn.tree.tree\n")
    return data


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_plain_pickle_rejects_023_layout(forest):
    model, _, _ = forest
    with pytest.raises(ValueError, match="node array from the pickle has an incompatible dtype"):
        pickle.loads(sklearn023_pickle(model))


@pytest.mark.parametrize("sklearn022_paths", [False, True], ids=["sklearn0.23", "sklearn0.22-paths"])
def test_legacy_pickle_predicts_identically(forest, tmp_path, sklearn022_paths):
    model, X, expected = forest
    path = _write(tmp_path, "conv-bn-relu.pkl", sklearn023_pickle(model, sklearn022_paths=sklearn022_paths))
    if sklearn022_paths:
        with pytest.raises(ModuleNotFoundError):
            pickle.loads(path.read_bytes())

    info = LoadInfo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the version-mismatch warning is recorded, not emitted
        loaded = load_predictor_file(path, info=info)
        predicted = loaded.predict(X)

    assert np.array_equal(predicted, expected)
    assert info.legacy and info.sklearn_version == "0.23.1"
    assert "RandomForestRegressor.estimator = base_estimator" in info.patched
    assert "RandomForestRegressor.monotonic_cst = None (default)" in info.patched
    assert all(type(est.tree_) is Tree for est in loaded.estimators_)  # no helper class leaks


def test_legacy_model_is_a_normal_model_afterwards(forest, tmp_path):
    model, X, expected = forest
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_legacy_pickle(io.BytesIO(sklearn023_pickle(model)))
        repr(loaded), loaded.get_params(), clone(loaded)
        assert np.array_equal(loaded.estimators_[0].predict(X), model.estimators_[0].predict(X))
        assert np.array_equal(pickle.loads(pickle.dumps(loaded)).predict(X), expected)
    with pytest.raises(ValueError, match="features"):  # width check restored via n_features_in_
        loaded.predict(X[:, :3])


def test_fresh_pickle_takes_fast_path(forest, tmp_path):
    model, X, expected = forest
    info = LoadInfo()
    loaded = load_predictor_file(_write(tmp_path, "fresh.pkl", pickle.dumps(model)), info=info)
    assert np.array_equal(loaded.predict(X), expected)
    assert info == LoadInfo(legacy=False, sklearn_version=None, patched=[])


@pytest.mark.parametrize(
    "make_bytes",
    [
        lambda model: b"this is not a pickle\n",
        lambda model: pickle.dumps(model)[:2000],
        lambda model: sklearn023_pickle(model)[:-500],
        lambda model: sklearn023_pickle(model).replace(b"sklearn.ensemble._forest\n", b"sklearn.ensemble._forezt\n"),
    ],
    ids=["garbage", "truncated", "truncated-legacy", "unknown-module"],
)
def test_unloadable_file_gives_one_line_error(forest, tmp_path, make_bytes):
    path = _write(tmp_path, "fc.pkl", make_bytes(forest[0]))
    with pytest.raises(InputError) as excinfo:
        load_predictor_file(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


def test_fast_path_records_other_version_instead_of_warning(forest, tmp_path):
    import sklearn

    model, X, expected = forest
    current = sklearn.__version__.encode()
    other = b"9" * len(current)  # same length keeps the pickle's string opcodes valid
    data = _replace(pickle.dumps(model), current, other)
    info = LoadInfo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_predictor_file(_write(tmp_path, "dwconv-bn-relu.pkl", data), info=info)
    assert np.array_equal(loaded.predict(X), expected)
    assert not info.legacy and info.sklearn_version == other.decode()


# ---------------------------------------------------------------------------------------------
# Hostile and malformed files: the restricted unpickler
# ---------------------------------------------------------------------------------------------

REFUSED = "refused to unpickle {} (predictor files may contain only scikit-learn/numpy objects)"


class _Call:
    """Pickles as ``fn(*args)``: what a hostile predictor file does with ``__reduce__``."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _hostile(kind: str, canary: Path, forest: RandomForestRegressor) -> tuple[bytes, str]:
    """A pickle that would create ``canary``, and the ``module.name`` it asks for."""
    import builtins
    import os
    import subprocess

    touch = f"touch {canary}"
    if kind == "os.system":  # hand-written protocol 0: GLOBAL 'os system', as a text editor would
        return f"cos\nsystem\n(S'{touch}'\ntR.".encode(), "os.system"
    if kind == "reduce-os.system":  # os.system pickles under its real module, posix
        return pickle.dumps(_Call(os.system, touch)), f"{os.system.__module__}.system"
    if kind == "builtins.eval":
        return pickle.dumps(_Call(builtins.eval, f"__import__('os').system({touch!r})")), "builtins.eval"
    if kind == "subprocess.Popen":
        return pickle.dumps(_Call(subprocess.Popen, ["touch", str(canary)])), "subprocess.Popen"
    if kind == "inside-a-real-forest":  # the estimator classes load first, the payload deep inside
        evil = clone(forest).fit(np.zeros((4, 2)), np.arange(4.0))
        evil.estimators_[-1].payload = _Call(os.system, touch)
        return pickle.dumps(evil), f"{os.system.__module__}.system"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["os.system", "reduce-os.system", "builtins.eval", "subprocess.Popen", "inside-a-real-forest"]
)
def test_hostile_pickle_is_refused_and_runs_nothing(forest, tmp_path, kind):
    canary = tmp_path / "lodevem-pickle-canary"
    data, qualname = _hostile(kind, canary, forest[0])
    path = _write(tmp_path, "conv-bn-relu.pkl", data)
    with pytest.raises(InputError) as excinfo:
        load_predictor_file(path)
    assert str(excinfo.value) == f"{path}: {REFUSED.format(qualname)}"
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__  # no chained traceback
    assert not canary.exists()
    with pytest.raises(InputError, match="refused to unpickle"):  # the stream API is the same loader
        load_legacy_pickle(io.BytesIO(data))
    assert not canary.exists()


def _stack_global(module: str, name: str) -> bytes:
    """Protocol 4 STACK_GLOBAL, which (unlike GLOBAL) accepts dotted attribute paths."""
    m, n = module.encode(), name.encode()
    return b"\x80\x04\x8c" + bytes([len(m)]) + m + b"\x8c" + bytes([len(n)]) + n + b"\x93"


def test_allowed_names_cannot_be_stretched_or_altered(tmp_path):
    import numpy._core.numeric as numeric
    from sklearn.ensemble import RandomForestRegressor as Forest

    defaults, predict = numeric._frombuffer.__defaults__, Forest.predict
    for i, (data, expected) in enumerate([
        # an attribute path starting at an allowed name is not that name
        (_stack_global("numpy", "ndarray.__init__") + b".", REFUSED.format("numpy.ndarray.__init__")),
        (_stack_global("sklearn.ensemble._forest", "RandomForestRegressor.__init__.__globals__") + b".",
         REFUSED.format("sklearn.ensemble._forest.RandomForestRegressor.__init__.__globals__")),
        # BUILD on an allowed function or class must not change it for later loads
        (b"cnumpy.core.numeric\n_frombuffer\n(N(dS'__defaults__'\n(I1\ntstb.", "not a usable"),
        (b"cnumpy.core.numeric\n_frombuffer\n(dS'x'\nI1\nsb.", "not a usable"),
        (b"csklearn.ensemble._forest\nRandomForestRegressor\n(N(dS'predict'\nI1\nstb.", "not a usable"),
        (b"c__builtin__\nobject\n(N(dS'__doc__'\nS'x'\nstb.", "not a usable"),
        # _codecs.encode is admitted for latin-1 bytes only
        (b"c_codecs\nencode\n(S'abc'\nS'rot13'\ntR.", "admitted only as (str, 'latin1')"),
    ]):
        path = _write(tmp_path, f"k{i}.pkl", data)
        with pytest.raises(InputError) as excinfo:
            load_predictor_file(path)
        message = str(excinfo.value)
        assert message.startswith(f"{path}: ") and expected in message and "\n" not in message
    assert numeric._frombuffer.__defaults__ == defaults and not hasattr(numeric._frombuffer, "x")
    assert Forest.predict is predict


def _with_tree_nodes(model: RandomForestRegressor, edit) -> bytes:
    """A fresh pickle of ``model`` whose first tree's node records went through ``edit``."""

    class Pickler(pickle.Pickler):
        done = False

        def reducer_override(self, obj):
            if isinstance(obj, Tree) and not Pickler.done:
                Pickler.done = True
                cls, args, state = obj.__reduce__()
                nodes = state["nodes"].copy()
                return cls, args, edit(dict(state, nodes=nodes)) or dict(state, nodes=nodes)
            return NotImplemented

    buf = io.BytesIO()
    Pickler(buf, protocol=4).dump(model)
    return buf.getvalue()


def _set(field_name, index, value):
    def edit(state):
        state["nodes"][field_name][index] = value
    return edit


@pytest.mark.parametrize(
    "edit, reason",
    [
        (_set("left_child", 0, 10**6), "child index is out of order or out of range"),
        (_set("right_child", 0, 0), "child index is out of order or out of range"),  # a cycle
        (_set("right_child", 0, -1), "only one child"),
        (_set("feature", 0, 7), "feature outside 0..6"),
        (_set("feature", 0, -5), "feature outside 0..6"),
        (lambda state: dict(state, node_count=state["node_count"] + 1000), "does not match its"),
    ],
    ids=["child-out-of-range", "cycle", "one-child", "feature-too-high", "feature-negative", "node-count"],
)
def test_unsound_trees_are_refused_before_sklearn_walks_them(forest, tmp_path, edit, reason):
    path = _write(tmp_path, "conv-bn-relu.pkl", _with_tree_nodes(forest[0], edit))
    with pytest.raises(InputError, match=reason) as excinfo:
        load_predictor_file(path)
    assert str(excinfo.value).startswith(f"{path}: not a usable nn-Meter predictor (a tree")


def _forest_without_trees(model):
    empty = clone(model).fit(np.zeros((4, 7)), np.arange(4.0))
    empty.estimators_ = []
    return empty


def _forest_holding_an_array(model):
    odd = clone(model).fit(np.zeros((4, 7)), np.arange(4.0))
    odd.estimators_[0] = np.zeros(3)
    return odd


def _forest_with_wider_trees(model):
    odd = clone(model).fit(np.zeros((4, 7)), np.arange(4.0))
    odd.estimators_[0] = clone(odd.estimators_[0]).fit(np.zeros((4, 9)), np.arange(4.0))
    return odd


@pytest.mark.parametrize(
    "make_object, reason",
    [
        (lambda model: np.arange(5.0), "holds a numpy.ndarray, not a RandomForestRegressor"),
        (lambda model: {"conv-bn-relu": 1.0}, "holds a builtins.dict, not a RandomForestRegressor"),
        (lambda model: model.estimators_[0].tree_, "holds a sklearn.tree._tree.Tree, not a RandomForestRegressor"),
        (_forest_without_trees, "RandomForestRegressor.estimators_ is not a non-empty list of trees"),
        (_forest_holding_an_array, "RandomForestRegressor.estimators_ holds a numpy.ndarray without a fitted tree"),
        (_forest_with_wider_trees, "a tree whose feature or output count differs from the forest's"),
    ],
    ids=["array", "dict", "bare-tree", "no-trees", "array-as-tree", "wider-tree"],
)
def test_allowed_objects_that_are_no_predictor_are_refused(forest, tmp_path, make_object, reason):
    path = _write(tmp_path, "fc.pkl", pickle.dumps(make_object(forest[0])))
    with pytest.raises(InputError) as excinfo:
        load_predictor_file(path)
    assert str(excinfo.value) == f"{path}: not a usable nn-Meter predictor ({reason})"


@pytest.mark.parametrize(
    "make_bytes, reason",
    [
        (lambda model: np.random.RandomState(1).bytes(4096), "UnpicklingError"),
        (lambda model: b"", "EOFError: Ran out of input"),
        (lambda model: pickle.dumps(model, protocol=0)[:-1], ""),  # protocol 0 without its STOP
        (lambda model: sklearn023_pickle(model)[: len(sklearn023_pickle(model)) // 2], ""),
    ],
    ids=["random-bytes", "empty", "no-stop-opcode", "half-legacy"],
)
def test_broken_files_give_one_line_input_errors(forest, tmp_path, make_bytes, reason):
    path = _write(tmp_path, "maxpool.pkl", make_bytes(forest[0]))
    with pytest.raises(InputError) as excinfo:
        load_predictor_file(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: not a usable nn-Meter predictor (") and reason in message
    assert "\n" not in message and len(message) < len(str(path)) + 400


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_pickle_protocol_loads_identically(forest, tmp_path, protocol):
    model, X, expected = forest
    info = LoadInfo()
    path = _write(tmp_path, "conv-bn-relu.pkl", pickle.dumps(model, protocol=protocol))
    loaded = load_predictor_file(path, info=info)
    assert np.array_equal(loaded.predict(X), expected)
    assert info == LoadInfo()


@pytest.fixture(scope="module")
def oob_forest(forest):
    """Trained like nn-Meter's (oob_score=True, max_features, n_jobs=32 as its GPU predictors),
    with ``oob_score_`` a numpy.float64 as 0.23's r2_score made it."""
    _, X, _ = forest
    model = RandomForestRegressor(n_estimators=8, max_depth=70, max_features=6, oob_score=True, random_state=10,
                                  n_jobs=32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few trees for every sample to have an OOB estimate
        model.fit(X, X[:, 5] * 0.01 + X[:, 0])
    model.oob_score_ = np.float64(model.oob_score_)
    sequential = clone(model).set_params(n_jobs=None)
    sequential.__dict__.update({k: v for k, v in vars(model).items() if k != "n_jobs"})
    return model, X, sequential.predict(X)


def test_file_cannot_choose_host_threads_or_verbosity(oob_forest, tmp_path):
    model, X, expected = oob_forest
    noisy = pickle.loads(pickle.dumps(model))
    noisy.verbose = 3
    info = LoadInfo()
    loaded = load_predictor_file(_write(tmp_path, "conv-bn-relu.pkl", pickle.dumps(noisy)), info=info)
    assert (loaded.n_jobs, loaded.verbose) == (None, 0)
    assert info.patched == ["RandomForestRegressor.n_jobs = None (the host's choice)",
                            "RandomForestRegressor.verbose = 0 (the host's choice)"]
    assert np.array_equal(loaded.predict(X), expected)  # summed in tree order, as with n_jobs=None


def test_allow_list_is_exactly_what_forest_pickles_use(forest, oob_forest, monkeypatch):
    """Every entry of ALLOWED_GLOBALS has a reason and is needed by some real predictor pickle:
    current-layout forests at every protocol, 0.23-layout ones (numpy.float64 oob_score_)."""
    from lodevem.latency import sklearn_compat

    used: set[tuple[str, str]] = set()
    real_find_class = sklearn_compat._RestrictedUnpickler.find_class

    def recording(self, module, name):
        used.add((sklearn_compat._MODULE_RENAMES.get(module, module), name))
        return real_find_class(self, module, name)

    monkeypatch.setattr(sklearn_compat._RestrictedUnpickler, "find_class", recording)
    pickles = [pickle.dumps(m, protocol=p) for m in (forest[0], oob_forest[0])
               for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    pickles += [sklearn023_pickle(m, sklearn022_paths=old) for m in (forest[0], oob_forest[0]) for old in (False, True)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for data in pickles:
            load_legacy_pickle(io.BytesIO(data))
    assert used == set(ALLOWED_GLOBALS)
    assert all(isinstance(why, str) and len(why) > 20 for why in ALLOWED_GLOBALS.values())


def test_legacy_oob_forest_predicts_identically(oob_forest, tmp_path):
    model, X, expected = oob_forest
    info = LoadInfo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_predictor_file(_write(tmp_path, "dwconv-bn-relu.pkl", sklearn023_pickle(model)), info=info)
        assert np.array_equal(loaded.predict(X), expected)
    assert info.legacy and info.sklearn_version == "0.23.1"
    assert type(loaded.oob_score_) is np.float64 and loaded.oob_score_ == model.oob_score_
