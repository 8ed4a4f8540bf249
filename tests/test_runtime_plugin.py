"""A runtime plugs in as one folder (``lodevem/runtimes/<name>/``: its adapter,
``lodevem.runtimes.base.Runtime``, its container half and its image pins) and one registry line
(its ``RuntimeSpec`` in ``wire.registry.RUNTIMES``): the toy runtime in ``tests/toyrt``, put at
``lodevem.runtimes.toyrt`` with its line ``TOY`` and no other edit to lodevem, is then what every
host stage asks: the options and the run config take it, ``build-image`` plans its images, its
converted file is named by it, a measurement or an evaluation of it runs its converted file, and
its device tool's log calibrates it. In a copy of the package with the same folder and line, it
converts, measures and evaluates through the worker in real containers (Docker lane), chosen by
the worker's one table.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import pytest

from lodevem import runtimes
from lodevem.latency.calibration import parse_benchmark_log
from lodevem.measure import MeasureCache, MeasurePlan
from lodevem.results import ConversionResult, ModelFile
from lodevem.runtimes.base import Runtime
from lodevem.sandbox.artifacts import converted_name
from lodevem.sandbox.client import MeasureSettings, WorkerClient
from lodevem.sandbox.image import image_status, image_targets, specs_for_runtimes
from lodevem.wire import registry
from lodevem.wire.protocol import WORKER_RELEASE, source_digest
from lodevem.wire.registry import Converter, RuntimeSpec

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"
TOY_FOLDER = Path(__file__).resolve().parent / "toyrt"
# The toy's one registry line (what ``wire.registry.RUNTIMES`` holds for it).
TOY = RuntimeSpec("toyrt", "toy runtime (plumbing test)", "bench", "toypkg",
                  Converter("toyconv", "1.0", "export-toyrt"), on_device=True)


def _copy_folder(runtimes_dir: Path) -> None:
    shutil.copytree(TOY_FOLDER, runtimes_dir / "toyrt", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Runtime]:
    """The toy's folder as ``lodevem/runtimes/toyrt/`` (beside the package's own folders) and its
    registry line: nothing else is told about it."""
    _copy_folder(tmp_path / "runtimes")
    monkeypatch.setattr(runtimes, "__path__", [*runtimes.__path__, str(tmp_path / "runtimes")])
    monkeypatch.setitem(registry.RUNTIMES, "toyrt", TOY)
    yield runtimes.adapter("toyrt")
    for name in [m for m in sys.modules if m.startswith("lodevem.runtimes.toyrt")]:
        del sys.modules[name]


def test_without_its_registry_line_there_is_no_such_runtime() -> None:
    with pytest.raises(Exception, match="runtime toyrt"):
        runtimes.adapter("toyrt")


def test_the_run_and_build_image_take_it(toy: Runtime) -> None:
    from lodevem.runner import RunConfig

    assert runtimes.adapter("toyrt") is toy and toy.converts and toy.images == ("bench", "convert")
    assert RunConfig.of((), (), runtimes=("toyrt",)).runtimes == ("toyrt",)
    assert "toyrt" in image_targets()
    assert [s.name for s in specs_for_runtimes(["toyrt"])] == ["bench", "convert"]


def test_its_converted_file_is_named_by_its_adapter(toy: Runtime) -> None:
    name = converted_name("ab" * 32, "toyrt", (1, 3, 8, 8), quantize="fp16")
    assert name.endswith("-toyconv-1.0-fp16.toy")


class _Converts:
    """The conversion cache as a measurement plan sees it: records what it was asked to make."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.asked = folder, []

    def convert(self, path: Path, sha256: str, runtime: str, input_shape: Any, quantize: Optional[str] = None,
                calibration: Optional[Path] = None) -> ConversionResult:
        self.asked.append(runtime)
        made = self.folder / converted_name(sha256, runtime, input_shape, quantize)
        made.write_bytes(b"toy")
        return ConversionResult(made, "", tuple(input_shape))


def test_a_measurement_runs_its_converted_file(toy: Runtime, tmp_path: Path) -> None:
    model_path = tmp_path / "m.pt"
    model_path.write_bytes(b"not loaded here")
    model = ModelFile.from_path(model_path, "m.pt")
    converts = _Converts(tmp_path)
    plan = MeasurePlan(None, MeasureSettings(runtime="toyrt", input_shape=(1, 3, 8, 8)), 60.0,  # type: ignore[arg-type]
                       MeasureCache(None), None, converts)  # type: ignore[arg-type]
    files = plan.files(model)
    assert converts.asked == ["toyrt"] and files.conversion is not None and files.conversion.path.suffix == ".toy"
    assert files.onnx_path is None and not files.error


def test_its_device_log_calibrates_it(toy: Runtime) -> None:
    log = parse_benchmark_log("boot\ntoybench: mobilenet_v2 avg_ms=12.5\n", "toy.log")
    assert (log.runtime, log.tool, log.entries[0].name, log.entries[0].ms) == ("toyrt", "toybench", "mobilenet_v2", 12.5)


def _package_with_the_toy(root: Path) -> Path:
    """A copy of lodevem with the toy's folder as ``runtimes/toyrt/`` and its one registry line."""
    pkg = root / "lodevem"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, pkg, ignore=ignore)
    _copy_folder(pkg / "runtimes")
    registry_file = pkg / "wire" / "registry.py"
    text, end = registry_file.read_text(), "\n)}\n"
    assert text.count(end) == 1
    registry_file.write_text(text.replace(end, f"\n    {TOY!r},{end}"))
    return pkg


@pytest.mark.docker
def test_it_converts_measures_and_evaluates_in_a_container(toy: Runtime, docker_backend: Any, digits_files: Any,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for spec in specs_for_runtimes(["toyrt"]):
        if not image_status(spec=spec).present:
            pytest.skip(f"image {spec.tag} is not built")
    pkg = _package_with_the_toy(tmp_path / "pkg")
    monkeypatch.setattr(docker_backend, "host_pkg", pkg)  # mounted over the image's copy, as the host's is
    client = WorkerClient(docker_backend, expected_version=f"{WORKER_RELEASE}+{source_digest(pkg)}")
    shape = tuple(np.load(digits_files.npz)["inputs"].shape[1:])
    target = tmp_path / converted_name("cd" * 32, "toyrt", (1, *shape))

    made = client.convert(digits_files.pickled, "toyrt", target, (1, *shape), timeout_s=300)
    assert made.ok, made.problem()
    assert made.reply is not None and made.reply.converted is not None
    assert made.reply.converted.format == "toyrt" and made.reply.converted.converter == "toyconv"
    assert target.is_file() and target.read_bytes()[:2] == b"PK"  # a TorchScript archive

    settings = MeasureSettings(runtime="toyrt", input_shape=(1, *shape), warmup=1, runs=3)
    measured = client.measure(digits_files.pickled, 512, settings, 300, converted_path=target)
    assert measured.ok, measured.problem()
    reply = measured.reply
    assert reply is not None and reply.runtime is not None and reply.runtime.name == "toyrt"
    assert reply.latency is not None and len(reply.latency.samples_ms) == 3 and reply.memory is not None

    evaluated = client.evaluate(digits_files.pickled, digits_files.npz, settings, 300, converted_path=target)
    assert evaluated.ok, evaluated.problem()
    counted = evaluated.reply.accuracy if evaluated.reply else None
    assert counted is not None and counted.samples == 597
    # the toy's file is the model traced: the same top-1 as torch's plain evaluation, sample by sample
    assert 100.0 * counted.top1_correct / counted.samples == pytest.approx(digits_files.plain_top1, abs=0.2)
