"""Display rules a row's text cells follow: what the zeros of a pruned file mean for its latency
(``sparsity_note``), when host timings are too noisy to read (``unstable``), and which layers of
a partially quantized file still run in float (``quantization_note``). Pure functions of
figures: the row assembly (``results.PairResult.from_records``) calls them, nothing here
knows the records.

Why the quantization note: a ``quantize_dynamic`` file of a conv net is "int8" by its name but
computes its convolutions in fp32, so its latency equals the fp32 one; without a word, the table
reads as "int8 does not help". The kernel precisions come from the export's kernel graph (what
the predictor charged), so the note says exactly which kernels ran in which precision."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..wire.precision import PARTLY_QUANTIZED

if TYPE_CHECKING:
    from ..sandbox.client import SparsitySection

__all__ = ["UNSTABLE_STD_FRACTION", "joined", "kernel_precisions", "quantization_note", "sparsity_note", "unstable"]

# pyperf's rule of thumb: a benchmark whose std is >= 10 % of its mean is unstable.
UNSTABLE_STD_FRACTION = 0.10


def unstable(mean_ms: Optional[float], std_ms: Optional[float]) -> Optional[str]:
    """Why the host timings are unstable (std >= 10 % of the mean), or None."""
    if not mean_ms or std_ms is None or std_ms < UNSTABLE_STD_FRACTION * mean_ms:
        return None
    return f"std is {100 * std_ms / mean_ms:.0f} % of the mean"


def sparsity_note(found: Optional["SparsitySection"], channels_removed_figure: bool) -> Optional[str]:
    """What the zeros of a pruned file mean for its latency, or None for a dense file.
    ``channels_removed_figure``: the row carries latency_if_channels_removed_ms."""
    if found is None or not found.pruned:
        return None
    parts = [f"{found.zero_fraction:.0%} of the Conv/Linear weights are zero"]
    if found.masked_layers:
        parts.append(f"prune masks attached on {found.masked_layers} layer(s)")
    if found.zero_channels:
        parts.append(f"{found.zero_channels} of {found.channels} output channels entirely zero")
    text = (f"{'; '.join(parts)}: a dense runtime multiplies zeros like any other weight, so this is the dense "
            f"model's latency; `lodevem derive --levels pruned` removes channels physically")
    if channels_removed_figure:
        text += "; latency_if_channels_removed_ms: the same graph with the all-zero channels removed"
    elif found.zero_channels and found.channels_removed:
        text += f"; no channels-removed figure ({found.channels_removed})"
    return text


def joined(*notes: Optional[str]) -> Optional[str]:
    """Notes of one cell, "; "-separated (None when there is none)."""
    return "; ".join(n for n in notes if n) or None

# Kernel categories (latency.kernels) -> the layer kind a user recognises.
# Only layers that carry weights are quantized; pooling and element-wise kernels are left out.
_LAYER_WORDS = {"fc": "Linear", "dense_conv": "conv", "pointwise_conv": "1x1 conv", "depthwise_conv": "depthwise conv"}


def kernel_precisions(graph_path: Optional[Path]) -> tuple[tuple[str, str, int], ...]:
    """(kernel category, precision, count) of the export's kernel graph, most frequent first;
    () when there is no graph or it cannot be read (the prediction then says why)."""
    if graph_path is None:
        return ()
    from ..errors import InputError
    from ..latency.kernels import DEFAULT_RULES, extract_kernels

    try:
        graph = extract_kernels(graph_path, DEFAULT_RULES)
    except (InputError, OSError, ValueError):
        return ()
    counts = Counter((k.category, getattr(k, "precision", "fp32")) for k in graph.kernels)
    return tuple((c, p, n) for (c, p), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _word(category: str) -> str:
    return _LAYER_WORDS[category]


def quantization_note(precision: Optional[str], by_class: tuple[tuple[str, str, int], ...]) -> Optional[str]:
    """For a file quantized only in part: which layers are int8 and which still run in float,
    with the level that quantizes the rest. None for a file with one precision throughout."""
    by_class = tuple(k for k in by_class if k[0] in _LAYER_WORDS)
    if precision not in PARTLY_QUANTIZED or not by_class:
        return None
    int8 = sorted({_word(c) for c, p, _ in by_class if p.startswith("int8")})
    floats = {p for _, p, _ in by_class if not p.startswith("int8")}
    still = sorted({_word(c) for c, p, _ in by_class if not p.startswith("int8")} - set(int8))
    if not int8 or not still:
        return None
    float_name = "/".join(sorted(floats))
    return (f"only {'/'.join(int8)} layers are int8: {', '.join(still)} layers run {float_name}, so the latency is "
            f"close to the {float_name} model's; try --levels int8-static to quantize them too")
