"""``--eval-data`` on the host: the bounded reader of labelled samples and every bad input the
issue lists, each refused in one line naming the file and the problem, exit 2, before any
container starts (the data is read before the backend is opened: ``--backend process`` here,
and nothing of the model file is ever loaded: it is not a model at all).

The readers are real (numpy's own ``.npz`` writer makes the files); nothing is mocked.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from lodevem.accuracy import with_drops
from lodevem.accuracy.data import prepare_eval_data
from lodevem.cli import cli
from lodevem.errors import InputError
from lodevem.results import Accuracy, ModelFile
from lodevem.store import ArtifactStore
from lodevem.worker.evaluate.samples import NpzSamples


def _digits(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images[:n] / 16.0).astype(np.float32)[:, None], d.target[:n].astype(np.int64)


def _npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def _start(tmp_path: Path, data: Path, *extra: str):
    model = tmp_path / "never_loaded.pt"
    model.write_bytes(b"not a model: --eval-data is checked before anything loads it")
    return CliRunner().invoke(cli, ["start", str(model), "--eval-data", str(data), "--profile", "nokia_c1",
                                    "--backend", "process", "--output", str(tmp_path / "out"), *extra])


def _refused(tmp_path: Path, data: Path, fragment: str, *extra: str) -> str:
    result = _start(tmp_path, data, *extra)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and fragment in last, result.output
    assert not (tmp_path / "out" / "benchmark_results.csv").exists()
    return last


def test_a_valid_npz_is_normalised_streamed_and_cached(tmp_path: Path) -> None:
    x, y = _digits(40)
    source = tmp_path / "digits.npz"
    np.savez_compressed(source, inputs=x.astype(np.float64), labels=y.astype(np.int32))
    store = ArtifactStore(tmp_path / "cache")
    data = prepare_eval_data(source, 25, store)
    assert (data.samples, data.available, data.sample_shape, data.input_shape) == (25, 40, (1, 8, 8), (1, 1, 8, 8))
    assert data.classes == len(set(y[:25].tolist())) and data.max_label == int(y[:25].max())
    with np.load(data.path) as copy:  # the sandbox's copy: float32 inputs, int64 labels, the first 25
        assert copy["inputs"].dtype == np.float32 and np.array_equal(copy["inputs"], x[:25])
        assert copy["labels"].dtype == np.int64 and np.array_equal(copy["labels"], y[:25])
    assert os.stat(data.path).st_mode & 0o004  # the container's user reads it
    again = prepare_eval_data(source, 25, store)  # from the store's sidecar, same digest
    assert again.sha256 == data.sha256 and again.path == data.path
    assert prepare_eval_data(source, 30, store).sha256 != data.sha256  # another limit, another data set


def test_the_reader_holds_one_sample_at_a_time(tmp_path: Path) -> None:
    """Rows come one by one from the zip member: a file of 200 samples yields arrays of one."""
    path = _npz(tmp_path / "d.npz", inputs=np.arange(200 * 12, dtype=np.float32).reshape(200, 3, 2, 2),
                labels=np.arange(200) % 4)
    with open(path, "rb") as fh:
        samples = NpzSamples(fh)
        rows = list(samples.iter_inputs(5))
    assert len(rows) == 5 and rows[0].shape == (3, 2, 2) and rows[4][0, 0, 0] == 4 * 12


BAD_NPZ = {
    "object arrays": (lambda x, y: {"inputs": np.array([object()] * 4, dtype=object), "labels": y[:4]},
                      "holds Python objects"),
    "missing labels": (lambda x, y: {"inputs": x}, "no 'labels' array"),
    "missing inputs": (lambda x, y: {"images": x, "labels": y}, "no 'inputs' array"),
    "3-D inputs": (lambda x, y: {"inputs": x[:, 0], "labels": y}, "expected 4 dimensions"),
    "float labels": (lambda x, y: {"inputs": x, "labels": y.astype(np.float32)}, "expected N integers"),
    "count mismatch": (lambda x, y: {"inputs": x, "labels": y[:-1]}, "40 inputs but 39 labels"),
    "NaN inputs": (lambda x, y: {"inputs": np.where(np.arange(40)[:, None, None, None] == 7, np.nan, x),
                                 "labels": y}, "sample 7 of 'inputs' holds NaN"),
    "negative label": (lambda x, y: {"inputs": x, "labels": np.where(np.arange(40) == 3, -1, y)}, "label -1 is negative"),
    "single class": (lambda x, y: {"inputs": x, "labels": np.zeros(40, dtype=np.int64)}, "a single class"),
    "string inputs": (lambda x, y: {"inputs": np.array(["a"] * 40).reshape(40, 1, 1, 1), "labels": y},
                      "expected numbers"),
}


@pytest.mark.parametrize("case", sorted(BAD_NPZ))
def test_a_malformed_npz_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    make, fragment = BAD_NPZ[case]
    path = _npz(tmp_path / "bad.npz", **make(*_digits(40)))
    line = _refused(tmp_path, path, fragment)
    assert str(path) in line and "--eval-data" in line


def test_a_truncated_npz_is_refused(tmp_path: Path) -> None:
    path = _npz(tmp_path / "whole.npz", inputs=_digits(40)[0], labels=_digits(40)[1])
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    _refused(tmp_path, cut, "not an .npz (zip) archive")


def test_a_member_cut_short_is_refused(tmp_path: Path) -> None:
    """A zip whose inputs member declares more rows than it holds: 'ends early'."""
    x, y = _digits(40)
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w") as zf:
        with zf.open("inputs.npy", "w") as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (40, 1, 8, 8)})
            fh.write(x[:10].tobytes())
        with zf.open("labels.npy", "w") as fh:
            np.save(fh, y)
    _refused(tmp_path, path, "'inputs' ends early")


def test_a_pickle_in_a_pt_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    payload = tmp_path / "data.pt"
    import pickle

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    payload.write_bytes(pickle.dumps(Boom()))
    _refused(tmp_path, payload, "never unpickles")
    assert not marker.exists()


def test_fifos_devices_links_and_folders_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    _refused(tmp_path, fifo, "not a regular file (a FIFO)")
    _refused(tmp_path, Path("/dev/zero"), "not a regular file (a device)")
    link = tmp_path / "zero.npz"
    link.symlink_to("/dev/zero")
    _refused(tmp_path, link, "not a regular file (a device)")
    folder = tmp_path / "imagefolder"
    (folder / "cat").mkdir(parents=True)
    _refused(tmp_path, folder, "1 class folder(s); an ImageFolder tree holds one folder per class")
    _refused(tmp_path, tmp_path / "absent.npz", "not found")


def test_eval_limit_is_bounded_by_the_cli(tmp_path: Path) -> None:
    path = _npz(tmp_path / "d.npz", inputs=_digits(40)[0], labels=_digits(40)[1])
    result = _start(tmp_path, path, "--eval-limit", "0")
    assert result.exit_code == 2 and "--eval-limit" in result.output and "Traceback" not in result.output


def test_with_drops_compares_each_level_with_fp32_of_the_same_file_and_runtime(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    path.write_bytes(b"x")
    base = ModelFile.from_path(path, "m.pt")
    models = [base.__class__(**{**base.__dict__, "label": f"m@{lvl} [{rt}]", "level": None if lvl == "fp32" else lvl,
                                "runtime": rt})
              for rt in ("torch", "tflite") for lvl in ("fp32", "int8", "pruned")]
    found = {"m@fp32 [torch]": Accuracy(97.5, 99.0, 500), "m@int8 [torch]": Accuracy(96.0, 99.0, 500),
             "m@pruned [torch]": Accuracy(80.25, 98.0, 500), "m@fp32 [tflite]": Accuracy(97.0, 99.0, 500),
             "m@int8 [tflite]": Accuracy.unavailable("not evaluated: tflite conversion failed"),
             "m@pruned [tflite]": Accuracy(81.0, 98.0, 500)}
    out = with_drops(models, found)
    assert out["m@fp32 [torch]"].drop_pts == 0.0 and out["m@int8 [torch]"].drop_pts == 1.5
    assert out["m@pruned [torch]"].drop_pts == 17.25 and out["m@pruned [tflite]"].drop_pts == 16.0  # its own fp32
    assert out["m@int8 [tflite]"].drop_pts is None and "conversion failed" in out["m@int8 [tflite]"].note
    assert out["m@pruned [torch]"].note == "pruned without fine-tuning"


def test_a_users_compressed_file_drops_against_its_float_siblings_fp32_row(tmp_path: Path) -> None:
    import dataclasses

    from lodevem.report.cells import accuracy_text

    net, own = (tmp_path / "net@v1.pt", tmp_path / "net_int8.pt2")
    for path in (net, own):
        path.write_bytes(path.name.encode())
    fp32 = dataclasses.replace(ModelFile.from_path(net, "net@v1.pt"), label="net@v1.pt@fp32 [tflite]", runtime="tflite")
    mine = dataclasses.replace(ModelFile.from_path(own, "net_int8.pt2"), label="net_int8.pt2 [tflite]",
                               runtime="tflite", variant_of="net@v1.pt")
    out = with_drops([fp32, mine], {fp32.label: Accuracy(90.0, 99.0, 450), mine.label: Accuracy(88.5, 99.0, 450)})
    assert out[mine.label].drop_pts == 1.5 and out[fp32.label].drop_pts == 0.0
    from test_paper_kit import make_row

    from lodevem.profiles import load_profiles

    row = make_row(load_profiles()[0], model="net_int8.pt2", accuracy_top1_pct=88.5, accuracy_drop_pts=1.5,
                   variant_of="net@v1.pt")
    assert accuracy_text(row) == "88.5 (\u22121.5)"


def test_calibration_inputs_need_no_labels_and_keep_only_inputs(tmp_path: Path) -> None:
    """--calib-data's reader (for int8-static; branch convert passes the file to the quantizer):
    inputs only, the same refusals."""
    from lodevem.accuracy.data import prepare_calibration_data

    x, _ = _digits(40)
    store = ArtifactStore(tmp_path / "cache")
    calib = prepare_calibration_data(_npz(tmp_path / "calib.npz", inputs=x), store, limit=16)
    assert (calib.samples, calib.available, calib.input_shape) == (16, 40, (1, 1, 8, 8))
    # the manifest names the user's file by its own digest (issue 46), fresh or served from the store
    import hashlib

    own = hashlib.sha256((tmp_path / "calib.npz").read_bytes()).hexdigest()
    assert calib.source_sha256 == own and calib.class_count is None
    assert prepare_calibration_data(tmp_path / "calib.npz", store, limit=16).source_sha256 == own
    with np.load(calib.path) as copy:
        assert list(copy.keys()) == ["inputs"] and np.array_equal(copy["inputs"], x[:16])
    with pytest.raises(InputError, match="holds Python objects"):
        prepare_calibration_data(_npz(tmp_path / "obj.npz", inputs=np.array([object()] * 4, dtype=object)), store)
    with pytest.raises(InputError, match="not a regular file"):
        prepare_calibration_data(Path("/dev/zero"), store)
