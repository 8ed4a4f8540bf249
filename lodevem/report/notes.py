"""Display rules a row's text cells follow: what the zeros of a pruned file mean for its latency
(``sparsity_note``) and when host timings are too noisy to read (``unstable``). Pure functions
of figures: the row assembly (``results.PairResult.from_records``) calls them, nothing here
knows the records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..sandbox.client import SparsitySection

__all__ = ["UNSTABLE_STD_FRACTION", "joined", "sparsity_note", "unstable"]

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
