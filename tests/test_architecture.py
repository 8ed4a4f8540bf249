"""The package's shape, checked from its source: the wings behind the pipeline's faces.

Why test it: the layout is what keeps the seams clean (the README's faces cli -> runner ->
predict + measure -> reporter, each stage's code in its own wing), and it erodes one
convenient import at a time. Imports are read with ``ast``, including those inside functions,
since a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lodevem"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """module -> the lodevem modules it imports (``from . import x`` resolves to the module x)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("lodevem") and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``lodevem/__init__.py`` is the package itself: every module 'imports' it implicitly."""
    return {k: {v for v in vs if v != "lodevem"} for k, vs in graph.items()}


def test_no_import_cycle() -> None:
    assert _cycles(_without_package_inits(_imports())) == []


def test_the_rule_catches_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_below_the_runner_imports_runner_or_cli() -> None:
    graph = _imports()
    offenders = sorted(f"{module} -> {target}" for module, targets in graph.items()
                       for target in targets & {"lodevem.runner", "lodevem.cli"}
                       if module not in ("lodevem.cli",))
    assert offenders == []


def test_at_most_sixteen_modules_directly_under_the_package() -> None:
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 16, flat


def test_every_exception_class_is_defined_in_errors() -> None:
    """One module of exceptions; the worker's own (it imports nothing of the host) and Click's
    error subclass in cli.py are the exceptions to the rule."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("errors.py", "cli.py") or rel.startswith("worker/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if any(b.endswith(("Error", "Exception")) or b in ("Cancelled", "DeriveFailed") for b in bases):
                    offenders.append(f"{rel}:{node.lineno} {node.name}")
    assert offenders == []


def test_only_the_client_builds_worker_requests() -> None:
    """One owner of the worker protocol on the host: requests are built in sandbox/client.py."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("sandbox/client.py",) or rel.startswith("worker/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                    "WorkerRequest", "from_json") and "WorkerRequest" in ast.unparse(node.func):
                offenders.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "WorkerRequest":
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


def test_no_module_level_mutable_state() -> None:
    """No module-level dict/list/set bound to a lower-case name, and no module-level
    ``threading.Event``/``Lock``: state belongs to an object a caller owns."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            if value is None:
                continue
            text = ast.unparse(value)
            if any(n == n.lower() and not n.startswith("__") for n in names) and isinstance(
                    value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
                offenders.append(f"{rel}:{node.lineno} {names}")
            if any(call in text for call in ("threading.Event(", "threading.Lock(", "itertools.count(")):
                offenders.append(f"{rel}:{node.lineno} {names} = {text[:40]}")
    assert offenders == []
