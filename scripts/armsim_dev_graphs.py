#!/usr/bin/env python
"""The graphs behind the dev rows, as lodevem converts them: the input of armsim's profiles.

    python scripts/armsim_dev_graphs.py [--out .lodevem-build/armsim-dev] [--runtime ncnn|tflite|all]

Why a script of its own: ``scripts/fit_armsim.py`` fits on stored profiles and must run offline
without Docker; making the graphs needs the converter image and minutes of CPU, once.

1. Every benchmark graph of the dev CSV (``fit_estimator.graph_maps``: ncnn's own graphs map to
   the closest zoo model at the row's input size, TFLite + XNNPACK rows to the standard graphs) is
   written as a zoo ``.pt`` and converted by lodevem's own conversions in the sandbox
   (``WorkerClient.convert``: litert-torch for ``.tflite``, pnnx for ncnn), exactly the files
   ``--runtime tflite/ncnn`` measures.
2. ncnn int8 (``*_int8`` rows): the int8 graph is written here from the fp32 pnnx files in ncnn's
   int8 format (as ``lodevem/runtimes/ncnn/int8.py`` writes it, but uncalibrated; documented in
   ncnn's ``src/layer/convolution.cpp``/``convolutiondepthwise.cpp``/``innerproduct.cpp`` ``load_model``
   and ``src/modelbin.cpp``): Convolution and InnerProduct get ``8=2`` (int8_scale_term: per-output
   channel weight scales + one input scale), ConvolutionDepthWise ``8=1`` (per-group weight scales);
   weights are stored with the int8 tag ``0x000D4B38``, rounded to int8 with per-channel absmax
   scales; the scale tables follow the bias. Input scales are NOT calibrated (one fixed scale per
   layer, 127/8): the instructions ncnn executes do not depend on the scale values, the numbers it
   computes do, and nothing here reads them. Requantize fusion (ncnn's ``int8_scale_term + 100``):
   a Convolution/ConvolutionDepthWise whose output feeds only another int8 conv gets
   ``int8_scale_term + 100`` and that conv's input scale as its output scale (it writes int8, the
   next layer skips its quantize pass); any other int8 layer dequantizes its output to float.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import fit_estimator as fe  # noqa: E402

from lodevem.runtimes.ncnn.int8 import float_weights  # noqa: E402

DEFAULT_OUT = REPO / ".lodevem-build" / "armsim-dev"
INT8_TAG = 0x000D4B38
INT8_MODELS = ("squeezenet", "mobilenet", "resnet18", "resnet50")  # the dev data's *_int8 rows
FIXED_INPUT_SCALE = 127.0 / 8.0


def graph_file(out: Path, key: str, runtime: str, precision: str = "fp32") -> Path:
    """Where the converted dev graph of a graph key lives (``std:x`` keys are TFLite graphs)."""
    stem = key.replace("std:", "std_") + ("_int8" if precision == "int8" else "")
    return out / (f"{stem}.tflite" if runtime == "tflite" else f"{stem}.ncnn.param")


def dev_graph_keys() -> list[tuple[str, str]]:
    """(graph key, runtime) of every graph the dev rows ran."""
    rows = fe.load_rows(fe.DEFAULT_DATA)
    return sorted({(r.graph_key, "tflite" if r.graph_key.startswith("std:") else "ncnn") for r in rows})


def convert_all(out: Path, runtime_filter: str, timeout_s: float) -> None:
    from lodevem import zoo
    from lodevem.sandbox import open_backend
    from lodevem.sandbox.client import WorkerClient

    backend, _ = open_backend("docker")
    client = WorkerClient(backend)
    maps = fe.graph_maps()
    for key, runtime in dev_graph_keys():
        if runtime_filter not in ("all", runtime):
            continue
        target = graph_file(out, key, runtime)
        if target.exists():
            continue
        bench = maps[key]
        pt = zoo.write(bench.zoo, out / "pt")
        t0 = time.perf_counter()
        run = client.convert(pt, runtime, target, (1, 3, bench.input_hw, bench.input_hw), timeout_s)
        print(f"{key} -> {target.name}: {'ok' if run.ok else run.problem()} ({time.perf_counter() - t0:.0f} s)",
              flush=True)


# ---------------------------------------------------------------------------------------------
# ncnn int8 (ncnn's int8 file format, from the fp32 pnnx files)
# ---------------------------------------------------------------------------------------------

def _params(fields: list[str]) -> dict[int, str]:
    out = {}
    for f in fields:
        k, _, v = f.partition("=")
        out[int(k)] = v
    return out


def _layers(param: Path) -> Iterator[tuple[str, list[str]]]:
    lines = param.read_text().splitlines()
    if lines[0].strip() != "7767517":
        raise ValueError(f"{param}: not an ncnn param file (magic {lines[0]!r})")
    for line in lines[2:]:
        if line.strip():
            parts = line.split()
            yield parts[0], parts


WEIGHTED = ("Convolution", "ConvolutionDepthWise", "InnerProduct")


def quantize_ncnn_int8(param: Path, out_param: Path) -> int:
    """Write the int8 twin of an fp32 ncnn model; returns how many layers became int8."""
    src = param.with_suffix(".bin").read_bytes()
    layers = list(_layers(param))
    consumers: dict[str, list[str]] = {}
    for ltype, parts in layers:
        for blob in parts[4:4 + int(parts[2])]:
            consumers.setdefault(blob, []).append(ltype)
    convs = ("Convolution", "ConvolutionDepthWise")

    def requantized(parts: list[str]) -> bool:
        tops = parts[4 + int(parts[2]):4 + int(parts[2]) + int(parts[3])]
        return parts[0] in convs and len(tops) == 1 and consumers.get(tops[0], []) in (["Convolution"],
                                                                                      ["ConvolutionDepthWise"])
    pos = 0
    out_bin = bytearray()
    out_lines = param.read_text().splitlines()[:2]
    n_int8 = 0
    for ltype, parts in layers:
        name_end = 4 + int(parts[2]) + int(parts[3])
        head, fields = parts[:name_end], parts[name_end:]
        p = _params(fields)
        if ltype in WEIGHTED:
            try:
                w, bias, pos = float_weights(src, pos, ltype, p)  # the worker's own reader of the layout
            except ValueError as exc:
                raise ValueError(f"{param}: layer {parts[1]} {exc}") from None
            num_output = int(p.get(0, "0"))
            groups = int(p.get(7, "1")) if ltype == "ConvolutionDepthWise" else num_output
            wg = w.reshape(groups, -1)
            absmax = np.maximum(np.abs(wg).max(axis=1), 1e-8)
            scales = (127.0 / absmax).astype("<f4")
            q = np.clip(np.rint(wg * scales[:, None]), -127, 127).astype(np.int8).tobytes()
            q += b"\0" * (-len(q) % 4)
            out_bin += struct.pack("<I", INT8_TAG) + q + bias + scales.tobytes()
            out_bin += struct.pack("<f", FIXED_INPUT_SCALE)
            term = 1 if ltype == "ConvolutionDepthWise" else 2
            if requantized(parts):
                term += 100
                out_bin += struct.pack("<f", FIXED_INPUT_SCALE)  # the next conv's input scale
            fields = [f for f in fields if not f.startswith("8=")]
            fields.append(f"8={term}")
            n_int8 += 1
        elif ltype in ("BatchNorm", "Scale", "MemoryData", "PReLU", "Embed", "Deconvolution"):
            raise ValueError(f"{param}: layer type {ltype} carries weights this writer does not know")
        out_lines.append(" ".join(head + fields))
    if pos != len(src):
        raise ValueError(f"{param}: {len(src) - pos} bytes of weights left unread (a layer's layout was misread)")
    out_param.with_suffix(".bin").write_bytes(bytes(out_bin))
    out_param.write_text("\n".join(out_lines) + "\n")
    return n_int8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--runtime", choices=("ncnn", "tflite", "all"), default="all")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    convert_all(args.out, args.runtime, args.timeout)
    if args.runtime in ("ncnn", "all"):
        for model in INT8_MODELS:
            src, dst = graph_file(args.out, model, "ncnn"), graph_file(args.out, model, "ncnn", "int8")
            if src.exists():
                print(f"{dst.name}: {quantize_ncnn_int8(src, dst)} int8 layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
