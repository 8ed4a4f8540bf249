"""Files meant to be shared carry no path of the user's machine (issue 46).

Why: report.html is mailed to collaborators, the .tex and methods text go into a paper, the CSV
into a supplement; an absolute path names the user's home, their project layout, a temporary
folder. Every string a shared file is written from (the rows' fields, the manifest) passes
through ``Scrub``: an absolute path under the working directory is written relative to it, one
under the results folder relative to that, any other as its file name alone (the manifest keeps
each file's digest, which identifies it better than a path). Applied by the writers themselves,
so no output can forget it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results import PairResult
from ..results.columns import map_text
from .manifest import Manifest, ManifestLike

__all__ = ["Scrub", "shared_manifest", "shared_rows"]

# An absolute path inside any text: a "/" not inside a word or a relative path, then path
# characters (no blanks, quotes or the punctuation that ends a path in prose or code). A path after
# a colon counts (the process backend's identity: "process:", an interpreter path, ":3.11"); a URL's
# "//" never matches (a path's first character is not "/").
_ABSOLUTE = re.compile(r"(?<![\w./~@-])/[^\s/'\"`;,()\[\]{}<>|]+(?:/[^\s/'\"`;,()\[\]{}<>|]*)*")


class Scrub:
    """Rewrites the absolute paths in a text relative to the working directory or ``folder`` (the
    results folder), else to their file name."""

    def __init__(self, folder: Path) -> None:
        bases = []
        for base in (Path.cwd(), Path(folder).absolute()):
            bases += [str(base), os.path.realpath(base)]
        self.bases = [b.rstrip("/") for b in dict.fromkeys(bases) if b not in ("", "/")]

    def path(self, text: str) -> str:
        tail = ""
        while text and text[-1] in ".:":  # the end of a sentence or a "path: message"
            text, tail = text[:-1], text[-1] + tail
        for base in self.bases:
            if text == base:
                return "." + tail
            if text.startswith(base + "/"):
                return text[len(base) + 1:] + tail
        return (os.path.basename(text.rstrip("/")) or text) + tail

    def text(self, value: str) -> str:
        return _ABSOLUTE.sub(lambda m: self.path(m.group(0)), value) if "/" in value else value

    def value(self, value: Any) -> Any:
        """Every string in ``value`` (a mapping, list or tuple of them, nested) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v) for v in value)
        return value


def shared_rows(rows: Sequence[PairResult], folder: Path) -> list[PairResult]:
    """The rows as a shared file may show them (``Scrub``): every text of every part scrubbed; the
    model's path, which holds one path as a whole (a file name may hold "[", "(" or blanks, which
    end a path inside prose), scrubbed as a path, not searched as text."""
    scrub = Scrub(folder)
    out = []
    for row in rows:
        shared = map_text(row, scrub.value)
        if os.path.isabs(row.model.path):
            shared = dataclasses.replace(shared, model=dataclasses.replace(shared.model,
                                                                           path=scrub.path(row.model.path)))
        out.append(shared)
    return out


def shared_manifest(manifest: ManifestLike, folder: Path) -> ManifestLike:
    """The manifest as a shared file may show it (in the form given): no path of the machine, the
    digests kept."""
    if isinstance(manifest, Manifest):
        return Manifest.from_dict(Scrub(folder).value(manifest.to_dict()))
    return dict(Scrub(folder).value(dict(manifest)))
