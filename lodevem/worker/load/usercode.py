"""The user's own model code (``--code``) and architectures for weights-only files (``--arch``).

Why here, in the sandbox: a pickled module names the classes it needs (``cocoa.model.CocoaNet``)
and a checkpoint needs the class that builds the module. Both mean running the user's code, which
only ever happens in the worker, under the run's memory, pids and time limits.

* ``--code`` entries are package folders (``cocoa/``) or scripts (``train.py``). The folder that
  holds each one goes on ``sys.path``, so ``import cocoa`` and ``import train`` work as they did
  where the file was saved.
* A class pickled from ``__main__`` (defined in the training script itself) is looked up in the
  given scripts, imported under their own module names: their ``if __name__ == "__main__":``
  block does not run. A script is imported only when a pickle asks for ``__main__``.
* ``--arch MODULE:CALLABLE`` (or ``zoo:<name>``) builds the module a state_dict or a training
  checkpoint is loaded into.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Mapping
from typing import Any, Optional

from ...wire.protocol import WorkerError, first_line, progress

# Where common training code keeps the weights inside a checkpoint dict, most specific first.
WEIGHT_KEYS = ("state_dict", "model_state_dict", "model_state", "model", "net", "network", "ema", "model_ema",
               "state_dict_ema", "ema_state_dict", "module", "weights", "params")
# Prefixes wrappers add to every key: DataParallel/DistributedDataParallel, torch.compile.
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


class UserCode:
    """The ``--code`` entries of one request, installed once per worker process."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = [os.path.abspath(p) for p in paths]
        self.scripts = [p for p in self.paths if p.endswith(".py") and os.path.isfile(p)]
        self._loaded: dict[str, types.ModuleType] = {}

    def install(self) -> None:
        """Put the folder holding each entry on ``sys.path`` (first, so the user's code wins)."""
        for path in reversed(self.paths):
            if not os.path.exists(path):
                raise WorkerError("not_found", f"--code {path}: no such file or folder in the sandbox")
            parent = os.path.dirname(path.rstrip(os.sep))
            if parent not in sys.path:
                sys.path.insert(0, parent)
        if self.paths:
            importlib.invalidate_caches()
            progress(f"user code on sys.path: {', '.join(os.path.basename(p.rstrip(os.sep)) for p in self.paths)}")

    def main_attribute(self, name: str) -> Optional[Any]:
        """``name`` as defined in one of the given scripts, for a class pickled from ``__main__``."""
        for script in self.scripts:
            module = self._script(script)
            found = _getattr_path(module, name)
            if found is not None:
                return found
        return None

    def _script(self, path: str) -> types.ModuleType:
        """Import ``path`` as module ``<stem>``: ``__name__`` is not ``"__main__"``, so the
        script's training entry point does not run."""
        if path in self._loaded:
            return self._loaded[path]
        name = os.path.splitext(os.path.basename(path))[0]
        module = sys.modules.get(name)
        if module is None or os.path.abspath(getattr(module, "__file__", "") or "") != path:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise WorkerError("model_failed", f"--code {path}: cannot be imported as a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            progress(f"importing {os.path.basename(path)} as module {name!r} for classes pickled from __main__")
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                del sys.modules[name]
                raise WorkerError("model_failed", f"importing --code {path} raised {type(exc).__name__}: "
                                                  f"{first_line(exc, 200)}") from None
        self._loaded[path] = module
        return module

    def pickle_module(self) -> Any:
        """A ``pickle_module`` for ``torch.load`` whose unpickler resolves ``__main__`` classes
        against the given scripts (torch subclasses ``pickle_module.Unpickler``)."""
        import pickle

        code = self

        class Unpickler(pickle.Unpickler):
            def find_class(self, module: str, name: str) -> Any:
                if module == "__main__":
                    found = code.main_attribute(name)
                    if found is not None:
                        return found
                return super().find_class(module, name)

        shim = types.ModuleType("lodevem_user_pickle")
        shim.Unpickler = Unpickler  # type: ignore[attr-defined]
        shim.load = lambda fh, **kw: Unpickler(fh, **kw).load()  # type: ignore[attr-defined]
        shim.__dict__.update({k: getattr(pickle, k) for k in ("UnpicklingError", "HIGHEST_PROTOCOL", "dumps",
                                                                "loads", "dump", "Pickler")})
        return shim


def _getattr_path(obj: Any, dotted: str) -> Optional[Any]:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def build_arch(arch: str, kwargs: Optional[dict[str, Any]]) -> Any:
    """The module ``--arch`` names, built with ``kwargs``: ``pkg.mod:Class`` or ``zoo:<name>``."""
    kwargs = dict(kwargs or {})
    if arch.startswith("zoo:"):
        from lodevem import zoo  # the worker's own copy of the zoo (baked into the image beside it)

        name = arch[len("zoo:"):]
        if name not in zoo.ZOO:
            raise WorkerError("bad_request", f"--arch {arch}: no zoo model {name!r}; known: {', '.join(zoo.ZOO)}")
        build = zoo.ZOO[name].builder
    else:
        module_name, _, attr = arch.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise WorkerError("unsupported_format", f"--arch {arch}: module {exc.name!r} is not importable in the "
                                                    f"sandbox; pass the folder or file that defines it with --code"
                              ) from None
        except Exception as exc:
            raise WorkerError("model_failed", f"--arch {arch}: importing {module_name} raised {type(exc).__name__}: "
                                              f"{first_line(exc, 200)}") from None
        found = _getattr_path(module, attr)
        if found is None or not callable(found):
            raise WorkerError("bad_request", f"--arch {arch}: {module_name} has no callable {attr!r}")
        build = found
    try:
        built = build(**kwargs)
    except Exception as exc:
        raise WorkerError("model_failed", f"--arch {arch}: building it with {kwargs or 'no arguments'} raised "
                                          f"{type(exc).__name__}: {first_line(exc, 200)}") from None
    import torch

    if not isinstance(built, torch.nn.Module):  # else an AttributeError deep in the load, per command
        raise WorkerError("not_a_model", f"--arch {arch}: the callable returned {type(built).__name__[:80]}, "
                                         "not an nn.Module; name the class (or a function returning an instance)")
    return built


def weights_of(path: str, obj: Any) -> tuple[dict[str, Any], str]:
    """The state_dict inside ``obj`` (a plain state_dict or a checkpoint) and where it was found."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj.state_dict(), "a whole module"
    if not isinstance(obj, Mapping):
        raise WorkerError("not_a_model", f"{path} is a pickled {type(obj).__name__}, not weights for --arch")
    if obj and all(torch.is_tensor(v) for v in obj.values()):
        return _unwrap(dict(obj)), "a state_dict"
    for key in WEIGHT_KEYS:
        value = obj.get(key)
        if isinstance(value, torch.nn.Module):
            return _unwrap(value.state_dict()), f"checkpoint key {key!r} (a module)"
        if isinstance(value, Mapping) and value and all(torch.is_tensor(v) for v in value.values()):
            return _unwrap(dict(value)), f"checkpoint key {key!r}"
    shown = ", ".join(repr(str(k)) for k in list(obj)[:6])
    raise WorkerError("optimizer_checkpoint", f"{path}: no weights found for --arch under the usual checkpoint keys "
                                              f"({', '.join(WEIGHT_KEYS[:6])}...); its keys: {shown}")


def _unwrap(state: dict[str, Any]) -> dict[str, Any]:
    """Remove a wrapper's prefix when every key carries it (``module.conv.weight`` -> ``conv.weight``)."""
    for prefix in _WRAPPER_PREFIXES:
        if state and all(str(k).startswith(prefix) for k in state):
            state = {str(k)[len(prefix):]: v for k, v in state.items()}
    return state


def load_into(path: str, arch: str, module: Any, state: dict[str, Any]) -> None:
    """Load ``state`` strictly; mismatched keys or shapes are one line naming the first of each."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {missing[0]!r}" + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""))
        if unexpected:
            parts.append(f"unexpected {unexpected[0]!r}"
                         + (f" (+{len(unexpected) - 1} more)" if len(unexpected) > 1 else ""))
        raise WorkerError("weights_mismatch", f"{path}: the weights do not fit --arch {arch}: {', '.join(parts)} keys; "
                                              f"check --arch and its keyword arguments")
    for key, tensor in own.items():
        given = state[key]
        if hasattr(given, "shape") and tuple(given.shape) != tuple(tensor.shape):
            raise WorkerError("weights_mismatch", f"{path}: the weights do not fit --arch {arch}: {key!r} is "
                                                  f"{tuple(given.shape)} in the file but {tuple(tensor.shape)} in the "
                                                  f"module; check --arch and its keyword arguments")
    module.load_state_dict(state, strict=True)
