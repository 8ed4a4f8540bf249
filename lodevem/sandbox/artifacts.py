"""Files made in the sandbox from a user's model, kept in the artifact store: ONNX exports and
tflite / ncnn conversions (``--levels`` variants: ``derive.derive_cached``).

Each producer asks the store first (``ArtifactStore.lookup``: the sidecar must name the same
maker), else runs the worker with a fresh staging folder as its output and publishes the files
only when the run succeeded (``ArtifactStore.publish`` validates them). So a model that writes
its own "converted" file and then fails leaves nothing behind: its staging folder is deleted
whole, and the next run converts again. Within one run a result, good or bad, is remembered per
key (one conversion per (file, shape, runtime), shared by every RAM limit and profile; one
error row per runtime, not one attempt per limit). Thread-safe: parallel measurement jobs of one
model export and convert it once.

Why in the sandbox package (it was ``store.artifacts``): these caches run the worker, and their
records (``ExportResult``, ``ConversionResult``; re-exported by ``results``) are what the sandbox
made, so the store stays the low-level home of files and digests that the sandbox, the latency
wing and the records all import, with no cycle between them.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..runtimes import adapter
from ..store import ArtifactStore, digest
from ..wire.protocol import artifact_files
from .client import ConvertedSection, ModelSection, WorkerClient

__all__ = ["ConversionResult", "ConvertCache", "ExportCache", "ExportResult", "converted_name", "loading_sha256",
           "onnx_name", "shape_text"]


@dataclass(frozen=True)
class ExportResult:
    """The ONNX export of one model file: the graph latency is predicted from (and the file
    onnxruntime runs), or why there is none. ``unusable``: the worker refused the file itself."""

    path: Optional[Path]
    error: str
    model: ModelSection
    unusable: bool = False
    channels_removed_path: Optional[Path] = None  # the graph without its all-zero channels



@dataclass(frozen=True)
class ConversionResult:
    """A model converted for an on-device runtime (tflite: the ``.tflite``; ncnn: the ``.param``,
    its ``.bin`` beside it), or the converter's reason why not. ``seconds`` is the conversion's
    own time (None on a cache hit: nothing ran). The file's facts, as the worker read them back
    from its bytes (kept in the artifact store's sidecar, so a cache hit has them too):
    ``size_bytes`` (every file of the model), ``precision`` (``precision.FILE_PRECISIONS``),
    ``scheme`` (one line: weights, activations, toolchain), ``calibration`` (what calibrated its
    int8 scales, None when nothing did) and ``converter`` (package and version)."""

    path: Optional[Path]
    error: str
    input_shape: Optional[tuple[int, ...]]
    seconds: Optional[float] = None
    cached: bool = False
    size_bytes: Optional[int] = None
    precision: Optional[str] = None
    scheme: Optional[str] = None
    calibration: Optional[str] = None
    converter: Optional[str] = None



def loading_sha256(model_sha256: str, loading_key: str) -> str:
    """The file's digest, combined with the run's ``--code``/``--arch`` when given: the same
    weights built by other code are another model to export, derive and measure."""
    return digest([model_sha256, loading_key]) if loading_key else model_sha256


def shape_text(input_shape: Optional[Sequence[int]]) -> str:
    return "x".join(map(str, input_shape)) if input_shape else "auto"


def onnx_name(model_sha256: str, input_shape: Optional[Sequence[int]], loading_key: str = "") -> str:
    """The store name of an export of a model file at an input shape: one per key."""
    return f"{loading_sha256(model_sha256, loading_key)[:32]}-{shape_text(input_shape)}.onnx"


def converted_name(model_sha256: str, runtime: str, input_shape: Optional[Sequence[int]],
                   quantize: Optional[str] = None, calibration_sha256: Optional[str] = None) -> str:
    """The store name of a conversion: one per (file content, input shape, converter and version,
    quantization made while converting, the calibration data's digest when given); an ncnn
    conversion is this ``.param`` and the ``.bin`` beside it."""
    made_by = adapter(runtime)
    converter, version = made_by.converter
    suffix = made_by.converted_suffix or f".{runtime}"
    quantized = f"-{quantize}" if quantize else ""
    calibrated = f"-cal{calibration_sha256[:12]}" if calibration_sha256 else ""
    return f"{model_sha256[:32]}-{shape_text(input_shape)}-{converter}-{version}{quantized}{calibrated}{suffix}"


class ExportCache:
    """ONNX exports, one per (file content, input shape, loading), shared by the latency stage
    (the graph to predict from) and onnxruntime measurements (the file to run). The sidecar's
    maker is the worker version, the sandbox's identity (another image may export another graph)
    and the loading; its info the worker's model section."""

    KIND = "onnx"

    def __init__(self, client: WorkerClient, store: ArtifactStore, timeout_s: float) -> None:
        self.client, self.store, self.timeout_s = client, store, timeout_s
        self._lock = threading.Lock()
        self._done: dict[str, ExportResult] = {}

    def _maker(self, sha256: str, input_shape: Optional[Sequence[int]], twin: bool) -> dict[str, Any]:
        return {"model_sha256": sha256, "input_shape": list(input_shape) if input_shape else None,
                "worker_version": self.client.worker_version, "identity": self.client.backend.identity,
                "loading": self.client.cache_key, "twin": twin}

    def export(self, path: Path, sha256: str, input_shape: Optional[Sequence[int]]) -> ExportResult:
        """The graph latency is predicted from: a quantized or fp16 model's float twin."""
        return self._export(path, sha256, onnx_name(sha256, input_shape, self.client.cache_key), input_shape, True)

    def runtime_export(self, path: Path, sha256: str, input_shape: Optional[Sequence[int]]) -> ExportResult:
        """The graph onnxruntime measures: the prediction export when the model is fp32, else the
        export as torch writes it (the float twin would hold fp32 weights)."""
        predicted = self.export(path, sha256, input_shape)
        if predicted.model.precision in (None, "fp32") or predicted.unusable:
            return predicted
        name = onnx_name(sha256, input_shape, self.client.cache_key)
        return self._export(path, sha256, name.replace(".onnx", "-runtime.onnx"), input_shape, False)

    def _export(self, path: Path, sha256: str, name: str, input_shape: Optional[Sequence[int]],
                twin: bool) -> ExportResult:
        # the prediction export of a file with all-zero channels also gets the graph without them
        removed = name.replace(".onnx", ".channels-removed.onnx") if twin else None
        optional = [removed] if removed else []
        with self._lock:
            if name in self._done:
                return self._done[name]
            maker = self._maker(sha256, input_shape, twin)
            kept = self.store.lookup(self.KIND, [name], maker)
            if kept is not None:
                result = ExportResult(kept.path, "", ModelSection.parse(kept.info.get("model") or {}),
                                      channels_removed_path=_named(kept.paths, removed))
            else:
                result = self._run(path, name, removed, input_shape, twin, maker, optional)
            self._done[name] = result
            return result

    def _run(self, path: Path, name: str, removed: Optional[str], input_shape: Optional[Sequence[int]],
             twin: bool, maker: dict[str, Any], optional: list[str]) -> ExportResult:
        with self.store.staging() as staged:
            run = self.client.export_onnx(path, staged / name, input_shape, self.timeout_s, twin=twin,
                                          channels_removed=staged / removed if removed else None)
            model = (run.reply.model if run.reply is not None else None) or ModelSection()
            if not run.ok:
                return ExportResult(None, run.failure_message("ONNX export failed"), model, run.unusable_file)
            artifact, error = self.store.publish(self.KIND, staged, [name], maker, {"model": asdict(model)},
                                                 optional=optional)
        if artifact is None:
            return ExportResult(None, f"ONNX export refused: {error}", model)
        return ExportResult(artifact.path, "", model, channels_removed_path=_named(artifact.paths, removed))


def _named(paths: Sequence[Path], name: Optional[str]) -> Optional[Path]:
    return next((p for p in paths if name is not None and p.name == name), None)


class ConvertCache:
    """Conversions to tflite / ncnn made in the sandbox (converter image, work limit)."""

    KIND = "converted"

    def __init__(self, client: WorkerClient, store: ArtifactStore, timeout_s: float) -> None:
        self.client, self.store, self.timeout_s = client, store, timeout_s
        self._lock = threading.Lock()
        self._done: dict[str, ConversionResult] = {}

    def convert(self, path: Path, sha256: str, runtime: str, input_shape: Optional[Sequence[int]],
                quantize: Optional[str] = None, calibration: Optional[Path] = None) -> ConversionResult:
        """``quantize`` (``precision.CONVERT_QUANTIZE``: fp16, int8, int8-static): the level made by
        the runtime's own toolchain from the float model while converting; ``calibration``: an
        .npz of ``inputs`` that calibrates the int8 levels (None: the worker's synthetic default),
        keyed by its content."""
        shape = tuple(input_shape) if input_shape else None
        # the store's own file: its digest as recorded when it was published, not hashed again
        calibration_sha256 = self.store.file_sha256(calibration) if calibration is not None else None
        name = converted_name(loading_sha256(sha256, self.client.cache_key), runtime, shape, quantize,
                              calibration_sha256)
        names = [Path(f).name for f in artifact_files(name)]
        maker = {"model_sha256": sha256, "loading": self.client.cache_key, "runtime": runtime,
                 "converter": list(adapter(runtime).converter), "input_shape": list(shape) if shape else None,
                 "worker_version": self.client.worker_version}
        if quantize:  # only then: existing conversions keep their makers
            maker["quantize"] = quantize
        if calibration_sha256:
            maker["calibration_sha256"] = calibration_sha256
        with self._lock:
            if name in self._done:
                return self._done[name]
            kept = self.store.lookup(self.KIND, names, maker)
            if kept is not None:
                result = _conversion(kept.path, shape, kept.info.get("converted") or {}, cached=True)
            else:
                result = self._run(path, runtime, names, shape, maker, quantize, calibration)
            self._done[name] = result
            return result

    def _run(self, path: Path, runtime: str, names: list[str], shape: Optional[tuple[int, ...]],
             maker: dict[str, Any], quantize: Optional[str] = None,
             calibration: Optional[Path] = None) -> ConversionResult:
        with self.store.staging() as staged:
            run = self.client.convert(path, runtime, staged / names[0], shape, self.timeout_s, quantize, calibration)
            if not run.ok:
                return ConversionResult(None, run.failure_message(f"{runtime} conversion failed"), shape)
            converted = run.reply.converted if run.reply is not None else None
            info = {"converted": asdict(converted)} if converted is not None else {}
            artifact, error = self.store.publish(self.KIND, staged, names, maker, info)
        if artifact is None:
            return ConversionResult(None, f"{runtime} conversion refused: {error}", shape)
        return _conversion(artifact.path, shape, info.get("converted") or {}, cached=False)


def _conversion(path: Path, shape: Optional[tuple[int, ...]], section: dict[str, Any], cached: bool
                ) -> ConversionResult:
    """A ConversionResult with the converted section's facts (from the reply, or from the store's
    sidecar on a cache hit: parsed again, as any reply). ``size_bytes`` is the published files'
    own size, not the reply's word."""
    parsed = ConvertedSection.parse(section) if isinstance(section, dict) else None
    size = sum(p.stat().st_size for p in (Path(f) for f in artifact_files(str(path))) if p.is_file())
    return ConversionResult(path, "", shape, None if cached or parsed is None else parsed.seconds, cached=cached,
                            size_bytes=size or None,
                            precision=parsed.precision if parsed else None, scheme=parsed.scheme if parsed else None,
                            calibration=parsed.calibration if parsed else None,
                            converter=f"{parsed.converter} {parsed.converter_version}".strip() if parsed else None)
