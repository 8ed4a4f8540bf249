"""The artifact store: what is published, what a lookup accepts, and (on the real Docker engine)
that a failed run's files never leave its staging folder (issue 21, item 4)."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest
from fakes import Counting

from lodevem import measure
from lodevem.sandbox.artifacts import converted_name
from lodevem.sandbox.client import MeasureSettings, WorkerClient
from lodevem.store import FORMAT_VERSION, ArtifactStore, cache_root, digest

MAKER = {"model_sha256": "abc", "worker_version": "w1"}


def _staged(folder: Path, **files: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name.replace("_", ".")).write_bytes(data)
    return folder


def test_digest_is_canonical() -> None:
    assert digest({"b": 1, "a": [1, 2]}) == digest({"a": [1, 2], "b": 1})
    assert digest({"a": 1}) != digest({"a": 2})
    assert cache_root(Path("out")) == Path("out") / ".cache"


def test_publish_then_lookup(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "cache")
    with store.staging() as staged:
        (staged / "m.param").write_bytes(b"graph")
        (staged / "m.bin").write_bytes(b"weights")
        artifact, error = store.publish("converted", staged, ["m.param", "m.bin"], MAKER, {"note": "x"})
    assert error == "" and artifact is not None and artifact.path == tmp_path / "cache" / "converted" / "m.param"
    assert not any((tmp_path / "cache" / ".staging").iterdir())  # the staging folder is gone
    kept = store.lookup("converted", ["m.param", "m.bin"], MAKER)
    assert kept is not None and kept.info == {"note": "x"} and [p.name for p in kept.paths] == ["m.param", "m.bin"]
    assert store.lookup("converted", ["m.param", "m.bin"], {**MAKER, "worker_version": "w2"}) is None
    assert store.file_sha256(kept.path) == hashlib.sha256(b"graph").hexdigest()
    assert ArtifactStore(tmp_path / "cache", use_cache=False).lookup("converted", ["m.param"], MAKER) is None
    (tmp_path / "cache" / "converted" / "m.bin").write_bytes(b"other weights")  # changed since published
    assert store.lookup("converted", ["m.param", "m.bin"], MAKER) is None


def test_a_file_without_its_sidecar_is_never_a_hit(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    store.folder("converted").mkdir(parents=True, exist_ok=True)
    (store.folder("converted") / "m.tflite").write_bytes(b"planted")
    assert store.lookup("converted", ["m.tflite"], MAKER) is None


@pytest.mark.parametrize("case", ["link", "extra", "missing", "big", "fifo"])
def test_publish_refuses_anything_but_the_expected_regular_files(tmp_path: Path, case: str) -> None:
    store = ArtifactStore(tmp_path / "cache")
    staged = _staged(tmp_path / "staged", m_tflite=b"model")
    if case == "link":
        (staged / "m.tflite").unlink()
        (staged / "m.tflite").symlink_to("/etc/passwd")
    elif case == "extra":
        (staged / "payload.sh").write_bytes(b"#!/bin/sh")
    elif case == "missing":
        (staged / "m.tflite").unlink()
    elif case == "fifo":
        (staged / "m.tflite").unlink()
        os.mkfifo(staged / "m.tflite")
    artifact, error = store.publish("converted", staged, ["m.tflite"], MAKER, max_bytes=3 if case == "big" else 2**20)
    assert artifact is None and error
    assert not store.folder("converted").exists() or not list(store.folder("converted").iterdir())


def test_records_carry_the_format_version_and_honour_no_cache(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    store.put_record("measure", "k", {"verdict": "fits"})
    assert store.get_record("measure", "k") == {"verdict": "fits"}
    assert f'"format_version": {FORMAT_VERSION}' in (tmp_path / "measure" / "k.json").read_text()
    assert ArtifactStore(tmp_path, use_cache=False).get_record("measure", "k") is None
    (tmp_path / "measure" / "old.json").write_text('{"verdict": "fits"}')  # a record of no format version
    assert store.get_record("measure", "old") is None


# --- the real engine: a model that plants its own "converted" file, then fails -----------------

SHAPE = (1, 3, 16, 16)

_PLANT = """
import glob, hashlib
path = glob.glob('/input/*')[0]
sha = hashlib.sha256(open(path, 'rb').read()).hexdigest()
for name in NAMES:
    open('/output/' + name.replace('SHA', sha[:32]), 'wb').write(b'planted by the model')
raise RuntimeError('the model fails after planting its converted file')
"""


class _Payload:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):  # unpickling runs the code, in the sandbox
        return (exec, (self.code,))


def _planting_model(path: Path, runtime: str) -> Path:
    """A pickle that writes the files the store would take for its conversion, then fails."""
    template = converted_name("SHA" + "0" * 61, runtime, SHAPE).replace("SHA" + "0" * 29, "SHA")
    names = [template] + ([template.replace(".param", ".bin")] if runtime == "ncnn" else [])
    path.write_bytes(pickle.dumps(_Payload(f"NAMES = {names!r}\n{_PLANT}"), protocol=2))
    path.chmod(0o644)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert template.replace("SHA", sha[:32]) == converted_name(sha, runtime, SHAPE)  # the very name it takes
    return path


@pytest.mark.fresh_store  # it checks what its run's own .cache holds
@pytest.mark.docker
@pytest.mark.parametrize("runtime", ["tflite", "ncnn"])
def test_a_failed_conversion_leaves_nothing_to_copy_or_reuse(docker_backend, tmp_path: Path, runtime: str) -> None:
    from lodevem.sandbox import image

    for spec in image.specs_for_runtimes([runtime]):
        if not image.image_status(spec=spec).present:
            pytest.skip(f"image {spec.name} not built")
    model = _planting_model(tmp_path / "evil.pt", runtime)
    cache = tmp_path / "out" / ".cache"
    settings = MeasureSettings(runtime=runtime, warmup=0, runs=1, input_shape=SHAPE)
    for attempt in range(2):  # the second run must convert again, not measure what was planted
        backend = Counting(docker_backend)
        value = measure.measure_models([model], [512], client=WorkerClient(backend), settings=settings, jobs=1,
                                       timeout_s=300, cache_dir=cache / "measure")[(str(model), 512)]
        # the conversion failed: the row falls back to torch (issue 38), where the model fails again
        assert value.verdict == "error" and value.fallback is not None, value
        assert value.fallback.reason.startswith(f"{runtime} conversion failed") and "planting" in value.fallback.reason
        # the planted file was never measured: only torch's own run of the user's file followed
        assert backend.actions == [f"export-{runtime}", "measure"], (attempt, backend.actions)
        assert value.runtime == "torch", value.runtime
        assert not (cache / "converted").exists() or not list((cache / "converted").iterdir())
        assert not list((cache / ".staging").iterdir())


# --- a zoo model's graph and prediction are kept: a new process imports no torch, onnx, nn-Meter -

_FIRST_CALL = """
import sys
import lodevem
p = lodevem.Predictor("nokia_c1", cache_dir=sys.argv[1], predictor="estimator")
ms = p.predict("tiny_cnn").latency_ms
heavy = sorted(m for m in ("torch", "onnx", "nn_meter", "sklearn") if m in sys.modules)
print(ms, ",".join(heavy) or "-")
"""


def test_a_first_call_on_a_stored_zoo_model_loads_nothing_heavy(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    runs = [subprocess.run([sys.executable, "-c", _FIRST_CALL, str(tmp_path)], capture_output=True, text=True,
                           env=env, timeout=600, check=True).stdout.split() for _ in range(2)]
    (first_ms, first_heavy), (again_ms, again_heavy) = runs
    assert float(first_ms) > 0 and first_ms == again_ms
    assert "torch" in first_heavy  # the first process built and exported the model
    assert again_heavy == "-", again_heavy  # the second read graph and prediction from the store
    assert list((tmp_path / "zoo").glob("tiny_cnn-*.onnx.json"))


# --------------------------------------------------------------------------- the one writer


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    from lodevem.store import atomic_file, write_atomic

    target = tmp_path / "deep" / "result.csv"
    write_atomic(target, "old\n")
    with pytest.raises(RuntimeError, match="half-way"):
        with atomic_file(target) as handle:
            handle.write("new, half")
            raise RuntimeError("half-way")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["result.csv"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)  # shared results, not mkstemp's 0600


def test_write_new_never_replaces_and_json_file_has_no_nan(tmp_path: Path) -> None:
    import json

    from lodevem.store import write_json_file, write_new

    path = tmp_path / "record.json"
    assert write_new(path, "first")
    assert not write_new(path, "second")
    assert path.read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["record.json"]
    write_json_file(tmp_path / "x.json", {"ms": float("nan"), "ok": [1.5, float("inf")]}, indent=1)
    assert json.loads((tmp_path / "x.json").read_text()) == {"ms": None, "ok": [1.5, None]}


def test_the_user_cache_folder_is_named_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodevem.sandbox.image import build_dir
    from lodevem.store import user_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "lodevem" and build_dir() == tmp_path / "lodevem" / "build"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache_dir() == Path.home() / ".cache" / "lodevem"
