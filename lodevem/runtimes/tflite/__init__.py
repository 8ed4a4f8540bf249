"""LiteRT / TFLite with XNNPACK: the runtime a phone app ships by default, and the one latencies
are predicted for unless ``--latency-runtime`` says otherwise."""

from __future__ import annotations

from ..base import NUMPY_PIN, Citation, OwnImage, Runtime
from .log import parse_log, parse_run

__all__ = ["ADAPTER", "Tflite"]


class Tflite(Runtime):
    """Runs the ``.tflite`` litert-torch makes from the model; calibrated by ``benchmark_model``."""

    name = "tflite"
    converted_suffix = ".tflite"
    read_log = staticmethod(parse_log)
    read_run = staticmethod(parse_run)
    benchmark_tool = "benchmark_model"
    benchmark_source = ("LiteRT's benchmark_model for Android: the prebuilt nightly for android_aarch64 or "
                        "android_arm (ai.google.dev/edge/litert/models/measurement), or built from the TensorFlow/"
                        "LiteRT sources with bazel (//tensorflow/lite/tools/benchmark:benchmark_model, "
                        "--config=android_arm64)")
    cited = Citation("LiteRT", "litert")
    kernels_cited = Citation("TFLite with XNNPACK", "xnnpack")
    data_source_prefix = "google/XNNPACK"
    # dynamic range: XNNPACK's QD8 kernels for Conv2D and Fully Connected (int8 compute, float
    # tensors between operators; TensorFlow Blog, "Faster Dynamically Quantized Inference with
    # XNNPack", 2024-04-09); the other kernels (depthwise included) stay fp32
    dynamic_int8 = (("dense_conv", "pointwise_conv", "fc"), "int8-dynamic")
    # docs/runtimes.md says why this one: tflite-runtime 2.14 fails with numpy 2
    own_image = OwnImage("lodevem-litert", (NUMPY_PIN, "ai-edge-litert==2.3.0"),
                         "python3 + numpy + LiteRT (ai-edge-litert)", "ai_edge_litert.interpreter, numpy")

    def executes(self, arithmetic: str, fp16_core: bool) -> str:
        """An fp16-weights file is dequantized to fp32 when LiteRT loads it and runs fp32 kernels:
        XNNPACK's reduced-precision fp16 inference needs the delegate's FORCE_FP16 flag, which
        LiteRT does not set by default (TensorFlow Blog, "Half-precision Inference Doubles
        On-Device Inference Performance", 2023)."""
        return "fp32" if arithmetic == "fp16" else arithmetic


ADAPTER = Tflite()
