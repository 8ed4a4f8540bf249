"""lodevem's ncnn int8 writer (runtimes/ncnn/int8.py), without Docker: the bytes it writes are
ncnn's int8 layout (the calibration, which runs the ``ncnn`` wheel, is checked in the converter
image by tests/test_convert_levels.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from lodevem.runtimes.ncnn.int8 import INT8_TAG, _layers, write_int8
from lodevem.wire.protocol import WorkerError
from lodevem.worker.export.artifact_info import ncnn_census

PARAM = ("7767517\n4 4\nInput in0 0 1 in0\n"
         "Convolution conv 1 1 in0 1 0=2 1=1 5=1 6=6 9=1\n"
         "ConvolutionDepthWise dw 1 1 1 2 0=2 1=1 5=0 6=2 7=2\n"
         "InnerProduct fc 1 1 2 out0 0=2 1=0 2=4\n")


def _model(tmp_path: Path, param: str = PARAM) -> tuple[list[str], np.ndarray]:
    p, b = tmp_path / "m.param", tmp_path / "m.bin"
    p.write_text(param)
    conv_w = np.array([1.0, -2.0, 0.5, 0.0, 0.25, 4.0], "<f4")
    raw = struct.pack("<I", 0) + conv_w.tobytes() + np.array([0.1, 0.2], "<f4").tobytes()
    raw += struct.pack("<I", 0) + np.array([3.0, -1.5], "<f4").tobytes()
    raw += struct.pack("<I", 0) + np.array([1.0, 2.0, -3.0, 0.0], "<f4").tobytes()
    b.write_bytes(raw)
    return [str(p), str(b)], conv_w


def test_writes_ncnns_int8_layout(tmp_path: Path) -> None:
    src, conv_w = _model(tmp_path)
    header, layers = _layers(src[0], "m.pt")
    out = [str(tmp_path / "q.param"), str(tmp_path / "q.bin")]
    assert write_int8(*src, out, header, layers, {"in0": 10.0, "1": 20.0, "2": 30.0}, "m.pt") == 3
    census = ncnn_census(*out)
    assert census.complete and census.precision() == "int8-static" and census.int8_layers == 3
    lines = Path(out[0]).read_text().splitlines()
    assert lines[3].endswith("8=2") and lines[4].endswith("8=1") and lines[5].endswith("8=2")
    data = Path(out[1]).read_bytes()
    assert struct.unpack_from("<I", data, 0)[0] == INT8_TAG
    q = np.frombuffer(data, np.int8, 6, 4)  # conv: 2 channels of 3, padded to 8 bytes
    scales = 127.0 / np.array([2.0, 4.0])
    assert list(q) == list(np.clip(np.rint(conv_w.reshape(2, 3) * scales[:, None]), -127, 127).ravel())
    bias, wscale, iscale = np.frombuffer(data, "<f4", 2, 12), np.frombuffer(data, "<f4", 2, 20), \
        np.frombuffer(data, "<f4", 1, 28)
    assert np.allclose(bias, [0.1, 0.2]) and np.allclose(wscale, scales) and iscale[0] == 10.0
    assert struct.unpack_from("<I", data, 32)[0] == INT8_TAG  # depthwise: per-group scales, no bias
    assert np.allclose(np.frombuffer(data, "<f4", 3, 40), [127 / 3.0, 127 / 1.5, 20.0])


def test_an_unknown_weighted_layer_is_refused(tmp_path: Path) -> None:
    src, _ = _model(tmp_path, PARAM.replace("4 4\n", "5 5\n") + "BatchNorm bn 1 1 out0 out1 0=2\n")
    header, layers = _layers(src[0], "m.pt")
    with pytest.raises(WorkerError, match="BatchNorm"):
        write_int8(*src, [str(tmp_path / "q.param"), str(tmp_path / "q.bin")], header, layers,
                   {"in0": 1.0, "1": 1.0, "2": 1.0}, "m.pt")
