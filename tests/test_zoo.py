"""Tests for lodevem.zoo: architectures must match torchvision exactly.

Parameter counts are torchvision's published ``num_params`` (plus the
MobileNetV1 paper count), so any layer-structure drift fails loudly.
"""

from __future__ import annotations

import functools
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
import torch
from torch import nn

from lodevem import zoo
from lodevem.zoo.macs import count_macs

EXPECTED_PARAMS: dict[str, int] = {
    "mobilenet_v1": 4_231_976,
    "mobilenet_v2": 3_504_872,
    "mobilenet_v3_small": 2_542_856,
    "mobilenet_v3_large": 5_483_032,
    "shufflenet_v2_x1_0": 2_278_604,
    "mnasnet1_0": 4_383_312,
    "squeezenet1_1": 1_235_496,
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "efficientnet_b0": 5_288_548,
}

# Reference MACs at 224x224 (torchvision docs' "GFLOPS" column, which is
# GMACs; shufflenet from Ma et al. 2018 Table 8 because torchvision's rounded
# 0.14 is 3.5% off; mobilenet_v1 from Howard et al. 2017 Table 1).
EXPECTED_MMACS: dict[str, float] = {
    "mobilenet_v1": 569.0,
    "mobilenet_v2": 300.8,
    "mobilenet_v3_large": 220.0,
    "shufflenet_v2_x1_0": 146.0,
    "mnasnet1_0": 310.0,
    "squeezenet1_1": 350.0,
    "resnet18": 1810.0,
    "resnet50": 4090.0,
    "efficientnet_b0": 390.0,
}

ALL_NAMES = [
    "tiny_cnn",
    "mobilenet_v1",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "shufflenet_v2_x1_0",
    "mnasnet1_0",
    "squeezenet1_1",
    "resnet18",
    "resnet50",
    "efficientnet_b0",
]

INPUT_224 = (1, 3, 224, 224)


@functools.cache
def _built(name: str) -> nn.Module:
    """One shared build per model; tests using it must not mutate it."""
    return zoo.build(name)


def test_names_order_and_entries() -> None:
    assert zoo.names() == ALL_NAMES
    assert list(zoo.ZOO) == ALL_NAMES
    for name, entry in zoo.ZOO.items():
        assert entry.name == name
        assert entry.default_input == INPUT_224
        assert entry.description and "\n" not in entry.description
    with pytest.raises(FrozenInstanceError):
        zoo.ZOO["tiny_cnn"].name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_param_counts_match_torchvision(name: str) -> None:
    assert zoo.count_params(_built(name)) == EXPECTED_PARAMS[name]


def test_tiny_cnn_is_tiny_and_accepts_small_inputs() -> None:
    model = _built("tiny_cnn")
    assert zoo.count_params(model) < 100_000
    with torch.no_grad():
        assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_forward_shape_and_finite(name: str) -> None:
    model = _built(name)
    assert not model.training, "build() must return an eval() model"
    with torch.no_grad():
        out = model(torch.randn(*INPUT_224))
    assert out.shape == ((1, 10) if name == "tiny_cnn" else (1, 1000))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_builds_are_deterministic(name: str) -> None:
    a = zoo.build(name).state_dict()
    b = zoo.ZOO[name].builder().state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_build_does_not_disturb_global_rng() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    zoo.build("tiny_cnn")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("name", sorted(EXPECTED_MMACS))
def test_macs_close_to_reference(name: str) -> None:
    mmacs = count_macs(_built(name), INPUT_224) / 1e6
    assert mmacs == pytest.approx(EXPECTED_MMACS[name], rel=0.03)


def test_mflops_is_twice_macs_and_counting_is_side_effect_free() -> None:
    model = zoo.build("tiny_cnn").train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    macs = count_macs(model, (1, 3, 64, 64))
    assert macs > 0
    assert zoo.count_mflops(model, (1, 3, 64, 64)) == pytest.approx(2 * macs / 1e6)
    assert model.training, "train/eval mode must be restored"
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "BN running stats changed"
    assert not any(m._forward_hooks for m in model.modules()), "hooks leaked"


def test_count_macs_grouped_conv_and_linear() -> None:
    model = nn.Sequential(
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),  # depthwise: 8*4*4*9
        nn.Conv2d(8, 16, 1),  # pointwise: 16*4*4*8
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 5),  # 5*256
    )
    assert count_macs(model, (1, 8, 4, 4)) == 8 * 16 * 9 + 16 * 16 * 8 + 5 * 256


def test_unknown_name_raises_keyerror_listing_valid_names() -> None:
    with pytest.raises(KeyError) as excinfo:
        zoo.build("nope")
    message = str(excinfo.value)
    assert "nope" in message
    for name in ALL_NAMES:
        assert name in message


def test_write_round_trips(tmp_path: Path) -> None:
    out_dir = tmp_path / "nested" / "models"
    path = zoo.write("tiny_cnn", out_dir)
    assert path == out_dir / "tiny_cnn.pt"
    assert path.is_file()
    loaded = torch.load(path, weights_only=False)
    assert isinstance(loaded, nn.Module)
    assert not loaded.training
    ref = _built("tiny_cnn")
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(loaded(x), ref(x))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_onnx_export(name: str, tmp_path: Path) -> None:
    import warnings

    onnx = pytest.importorskip("onnx")
    model = _built(name)
    x = torch.randn(*INPUT_224)
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy-exporter deprecation chatter
        torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=13)
    onnx.checker.check_model(onnx.load(str(path)))
