"""Labelled samples in an ``.npz``, read one sample at a time (numpy only, never pickle).

Why streamed: 1,000 ImageNet-sized inputs are 600 MB of float32, more than the phone-sized memory
limits lodevem works under, and a user's data set may be far larger. ``np.load`` of an ``.npz``
member reads the whole array; here the ``.npy`` header of a member is parsed and its rows are read
one by one from the (stored or deflated) zip member, so memory stays at one sample whatever N is.

One home for the format, shared by the host (``lodevem.accuracy.data`` validates a user's file
through it and writes the normalised copy the sandbox gets with ``NpzWriter``) and the worker's
``evaluate`` action (which reads that copy). Caps on members and header sizes keep a hostile zip
from costing more than its rows.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Optional

MAX_MEMBERS = 64  # an .npz of a data set has two or three arrays; a zip of thousands is not one
MAX_HEADER_BYTES = 65536
MAX_SAMPLE_BYTES = 256 * 2**20  # one input (C x H x W) above this is no image


class SampleFileError(ValueError):
    """The file is not a usable labelled-sample ``.npz``; the message says why, in one line."""


@dataclass(frozen=True)
class ArrayHeader:
    """A member's ``.npy`` header: what its rows are, before any row is read."""

    name: str
    shape: tuple[int, ...]
    dtype: Any  # numpy dtype

    @property
    def row_bytes(self) -> int:
        size = self.dtype.itemsize
        for dim in self.shape[1:]:
            size *= dim
        return size


def _header(np: Any, fh: IO[bytes], name: str) -> ArrayHeader:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh, max_header_size=MAX_HEADER_BYTES)
        else:
            raise SampleFileError(f"'{name}' is an .npy of unknown version {version}")
    except SampleFileError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise SampleFileError(f"'{name}' is not a readable .npy array ({' '.join(str(exc).split())[:120]})") from None
    if dtype.hasobject:
        raise SampleFileError(f"'{name}' holds Python objects (an object array needs pickle; lodevem never unpickles)")
    if fortran and len(shape) > 1:
        raise SampleFileError(f"'{name}' is stored in Fortran order; save it C-ordered (np.ascontiguousarray)")
    return ArrayHeader(name, tuple(int(d) for d in shape), dtype)


class NpzSamples:
    """An ``.npz`` with ``inputs`` (N x C x H x W, numeric) and ``labels`` (N, integers), opened
    from a file object the caller owns (the host opens it through ``safe_io``)."""

    def __init__(self, fh: IO[bytes], np: Optional[Any] = None, labelled: bool = True) -> None:
        """``labelled=False`` (calibration inputs): ``labels`` may be absent."""
        if np is None:
            import numpy as np
        self.np: Any = np
        try:
            self.zip = zipfile.ZipFile(fh)
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise SampleFileError(f"not an .npz (zip) archive ({' '.join(str(exc).split())[:120]})") from None
        if len(infos) > MAX_MEMBERS:
            raise SampleFileError(f"{len(infos)} members; an .npz of samples has a few (at most {MAX_MEMBERS})")
        names = {i.filename for i in infos}
        missing = [k for k in ("inputs", "labels") if f"{k}.npy" not in names and (labelled or k == "inputs")]
        if missing:
            raise SampleFileError(f"no {' and no '.join(repr(m) for m in missing)} array (found: "
                                  f"{', '.join(sorted(n.removesuffix('.npy') for n in names)[:8]) or 'nothing'}); "
                                  "expected 'inputs' (N x C x H x W) and 'labels' (N)")
        self.inputs = self._open_header("inputs")
        self.labels = self._open_header("labels") if "labels.npy" in names else None
        if len(self.inputs.shape) != 4:
            raise SampleFileError(f"'inputs' has shape {list(self.inputs.shape)}; expected 4 dimensions N x C x H x W")
        if self.inputs.dtype.kind not in "fiu" or self.inputs.dtype.itemsize > 8:
            raise SampleFileError(f"'inputs' is {self.inputs.dtype}; expected numbers (float or integer)")
        if self.labels is not None and (len(self.labels.shape) != 1 or self.labels.dtype.kind not in "iu"):
            raise SampleFileError(f"'labels' is {self.labels.dtype} of shape {list(self.labels.shape)}; expected N "
                                  "integers")
        if self.labels is not None and self.labels.shape[0] != self.inputs.shape[0]:
            raise SampleFileError(f"{self.inputs.shape[0]} inputs but {self.labels.shape[0]} labels")
        if self.inputs.shape[0] == 0 or 0 in self.inputs.shape:
            raise SampleFileError(f"'inputs' has shape {list(self.inputs.shape)}: no samples")
        if self.inputs.row_bytes > MAX_SAMPLE_BYTES:
            raise SampleFileError(f"one input is {self.inputs.row_bytes / 2**20:.0f} MB (shape "
                                  f"{list(self.inputs.shape[1:])}); at most {MAX_SAMPLE_BYTES // 2**20} MB")

    def _open_header(self, key: str) -> ArrayHeader:
        with self.zip.open(f"{key}.npy") as fh:
            return _header(self.np, fh, key)

    @property
    def count(self) -> int:
        return self.inputs.shape[0]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return self.inputs.shape[1:]

    def labels_array(self, limit: Optional[int] = None) -> Any:
        """The first ``limit`` labels as int64 (8 bytes a sample: small beside the inputs)."""
        n = self.count if limit is None else min(limit, self.count)
        if self.labels is None:
            raise SampleFileError("no 'labels' array")
        with self.zip.open("labels.npy") as fh:
            _header(self.np, fh, "labels")
            raw = _read_exact(fh, n * self.labels.dtype.itemsize, "labels")
        return self.np.frombuffer(raw, dtype=self.labels.dtype).astype(self.np.int64)

    def iter_inputs(self, limit: Optional[int] = None) -> Iterator[Any]:
        """Each input as a float32 C x H x W array, one read of ``row_bytes`` at a time."""
        n = self.count if limit is None else min(limit, self.count)
        np, header = self.np, self.inputs
        with self.zip.open("inputs.npy") as fh:
            _header(np, fh, "inputs")
            for _ in range(n):
                raw = _read_exact(fh, header.row_bytes, "inputs")
                yield np.frombuffer(raw, dtype=header.dtype).reshape(header.shape[1:]).astype(np.float32)

    def close(self) -> None:
        self.zip.close()


def _read_exact(fh: IO[bytes], size: int, name: str) -> bytes:
    try:
        data = fh.read(size)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:  # a CRC error, a cut deflate stream
        raise SampleFileError(f"'{name}' cannot be read to its end ({' '.join(str(exc).split())[:120]})") from None
    if len(data) != size:
        raise SampleFileError(f"'{name}' ends early: the file is truncated")
    return data


class NpzWriter:
    """Writes ``inputs`` (float32) and ``labels`` (int64) into an uncompressed ``.npz`` one sample
    at a time: the shape is known up front (``count``), so each member's header is written first."""

    def __init__(self, path: str, count: int, sample_shape: tuple[int, ...]) -> None:
        import numpy as np

        self.np, self.count, self.sample_shape = np, count, tuple(sample_shape)
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._inputs = self.zip.open("inputs.npy", "w", force_zip64=True)
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
                  "shape": (count, *self.sample_shape)}
        np.lib.format.write_array_header_2_0(self._inputs, header)
        self.written = 0

    def add(self, x: Any) -> None:
        if self.written >= self.count:
            raise ValueError("more samples than declared")
        self._inputs.write(self.np.ascontiguousarray(x, dtype=self.np.float32).reshape(self.sample_shape).tobytes())
        self.written += 1

    def finish(self, labels: Optional[Any]) -> None:
        """``labels=None``: inputs only (calibration data)."""
        if self.written != self.count or (labels is not None and len(labels) != self.count):
            raise ValueError(f"declared {self.count} samples, wrote {self.written} inputs")
        self._inputs.close()
        if labels is None:
            self.zip.close()
            return
        with self.zip.open("labels.npy", "w", force_zip64=True) as fh:
            arr = self.np.ascontiguousarray(labels, dtype=self.np.int64)
            self.np.lib.format.write_array_header_2_0(fh, {"descr": "<i8", "fortran_order": False,
                                                           "shape": (self.count,)})
            fh.write(arr.tobytes())
        self.zip.close()

    def abort(self) -> None:
        try:
            self._inputs.close()
        except Exception:
            pass
        self.zip.close()
