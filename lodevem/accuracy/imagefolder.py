"""ImageFolder trees as data (``--eval-data DIR``, ``--finetune-data DIR``, ``--calib-data DIR``):
walked on the host, decoded in the sandbox (``worker.evaluate.images``), then the same normalised ``.npz``
as an ``.npz`` the user gave.

Why split so: an image is a file for a large C decoder, as hostile as a model file, so the host
never decodes one. It only walks the tree and reads bytes through ``safe_io`` (every folder and
file opened relative to its parent's descriptor, no link followed at any step: nothing outside
the tree is opened), hashes them and packs the ones it will use into one uncompressed zip; the
sandbox decodes that pack under the work memory, pids, disk, output and time limits.

The rules (docs/accuracy.md states them for users):

* **classes**: the tree's sub-folders, sorted by name; a sample's label is its folder's index
  (torchvision's ``ImageFolder.find_classes``). Images may sit at any depth under a class folder.
* **images**: files named ``*.png``, ``*.jpg``, ``*.jpeg`` (any case); other regular files are
  never opened (counted as ignored).
* **a bad file is refused** in one line naming it, exit 2, never skipped: a symbolic link anywhere
  in the tree (it could point out of it), a FIFO, socket or device, an image of more than
  ``MAX_IMAGE_BYTES`` or of 0 bytes, a class folder without an image; what only decoding shows (a
  truncated image, a non-image named ``.png``, a decompression bomb) is refused by the sandbox the
  same way, before any model runs.
* **caps**: ``MAX_TREE_ENTRIES`` entries walked, ``MAX_DEPTH`` folders deep, the pack at most the
  store's ``MAX_ARTIFACT_BYTES``, each image ``worker.evaluate.images.MAX_IMAGE_PIXELS`` pixels; the host
  holds at most ``limit`` chosen paths and one image's bytes at a time, however large the tree.
* **which images**: all of them when the tree holds at most ``limit``; else a deterministic sample
  of ``limit``: those whose relative path has the smallest sha256 (the same set whatever the walk
  order, spread over the classes), used in the tree's sorted order.
* **the digest**: sha256 over the class names and each used image's label, path and content
  (streamed, once per run): the key of the decoded samples in the store, so a tree edited in
  place, even to the same sizes and times, is decoded anew (issue 38).
"""

from __future__ import annotations

import heapq
import json
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError, UnsafeInput
from ..safe_io import Kind, folder_fd, read_bytes
from ..safe_io.files import _shown
from ..store import MAX_ARTIFACT_BYTES, bytes_digest, digest
from ..worker.evaluate.images import IMAGE_MEMBER, LISTING, MAX_IMAGE_BYTES, is_image_name

MAX_TREE_ENTRIES = 2_000_000  # entries walked (ImageNet's training set is 1.3 million files)
MAX_DEPTH = 16  # folders below the tree's root
IMAGE_FILE = Kind("image", MAX_IMAGE_BYTES)
_PACK_TIME = (1980, 1, 1, 0, 0, 0)  # fixed member times: the pack's bytes depend on the images only


@dataclass(frozen=True)
class ImageTree:
    """A walked, hashed ImageFolder tree: what the sandbox will decode and what it stands for."""

    root: Path
    option: str
    classes: tuple[str, ...]
    chosen: tuple[tuple[int, str], ...]  # (label, path relative to the root), in the tree's order
    images: int  # image files in the tree
    ignored: int  # other regular files, never opened
    sha256: str  # the classes and every chosen image's (label, path, content)
    pack_bytes: int

    @property
    def selection(self) -> str:
        if len(self.chosen) == self.images:
            return f"all {self.images} images"
        return (f"{len(self.chosen)} of {self.images} images (those whose path has the smallest sha256: a "
                "deterministic sample spread over the classes)")

    def describe(self) -> str:
        ignored = f"; {self.ignored} other files ignored" if self.ignored else ""
        return f"{len(self.classes)} class folders, {self.selection}{ignored}"


def _refuse(path: Path, option: str, detail: str) -> InputError:
    return InputError(f"{option} {_shown(path)}: {detail}")


def walk_tree(root: Path, limit: int, option: str = "--eval-data") -> ImageTree:
    """Walk ``root`` (no link followed), choose at most ``limit`` images and hash them; an
    ``InputError`` naming the file for anything the rules above refuse."""
    root = Path(root)
    top = _open_folder(root, Path(), option)
    try:
        classes = sorted(e.name for e in _entries(top, root, option) if _kind(e, root, option) == "folder")
    finally:
        os.close(top)
    if len(classes) < 2:
        raise _refuse(root, option, f"{len(classes)} class folder(s); an ImageFolder tree holds one folder per "
                                    "class (at least two), each with its .png/.jpg/.jpeg images")
    walk = _Walk(root, option, limit)
    for label, name in enumerate(classes):
        if walk.folder(Path(name), label, 1) == 0:
            raise _refuse(root / name, option, "a class folder without a .png/.jpg/.jpeg image (torchvision's "
                                               "ImageFolder refuses it too); remove it or add its images")
    chosen = tuple(sorted((label, rel) for _, label, rel in walk.heap))
    parts: list[Any] = [list(classes)]
    size = 0
    for label, rel in chosen:
        data = _image_bytes(root, rel, option)
        size += len(data) + 200  # a stored member's headers
        if size > MAX_ARTIFACT_BYTES:
            raise _refuse(root, option, f"the {len(chosen)} images used hold more than "
                                        f"{MAX_ARTIFACT_BYTES // 2**30} GiB; lower --eval-limit")
        parts.append([label, rel, bytes_digest(data)])
    return ImageTree(root, option, tuple(classes), chosen, walk.images, walk.ignored, digest(parts), size)


class _Walk:
    """The walk's state: entries seen, images found, and the ``limit`` chosen (a heap whose top
    is the chosen path with the largest sha256, replaced by any smaller one)."""

    def __init__(self, root: Path, option: str, limit: int) -> None:
        self.root, self.option, self.limit = root, option, limit
        self.entries = self.images = self.ignored = 0
        self.heap: list[tuple[bytes, int, str]] = []  # (inverted sha256 of the path, label, path)

    def folder(self, rel: Path, label: int, depth: int) -> int:
        """Images under ``rel`` (a class folder or one below it)."""
        if depth > MAX_DEPTH:
            raise _refuse(self.root / rel, self.option, f"more than {MAX_DEPTH} folders deep")
        found = 0
        fd = _open_folder(self.root, rel, self.option)
        try:
            for entry in _entries(fd, self.root / rel, self.option):
                self.entries += 1
                if self.entries > MAX_TREE_ENTRIES:
                    raise _refuse(self.root, self.option, f"more than {MAX_TREE_ENTRIES:,} files and folders; "
                                                          "point it at a split of the data set")
                kind = _kind(entry, self.root / rel, self.option)
                if kind == "folder":
                    found += self.folder(rel / entry.name, label, depth + 1)
                elif kind == "image":
                    found += 1
                    self._offer(label, (rel / entry.name).as_posix(), entry)
                else:
                    self.ignored += 1
        finally:
            os.close(fd)
        return found

    def _offer(self, label: int, rel: str, entry: os.DirEntry[str]) -> None:
        size = entry.stat(follow_symlinks=False).st_size
        if size == 0 or size > MAX_IMAGE_BYTES:
            raise _refuse(self.root / rel, self.option, "an empty file, not an image" if size == 0 else
                          f"{size} bytes; an image may be at most {MAX_IMAGE_BYTES // 2**20} MiB")
        self.images += 1
        inverted = bytes(255 - b for b in bytes.fromhex(digest(rel)))
        item = (inverted, label, rel)
        if len(self.heap) < self.limit:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:  # its sha256 is smaller than the largest chosen one's
            heapq.heapreplace(self.heap, item)


def _open_folder(root: Path, rel: Path, option: str) -> int:
    """A descriptor of ``root/rel``, each component opened relative to its parent, no link followed."""
    try:
        return folder_fd(root, rel)
    except UnsafeInput as exc:
        raise _refuse(root / rel, option, exc.detail) from None


def _entries(fd: int, folder: Path, option: str) -> Iterator[os.DirEntry[str]]:
    """A folder's entries as the file system lists them, one at a time (never all held: a class
    folder may hold a million images; the choice does not depend on their order)."""
    try:
        with os.scandir(fd) as found:
            yield from found
    except OSError as exc:
        raise _refuse(folder, option, f"cannot list the folder: {exc.strerror or exc}") from None


def _kind(entry: os.DirEntry[str], folder: Path, option: str) -> str:
    """``folder``, ``image`` or ``other`` (a regular file that is not an image); a link, FIFO,
    socket or device is refused, whatever its name."""
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        raise _refuse(folder / entry.name, option, "a symbolic link; lodevem follows no link in an ImageFolder tree "
                                                   "(it could point out of the tree): copy the file in instead")
    if stat.S_ISDIR(mode):
        return "folder"
    if not stat.S_ISREG(mode):
        what = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise _refuse(folder / entry.name, option, f"{what}, not a file; an ImageFolder tree holds folders and files")
    return "image" if is_image_name(entry.name) else "other"


def _image_bytes(root: Path, rel: str, option: str) -> bytes:
    try:
        return read_bytes(rel, IMAGE_FILE, within=root)
    except UnsafeInput as exc:
        raise _refuse(root / rel, option, exc.detail) from None


def write_pack(tree: ImageTree, target: Path) -> None:
    """The chosen images, byte for byte, in one uncompressed zip with their listing (the sandbox's
    one input); an image that changed since ``walk_tree`` hashed it is refused."""
    listing = {"classes": list(tree.classes), "files": [[label, rel] for label, rel in tree.chosen]}
    parts: list[Any] = [list(tree.classes)]
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as pack:
        pack.writestr(zipfile.ZipInfo(LISTING, _PACK_TIME), json.dumps(listing, allow_nan=False))
        for i, (label, rel) in enumerate(tree.chosen):
            data = _image_bytes(tree.root, rel, tree.option)
            parts.append([label, rel, bytes_digest(data)])
            pack.writestr(zipfile.ZipInfo(IMAGE_MEMBER.format(i), _PACK_TIME), data)
    if digest(parts) != tree.sha256:
        raise _refuse(tree.root, tree.option, "the images changed while lodevem read them; run again")
    target.chmod(0o644)
