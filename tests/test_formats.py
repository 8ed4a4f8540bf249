"""Every model file and data set a researcher has, under the runtime an app ships (issue 37), with
real files against the REAL Docker engine: the digits CNN trained in the session as a pickled
module, TorchScript, an exported program and ONNX, and its test split as an ``.npz`` and as an
ImageFolder tree of PNGs (``tests/digits.py``).

The runs share one artifact store (``shared_output``): each conversion and measurement is made
once in the session, as a user's reruns would reuse them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lodevem.profiles import load_profiles, select_profiles
from lodevem.runner import RunConfig, run_benchmark

pytestmark = pytest.mark.docker
RUNTIMES = ("torch", "tflite", "ncnn")


def _run(models: tuple[Path, ...], data: Path, out: Path, runtimes: tuple[str, ...] = RUNTIMES,
         levels: tuple[str, ...] = (), predictor: str = "estimator") -> dict[tuple[str, str, str], object]:
    """{(file name, level, runtime): row} of one run on the Nokia 8110 4G."""
    profiles = tuple(select_profiles(load_profiles(), ids=["nokia_8110_4g"]))
    config = RunConfig.of(models=models, profiles=profiles, warmup=0, runs=1, output=out, backend="docker",
                          runtimes=runtimes, jobs=1, predictor=predictor, timeout_s=600, eval_data=data,
                          levels=levels, overwrite=True)
    outcome = run_benchmark(config)
    return {(Path(r.model.path).name, r.model.level or "fp32", r.model.label.rsplit("[", 1)[-1].rstrip("]")): r
            for r in outcome.rows}


@pytest.fixture(scope="module")
def every_format(app_backend, digits_files, tmp_path_factory: pytest.TempPathFactory,
                 shared_run_cache: Path):
    """The four files under torch, tflite and ncnn, evaluated on the .npz and on the tree."""
    from lodevem.store import cache_root

    out = tmp_path_factory.mktemp("formats") / "out"
    out.mkdir()
    cache_root(out).symlink_to(shared_run_cache, target_is_directory=True)
    models = tuple(digits_files.model_formats.values())
    return _run(models, digits_files.npz, out), _run(models, digits_files.tree, out)


def test_every_format_gives_the_same_top1_under_every_runtime_from_npz_and_tree(every_format, digits_files) -> None:
    by_npz, by_tree = every_format
    names = {p.name for p in digits_files.model_formats.values()}
    assert {key[0] for key in by_npz} == names and {key[2] for key in by_npz} == set(RUNTIMES)
    for rows, data in ((by_npz, "npz"), (by_tree, "tree")):
        for (name, _, runtime), row in rows.items():
            where = (data, name, runtime, row.memory.runtime_shown, row.accuracy.note)
            assert row.accuracy.top1_pct is not None, where
            assert abs(row.accuracy.top1_pct - digits_files.plain_top1) <= 0.3, (where, row.accuracy.top1_pct)
            assert row.memory.peak_rss_mb is not None and row.latency.ms is not None, where
            assert row.accuracy.samples == 597, where
    for key, row in by_tree.items():  # the tree is the same data: the same figure per row, +-0.3 pt
        assert abs(row.accuracy.top1_pct - by_npz[key].accuracy.top1_pct) <= 0.3, key


def test_each_format_is_measured_by_what_runs_it(every_format, digits_files) -> None:
    """TorchScript and the exported program under tflite are converted (TS2EP for TorchScript);
    an .onnx cannot become a .tflite here, so onnxruntime measures it and the row says why."""
    rows, _ = every_format
    for fmt, path in digits_files.model_formats.items():
        for runtime in ("tflite", "ncnn"):
            row = rows[(path.name, "fp32", runtime)]
            if fmt == "onnx" and runtime == "tflite":
                assert row.memory.runtime_shown == "onnxruntime (fallback)", row.memory.runtime_shown
                assert "cannot be made into a .tflite" in (row.memory.note or "") and "TensorFlow" in row.memory.note
                continue
            assert row.memory.runtime_shown == runtime and row.memory.converted.precision == "fp32", (fmt, runtime, row.memory.note)
        torch_row = rows[(path.name, "fp32", "torch")]
        assert torch_row.memory.runtime_shown == ("onnxruntime" if fmt == "onnx" else "torch")
        assert torch_row.model.format == fmt, (torch_row.model.format, fmt)


def test_the_four_formats_of_one_network_get_the_same_predicted_latency(every_format, digits_files) -> None:
    """Issue 35's invariant: the same kernels give the same figure, whatever file holds them."""
    rows, _ = every_format
    for runtime in RUNTIMES:
        latencies = {name: rows[(name, "fp32", runtime)].latency.ms for name in
                     (p.name for p in digits_files.model_formats.values())}
        assert len(set(latencies.values())) == 1, (runtime, latencies)


def test_a_torchscript_file_has_every_level_under_the_app_runtimes_as_the_pickled_module(
        app_backend, digits_files, tmp_path: Path, shared_output: Path) -> None:
    """The issue's done-when: ``--levels all --runtime tflite,ncnn --eval-data digits_tree/`` on the
    TorchScript file gives RAM, latency and accuracy on every row, equal to the pickled module's."""
    levels = ("fp32", "fp16", "int8", "int8-static", "pruned")
    scripted = _run((digits_files.torchscript,), digits_files.tree, shared_output, ("tflite", "ncnn"), levels)
    pickled = _run((digits_files.pickled,), digits_files.tree, shared_output, ("tflite", "ncnn"), levels)
    assert len(scripted) == len(pickled) == 10
    for (_, level, runtime), row in scripted.items():
        twin = pickled[(digits_files.pickled.name, level, runtime)]
        where = (level, runtime, row.memory.note, row.accuracy.note)
        assert row.memory.runtime_shown == runtime and row.memory.peak_rss_mb is not None and row.latency.ms is not None, where
        assert row.accuracy.top1_pct is not None and row.accuracy.top1_pct == twin.accuracy.top1_pct, (
            where, row.accuracy.top1_pct, twin.accuracy.top1_pct)
        assert row.memory.converted.precision == twin.memory.converted.precision, where
        assert row.latency.ms == twin.latency.ms, (where, row.latency.ms, twin.latency.ms)
        assert abs(row.memory.peak_rss_mb - twin.memory.peak_rss_mb) <= 3.0, (where, row.memory.peak_rss_mb, twin.memory.peak_rss_mb)


_PT2E_SCRIPT = """
import numpy as np, torch
from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
model = torch.load("/in/cnn.pt", weights_only=False).eval()
x = torch.zeros(1, 1, 8, 8)
quantizer = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))
prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
train = np.load("/in/train.npz")["inputs"]
for i in range(64):
    prepared(torch.from_numpy(train[i:i + 1]))
torch.export.save(torch.export.export(convert_pt2e(prepared), (x,)), "/out/digits_pt2e.pt2")
"""


def _pt2e_file(digits_files, folder: Path) -> Path:
    """A user's own PT2E-quantized exported program (calibrated on 64 training digits, weights
    folded to int8 as ``convert_pt2e`` does by default), made with torchao and litert-torch's
    quantizer where they are installed: the converter image (a throw-away container)."""
    import docker

    from lodevem.sandbox.image import IMAGES

    folder.mkdir(mode=0o777, exist_ok=True)
    folder.chmod(0o777)
    docker.from_env().containers.run(
        IMAGES["convert"].tag, ["-c", _PT2E_SCRIPT], entrypoint="python3", network_disabled=True, remove=True,
        volumes={str(digits_files.folder): {"bind": "/in", "mode": "ro"}, str(folder): {"bind": "/out", "mode": "rw"}})
    return folder / "digits_pt2e.pt2"


def test_a_pt2e_quantized_program_keeps_its_own_scales_under_tflite(app_backend, digits_files, tmp_path: Path,
                                                                     shared_output: Path) -> None:
    """37.3: the user's int8 file under the app runtime: LiteRT runs an int8 .tflite made with the
    file's own scales (nothing re-quantized), with the accuracy torch gives the same file; ncnn
    has no form for PT2E ops, so that row is torch's, saying why."""
    pt2e = _pt2e_file(digits_files, tmp_path / "user")
    rows = _run((pt2e,), digits_files.npz, shared_output)
    tflite, torch_row, ncnn = (rows[(pt2e.name, "fp32", r)] for r in ("tflite", "torch", "ncnn"))
    assert tflite.memory.runtime_shown == "tflite" and tflite.memory.converted.precision == "int8-static", tflite.memory.note
    assert "as the file was quantized" in (tflite.memory.converted.scheme or "") and "PT2E static" in tflite.memory.converted.scheme
    assert torch_row.model.precision == "int8-static" and torch_row.latency.ms is not None  # predicted at int8
    assert tflite.accuracy.top1_pct is not None and torch_row.accuracy.top1_pct is not None
    assert abs(tflite.accuracy.top1_pct - torch_row.accuracy.top1_pct) <= 1.0
    assert abs(tflite.accuracy.top1_pct - digits_files.plain_top1) <= 2.0
    assert ncnn.memory.runtime_shown == "torch (fallback)" and "PT2E-quantized program" in (ncnn.memory.note or "")


def test_inspect_reports_each_format(docker_backend, digits_files) -> None:
    from lodevem.inspection import ModelInspection, inspect_models
    from lodevem.sandbox.client import WorkerClient

    found = inspect_models(list(digits_files.model_formats.values()), WorkerClient(docker_backend),
                           input_shape=(1, 1, 8, 8))
    assert all(isinstance(item, ModelInspection) for item in found), found
    by_name = {item.path.name: item for item in found if isinstance(item, ModelInspection)}
    assert {name: item.model.format for name, item in by_name.items()} == {
        p.name: fmt for fmt, p in digits_files.model_formats.items()}
    # an exported program names the class it was exported from, not its GraphModule's
    assert by_name[digits_files.exported.name].model.class_name == "torch.nn.modules.container.Sequential"
    assert all(item.model.classes == 10 and item.kernels for item in by_name.values())


def _refused(model: Path, out: Path, *argv: str) -> str:
    from click.testing import CliRunner

    from lodevem.cli import cli

    result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_8110_4g", "--output", str(out),
                                      "--backend", "docker", "--runs", "1", "--warmup", "0", *argv])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not (out / "benchmark_results.csv").exists()
    return result.output.strip().splitlines()[-1]


def test_a_pt2_with_a_custom_op_is_one_line(app_backend, tmp_path: Path) -> None:
    """An operator registered only in the process that saved the program: named, exit 2."""
    @torch.library.custom_op("lodevemtest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    class Custom(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.lodevemtest.twice(x) + 1

    path = tmp_path / "custom.pt2"
    torch.export.save(torch.export.export(Custom(), (torch.randn(1, 3, 8, 8),)), str(path))
    path.chmod(0o644)
    last = _refused(path, tmp_path / "out", "--runtime", "torch")
    assert f"{path} is an exported program that calls torch.ops.lodevemtest.twice.default" in last, last
    assert "a custom op" in last


def test_an_onnx_whose_tensors_point_outside_its_folder_is_one_line(app_backend, digits_files, tmp_path: Path) -> None:
    import onnx

    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 4096)
    folder = tmp_path / "model"
    folder.mkdir()
    model = onnx.load(str(digits_files.onnx))
    onnx.save(model, str(folder / "outside.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    bare = onnx.load(str(folder / "outside.onnx"), load_external_data=False)
    for tensor in bare.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../secret.bin"
    onnx.save(bare, str(folder / "outside.onnx"))
    (folder / "outside.onnx").chmod(0o644)
    last = _refused(folder / "outside.onnx", tmp_path / "out", "--runtime", "onnxruntime", "--input-shape",
                    "1,1,8,8")
    assert "is stored outside the file, in '../secret.bin' (outside the model's folder: refused, never read)" in last
    assert "save_as_external_data=False" in last
