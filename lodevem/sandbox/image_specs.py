"""The catalogue of lodevem's images: each one's name, pinned requirements and recipe, and which
images a runtime or a worker action needs.

Why apart from ``image`` (which builds and checks them against the Docker engine): the catalogue is
pure data that the backends, ``lodevem check``, the manifest and ``build-image`` read, and the
version pins here are the ones ``tests/test_pins.py`` holds the extras and the Makefile to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

from ..runtimes import ADAPTERS
from ..runtimes.base import NUMPY_PIN
from ..version import __version__
from ..wire.registry import ARMSIM_AARCH64_REQUIREMENTS, ARMSIM_ARMV7L_REQUIREMENTS, CONVERT_ACTIONS, RUNTIMES

IMAGE_REPO = "lodevem-bench"
IMAGE_TAG = f"{IMAGE_REPO}:{__version__}"
BASE_IMAGE = "debian:bookworm"
# Where debootstrap fetches the offline base image from; `lodevem build-image --debian-mirror`
# (or $LODEVEM_DEBIAN_MIRROR, read by the CLI) passes another one down.
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
# The pins written once: the images' requirements below, `lodevem doctor`'s advice, and
# tests/test_pins.py, which holds the Makefile's TORCH_SPEC to it (it cannot import Python). A
# runtime's own pins are in its folder (``Runtime.own_image``, ``convert_requirements``).
TORCH_PIN = "torch==2.13.0"

# The worker's image: what every action on a PyTorch file runs (inspect, the ONNX export, derive)
# and what measures the runtimes without an image of their own. Pinned to what lodevem is
# developed against, so the container's onnxruntime/onnx match the host's exporter. TORCH_PIN
# resolves to the CPU wheel where pip's find-links has it.
IMAGE_REQUIREMENTS: tuple[str, ...] = (
    TORCH_PIN,
    NUMPY_PIN,
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
    "onnxsim==0.8.1",
    "torch-pruning==1.6.1",
    # decode-images: an ImageFolder tree's PNG/JPEG images are decoded here, never on the host
    # (worker.evaluate.images); the converter image, built on this one, shares it
    "pillow==13.0.0",
)

# (package, version) of the converter that makes each runtime's file from a PyTorch model: part
# of the conversion cache key and of the manifest; pinned in the runtime registry.
CONVERTERS: dict[str, tuple[str, str]] = {name: (spec.converter.package, spec.converter.version)
                                          for name, spec in RUNTIMES.items() if spec.converter is not None}
# The converters image: torch, then what each runtime's conversion needs besides its converter
# (its folder's ``convert_requirements``), then the converters.
CONVERT_REQUIREMENTS: tuple[str, ...] = tuple(dict.fromkeys((
    TORCH_PIN, NUMPY_PIN, *(pin for runtime in ADAPTERS.values() for pin in runtime.convert_requirements),
    *(f"{package}=={version}" for package, version in CONVERTERS.values()))))


@dataclass(frozen=True)
class GuestWheels:
    """Wheels for an emulated Arm guest's python (armsim), resolved on the host for that
    platform into the context's ``wheels-<platform>/``."""

    subdir: str
    requirements: tuple[str, ...]
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class ImageSpec:
    """One image lodevem builds: its name, pinned requirements and what its prewarm imports;
    ``dockerfile``, ``guest_wheels`` and ``extra_sources`` (package folders copied into the
    context, e.g. the armsim plugin's C source) for images not built from the shared file."""

    name: str
    repo: str
    requirements: tuple[str, ...]
    description: str
    warm_imports: str
    dockerfile: str = "Dockerfile"
    guest_wheels: tuple[GuestWheels, ...] = ()
    extra_sources: tuple[str, ...] = ()
    layered_on: Optional[str] = None  # IMAGES name this one is built FROM (its packages shared)

    @property
    def tag(self) -> str:
        return f"{self.repo}:{__version__}"


BENCH = ImageSpec("bench", IMAGE_REPO, IMAGE_REQUIREMENTS, "python3 + torch CPU + onnxruntime",
                  "torch, onnxruntime, numpy")
# The images of the runtimes that have their own, as their folders describe them (``OwnImage``).
RUNTIME_OWN_IMAGES: tuple[ImageSpec, ...] = tuple(
    ImageSpec(runtime.spec.image, own.repo, own.requirements, own.description, own.warm_imports)
    for runtime in ADAPTERS.values() if (own := runtime.own_image) is not None)
CONVERT = ImageSpec("convert", "lodevem-convert", CONVERT_REQUIREMENTS,
                    "converters: torch CPU + " + " + ".join(pin.partition("==")[0] for pin in CONVERT_REQUIREMENTS[2:]),
                    "torch", dockerfile="Dockerfile.convert", layered_on="bench")
ARMSIM = ImageSpec(
    "armsim", "lodevem-armsim", (), "qemu-user + lodevem's instruction-count plugin + arm64/armhf LiteRT and ncnn",
    "json", dockerfile="Dockerfile.armsim", extra_sources=("sandbox/armsim",),
    guest_wheels=(GuestWheels("wheels-aarch64", ARMSIM_AARCH64_REQUIREMENTS,
                              ("manylinux_2_27_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64")),
                  GuestWheels("wheels-armv7l", ARMSIM_ARMV7L_REQUIREMENTS, ("manylinux_2_31_armv7l",))))
IMAGES: dict[str, ImageSpec] = {spec.name: spec for spec in (BENCH, *RUNTIME_OWN_IMAGES, CONVERT, ARMSIM)}
class _RuntimeImages(Mapping[str, tuple[str, ...]]):
    """What each ``--runtime`` needs, read from its adapter (``runtimes.adapter(name).images``: its
    measurement image, then its converter's) when asked, so a runtime plugged in later is seen.
    ``armsim`` is not a runtime one measures under but the emulated-core latency predictor's
    image (``lodevem build-image --runtime armsim``): its profiles run the tflite/ncnn conversions."""

    _PREDICTORS = {"armsim": ("armsim", "convert")}

    def __getitem__(self, name: str) -> tuple[str, ...]:
        from ..runtimes import ADAPTERS

        if name in ADAPTERS:
            return ADAPTERS[name].images
        return self._PREDICTORS[name]

    def __iter__(self) -> Iterator[str]:
        from ..runtimes import ADAPTERS

        return iter([*ADAPTERS, *self._PREDICTORS])

    def __len__(self) -> int:
        return len(list(iter(self)))


RUNTIME_IMAGES: Mapping[str, tuple[str, ...]] = _RuntimeImages()


def image_targets() -> tuple[str, ...]:
    """What ``lodevem build-image --runtime`` takes: every runtime, and the predictor images beside them."""
    return tuple(RUNTIME_IMAGES)


ARMSIM_ACTION = "armsim-profile"


def spec_for(action: str, runtime: str) -> ImageSpec:
    """The image a worker request runs in: conversions in ``convert``, tflite/ncnn measurements
    in their runtime's image, everything else (inspect, ONNX export, derive, torch/onnxruntime) in
    ``bench``."""
    spec = RUNTIMES.get(runtime)
    if action in CONVERT_ACTIONS.values():
        return CONVERT
    if action == ARMSIM_ACTION:
        return ARMSIM
    if action in ("measure", "evaluate") and spec is not None:
        return IMAGES[spec.image]
    return BENCH


def specs_for_runtimes(runtimes: "tuple[str, ...] | list[str]") -> list[ImageSpec]:
    """The images the given runtimes need, bench first (every run exports to ONNX in it)."""
    names = ["bench"] + [n for r in runtimes for n in RUNTIME_IMAGES.get(r, ())]
    return [IMAGES[n] for n in dict.fromkeys(names)]
