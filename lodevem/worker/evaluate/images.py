"""ImageFolder trees (``--eval-data DIR`` and the other data options): the images decoded with
Pillow in the sandbox, never on the host (action ``decode-images``, in the benchmark image).

Why in the sandbox: an image decoder is a large C parser fed the user's bytes; PNG and JPEG
decoders have had memory-corruption bugs, and a decompression bomb (a small file declaring
gigapixels) takes all the memory of whoever decodes it. So the host (``lodevem.accuracy.imagefolder``)
only walks the tree (no link followed) and packs the files it will use, byte for byte, into one
uncompressed zip, the *pack*: ``listing.json`` (class names and one ``[label, relative path]`` per
image) and one member per image (``image-<i>``). The sandbox gets that one read-only file. Here:

* Pillow opens each image restricted to PNG and JPEG; its header's size is checked against
  ``MAX_IMAGE_PIXELS`` (below Pillow's own 89,478,485) before a pixel is decoded, so a bomb is
  refused by what it declares, never decoded;
* each image is decoded, converted (``Preprocessing.color``), resized, centre-cropped, scaled to
  [0, 1] and normalised as ``Preprocessing`` says (torchvision's ``Resize(int)``, ``CenterCrop``,
  ``ToTensor``, ``Normalize``, with the same Pillow calls), and written one sample at a time into the
  normalised ``.npz`` (``samples.NpzWriter``) that the evaluation reads;
* a file Pillow cannot read (truncated, not an image, too many pixels) is refused naming the file:
  one bad image stops the data set with one line, it is never silently skipped (docs/accuracy.md).

``Preprocessing`` is the one home of the options: parsed from ``--preprocess`` on the host, passed
in the request, stated in the manifest and the methods paragraph.
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings
import zipfile
from dataclasses import asdict, dataclass
from typing import Any, Optional

from ...wire.file_sections import DerivedFile
from ...wire.protocol import WorkerError, first_line, progress
from ...wire.replies import DecodeImagesReply
from ...wire.requests import DecodeImagesRequest

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
PIL_FORMATS = ("PNG", "JPEG")
# Pixels one image may declare: a 40-megapixel photo decodes to 120 MB of RGB. Below Pillow's own
# bomb guard (PIL.Image.MAX_IMAGE_PIXELS, 89,478,485), which warns only, and errs at twice that.
MAX_IMAGE_PIXELS = 40_000_000
MAX_IMAGE_BYTES = 64 * 2**20  # one image file (the host refuses a larger one before packing it)
MAX_LISTING_BYTES = 64 * 2**20  # listing.json of 100,000 images is ~10 MB
MAX_SIDE = 8192  # resize / crop sizes
LISTING, IMAGE_MEMBER = "listing.json", "image-{}"
GREY_MODES = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "I;16N", "F")
COLORS = ("auto", "rgb", "gray")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Preprocessing:
    """How an image becomes a model input, in torchvision's order: colour, ``resize`` (the shorter
    side to that many pixels, bilinear, aspect kept), ``crop`` (centre, square), scaled to [0, 1],
    then ``(x - mean) / std`` per channel. ``color``: ``rgb``, ``gray``, or ``auto`` (gray when every
    image used is single-channel, else RGB). ``preset``: the name the options came from."""

    resize: Optional[int] = None
    crop: Optional[int] = None
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    color: str = "auto"
    preset: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ("resize", "crop"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 1 <= value <= MAX_SIDE):
                raise ValueError(f"{name}={value!r}: expected a whole number of pixels 1..{MAX_SIDE}")
        if self.color not in COLORS:
            raise ValueError(f"color={self.color!r}: expected one of {', '.join(COLORS)}")
        for name in ("mean", "std"):
            values = getattr(self, name)
            if values is None:
                continue
            if (not isinstance(values, tuple) or len(values) not in (1, 3)
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                               for v in values)):
                raise ValueError(f"{name}: expected 1 or 3 finite numbers (one per channel)")
        if self.std is not None and any(v <= 0 for v in self.std):
            raise ValueError("std: every value must be above 0")
        if (self.mean is None) != (self.std is None):
            raise ValueError("mean and std go together: give both, or neither")

    @classmethod
    def parse(cls, text: str) -> "Preprocessing":
        """``imagenet`` or ``key=value`` pairs: ``resize=256,crop=224,mean=0.485/0.456/0.406,
        std=0.229/0.224/0.225,color=rgb`` (any subset; ValueError says what is wrong)."""
        text = text.strip()
        if text.lower() in PRESETS:
            return PRESETS[text.lower()]
        options: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",") if p.strip()):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in ("resize", "crop", "mean", "std", "color"):
                raise ValueError(f"{part!r}: expected a preset ({', '.join(PRESETS)}) or key=value with key resize, "
                                 "crop, mean, std or color")
            try:
                options[key] = (tuple(float(v) for v in value.split("/")) if key in ("mean", "std")
                                else value.strip().lower() if key == "color" else int(value))
            except ValueError:
                raise ValueError(f"{part!r}: not a number") from None
        return cls(**options)

    @classmethod
    def from_dict(cls, data: Any) -> "Preprocessing":
        if not isinstance(data, dict):
            raise ValueError("preprocessing must be an object")
        known = {k: v for k, v in data.items() if k in ("resize", "crop", "mean", "std", "color", "preset")}
        for key in ("mean", "std"):
            if isinstance(known.get(key), list):
                known[key] = tuple(known[key])
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def describe(self, color: Optional[str] = None) -> str:
        """One phrase for the methods paragraph and the manifest (``color``: what ``auto`` chose)."""
        steps = []
        if self.resize:
            steps.append(f"shorter side resized to {self.resize} px (bilinear)")
        if self.crop:
            steps.append(f"centre-cropped to {self.crop}x{self.crop}")
        steps.append({"rgb": "RGB", "gray": "greyscale"}.get(color or self.color,
                                                             "RGB (greyscale when every image is single-channel)")
                     + ", scaled to [0, 1]")
        if self.mean is not None and self.std is not None:
            steps.append(f"normalised with mean {_numbers(self.mean)} and std {_numbers(self.std)}")
        return ", ".join(steps) + (f" (preset {self.preset})" if self.preset else "")


def _numbers(values: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{v:g}" for v in values) + ")"


PRESETS = {"imagenet": Preprocessing(resize=256, crop=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, color="rgb",
                                     preset="imagenet")}


def is_image_name(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


# -- the action ------------------------------------------------------------------------------------

def action_decode_images(req: DecodeImagesRequest, res: DecodeImagesReply) -> None:
    """The pack (``model_path``) decoded into the normalised ``.npz`` at ``derive_out``."""
    import numpy as np
    from PIL import Image

    from .samples import NpzWriter

    if not req.derive_out:
        raise WorkerError("bad_request", "decode-images needs derive_out (where to write the samples)")
    try:
        prep = Preprocessing.from_dict(req.preprocess or {})
    except (ValueError, TypeError) as exc:
        raise WorkerError("bad_request", f"preprocessing: {first_line(exc)}") from None
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS  # Pillow's own guard too, at lodevem's cap
    with zipfile.ZipFile(req.model_path) as pack:
        classes, files = _listing(pack)
        headers = [_header(Image, pack, i, rel) for i, (_, rel) in enumerate(files)]
        color = prep.color if prep.color != "auto" else (
            "gray" if all(mode in GREY_MODES for _, _, mode in headers) else "rgb")
        sizes = {_final_size(w, h, prep) for w, h, _ in headers}
        if len(sizes) > 1:
            (w0, h0), (w1, h1) = sorted(sizes)[:2]
            first = files[next(i for i, (w, h, _) in enumerate(headers) if _final_size(w, h, prep) == (w0, h0))][1]
            other = files[next(i for i, (w, h, _) in enumerate(headers) if _final_size(w, h, prep) == (w1, h1))][1]
            raise WorkerError("bad_request", f"{first} is {w0}x{h0} but {other} is {w1}x{h1}: images of different "
                                             "sizes need --preprocess resize=N,crop=M (e.g. the imagenet preset)")
        width, height = sizes.pop()
        channels = 1 if color == "gray" else 3
        for name, values in (("mean", prep.mean), ("std", prep.std)):
            if values is not None and len(values) not in (1, channels):
                raise WorkerError("bad_request", f"preprocessing {name} has {len(values)} values but the images are "
                                                 f"{channels}-channel ({color})")
        mean = np.asarray(prep.mean or (0.0,), dtype=np.float32).reshape(-1, 1, 1)
        std = np.asarray(prep.std or (1.0,), dtype=np.float32).reshape(-1, 1, 1)
        tmp = f"{req.derive_out}.tmp{os.getpid()}"
        writer = NpzWriter(tmp, len(files), (channels, height, width))
        try:
            step = max(1, len(files) // 10)
            for i, (_, rel) in enumerate(files):
                pixels = _decoded(Image, pack, i, rel, color, prep)
                array = np.asarray(pixels, dtype=np.float32) / 255.0
                array = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
                writer.add((array - mean) / std)
                if (i + 1) % step == 0 or i + 1 == len(files):
                    progress(f"decoded {i + 1}/{len(files)} images")
            writer.finish(np.asarray([label for label, _ in files], dtype=np.int64))
        except BaseException:
            writer.abort()
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    os.replace(tmp, req.derive_out)
    check = (f"{len(files)} images of {len(classes)} classes decoded with Pillow {_pillow_version()} to "
             f"{channels}x{height}x{width} ({color})")
    res.derived = DerivedFile(os.path.abspath(req.derive_out), "npz", os.path.getsize(req.derive_out), check=check)
    progress(check)


def _pillow_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pillow")
    except metadata.PackageNotFoundError:
        return "unknown"


def _listing(pack: zipfile.ZipFile) -> tuple[list[str], list[tuple[int, str]]]:
    """The host's listing, checked: class names, then (label, relative path) per image member."""
    try:
        info = pack.getinfo(LISTING)
        if info.file_size > MAX_LISTING_BYTES:
            raise ValueError("listing too large")
        data = json.loads(pack.read(LISTING))
        classes, files = data["classes"], data["files"]
        if not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)
                and isinstance(files, list) and files):
            raise ValueError("listing of the wrong shape")
        parsed = [(int(label), str(rel)) for label, rel in files]
        if any(not 0 <= label < len(classes) for label, _ in parsed):
            raise ValueError("a label outside the classes")
    except (KeyError, ValueError, TypeError, zipfile.BadZipFile) as exc:
        raise WorkerError("bad_request", f"the image pack is not lodevem's ({first_line(exc)})") from None
    return classes, parsed


def _member(pack: zipfile.ZipFile, i: int, rel: str) -> bytes:
    try:
        info = pack.getinfo(IMAGE_MEMBER.format(i))
        if info.file_size > MAX_IMAGE_BYTES:
            raise WorkerError("bad_request", f"{rel}: {info.file_size} bytes; an image may be at most "
                                             f"{MAX_IMAGE_BYTES // 2**20} MiB")
        return pack.read(info)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise WorkerError("bad_request", f"the image pack is not lodevem's ({first_line(exc)})") from None


def _open(image_mod: Any, data: bytes, rel: str) -> Any:
    """Pillow on the bytes, PNG and JPEG only, a bomb refused by its declared size."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", image_mod.DecompressionBombWarning)
            image = image_mod.open(io.BytesIO(data), formats=PIL_FORMATS)
    except image_mod.UnidentifiedImageError:
        head = data[:8].hex() or "empty"
        raise WorkerError("bad_request", f"{rel}: not a PNG or JPEG image (first bytes {head})") from None
    except (image_mod.DecompressionBombError, image_mod.DecompressionBombWarning):
        raise WorkerError("bad_request", f"{rel}: a decompression bomb: its header declares more pixels than the cap "
                                         f"of {MAX_IMAGE_PIXELS:,} an image (nothing was decoded)") from None
    except Exception as exc:
        raise WorkerError("bad_request", f"{rel}: cannot be decoded, it looks truncated or corrupt "
                                         f"({type(exc).__name__}: {first_line(exc, 160)})") from None
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        image.close()
        raise WorkerError("bad_request", f"{rel}: {width}x{height} pixels, over the cap of {MAX_IMAGE_PIXELS:,} "
                                         "(a decompression bomb or an unresized photo); resize the images first")
    return image


def _header(image_mod: Any, pack: zipfile.ZipFile, i: int, rel: str) -> tuple[int, int, str]:
    """(width, height, mode) from the header alone: nothing is decoded yet."""
    with _open(image_mod, _member(pack, i, rel), rel) as image:
        return image.size[0], image.size[1], image.mode


def _final_size(width: int, height: int, prep: Preprocessing) -> tuple[int, int]:
    if prep.resize:
        width, height = _resized(width, height, prep.resize)
    if prep.crop:
        width = height = prep.crop
    return width, height


def _resized(width: int, height: int, short: int) -> tuple[int, int]:
    """torchvision's Resize(int): the shorter side to ``short``, the longer scaled and truncated."""
    if width <= height:
        return short, int(short * height / width)
    return int(short * width / height), short


def _decoded(image_mod: Any, pack: zipfile.ZipFile, i: int, rel: str, color: str, prep: Preprocessing) -> Any:
    """One image decoded and transformed (a Pillow image of the final size and mode)."""
    with _open(image_mod, _member(pack, i, rel), rel) as image:
        try:
            image.load()
            converted = image.convert("L" if color == "gray" else "RGB")
        except Exception as exc:  # truncated data, a corrupt stream: Pillow raises OSError, SyntaxError, ...
            raise WorkerError("bad_request", f"{rel}: cannot be decoded, it looks truncated or corrupt "
                                             f"({type(exc).__name__}: {first_line(exc, 160)})") from None
    if prep.resize:
        width, height = converted.size
        converted = converted.resize(_resized(width, height, prep.resize), image_mod.BILINEAR)
    if prep.crop:
        converted = _centre_crop(image_mod, converted, prep.crop)
    return converted


def _centre_crop(image_mod: Any, image: Any, size: int) -> Any:
    """torchvision's CenterCrop: zero padding where the image is smaller, then the centred window."""
    width, height = image.size
    if size > width or size > height:
        padded = image_mod.new(image.mode, (max(width, size), max(height, size)), 0)
        padded.paste(image, ((max(size - width, 0)) // 2, (max(size - height, 0)) // 2))
        image, (width, height) = padded, padded.size
    top, left = int(round((height - size) / 2.0)), int(round((width - size) / 2.0))
    return image.crop((left, top, left + size, top + size))
