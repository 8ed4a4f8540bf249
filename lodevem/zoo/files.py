"""Writing a zoo model to a ``.pt`` file a user can benchmark."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch

from .registry import build
from .summary import ZooSummary, describe_all

__all__ = ["ZooListing", "catalogue", "write"]


def write(name: str, out_dir: Path) -> Path:
    """Build ``name`` and torch.save the whole (eval-mode) module to out_dir/<name>.pt.

    Saving the full module (not just a state_dict) lets the worker load it
    without knowing the architecture, but loading needs ``lodevem.zoo``
    importable and ``torch.load(..., weights_only=False)``.
    """
    from ..store.files import atomic_file  # host-only: the image's copy of the zoo never writes

    path = Path(out_dir) / f"{name}.pt"
    try:
        # Through a Python file object, so a full or read-only disk is an OSError naming the file
        # (torch's own writer reports it as an opaque RuntimeError), and never a truncated .pt.
        with atomic_file(path, "wb") as handle:
            torch.save(build(name), handle)
    except (OSError, RuntimeError) as exc:
        # torch's zip writer turns the disk's OSError into a RuntimeError of its own on the way out
        cause = exc if isinstance(exc, OSError) else exc.__context__
        if isinstance(cause, OSError):
            raise OSError(cause.errno, cause.strerror, str(path)) from None
        raise
    return path


@dataclass(frozen=True)
class ZooListing:
    """What ``lodevem zoo`` answers: the models described, or the files written (never both)."""

    summaries: tuple[ZooSummary, ...] = ()
    written: tuple[Path, ...] = ()


def catalogue(names: Sequence[str] = (), out_dir: Optional[Path] = None) -> ZooListing:
    """``lodevem zoo``: every model (or ``names``) described; with ``out_dir``, ``names`` written
    there as ``.pt`` files instead."""
    if not names or out_dir is None:
        return ZooListing(summaries=tuple(describe_all(names)))
    return ZooListing(written=tuple(write(name, out_dir) for name in names))
