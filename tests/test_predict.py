"""Latency prediction end to end: zoo export -> nn-Meter kernels -> nn-Meter or the estimator.

The nn-Meter path runs on a synthetic predictor set the tests build in nn-Meter's own layout
(``<data>/predictor/cortexA76cpu_tflite21/<kernel>.pkl`` + ``fusion_rules.json``): small random
forests trained on nn-Meter-shaped features. No network, no real predictor download.
"""

from __future__ import annotations

import math
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import kinds_only
from sklearn.ensemble import RandomForestRegressor

from lodevem import zoo
from lodevem.errors import InputError, LodevemError
from lodevem.latency.estimator import Estimator, graph_works
from lodevem.latency.kernels import DEFAULT_RULES, extract_kernels
from lodevem.latency.memory import resolve
from lodevem.latency.nnmeter import ENV_VAR, default_data_dir, expected_kernels, fetch_predictors
from lodevem.predict import LatencyPrediction, format_clock
from lodevem.profiles import Cluster, Profile, load_profiles
from lodevem.zoo.macs import count_macs

PREDICTOR = "cortexA76cpu_tflite21"
MISSING = "add"  # left out of the synthetic set: mobilenet_v2 has 10 such kernels
# Feature vector length per nn-Meter kernel type (nn_meter/predictor/prediction/extract_feature.py).
N_FEATURES = {"conv-bn-relu": 7, "dwconv-bn-relu": 7, "fc": 4, "maxpool": 5, "avgpool": 5, "add": 3,
              "addrelu": 3, "concat": 6}


@pytest.fixture(scope="session")
def onnx_dir(zoo_onnx) -> Path:
    """Every zoo model exported once per session with the worker's own export (224x224)."""
    for name in zoo.names():
        zoo_onnx(name)
    return zoo_onnx.folder


@pytest.fixture(scope="session")
def profiles() -> list[Profile]:
    return load_profiles()


@pytest.fixture(scope="session")
def nn_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic cortexA76cpu_tflite21 set: one small forest per kernel type but ``MISSING``."""
    data = tmp_path_factory.mktemp("nnmeter-data")
    folder = data / "predictor" / PREDICTOR
    folder.mkdir(parents=True)
    shutil.copy(DEFAULT_RULES, folder / "fusion_rules.json")
    rng = np.random.RandomState(0)
    for i, kernel in enumerate(expected_kernels(PREDICTOR)):
        if kernel == MISSING:
            continue
        n = N_FEATURES.get(kernel, 2)
        X = rng.uniform(1, 500, size=(64, n))
        y = 0.05 + X[:, -1] / 500 + 0.01 * i  # ms, positive, depends on the features
        forest = RandomForestRegressor(n_estimators=4, max_depth=5, random_state=i).fit(X, y)
        (folder / f"{kernel}.pkl").write_bytes(pickle.dumps(forest))
    return data


def custom_profile(core: str, clock: float, count: int = 4, pid: str = "custom") -> Profile:
    return Profile(id=pid, name=pid, label=pid, tier="tier1", chipset="test", ram_mb=2048, sources=["test"],
                   cpu=[Cluster(core=core, count=count, clock_ghz=clock)])


def test_format_clock() -> None:
    assert [format_clock(c) for c in (2.0, 1.6, 2.42, 1.25, 1.1)] == ["2.0", "1.6", "2.42", "1.25", "1.1"]


def test_every_zoo_model_on_every_profile_offline(onnx_dir: Path, profiles: list[Profile], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    monkeypatch.setattr(requests, "get", lambda *a, **k: pytest.fail("no download as a side effect"))
    predictor = kinds_only("auto", nnmeter_data=tmp_path / "empty")
    assert len(profiles) == 16
    for name in zoo.names():
        result = predictor.cells(onnx_dir / f"{name}.onnx", profiles)
        assert list(result) == [p.id for p in profiles]
        for pid, pred in result.items():
            assert pred.latency_ms is not None and math.isfinite(pred.latency_ms) and pred.latency_ms > 0, (name, pid)
            assert pred.latency_source.startswith(f"{Estimator.load().label} tflite (") and pred.uncertainty
            assert "nn-Meter" not in (pred.note or "")  # the default never looks for nn-Meter's data


def test_estimator_source_string_is_exact(onnx_dir: Path, profiles: list[Profile]) -> None:
    pop6 = next(p for p in profiles if p.id == "tecno_pop6")
    pred = kinds_only("estimator").cells(onnx_dir / "mobilenet_v2.onnx", [pop6])["tecno_pop6"]
    assert pred.latency_source == f"{Estimator.load().label} tflite (Cortex-A53@2.0GHz)" and pred.runtime == "tflite"
    assert (pred.core, pred.clock_ghz, pred.threads) == ("Cortex-A53", 2.0, 1)
    # the Helio A22 publishes its DRAM (socs.yaml) but not its caches: the note says what was pooled
    assert pred.note.startswith("MediaTek Helio A22: Cortex-A53 L2+L3 not published: the median of")


def test_nnmeter_end_to_end(onnx_dir: Path, profiles: list[Profile], nn_data: Path) -> None:
    predictor = kinds_only("nn-meter", nnmeter_data=nn_data, breakdown=True)
    result = predictor.cells(onnx_dir / "mobilenet_v2.onnx", profiles)
    pop6 = result["tecno_pop6"]
    assert pop6.latency_source == "nn-meter:cortexA76cpu_tflite21 tflite→Cortex-A53@2.0GHz"
    assert pop6.latency_ms is not None and pop6.latency_ms > 0
    assert "10 add" in (pop6.note or "") and "not counted" in (pop6.note or "")
    assert sum(k.ms is None for k in pop6.kernels) == 10
    a7 = result["nokia_8110_4g"]
    assert a7.latency_source == "nn-meter:cortexA76cpu_tflite21 tflite→Cortex-A7@1.1GHz"
    assert a7.latency_ms > pop6.latency_ms  # an A7 at 1.1 GHz is slower than an A53 at 2.0 GHz


def test_nnmeter_sum_equals_nn_meters_own_predictor(onnx_dir: Path, nn_data: Path) -> None:
    """On nn-Meter's reference core and clock the transfer ratio is 1, so the total must be what
    ``nnMeterPredictor.predict`` itself returns with the same regressors and rules."""
    from nn_meter.predictor.nn_meter_predictor import nnMeterPredictor

    folder = nn_data / "predictor" / PREDICTOR
    pixel4 = custom_profile("Cortex-A76", 2.42, pid="pixel4")
    for name in ("mobilenet_v2", "resnet18", "mobilenet_v3_small"):
        path = onnx_dir / f"{name}.onnx"
        ours = kinds_only("nn-meter", nnmeter_data=nn_data).cells(path, [pixel4])["pixel4"]
        regressors = {p.stem: pickle.loads(p.read_bytes()) for p in folder.glob("*.pkl")}
        theirs = nnMeterPredictor(regressors, str(folder / "fusion_rules.json")).predict(str(path), "onnx")
        assert ours.latency_ms == pytest.approx(theirs, rel=1e-9), name


@pytest.mark.parametrize("content", ["hostile", "truncated"])
def test_bad_predictor_file_is_refused_with_its_name(onnx_dir: Path, profiles: list[Profile], nn_data: Path,
                                                     tmp_path: Path, content: str) -> None:
    """A predictor folder in nn-Meter's layout with one bad ``.pkl``: loading the folder (what
    ``lodevem start --predictor nn-meter`` does up front via ``require``) fails with a one-line
    InputError naming the file, and the payload never runs. The default (auto) never reads the
    folder: nn-Meter is opt-in."""
    data = tmp_path / "data"
    shutil.copytree(nn_data, data)
    canary = tmp_path / "canary"
    bad = data / "predictor" / PREDICTOR / "conv-bn-relu.pkl"
    if content == "hostile":
        bad.write_bytes(f"cos\nsystem\n(S'touch {canary}'\ntR.".encode())
        expected = f"{bad}: refused to unpickle os.system (predictor files may contain only scikit-learn/numpy objects)"
    else:
        bad.write_bytes(bad.read_bytes()[:1000])
        expected = f"{bad}: not a usable nn-Meter predictor ("
    predictor = kinds_only("nn-meter", nnmeter_data=data)
    for attempt in (lambda: predictor.require(profiles),
                    lambda: predictor.cells(onnx_dir / "tiny_cnn.onnx", profiles[:1])):
        with pytest.raises(InputError) as excinfo:
            attempt()
        assert str(excinfo.value).startswith(expected) and "\n" not in str(excinfo.value)
    default = kinds_only("auto", nnmeter_data=data)
    default.require(profiles)
    assert default.cells(onnx_dir / "tiny_cnn.onnx", profiles[:1])[profiles[0].id].latency_source.startswith(
        "estimator")
    assert not canary.exists()


def test_missing_kernel_types_are_listed_with_counts(onnx_dir: Path, nn_data: Path) -> None:
    pred = kinds_only("nn-meter", nnmeter_data=nn_data).cells(
        onnx_dir / "mobilenet_v3_small.onnx", [custom_profile("Cortex-A55", 1.6)])["custom"]
    # HardSigmoid + Mul (opset 13's hswish) have no nn-Meter predictor at all.
    assert "19 hardsigmoid" in pred.note and "19 mul" in pred.note and "6 add" in pred.note


def test_each_predictor_file_loaded_once(onnx_dir: Path, profiles: list[Profile], nn_data: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import lodevem.latency.sklearn_compat as compat

    calls: list[str] = []
    real = compat.load_predictor_file
    monkeypatch.setattr(compat, "load_predictor_file", lambda path, **kw: calls.append(str(path)) or real(path, **kw))
    predictor = kinds_only("nn-meter", nnmeter_data=nn_data)
    for name in ("tiny_cnn", "mobilenet_v2", "resnet18"):
        for pred in predictor.cells(onnx_dir / f"{name}.onnx", profiles).values():
            assert pred.latency_source.startswith("nn-meter:")
    pkls = list((nn_data / "predictor" / PREDICTOR).glob("*.pkl"))
    assert sorted(calls) == sorted(map(str, pkls))


def test_auto_falls_back_and_nnmeter_mode_refuses(onnx_dir: Path, profiles: list[Profile], tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    pred = kinds_only("auto", nnmeter_data=empty).cells(onnx_dir / "tiny_cnn.onnx", profiles[:1])[profiles[0].id]
    assert pred.latency_source.startswith(f"{Estimator.load().label} tflite")
    strict = kinds_only("nn-meter", nnmeter_data=empty)
    expected = str(empty / "predictor" / PREDICTOR)
    with pytest.raises(InputError, match=expected):
        strict.require(profiles)
    with pytest.raises(InputError, match=expected):
        strict.cells(onnx_dir / "tiny_cnn.onnx", profiles)
    with pytest.raises(InputError, match="unknown latency predictor"):
        kinds_only("magic")


def test_data_folder_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nn_data: Path,
                                onnx_dir: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert default_data_dir() == tmp_path / ".nn_meter" / "data"
    settings = tmp_path / ".nn_meter" / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text(f"data_folder: {tmp_path / 'nn'}\n")
    assert default_data_dir() == tmp_path / "nn"
    monkeypatch.setenv(ENV_VAR, str(nn_data))
    assert default_data_dir() == nn_data
    assert default_data_dir(tmp_path / "explicit") == tmp_path / "explicit"
    pred = kinds_only("nn-meter").cells(onnx_dir / "tiny_cnn.onnx", [custom_profile("Cortex-A53", 1.4)])["custom"]
    assert pred.latency_source == "nn-meter:cortexA76cpu_tflite21 tflite→Cortex-A53@1.4GHz"


def test_deterministic_and_threads(onnx_dir: Path, profiles: list[Profile], nn_data: Path) -> None:
    path = onnx_dir / "mnasnet1_0.onnx"
    for mode in ("estimator", "nn-meter"):
        a = kinds_only(mode, nnmeter_data=nn_data).cells(path, profiles)
        b = kinds_only(mode, nnmeter_data=nn_data).cells(path, profiles)
        assert a == b
    dual = custom_profile("Cortex-A7", 1.1, count=2, pid="dual")
    p = kinds_only("estimator")
    one, two, four = (p.cells(path, [dual], threads=n)["dual"] for n in (1, 2, 4))
    assert one.latency_ms > two.latency_ms == four.latency_ms  # capped by the cluster's 2 cores
    assert four.threads == 4
    with pytest.raises(InputError):
        p.cells(path, [dual], threads=0)


def test_unknown_core_in_custom_profile(onnx_dir: Path) -> None:
    # profiles.py already refuses such a file; the estimator must refuse too if handed one.
    cluster = Cluster.model_construct(core="Cortex-A78", count=4, clock_ghz=2.0)
    odd = custom_profile("Cortex-A53", 2.0).model_copy(update={"cpu": [cluster]})
    with pytest.raises(InputError, match="Cortex-A78"):
        kinds_only("estimator").cells(onnx_dir / "tiny_cnn.onnx", [odd])


def test_unreadable_model_gives_a_reason_not_a_number(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx file")
    pred = kinds_only("estimator").cells(bad, [custom_profile("Cortex-A53", 2.0)])["custom"]
    assert isinstance(pred, LatencyPrediction)
    assert pred.latency_ms is None and pred.note and "no latency" in pred.note


def test_kernels_match_nn_meter_counts(onnx_dir: Path) -> None:
    assert len(extract_kernels(onnx_dir / "mobilenet_v2.onnx").kernels) == 64
    graph = extract_kernels(onnx_dir / "resnet18.onnx")
    assert len(graph.kernels) == 31
    assert graph.macs == count_macs(zoo.build("resnet18"), (1, 3, 224, 224))
    assert {k.category for k in graph.kernels} >= {"dense_conv", "pointwise_conv", "fc", "pool", "elementwise"}


def test_fetch_predictors_offline_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    def no_dns(*args: object, **kwargs: object) -> None:
        raise requests.exceptions.ConnectionError("Failed to resolve 'github.com' ([Errno -3] Temporary failure)")

    monkeypatch.setattr(requests, "get", no_dns)
    with pytest.raises(LodevemError) as info:
        fetch_predictors(PREDICTOR, tmp_path, timeout_s=5)
    message = str(info.value)
    assert message.startswith("cannot reach github.com: DNS lookup failed")
    assert str(tmp_path / "predictor" / PREDICTOR) in message and "\n" not in message
    assert not (tmp_path / "predictor" / PREDICTOR).exists()


def test_estimator_ratio_shapes_nnmeter_path(onnx_dir: Path, nn_data: Path) -> None:
    """Both paths scale with the profile the same way: nn-Meter's ratio between two cores equals
    the estimator's when every kernel is covered and the work mix is the same."""
    path = onnx_dir / "tiny_cnn.onnx"
    slow, fast = custom_profile("Cortex-A53", 1.0, pid="slow"), custom_profile("Cortex-A53", 2.0, pid="fast")
    nn = kinds_only("nn-meter", nnmeter_data=nn_data).cells(path, [slow, fast])
    est = kinds_only("estimator").cells(path, [slow, fast])
    # the core's cycles halve at twice the clock; the DRAM's time (the SoC's) does not (issue 44)
    assert est["slow"].compute_ms / est["fast"].compute_ms == pytest.approx(2.0)
    assert 1.0 < est["slow"].latency_ms / est["fast"].latency_ms <= 2.0
    # nn-Meter's own kernel times weigh the kernels' DRAM shares differently: the same shape within 1 %
    assert nn["slow"].latency_ms / nn["fast"].latency_ms == pytest.approx(est["slow"].latency_ms
                                                                          / est["fast"].latency_ms, rel=0.01)
    assert Estimator.load().version in est["slow"].latency_source


def test_levels_warnings_and_unavailable(onnx_dir: Path, nn_data: Path, tmp_path: Path) -> None:
    path = onnx_dir / "mobilenet_v2.onnx"
    a55, a53 = custom_profile("Cortex-A55", 1.6, pid="a55"), custom_profile("Cortex-A53", 1.6, pid="a53")
    est = Estimator.load()
    p = kinds_only("estimator")
    fp32 = p.cells(path, [a55, a53])
    fp16 = p.cells(path, [a55, a53], level="fp16")
    kernels = extract_kernels(path).kernels  # on each profile's memory system (its SoC: pooled, "test")
    works = graph_works(kernels, resolve(a53.soc_name, "Cortex-A53"))
    # Per-kernel factors of (core, runtime, work class, precision): the sum is the model's own.
    assert fp16["a55"].latency_ms == pytest.approx(sum(
        est.latency_ms(w, "Cortex-A55", 1.6, "tflite", "fp16") for w in graph_works(kernels, resolve(a55.soc_name,
                                                                                                     "Cortex-A55"))))
    # LiteRT dequantizes fp16 weights at load: the fp16 level costs the fp32 level, on every core
    for core in ("a55", "a53"):
        assert fp16[core].latency_ms == fp32[core].latency_ms and "dequantizes fp16 weights" in fp16[core].note
    # ncnn computes both in fp16 on the A55, both in fp32 on the A53
    same = [{k: c.latency_ms for k, c in p.cells(path, [a55, a53], level=lv, runtime="ncnn").items()}
            for lv in ("fp16", "fp32", None)]
    assert same[0] == same[1] == same[2]
    int8 = p.cells(path, [a53], level="int8-static")["a53"]
    assert int8.latency_ms == pytest.approx(sum(est.latency_ms(w, "Cortex-A53", 1.6, "tflite", "int8") for w in works))
    assert "bounded prior" in int8.note and "int8 ncnn" not in int8.uncertainty
    assert "int8" in int8.uncertainty and int8.uncertainty != fp32["a53"].uncertainty
    assert p.cells(path, [a53], level="pruned")["a53"] == fp32["a53"]
    with pytest.raises(InputError, match="level"):
        p.cells(path, [a53], level="int4")

    auto = kinds_only("auto", nnmeter_data=tmp_path / "none")
    auto.cells(path, [a55, a53])
    auto.cells(onnx_dir / "tiny_cnn.onnx", [a55, a53])
    assert auto.warnings == []  # the default never looks for nn-Meter's data: nothing to warn about
    nn = kinds_only("nn-meter", nnmeter_data=nn_data)
    nn.cells(path, [a55, a53])
    assert nn.warnings == ["mobilenet_v2.onnx: nn-Meter has no predictor for 10 kernels (10 add); not counted"]

    cell = LatencyPrediction.unavailable(a53, "export failed", threads=2)
    assert (cell.latency_ms, cell.latency_source, cell.core, cell.threads) == (None, "unavailable", "Cortex-A53", 2)
    assert cell.note == "no latency: export failed"


def test_describe_data_for_lodevem_check(nn_data: Path, tmp_path: Path) -> None:
    from lodevem.latency.nnmeter import describe_data

    detail, ok = describe_data(nn_data)
    assert ok and f"missing {MISSING}" in detail and str(nn_data) in detail
    detail, ok = describe_data(tmp_path)
    assert not ok and str(tmp_path / "predictor" / PREDICTOR) in detail


def test_fetch_predictors_installs_the_zip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import zipfile

    import requests

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{PREDICTOR}/fusion_rules.json", DEFAULT_RULES.read_text())
        z.writestr(f"{PREDICTOR}/fc.pkl", pickle.dumps(RandomForestRegressor(n_estimators=1).fit([[0, 1, 2, 3]], [1.0])))
    payload = buf.getvalue()

    class FakeResponse:
        def __enter__(self) -> "FakeResponse":
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def raise_for_status(self) -> None:
            return None

        def iter_content(self, chunk_size: int) -> list[bytes]:
            return [payload[i:i + chunk_size] for i in range(0, len(payload), chunk_size)]

    seen: dict[str, object] = {}
    monkeypatch.setattr(requests, "get", lambda url, **kw: seen.update(url=url, **kw) or FakeResponse())
    folder = fetch_predictors(PREDICTOR, tmp_path, timeout_s=30)
    assert folder == tmp_path / "predictor" / PREDICTOR
    assert (folder / "fusion_rules.json").is_file() and (folder / "fc.pkl").is_file()
    assert str(seen["url"]).endswith(f"{PREDICTOR}.zip") and seen["timeout"] == (30, 30)
    assert [p.name for p in folder.parent.iterdir()] == [PREDICTOR]  # no temp leftovers


def test_runtime_is_named_on_every_path(onnx_dir: Path, nn_data: Path, tmp_path: Path) -> None:
    """tflite / ncnn estimator cells, nn-Meter cells (TFLite by construction) and unavailable cells
    all carry the runtime they stand for, in ``runtime`` and in ``latency_source``."""
    path = onnx_dir / "mobilenet_v2.onnx"
    a53 = custom_profile("Cortex-A53", 2.0, pid="a53")
    tfl = kinds_only("estimator").cells(path, [a53])["a53"]
    ncnn = kinds_only("estimator", runtime="ncnn").cells(path, [a53])["a53"]
    assert (tfl.runtime, ncnn.runtime) == ("tflite", "ncnn")
    assert ncnn.latency_source == f"{Estimator.load().label} ncnn (Cortex-A53@2.0GHz)"
    assert tfl.latency_ms != ncnn.latency_ms and "ncnn" in ncnn.uncertainty and "tflite" in tfl.uncertainty
    nn = kinds_only("nn-meter", nnmeter_data=nn_data).cells(path, [a53])["a53"]
    assert nn.runtime == "tflite" and " tflite→" in nn.latency_source
    # nn-Meter cannot stand for ncnn: nn-meter refuses; the default is the estimator anyway.
    auto = kinds_only("auto", nnmeter_data=nn_data, runtime="ncnn")
    cell = auto.cells(path, [a53])["a53"]
    assert cell.latency_source.startswith(f"{Estimator.load().label} ncnn") and auto.warnings == []
    with pytest.raises(InputError, match="nn-meter predicts TFLite 2.1 latencies, not ncnn"):
        kinds_only("nn-meter", nnmeter_data=nn_data, runtime="ncnn")
    with pytest.raises(InputError, match="no latency model for runtime 'tvm'"):
        kinds_only("estimator", runtime="tvm")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx file")
    for runtime in ("tflite", "ncnn"):
        none = kinds_only("estimator", runtime=runtime).cells(bad, [a53])["a53"]
        assert none.latency_ms is None and none.runtime == runtime and runtime in none.latency_source


def test_uncertainty_follows_the_cells_kind(onnx_dir: Path) -> None:
    path = onnx_dir / "mnasnet1_0.onnx"
    a53 = custom_profile("Cortex-A53", 2.0, pid="a53")
    p = kinds_only("estimator", runtime="ncnn")
    one, four = (p.cells(path, [a53], threads=n)["a53"] for n in (1, 4))
    assert "1-thread fp32 ncnn cells (" in one.uncertainty and " on Cortex-A53)" in one.uncertainty
    assert "multi-thread fp32 ncnn cells (" in four.uncertainty and " on Cortex-A53)" in four.uncertainty
    assert one.latency_ms > four.latency_ms
