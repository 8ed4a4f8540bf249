"""The host's view of the user's model code (``--code``) and ``--arch``: checked, hashed, never run.

The host only reads the bytes of the code to hash them (the digest joins every cache key and the
manifest: edited code means new exports and measurements); importing it is the worker's job, in
the sandbox. Backends mount each entry read-only (Docker) or pass the path (process backend).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..errors import InputError
from ..safe_io import CODE_TOTAL_BYTES, Kind, clip, hash_into, read_text

__all__ = ["ModelLoading", "code_digest", "with_code_hint"]

# Files that are not code and would make the digest depend on the last run (bytecode caches).
_SKIPPED_DIRS = {"__pycache__", ".git", ".hg", ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_MAX_CODE_FILES = 20_000  # a --code folder larger than this is a home directory, not a package
_ARCH = re.compile(r"^(zoo:[\w-]+|[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)$")


def _code_files(root: Path) -> Iterable[Path]:
    """Every entry of a --code folder to hash, links included (``os.walk`` does not descend into
    linked folders; ``safe_io.hash_into`` hashes a link as its target string)."""
    if root.is_file():
        yield root
        return
    count = 0
    for folder, dirs, files in os.walk(root):
        files = [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            if name.endswith(_SKIPPED_SUFFIXES):
                continue
            count += 1
            if count > _MAX_CODE_FILES:
                raise InputError(f"--code {root}: more than {_MAX_CODE_FILES} files; pass the package folder "
                                 f"itself, not a folder that contains it")
            yield Path(folder) / name


def code_digest(paths: Iterable[Path]) -> str:
    """sha256 over every code file's relative path and bytes (bytecode caches skipped), streamed
    through ``safe_io.hash_into``: links hashed as links, FIFOs and devices refused, each file and
    all of them together size-capped (``safe_io.CODE_FILE``, ``CODE_TOTAL_BYTES``)."""
    digest = hashlib.sha256()
    budget = [CODE_TOTAL_BYTES]
    for root in paths:
        digest.update(b"entry\0" + root.name.encode() + b"\0")
        for path in _code_files(root):
            rel = path.relative_to(root).as_posix() if root.is_dir() else path.name
            digest.update(os.fsencode(rel) + b"\0")
            hash_into(digest, path, budget)
    return digest.hexdigest()


# --arch-kwargs are a callable's keyword arguments (widths, class counts), not data: a few hundred
# bytes in practice. Past these they are refused before json parses them (a 5,000-deep nesting
# is a RecursionError in json, 128 KB no longer fits an exec argument list).
MAX_ARCH_KWARGS_BYTES = 16 * 2**10
MAX_ARCH_KWARGS_DEPTH = 16


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def parse_arch_kwargs(text: str) -> dict[str, Any]:
    """``--arch-kwargs`` as a dict, within ``MAX_ARCH_KWARGS_BYTES`` and ``MAX_ARCH_KWARGS_DEPTH``;
    each problem is one ``InputError`` naming the option."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_ARCH_KWARGS_BYTES:
        raise InputError(f"--arch-kwargs: {size} bytes; at most {MAX_ARCH_KWARGS_BYTES // 1024} KiB of JSON "
                         "(keyword arguments of the --arch callable)")
    # Brackets bound the depth before json recurses into them: a string holding brackets only
    # overestimates, which the exact check below corrects.
    opened = max_open = 0
    for char in text:
        if char in "[{":
            opened += 1
            max_open = max(max_open, opened)
        elif char in "]}":
            opened -= 1
    too_deep = max_open > 4 * MAX_ARCH_KWARGS_DEPTH
    kwargs: Any = None
    if not too_deep:
        try:
            kwargs = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            too_deep = True
        except ValueError as exc:
            raise InputError(f"--arch-kwargs: not valid JSON ({clip(str(exc))})") from None
    if too_deep or _depth(kwargs) > MAX_ARCH_KWARGS_DEPTH:
        raise InputError(f"--arch-kwargs: nested deeper than {MAX_ARCH_KWARGS_DEPTH} levels")
    if not isinstance(kwargs, dict):
        raise InputError(f"--arch-kwargs: expected a JSON object of keyword arguments, got {clip(text, 80)!r}")
    return kwargs


@dataclass(frozen=True)
class ModelLoading:
    """How the sandbox loads the user's files beyond their bytes; one per run.

    ``code``: package folders or ``.py`` scripts (absolute); ``arch``: ``MODULE:CALLABLE`` or
    ``zoo:NAME`` for files that hold only weights, built with ``arch_kwargs``.
    """

    code: tuple[Path, ...] = ()
    digest: str = ""
    arch: Optional[str] = None
    arch_kwargs: Optional[dict[str, Any]] = None

    @classmethod
    def from_options(cls, code: Iterable[Path | str] = (), arch: Optional[str] = None,
                     arch_kwargs: Optional[str] = None) -> "ModelLoading":
        """Validate ``--code``/``--arch``/``--arch-kwargs``; each problem is one ``InputError``."""
        entries: list[Path] = []
        for raw in code:
            path = Path(raw).expanduser()
            if not path.exists():
                raise InputError(f"--code {raw}: no such file or folder")
            if path.is_file() and path.suffix != ".py":
                raise InputError(f"--code {raw}: expected a package folder or a .py file")
            if not path.is_file() and not path.is_dir():
                raise InputError(f"--code {raw}: expected a package folder or a .py file")
            resolved = path.resolve()
            if resolved.name in {e.name for e in entries}:
                raise InputError(f"--code {raw}: another --code entry is also named {resolved.name!r}; "
                                 f"Python could import only one of them")
            entries.append(resolved)
        if arch is not None and not _ARCH.match(arch):
            raise InputError(f"--arch {arch!r}: expected MODULE:CALLABLE (e.g. cocoa.model:CocoaNet) or zoo:NAME")
        kwargs = None
        if arch_kwargs is not None:
            if arch is None:
                raise InputError("--arch-kwargs needs --arch")
            kwargs = parse_arch_kwargs(arch_kwargs)
        return cls(code=tuple(entries), digest=code_digest(entries) if entries else "", arch=arch,
                   arch_kwargs=kwargs)

    @property
    def key(self) -> str:
        """What cache keys add for this loading ('' when the file loads on its own)."""
        if not self.code and self.arch is None:
            return ""
        return json.dumps([self.digest, self.arch, self.arch_kwargs], sort_keys=True, allow_nan=False)

    def describe(self) -> dict[str, Any]:
        """For the manifest."""
        return {"code": [str(p) for p in self.code], "code_sha256": self.digest or None, "arch": self.arch,
                "arch_kwargs": self.arch_kwargs}


# --- the --code hint of a refused file ---------------------------------------------------------
# The worker can only say which module or class the pickle wanted; where it lives is on the
# host. A hint naming ``--code ./cocoa`` when there is no ./cocoa sends the user hunting, so the
# host names a path only after it has seen it exist: the module's folder or file in the current
# folder or beside the model file, or a script there that defines the __main__ class. The names
# come from the worker's reply, so only plain identifiers are used, as one path component (stat
# only) or as a literal searched for in at most _HINT_SCRIPTS small .py files (never imported).
_MISSING_MODULE = re.compile(r"module '([A-Za-z_]\w*)(?:\.[\w.]*)?' is not importable")
_MISSING_MAIN_CLASS = re.compile(r"class '([A-Za-z_]\w*)' was defined in the script that saved it")
_HINT_SCRIPTS, _HINT_SCRIPT_BYTES = 200, 512 * 1024
_HINT_SCRIPT = Kind("script", _HINT_SCRIPT_BYTES)


def _shown(path: Path, cwd: Path) -> str:
    try:
        text = path.relative_to(cwd).as_posix()
    except ValueError:
        text = str(path)
    return text + ("/" if path.is_dir() else "")


def _search_folders(model_path: Path, cwd: Path) -> list[Path]:
    folders = [cwd, model_path.parent.resolve(), model_path.parent.resolve().parent]
    return list(dict.fromkeys(f for f in folders if f.is_dir()))


def _defines_class(script: Path, name: str) -> bool:
    try:
        text = read_text(script, _HINT_SCRIPT)  # a regular file within the cap, else no hint
    except InputError:
        return False
    return re.search(rf"^\s*class\s+{re.escape(name)}\b", text, re.MULTILINE) is not None


def with_code_hint(message: str, model_path: Path, cwd: Optional[Path] = None) -> str:
    """``message`` (a worker's refusal of ``model_path``) plus where the missing code is, when
    the host can see it: ``(found: --code cocoa/)``; else says where it looked."""
    cwd = (cwd or Path.cwd()).resolve()
    folders = _search_folders(model_path, cwd)
    where = " or ".join(_shown(f, cwd) if f != cwd else "the current folder" for f in folders)
    module = _MISSING_MODULE.search(message)
    if module:
        name = module.group(1)
        found = [c for f in folders for c in (f / name, f / f"{name}.py") if c.exists()]
        if found:
            return f"{message} (found: --code {_shown(found[0], cwd)})"
        return f"{message} (no {name}/ or {name}.py in {where}: pass the path where it is)"
    main_class = _MISSING_MAIN_CLASS.search(message)
    if main_class:
        name = main_class.group(1)
        scripts = [s for f in folders for s in sorted(f.glob("*.py"))[:_HINT_SCRIPTS]]
        found = [s for s in scripts if _defines_class(s, name)]
        if found:
            return f"{message} (found: --code {_shown(found[0], cwd)} defines class {name})"
        return f"{message} (no .py file in {where} defines class {name}: pass the script that does)"
    return message
