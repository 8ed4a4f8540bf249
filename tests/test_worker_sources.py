"""The worker version covers every file the worker can run (issue 48).

Why: the host keys the exports, conversions and derivations it caches on the worker version, so a
file the worker runs that the version does not digest lets results made by old code be served
after an edit. The files are one list (``wire.protocol.WORKER_SOURCES``): what the image build
bakes, what the version digests, and (checked here) a superset of what the worker imports.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from test_architecture import PACKAGE, _imports

from lodevem.wire.protocol import WORKER_RELEASE, WORKER_SOURCES, WORKER_VERSION, source_digest, worker_source_files

# Imports of the worker's closure that only the host takes (inside a function the worker never
# calls): the zoo's writer of model files uses the host's atomic writes.
HOST_ONLY_IMPORTS = {("lodevem.zoo.files", "lodevem.store.files")}


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "lodevem"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def test_the_version_is_the_release_and_the_digest_of_the_package() -> None:
    assert WORKER_VERSION == f"{WORKER_RELEASE}+{source_digest(PACKAGE)}"


def test_every_source_file_is_in_the_digest(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = source_digest(root)
    files = worker_source_files(root)
    rel = {p.relative_to(root).as_posix() for p in files}
    assert {"__init__.py", "version.py", "worker/__main__.py", "zoo/macs.py"} <= rel
    assert not any("__pycache__" in r or r.endswith(".pyc") for r in rel)
    for path in files:
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert source_digest(root) != before, path.relative_to(root)
        path.write_bytes(original)
    assert source_digest(root) == before  # deterministic: same bytes, same digest, wherever the copy is


def test_a_file_in_a_new_subfolder_changes_the_version(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = source_digest(root)
    for entry in WORKER_SOURCES:
        if (root / entry).is_dir():
            added = root / entry / "newsub" / "deeper" / "mod.py"
            added.parent.mkdir(parents=True)
            added.write_text("X = 1\n")
            assert source_digest(root) != before, entry
            shutil.rmtree(root / entry / "newsub")
    assert source_digest(root) == before


def test_a_file_the_worker_never_runs_leaves_the_version(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = source_digest(root)
    (root / "cli.py").write_text((root / "cli.py").read_text() + "\n# edited\n")
    (root / "worker" / "__pycache__").mkdir(exist_ok=True)
    (root / "worker" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")
    assert source_digest(root) == before


def _in_sources(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return any(rel.as_posix() == Path(entry).with_suffix("").as_posix() or entry in rel.parts[:1]
               for entry in WORKER_SOURCES) or module == "lodevem"


def test_everything_the_worker_imports_is_in_its_sources() -> None:
    """The import closure of ``python -m lodevem.worker`` and of the runtimes' container halves
    stays inside ``WORKER_SOURCES``, so the image has every module it runs and the version digests it."""
    graph = _imports()
    seen: set[str] = set()
    # the worker finds each runtime's container half by the registry's name (worker.guest), so
    # the halves and what they import are started from too
    halves = [m for m in graph if m.startswith("lodevem.runtimes.") and m.rpartition(".")[2] in ("guest", "convert")]
    assert len(halves) >= 4
    todo = ["lodevem.worker.__main__", *halves]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += [t for t in graph.get(module, ()) if (module, t) not in HOST_ONLY_IMPORTS]
    assert sorted(m for m in seen if not _in_sources(m)) == []
