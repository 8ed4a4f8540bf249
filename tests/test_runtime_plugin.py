"""A runtime plugs in as one folder (its adapter, ``lodevem.runtimes.base.Runtime``) and one
registry line (``lodevem.runtimes.ADAPTERS``, beside its ``RuntimeSpec`` in the worker registry):
a toy runtime defined in ``tests/toyrt`` is then what every host stage asks, with no other edit to
lodevem: the options and the run config take it, ``build-image`` plans its images, its converted
file is named by it, a measurement or an evaluation of it runs its converted file, and its device
tool's log calibrates it. What a real runtime adds beside (its worker-side loading and measuring
in the images) is the worker's, dispatched by the request's runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from toyrt import SPEC, ToyRuntime

from lodevem import runtimes
from lodevem.latency.calibration import parse_benchmark_log
from lodevem.measure import MeasureCache, MeasurePlan
from lodevem.results import ConversionResult, ModelFile
from lodevem.sandbox.artifacts import converted_name
from lodevem.sandbox.client import MeasureSettings
from lodevem.sandbox.image import image_targets, specs_for_runtimes
from lodevem.worker import registry


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyRuntime:
    monkeypatch.setitem(registry.RUNTIMES, "toyrt", SPEC)  # what the worker would validate against
    adapter = ToyRuntime()
    monkeypatch.setitem(runtimes.ADAPTERS, "toyrt", adapter)  # the one registry line
    return adapter


def test_without_its_registry_line_there_is_no_such_runtime() -> None:
    with pytest.raises(Exception, match="runtime toyrt"):
        runtimes.adapter("toyrt")


def test_the_run_and_build_image_take_it(toy: ToyRuntime) -> None:
    from lodevem.runner import RunConfig

    assert runtimes.adapter("toyrt") is toy and toy.converts and toy.images == ("bench", "convert")
    assert RunConfig.of((), (), runtimes=("toyrt",)).runtimes == ("toyrt",)
    assert "toyrt" in image_targets()
    assert [s.name for s in specs_for_runtimes(["toyrt"])] == ["bench", "convert"]


def test_its_converted_file_is_named_by_its_adapter(toy: ToyRuntime) -> None:
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


def test_a_measurement_runs_its_converted_file(toy: ToyRuntime, tmp_path: Path) -> None:
    model_path = tmp_path / "m.pt"
    model_path.write_bytes(b"not loaded here")
    model = ModelFile.from_path(model_path, "m.pt")
    converts = _Converts(tmp_path)
    plan = MeasurePlan(None, MeasureSettings(runtime="toyrt", input_shape=(1, 3, 8, 8)), 60.0,  # type: ignore[arg-type]
                       MeasureCache(None), None, converts)  # type: ignore[arg-type]
    files = plan.files(model)
    assert converts.asked == ["toyrt"] and files.conversion is not None and files.conversion.path.suffix == ".toy"
    assert files.onnx_path is None and not files.error


def test_its_device_log_calibrates_it(toy: ToyRuntime) -> None:
    log = parse_benchmark_log("boot\ntoybench: mobilenet_v2 avg_ms=12.5\n", "toy.log")
    assert (log.runtime, log.tool, log.entries[0].name, log.entries[0].ms) == ("toyrt", "toybench", "mobilenet_v2", 12.5)
