"""Model files are code: no host-side module may deserialize one.

``.pt`` files are pickles and unpickling runs arbitrary code, so only ``lodevem/worker.py``
(which runs inside the container or a child process) may call torch's loaders. The one host
module that unpickles at all is ``sklearn_compat.py``, for nn-Meter's predictor data.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"
LOADERS = {("torch", "load"), ("jit", "load"), ("export", "load"), ("serialization", "load")}
PICKLE_OK = {"sklearn_compat.py"}


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
        if path.name == "worker.py":
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
    tree = ast.parse((PACKAGE / "worker.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert not any(name.startswith(".") or name.startswith("lodevem") for name in imported), imported
