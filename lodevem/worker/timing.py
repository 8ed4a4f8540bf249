"""Timed passes and their latency summary."""

from __future__ import annotations

import re
import statistics
import time
from typing import Any, Callable, Optional

from ..wire.protocol import WorkerError, first_line, progress
from ..wire.requests import MeasureRequest
from ..wire.sections import HostTimings

# What a forward pass that fails says when the input is the problem (as torch phrases it).
_SHAPE_WORDS = re.compile(r"shape|size|dimension|channels|mat1|mat2|expected input|expected .*input", re.I)
_MORE_INPUTS = re.compile(r"required positional argument|missing value for argument|expected \d+ arguments", re.I)


def forward_failure(exc: BaseException, describe_input: str) -> WorkerError:
    """Why a forward pass failed, in the words that help: a model needing more than one input, an
    input of the wrong shape, or the model's own code raising (quoted, not blamed on the shape)."""
    text = first_line(exc)
    if _MORE_INPUTS.search(text):
        return WorkerError("bad_input_shape", f"the model's forward takes more than one input ({text}); lodevem feeds "
                                              f"it one tensor of {describe_input}: save a wrapper module whose "
                                              "forward takes one tensor")
    if _SHAPE_WORDS.search(text):
        return WorkerError("bad_input_shape", f"the model rejected an input of {describe_input}: {text}; pass "
                                              "--input-shape with the shape the model expects")
    if not re.match(r"^[\w.]*(Error|Exception): ", text):
        text = f"{type(exc).__name__}: {text}"
    return WorkerError("model_failed", f"the model's forward failed on an input of {describe_input}: {text}")


def timed_passes(call: Callable[[], Any], label: str, n: int, describe_input: str) -> list[float]:
    """Run ``call`` n times, return per-pass ms; a failing pass becomes ``forward_failure``."""
    samples: list[float] = []
    step, last = max(1, n // 10), time.monotonic()
    for i in range(1, n + 1):
        t0 = time.perf_counter_ns()
        try:
            call()
        except Exception as exc:
            raise forward_failure(exc, describe_input) from None
        samples.append((time.perf_counter_ns() - t0) / 1e6)
        if i == n or i % step == 0 or time.monotonic() - last >= 2.0:
            progress(f"{label} {i}/{n}")
            last = time.monotonic()
    return samples


def first_output_shape(output: Any) -> Optional[list[int]]:
    """The shape of a model's (first) output tensor, e.g. [1, 10]: its last dimension is the
    number of classes the host checks labels and class folders against."""
    while isinstance(output, (tuple, list)) and output:
        output = output[0]
    if isinstance(output, dict) and output:
        output = next(iter(output.values()))
    shape = getattr(output, "shape", None)
    return [int(d) for d in shape] if shape is not None else None


def percentile(sorted_xs: list[float], q: float) -> float:
    """numpy's default (linear interpolation) percentile, q in [0, 100]."""
    k = (len(sorted_xs) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def latency_stats(samples: list[float], batch: int, req: MeasureRequest) -> HostTimings:
    """Summary of every timed pass; std is the population std (numpy's default)."""
    xs, mean = sorted(samples), statistics.fmean(samples)
    return HostTimings(samples_ms=tuple(samples), mean_ms=mean, std_ms=statistics.pstdev(samples), min_ms=xs[0],
                       max_ms=xs[-1], p50_ms=percentile(xs, 50), p90_ms=percentile(xs, 90),
                       p95_ms=percentile(xs, 95), p99_ms=percentile(xs, 99),
                       throughput_ips=1000.0 / mean * batch if mean > 0 else None,
                       warmup=req.warmup, runs=req.runs, threads=req.threads)
