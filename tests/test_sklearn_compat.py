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
from lodevem.latency.sklearn_compat import LoadInfo, load_legacy_pickle, load_predictor_file

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
