"""Labelled data for accuracy (``--eval-data``): validated on the host, handed to the sandbox as
one normalised ``.npz``.

Why here: the data is the user's file, as hostile as a model. An ``.npz`` is read without pickle
(``worker.evaluate.samples``: the ``.npy`` headers parsed, object arrays refused, rows streamed one sample at
a time, so host memory stays at one sample however large the file) through a descriptor
``regular_fd`` vouched for (no FIFO, no device, size-capped). Everything that can be known before
any container starts is checked here and refused in one line naming the file (exit 2): missing
keys, object arrays, shapes, truncation, NaN/inf inputs, negative labels, a single class. What
depends on the model (its input shape, its number of outputs) is checked against the model later
and lands in the row's accuracy cell.

A ``.pt`` is a pickle: lodevem never unpickles on the host, so it is refused with the one line
that says how to save the same tensors as an ``.npz``. An ImageFolder tree (a folder of class
folders of PNG/JPEG images) is walked here and decoded in the sandbox (``accuracy.imagefolder``,
``worker.evaluate.images``) into the same normalised copy.

The normalised copy (float32 inputs, int64 labels, the first ``limit`` samples, uncompressed so the
worker streams it) is kept in the artifact store (kind ``evaldata``) under the source's content
digest (a file's sha256, a tree's ``ImageTree.sha256``, computed once per run) and the limit (and
a tree's preprocessing and decoder), so a rerun neither re-validates nor rewrites it, and a source
rewritten in place, even to its old size and time, is read anew. Its own sha256 is the data digest
that keys every accuracy record; the manifest names both digests (``report.manifest.DataSetEntry``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..errors import InputError, UnsafeInput
from ..safe_io.files import Kind, _shown, open_regular, sha256_file
from ..worker.evaluate.images import Preprocessing
from ..worker.evaluate.samples import NpzSamples, NpzWriter, SampleFileError

if TYPE_CHECKING:
    from ..sandbox.client import WorkerClient
    from ..store import Artifact, ArtifactStore

# An .npz of evaluation samples: 16 GiB is ~27,000 ImageNet-sized float32 inputs, far more than
# --eval-limit reads; the cap stops a sparse or endless file, not a real data set.
EVAL_DATA = Kind("data file", 16 * 2**30)
DEFAULT_EVAL_LIMIT = 1000
MAX_EVAL_LIMIT = 100_000
# --finetune-data: every sample up to this many (the sandbox holds them in memory while training)
MAX_FINETUNE_SAMPLES = 20_000
DEFAULT_FINETUNE_EPOCHS, MAX_FINETUNE_EPOCHS = 3, 50
READER_VERSION = 1  # bump when the normalised copy changes
KIND = "evaldata"
NPZ, IMAGEFOLDER = "npz", "imagefolder"
CALIBRATION_OPTION = "--calib-data"  # the option whose samples calibrate int8 (labels unread)


@dataclass(frozen=True)
class ImageDecoding:
    """How a run decodes ImageFolder trees: in the sandbox of ``client``, with ``preprocessing``
    (``--preprocess``), within ``timeout_s``."""

    client: "WorkerClient"
    preprocessing: Preprocessing
    timeout_s: float


@dataclass(frozen=True)
class EvalData:
    """The validated data: where the sandbox reads it and what the outputs say about it."""

    source: Path
    option: str  # "--eval-data" (messages name the option)
    path: Path  # the normalised .npz in the store
    sha256: str  # digest of the normalised copy: part of every accuracy record's key
    samples: int  # used (at most the limit)
    available: int  # in the source
    sample_shape: tuple[int, ...]  # C x H x W
    classes: int  # distinct labels among the used samples
    max_label: int
    fmt: str = NPZ  # NPZ | IMAGEFOLDER
    source_sha256: str = ""  # the source's content: the file's sha256, or the tree's (ImageTree.sha256)
    tree_classes: Optional[int] = None  # an ImageFolder tree's class folders (labels 0..tree_classes-1)
    preprocessing: Optional[Preprocessing] = None  # a tree's (None: an .npz's inputs are used as given)
    selection: str = ""  # which samples of the source were used

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (1, *self.sample_shape)

    @property
    def class_count(self) -> Optional[int]:
        """The classes its labels name (a tree's class folders); None for ``--calib-data``, whose
        labels are never read (calibration needs inputs only): not "0 classes"."""
        if self.option == CALIBRATION_OPTION:
            return None
        return self.tree_classes or self.classes

    @property
    def color(self) -> Optional[str]:
        """What a tree's images were decoded to (``auto`` resolved by the images), from the channels."""
        if self.fmt != IMAGEFOLDER:
            return None
        return "gray" if self.sample_shape[:1] == (1,) else "rgb"

    def how_preprocessed(self) -> str:
        """How the inputs were made from the source, for the methods paragraph and the manifest."""
        if self.preprocessing is None:
            return "as given (no resizing or normalisation)"
        return f"decoded in the sandbox with Pillow: {self.preprocessing.describe(self.color)}"

    def describe(self) -> str:
        """One phrase for the methods paragraph and the manifest."""
        shape = "x".join(map(str, self.sample_shape))
        if self.fmt == IMAGEFOLDER:
            return (f"{self.source.name}/ (an ImageFolder tree: {self.selection}; {shape} inputs "
                    f"{self.how_preprocessed()})")
        classes = "labels not used" if self.class_count is None else f"{self.class_count} classes"
        return (f"{self.source.name} ({self.fmt}, {self.samples} of {self.available} samples, {shape} inputs "
                f"{self.how_preprocessed()}, {classes})")

    def labels_problem(self, outputs: Optional[int], model: str) -> Optional[str]:
        """Why these labels cannot be the classes of a model with ``outputs`` outputs (None: they
        can, or the model's outputs are not known): a label beyond them; for a tree, another number
        of class folders (the folder index means the class only for a model of the same classes)."""
        if outputs is None:
            return None
        if self.fmt == IMAGEFOLDER and self.tree_classes is not None and self.tree_classes != outputs:
            return (f"{self.option} {self.source.name}/ has {self.tree_classes} class folders but {model} has "
                    f"{outputs} outputs: a folder's index (its sorted name) is its label only for a model trained "
                    f"on the same {self.tree_classes} classes")
        if self.max_label >= outputs:
            return (f"{self.option} {self.source.name}: label {self.max_label} is outside {model}'s {outputs} "
                    f"outputs (labels must be 0..{outputs - 1})")
        return None


def _refuse(path: Path, option: str, detail: str) -> InputError:
    return InputError(f"{option} {_shown(path)}: {detail}")


def _sha256(path: Path, option: str) -> str:
    """The file's digest through ``safe_io`` (a FIFO, a device, a link to one: refused unread),
    the refusal naming the option."""
    try:
        return sha256_file(path, EVAL_DATA)
    except UnsafeInput as exc:
        raise _refuse(path, option, exc.detail) from None


def prepare_eval_data(path: Path, limit: int, store: "ArtifactStore", option: str = "--eval-data",
                      images: Optional[ImageDecoding] = None) -> EvalData:
    """Validate ``path`` and publish its first ``limit`` samples as the normalised ``.npz``; an
    ``InputError`` (one line, exit 2) for anything unusable. A folder is an ImageFolder tree,
    decoded in the sandbox ``images`` names (``_tree``)."""
    path = Path(path)
    if not 1 <= limit <= MAX_EVAL_LIMIT:
        raise InputError(f"--eval-limit {limit}: expected 1..{MAX_EVAL_LIMIT} samples")
    if not os.path.lexists(path):
        raise _refuse(path, option, "not found")
    if path.is_dir():
        if images is None:
            raise _refuse(path, option, "an ImageFolder tree; this command reads .npz samples only (lodevem "
                                        "start decodes a tree's images in the sandbox)")
        return _tree(path, limit, store, option, images)
    suffix = path.suffix.lower()
    if suffix in (".pt", ".pth"):
        raise _refuse(path, option, "a .pt file is a pickle and lodevem never unpickles on the host; save the same "
                                    "tensors with numpy.savez(path, inputs=x.numpy(), labels=y.numpy())")
    source_sha = _sha256(path, option)  # refuses FIFOs, devices, sockets and files past the cap
    name = f"{source_sha[:32]}-{limit}.npz"
    maker = {"source_sha256": source_sha, "limit": limit, "reader": READER_VERSION}
    kept = _kept(store, path, option, store.lookup(KIND, [name], maker))
    if kept is not None:
        return kept
    with open_regular(path, EVAL_DATA) as fh:
        try:
            samples = NpzSamples(fh)
            info = _normalise(samples, limit, path, option, store, name, maker, source_sha)
        except SampleFileError as exc:
            raise _refuse(path, option, str(exc)) from None
        finally:
            if "samples" in locals():
                samples.close()
    artifact_path = store.path(KIND, name)
    return _from_info(path, option, artifact_path, store.file_sha256(artifact_path), info)


def _normalise(samples: NpzSamples, limit: int, path: Path, option: str, store: "ArtifactStore", name: str,
               maker: dict[str, object], source_sha: str) -> dict[str, object]:
    import numpy as np

    labels = samples.labels_array(limit)
    n = len(labels)
    if labels.min() < 0:
        raise _refuse(path, option, f"label {int(labels.min())} is negative; labels are class indices 0..K-1")
    classes = int(np.unique(labels).size)
    if classes < 2:
        raise _refuse(path, option, f"every one of the {n} samples used has label {int(labels[0])}: a single class "
                                    "says nothing about accuracy (give samples of at least two classes)")
    from ..store import MAX_ARTIFACT_BYTES

    size = n * samples.inputs.row_bytes // max(1, samples.inputs.dtype.itemsize) * 4  # as float32
    if size > MAX_ARTIFACT_BYTES:
        raise _refuse(path, option, f"{n} samples of {list(samples.sample_shape)} are {size / 2**30:.1f} GiB as "
                                    f"float32, over the {MAX_ARTIFACT_BYTES // 2**30} GiB cap: "
                                    + ("lower --eval-limit" if option == "--eval-data" else "use fewer samples"))
    info = {"samples": n, "available": samples.count, "sample_shape": list(samples.sample_shape),
            "classes": classes, "max_label": int(labels.max()), "source_sha256": source_sha,
            "selection": f"the first {n} of {samples.count} samples"}

    store.publish_local(KIND, name, maker, lambda target: _write_samples(target, samples, n, labels, path, option),
                        info)
    return info


def _kept(store: "ArtifactStore", path: Path, option: str, kept: "Optional[Artifact]") -> Optional[EvalData]:
    """The stored normalised copy (its bytes already checked against its sidecar), when the
    sidecar's facts are what ``_normalise`` writes; an edited one is set aside and made again."""
    if kept is None:
        return None
    try:
        found = _from_info(path, option, kept.path, store.file_sha256(kept.path), kept.info)
        if min(found.samples, found.available, found.classes, *found.sample_shape, 1) < 1 or found.max_label < 0:
            raise ValueError("a count below 1")
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        store.discard(kept, f"its record's facts are not what lodevem writes ({str(exc)[:80]})")
        return None
    return found


def _from_info(path: Path, option: str, stored: Path, sha256: str, info: dict[str, Any]) -> EvalData:
    shape = info.get("sample_shape") or ()
    prep = info.get("preprocessing")
    return EvalData(source=path, option=option, path=stored, sha256=sha256, samples=int(info["samples"]),
                    available=int(info["available"]), sample_shape=tuple(int(d) for d in shape),
                    classes=int(info["classes"]), max_label=int(info["max_label"]),
                    fmt=str(info.get("format") or NPZ), source_sha256=str(info.get("source_sha256") or ""),
                    tree_classes=info.get("tree_classes") if isinstance(info.get("tree_classes"), int) else None,
                    preprocessing=Preprocessing.from_dict(prep) if isinstance(prep, dict) else None,
                    selection=str(info.get("selection") or ""))


def _tree(path: Path, limit: int, store: "ArtifactStore", option: str, images: ImageDecoding) -> EvalData:
    """An ImageFolder tree: walked and hashed here (a bad file refused naming it, before any
    container), decoded in the sandbox once per (content, limit, preprocessing, decoder), then
    checked like any normalised copy."""
    import numpy as np

    from ..store import digest
    from .imagefolder import walk_tree, write_pack

    tree = walk_tree(path, limit, option)
    prep, client = images.preprocessing, images.client
    name = f"{tree.sha256[:32]}-{limit}-{digest(prep.to_dict())[:12]}.npz"
    maker = {"tree_sha256": tree.sha256, "limit": limit, "reader": READER_VERSION, "preprocessing": prep.to_dict(),
             "decoder": client.backend.identity, "worker_version": client.worker_version}
    kept = _kept(store, path, option, store.lookup(KIND, [name], maker))
    if kept is not None:
        return kept
    with store.staging() as packed, store.staging() as staged:
        pack = packed / "images.zip"
        write_pack(tree, pack)
        run = client.decode_images(pack, staged / name, prep.to_dict(), images.timeout_s)
        if not run.ok:
            raise _decode_failure(path, option, tree.chosen, run.failure_message("the sandbox decoded no images"))
        with open_regular(staged / name, EVAL_DATA, follow=False) as fh:
            try:
                samples = NpzSamples(fh)
                labels = samples.labels_array()
                finite = all(bool(np.isfinite(x).all()) for x in samples.iter_inputs())
            except SampleFileError as exc:
                raise _refuse(path, option, f"the sandbox's decoded samples are unreadable ({exc})") from None
            finally:
                if "samples" in locals():
                    samples.close()
        if samples.count != len(tree.chosen) or not finite:
            raise _refuse(path, option, "the sandbox's decoded samples do not match the images (or are not finite)")
        info = {"samples": samples.count, "available": tree.images, "sample_shape": list(samples.sample_shape),
                "classes": int(np.unique(labels).size), "max_label": int(labels.max()), "format": IMAGEFOLDER,
                "source_sha256": tree.sha256, "tree_classes": len(tree.classes), "preprocessing": prep.to_dict(),
                "selection": tree.describe()}
        artifact, error = store.publish(KIND, staged, [name], maker, info)
    if artifact is None:
        raise _refuse(path, option, f"the decoded samples could not be kept: {error}")
    return _from_info(path, option, artifact.path, store.file_sha256(artifact.path), info)


def _decode_failure(path: Path, option: str, chosen: tuple[tuple[int, str], ...], message: str) -> InputError:
    """The sandbox's refusal of one image (``<relative path>: <why>``) as the one line naming the
    file under the tree; any other failure (a timeout, the memory limit) names the tree."""
    for _, rel in chosen:
        if message.startswith(f"{rel}: "):
            return _refuse(path / rel, option, message[len(rel) + 2:])
    return _refuse(path, option, f"its images could not be decoded in the sandbox: {message}")


def check_model_shape(data: EvalData, input_shape: Optional[tuple[int, ...]]) -> Optional[str]:
    """Why ``data`` cannot be fed to a model taking ``input_shape`` (None: it can)."""
    if input_shape is None or tuple(input_shape[1:]) == data.sample_shape:
        return None
    return (f"{data.option} samples are {'x'.join(map(str, data.sample_shape))} but the model takes "
            f"{'x'.join(map(str, input_shape))}")


# --calib-data (int8-static calibration): a few hundred inputs are plenty for activation ranges
DEFAULT_CALIBRATION_SAMPLES = 256


def prepare_calibration_data(path: Path, store: "ArtifactStore", limit: int = DEFAULT_CALIBRATION_SAMPLES,
                             option: str = CALIBRATION_OPTION, images: Optional[ImageDecoding] = None) -> EvalData:
    """Calibration inputs for int8-static (``labels`` optional, ignored): validated like
    ``--eval-data`` and written as an uncompressed ``.npz`` holding only ``inputs`` (float32
    N x C x H x W), the file the converter's calibration reads in the sandbox (branch ``convert``:
    the worker request's calibration field). Same refusals, one line, exit 2; a folder is an
    ImageFolder tree, decoded in the sandbox like --eval-data's."""
    path = Path(path)
    if not os.path.lexists(path):
        raise _refuse(path, option, "not found")
    if path.is_dir() and images is not None:  # an ImageFolder tree: its labels come along, unused
        return _tree(path, limit, store, option, images)
    if path.is_dir() or path.suffix.lower() in (".pt", ".pth"):
        raise _refuse(path, option, "expected an .npz with 'inputs' (N x C x H x W); save it with "
                                    "numpy.savez(path, inputs=...)")
    source_sha = _sha256(path, option)
    name = f"{source_sha[:32]}-{limit}-calibration.npz"
    maker = {"source_sha256": source_sha, "limit": limit, "reader": READER_VERSION, "calibration": True}
    kept = store.lookup(KIND, [name], maker)
    if kept is not None and isinstance(kept.info.get("samples"), int):  # the manifest keeps the user's file's digest
        return replace(_from_info(path, option, kept.path, store.file_sha256(kept.path), kept.info),
                       source_sha256=source_sha)

    with open_regular(path, EVAL_DATA) as fh:
        try:
            samples = NpzSamples(fh, labelled=False)
            n = min(limit, samples.count)
            info = {"samples": n, "available": samples.count, "sample_shape": list(samples.sample_shape),
                    "classes": 0, "max_label": 0}

            store.publish_local(KIND, name, maker,
                                lambda target: _write_samples(target, samples, n, None, path, option), info)
        except SampleFileError as exc:
            raise _refuse(path, option, str(exc)) from None
    stored = store.path(KIND, name)
    return replace(_from_info(path, option, stored, store.file_sha256(stored), info), source_sha256=source_sha)


def _write_samples(target: Path, samples: NpzSamples, n: int, labels: Any, path: Path, option: str) -> None:
    """The normalised copy: the first ``n`` inputs as float32, streamed one sample at a time, a
    non-finite sample refused in one line naming it; ``labels`` None for calibration inputs."""
    import numpy as np

    writer = NpzWriter(str(target), n, samples.sample_shape)
    try:
        for i, x in enumerate(samples.iter_inputs(n)):
            if not np.all(np.isfinite(x)):
                raise _refuse(path, option, f"sample {i} of 'inputs' holds NaN or infinite values")
            writer.add(x)
        writer.finish(labels)
    except BaseException:
        writer.abort()
        raise
