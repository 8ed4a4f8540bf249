"""Model files are code: no host-side module may deserialize one.

``.pt`` files are pickles and unpickling runs arbitrary code, so only the ``lodevem/worker/``
package (which runs inside the container or a child process) may call torch's loaders. The host
never calls ``pickle.load``/``loads``, ``joblib.load`` and the like at all: the one host module that
unpickles, ``sklearn_compat.py`` (nn-Meter's predictor data), does it only through its
``_RestrictedUnpickler``, whose ``find_class`` admits an allow-list.
"""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import runs_in_the_sandbox

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"
LOADERS = {("torch", "load"), ("jit", "load"), ("export", "load"), ("serialization", "load")}
WORKER = PACKAGE / "worker"
# Modules whose load functions unpickle without restriction, and those functions.
PICKLERS = {"pickle", "_pickle", "dill", "cloudpickle", "joblib", "pickle5"}
PICKLE_LOADS = {"load", "loads", "_load", "_loads", "Unpickler", "_Unpickler"}
RESTRICTED = "_RestrictedUnpickler"  # in sklearn_compat.py, the only unpickler the host may run


def _calls(tree: ast.AST) -> list[tuple[str, str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            found.append((name, node.func.attr, node.lineno))
    return found


def _host_sources() -> list[tuple[Path, ast.AST]]:
    """(path, parsed tree) of every host module: the package outside what the sandbox runs (the
    worker and the runtimes' container halves, ``helpers.runs_in_the_sandbox``)."""
    return [(path, ast.parse(path.read_text(), filename=str(path)))
            for path in sorted(PACKAGE.rglob("*.py")) if not runs_in_the_sandbox(path.relative_to(PACKAGE).as_posix())]


def test_only_the_worker_loads_model_files() -> None:
    offenders = []
    for path, tree in _host_sources():
        for owner, attr, line in _calls(tree):
            if (owner, attr) in LOADERS:
                offenders.append(f"{path.name}:{line} {owner}.{attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "torch" and any(
                a.name == "load" for a in node.names
            ):
                offenders.append(f"{path.name}:{node.lineno} from torch import load")
        offenders += _unpickling_offenders(tree, path.name)
    assert offenders == []


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, ``""`` for anything else."""
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return node.id if isinstance(node, ast.Name) else ""


def _unpickling_offenders(tree: ast.AST, filename: str) -> list[str]:
    """Every way host code could unpickle without the restricted unpickler's allow-list."""
    compat = filename == "sklearn_compat.py"
    restricted = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == RESTRICTED]
    allowed_base = {id(b) for c in restricted for b in c.bases} if compat else set()
    offenders = []
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and _dotted(node.value) in PICKLERS and node.attr in PICKLE_LOADS:
            if not (id(node) in allowed_base and node.attr == "Unpickler"):
                offenders.append(f"{where} {_dotted(node)}")  # called, passed around or subclassed
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PICKLERS:
            offenders += [f"{where} from {node.module} import {a.name}"
                          for a in node.names if a.name in PICKLE_LOADS]
        elif isinstance(node, ast.Import):  # an alias would hide pickle.load from this rule
            offenders += [f"{where} import {a.name} as {a.asname}"
                          for a in node.names if a.name in PICKLERS and a.asname]
        elif isinstance(node, ast.ClassDef) and node.name != RESTRICTED and any(
                _dotted(b).split(".")[-1] in (RESTRICTED, "Unpickler", "_Unpickler") for b in node.bases):
            offenders.append(f"{where} class {node.name} subclasses an unpickler")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.endswith(("read_pickle", "load_pickle")):
                offenders.append(f"{where} {name}")
            if any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                   for k in node.keywords):
                offenders.append(f"{where} {name}(allow_pickle=...)")
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if compat and method in ("load", "loads"):  # there, only _RestrictedUnpickler(...).load()
                receiver = node.func.value
                if not (method == "load" and isinstance(receiver, ast.Call) and _dotted(receiver.func) == RESTRICTED):
                    offenders.append(f"{where} {ast.unparse(node.func)}()")
    if compat:
        finds = [f for c in restricted for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "find_class"]
        if len(restricted) != 1 or len(finds) != 1:
            offenders.append(f"{filename}: no {RESTRICTED} with its own find_class")
    return offenders


def test_sklearn_compat_unpickles_only_through_the_restricted_unpickler() -> None:
    path = PACKAGE / "latency" / "sklearn_compat.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    assert _unpickling_offenders(tree, path.name) == []
    loads = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "load" and isinstance(n.func.value, ast.Call)]
    assert len(loads) == 1  # the one _RestrictedUnpickler(...).load(): the rule has something to check


def test_the_rule_catches_plain_unpickling() -> None:
    def offenders(source: str, filename: str = "elsewhere.py") -> list[str]:
        return _unpickling_offenders(ast.parse(source), filename)

    ok = f"import pickle\nclass {RESTRICTED}(pickle.Unpickler):\n    def find_class(self, m, n): ...\n"
    assert offenders(ok + f"x = {RESTRICTED}(f, info).load()\n", "sklearn_compat.py") == []
    assert offenders(ok)  # the same class anywhere else is an unpickler nobody checks
    for bad in ("import pickle\npickle.loads(b)\n", "import pickle\npickle.load(f)\n",
                "import joblib\njoblib.load(p)\n", "import dill\ndill.loads(b)\n",
                "import pickle\npickle.Unpickler(f).load()\n", "import pickle\nu = pickle.Unpickler\n",
                "import pickle\nclass U(pickle.Unpickler):\n    pass\n", "from pickle import loads\n",
                "from joblib import load\n", "import pickle as p\n", "import pandas as pd\npd.read_pickle(p)\n",
                "import numpy as np\nnp.load(p, allow_pickle=True)\n"):
        assert offenders(bad), bad
        assert offenders(ok + bad, "sklearn_compat.py"), bad
    for bad in ("u = pickle.Unpickler(f)\nu.load()\n", f"u = {RESTRICTED}(f, i)\nu.load()\n",
                f"class Wider({RESTRICTED}):\n    pass\n", f"{RESTRICTED}(f, i).loads()\n"):
        assert offenders(ok + bad, "sklearn_compat.py"), bad
    assert offenders(f"import pickle\nclass {RESTRICTED}(pickle.Unpickler):\n    pass\n", "sklearn_compat.py")


def test_the_rule_catches_a_load() -> None:
    tree = ast.parse("import torch\nm = torch.load(p, weights_only=False)\n")
    assert ("torch", "load", 2) in _calls(tree)


def test_worker_imports_no_host_module() -> None:
    """The worker's modules (at any depth) import only the worker, the wire (the records both
    sides speak) and the runtimes' container halves they are handed, never a host module."""
    from test_architecture import _imports

    assert (WORKER / "__init__.py").is_file() and (WORKER / "__main__.py").is_file()
    # lodevem.zoo is model code shipped into the image beside the worker (wire.protocol.WORKER_SOURCES), as
    # the user's --code is mounted: `--arch zoo:NAME` builds one of its reference architectures, and
    # its MAC counter is the one both use (derive.variants: the pruning report). The zoo imports no worker.
    allowed = ("lodevem.worker", "lodevem.wire")
    left = {("lodevem.worker.load.usercode", "lodevem"), ("lodevem.worker.load.usercode", "lodevem.zoo"),
            ("lodevem.worker.derive.variants", "lodevem.zoo.macs")}
    imported = sorted(f"{m} -> {t}" for m, ts in _imports().items() if m.startswith("lodevem.worker")
                      for t in ts if not t.startswith(allowed) and (m, t) not in left)
    assert imported == []


def test_worker_imports_only_the_stdlib_at_top_level() -> None:
    """Host code imports ``lodevem.worker`` for the protocol: torch, onnx... only inside functions."""
    import sys

    offenders = []
    for path in sorted(WORKER.rglob("*.py")):
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


# Calls that import or run code by name or path; the host must never point them at the user's
# --code. The one host use is the restricted unpickler's allow-listed find_class.
DYNAMIC_IMPORTS = {("importlib", "import_module"), ("util", "spec_from_file_location"),
                   ("util", "module_from_spec"), ("runpy", "run_path"), ("runpy", "run_module")}


def test_the_host_never_imports_or_runs_code_by_name() -> None:
    """The user's code (``--code``) is imported only in the sandbox (``worker/load/usercode.py``): host
    modules have no dynamic import, exec/eval or ``sys.path`` edit, except the restricted
    unpickler's allow-listed ``import_module`` (a fixed set of scikit-learn/numpy modules) and the
    runtimes' adapters found by the registry's own names (``runtimes.ADAPTERS``: lodevem's folders,
    the registry's names only, never a name a user typed)."""
    allowed = {PACKAGE / "latency" / "sklearn_compat.py", PACKAGE / "runtimes" / "__init__.py"}
    offenders = []
    for path, tree in _host_sources():
        for owner, attr, line in _calls(tree):
            if (owner, attr) in DYNAMIC_IMPORTS and path not in allowed:
                offenders.append(f"{path.name}:{line} {owner}.{attr}")
            if owner == "path" and attr in ("insert", "append"):
                offenders.append(f"{path.name}:{line} sys.path.{attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "exec", "eval", "__import__", "compile"):
                offenders.append(f"{path.name}:{node.lineno} {node.func.id}()")
    assert offenders == []
