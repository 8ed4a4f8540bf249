"""Every compression level made by the runtime's own toolchain, against the REAL converter image.

A level of a tflite or ncnn row is a property of the file the runtime loads: the worker makes
it from the fp32 model with litert-torch / ai-edge-quantizer (tflite) or pnnx + lodevem's ncnn
int8 writer (ncnn) and reads the file back to say what it is. These tests convert the zoo's
mobilenet_v2 at 1x3x96x96 (small, so the suite stays quick) at every level and check what the
bytes say: the precision, and the size against fp32's (fp16 about half, int8 about a quarter;
ranges, not exact figures). The reader itself is checked on the files made here, and its refusal
of a damaged file without a crash.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lodevem import zoo
from lodevem.runtimes.ncnn.int8 import NCNN_NO_DYNAMIC
from lodevem.sandbox.artifacts import ConvertCache
from lodevem.sandbox.client import WorkerClient
from lodevem.store import ArtifactStore
from lodevem.wire.precision import CONVERT_QUANTIZE
from lodevem.worker.export.artifact_info import ArtifactUnreadable, ncnn_census, tflite_census

SHAPE = (1, 3, 96, 96)
LEVELS = (None, *CONVERT_QUANTIZE)  # None: fp32
EXPECTED = {"tflite": {None: "fp32", "fp16": "fp16", "int8": "int8-dynamic", "int8-static": "int8-static"},
            "ncnn": {None: "fp32", "fp16": "fp16", "int8": "int8-static", "int8-static": "int8-static"}}
# The file's size over fp32's: fp16 halves the weights, int8 quarters them (scales, biases and
# the graph add a little).
SIZE_RATIO = {"fp16": (0.45, 0.56), "int8": (0.22, 0.34), "int8-static": (0.22, 0.34)}

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def convert_backend(app_backend):
    """The session's DockerBackend with the converter and runtime images (conftest)."""
    return app_backend


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.write("mobilenet_v2", tmp_path_factory.mktemp("levels-model"))


@pytest.fixture(scope="module")
def converts(convert_backend, shared_store: ArtifactStore) -> ConvertCache:
    return ConvertCache(WorkerClient(convert_backend), shared_store, timeout_s=900)


class _Conversions(dict):
    """(runtime, level) -> ConversionResult, each converted on first use (once per module)."""

    def __init__(self, converts: ConvertCache, model: Path) -> None:
        from lodevem.store import file_digest

        super().__init__()
        self.converts, self.model, self.sha = converts, model, file_digest(model)

    def __missing__(self, key: tuple) -> object:
        runtime, level = key
        self[key] = self.converts.convert(self.model, self.sha, runtime, SHAPE, quantize=level)
        return self[key]


@pytest.fixture(scope="module")
def converted(converts: ConvertCache, mobilenet: Path) -> dict:
    return _Conversions(converts, mobilenet)


@pytest.mark.parametrize("runtime", ["tflite", "ncnn"])
@pytest.mark.parametrize("level", LEVELS)
def test_each_level_is_a_file_of_that_precision(converted: dict, runtime: str, level) -> None:
    result = converted[(runtime, level)]
    assert result.error == "" and result.path is not None and result.path.is_file()
    assert result.precision == EXPECTED[runtime][level]
    assert result.size_bytes and result.scheme and result.converter
    # read again here, from the published file: the reply's word is not taken for it
    census = tflite_census(str(result.path)) if runtime == "tflite" else \
        ncnn_census(str(result.path), str(result.path).removesuffix(".param") + ".bin")
    assert census.precision() == result.precision
    if level in ("int8", "int8-static") and (runtime == "ncnn" or level == "int8-static"):
        assert result.calibration is not None and "32 synthetic inputs" in result.calibration
    else:
        assert result.calibration is None
    if runtime == "ncnn":
        assert census.complete  # every byte of the .bin accounted for by the layers walked
        if level == "int8":
            assert result.scheme.startswith(NCNN_NO_DYNAMIC)


@pytest.mark.parametrize("runtime", ["tflite", "ncnn"])
@pytest.mark.parametrize("level", CONVERT_QUANTIZE)
def test_sizes_follow_the_weights_precision(converted: dict, runtime: str, level: str) -> None:
    fp32 = converted[(runtime, None)].size_bytes
    low, high = SIZE_RATIO[level]
    ratio = converted[(runtime, level)].size_bytes / fp32
    assert low <= ratio <= high, f"{runtime} {level}: {ratio:.3f} of fp32's size"


def test_a_cache_hit_keeps_the_file_facts(converts: ConvertCache, converted: dict, mobilenet: Path) -> None:
    from lodevem.store import file_digest

    again = ConvertCache(converts.client, converts.store, timeout_s=900)  # a new run: only the store remembers
    hit = again.convert(mobilenet, file_digest(mobilenet), "ncnn", SHAPE, quantize="int8-static")
    first = converted[("ncnn", "int8-static")]
    assert hit.cached and hit.path == first.path
    assert (hit.precision, hit.scheme, hit.calibration, hit.size_bytes, hit.converter) == \
        (first.precision, first.scheme, first.calibration, first.size_bytes, first.converter)


def test_calibration_data_is_used_and_keys_the_conversion(converts: ConvertCache, converted: dict,
                                                          mobilenet: Path, tmp_path: Path) -> None:
    from lodevem.store import file_digest

    calib = tmp_path / "calib.npz"
    np.savez(calib, inputs=np.random.default_rng(1).uniform(0, 1, (8, *SHAPE[1:])).astype(np.float32))
    result = converts.convert(mobilenet, file_digest(mobilenet), "tflite", SHAPE, quantize="int8-static",
                              calibration=calib)
    assert result.error == "" and result.precision == "int8-static"
    assert result.calibration == "8 inputs from calib.npz"
    assert result.path != converted[("tflite", "int8-static")].path


def test_bad_calibration_data_is_one_line_naming_the_file(converts: ConvertCache, mobilenet: Path,
                                                          tmp_path: Path) -> None:
    from lodevem.store import file_digest

    calib = tmp_path / "wrong.npz"
    np.savez(calib, inputs=np.zeros((4, 3, 32, 32), dtype=np.float32))
    result = converts.convert(mobilenet, file_digest(mobilenet), "ncnn", SHAPE, quantize="int8-static",
                              calibration=calib)
    assert result.path is None and "\n" not in result.error
    assert "wrong.npz" in result.error and "expected float32 N x [3, 96, 96]" in result.error
    assert not list(converts.store.folder("converted").glob(f"*-cal{file_digest(calib)[:12]}*"))  # nothing published


def test_the_reader_refuses_a_damaged_file(converted: dict, tmp_path: Path) -> None:
    good = converted[("tflite", "int8")].path.read_bytes()
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(good[: len(good) // 3])
    with pytest.raises(ArtifactUnreadable):
        tflite_census(str(cut))
    param = converted[("ncnn", "fp16")].path
    short = tmp_path / "short.bin"
    short.write_bytes(Path(str(param).removesuffix(".param") + ".bin").read_bytes()[:1000])
    with pytest.raises(ArtifactUnreadable):
        ncnn_census(str(param), str(short))


class _DataDependent(torch.nn.Module):
    """Scripted: litert-torch goes through torch.export, which cannot take a ScriptModule."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if bool(y.sum() > 0):
            return y.relu()
        return -y


def test_a_model_the_converter_cannot_take_is_one_line_and_nothing_kept(converts: ConvertCache,
                                                                        tmp_path: Path) -> None:
    import warnings

    from lodevem.store import file_digest

    path = tmp_path / "data_dependent.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(_DataDependent().eval()).save(str(path))
    result = converts.convert(path, file_digest(path), "tflite", (1, 3, 32, 32), quantize="fp16")
    assert result.path is None and "\n" not in result.error
    # the converter that refused it (TorchScript goes through torch's TS2EP first), with the user's path, not the sandbox's
    converter, _, rest = result.error.partition(f" cannot convert {path}")
    assert rest and converter in ("litert-torch", "torch's TorchScript-to-export converter (TS2EPConverter)"), result.error
    assert not [p for p in converts.store.folder("converted").glob("*") if file_digest(path)[:32] in p.name]
