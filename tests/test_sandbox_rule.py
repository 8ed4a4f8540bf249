"""Model files are code: no host-side module may deserialize one.

``.pt`` files are pickles and unpickling runs arbitrary code, so only the ``lodevem/worker/``
package (which runs inside the container or a child process) may call torch's loaders. The one host
module that unpickles at all is ``sklearn_compat.py``, for nn-Meter's predictor data.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"
LOADERS = {("torch", "load"), ("jit", "load"), ("export", "load"), ("serialization", "load")}
PICKLE_OK = {"sklearn_compat.py"}
WORKER = PACKAGE / "worker"


def _calls(tree: ast.AST) -> list[tuple[str, str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            found.append((name, node.func.attr, node.lineno))
    return found


def test_only_the_worker_loads_model_files() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if WORKER in path.parents:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for owner, attr, line in _calls(tree):
            if (owner, attr) in LOADERS:
                offenders.append(f"{path.name}:{line} {owner}.{attr}")
            if owner in ("pickle", "dill", "cloudpickle") and attr in ("load", "loads") and path.name not in PICKLE_OK:
                offenders.append(f"{path.name}:{line} {owner}.{attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "torch" and any(
                a.name == "load" for a in node.names
            ):
                offenders.append(f"{path.name}:{node.lineno} from torch import load")
    assert offenders == []


def test_the_rule_catches_a_load() -> None:
    tree = ast.parse("import torch\nm = torch.load(p, weights_only=False)\n")
    assert ("torch", "load", 2) in _calls(tree)


def test_worker_imports_no_host_module() -> None:
    """Only the worker's own modules (single-dot relative imports) and no ``lodevem`` import."""
    files = sorted(WORKER.glob("*.py"))
    assert WORKER / "__init__.py" in files and WORKER / "__main__.py" in files
    assert not any(p.is_dir() and p.name != "__pycache__" for p in WORKER.iterdir())  # no sub-packages
    own = {p.stem for p in files}
    imported = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                name = "." * node.level + (node.module or "")
                if node.level == 1 and (node.module in own or (node.module is None and
                                                               all(a.name in own for a in node.names))):
                    continue  # a sibling module of the worker package
                imported.add(f"{path.name}: {name}")
            elif isinstance(node, ast.Import):
                imported.update(f"{path.name}: {a.name}" for a in node.names)
    assert not any(name.split(": ", 1)[1].startswith((".", "lodevem")) for name in imported), imported


def test_worker_imports_only_the_stdlib_at_top_level() -> None:
    """Host code imports ``lodevem.worker`` for the protocol: torch, onnx... only inside functions."""
    import sys

    offenders = []
    for path in sorted(WORKER.glob("*.py")):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] not in sys.stdlib_module_names and n != "__future__"]
    assert offenders == []
