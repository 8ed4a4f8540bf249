"""Writing a zoo model to a ``.pt`` file a user can benchmark."""

from __future__ import annotations

from pathlib import Path

import torch

from .registry import build

__all__ = ["write"]


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
