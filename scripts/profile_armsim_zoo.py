#!/usr/bin/env python
"""armsim profiles of the zoo models, shipped as package data (``lodevem/data/armsim_zoo_profiles.json``).

    python scripts/profile_armsim_zoo.py --views DIR --plugin libicount.so --guest lodevem/worker/armsim/armsim_guest.py \\
        --site litert-2.3.0:tflite:/opt/armsim/arm64/opt/pydeps --site ncnn-20250503:ncnn:/opt/armsim/arm64/opt/pydeps \\
        --site ncnn-20261020:ncnn:/opt/armsim/armhf/opt/pydeps [--models mobilenet_v2 ...] [--convert-only]

Why: armsim's figures for the zoo models under every core view the shipped phone profiles use
(their fastest clusters: Cortex-A7, A53, A55, A75), made once, offline, so the invariant tests
price armsim without Docker and a run over zoo models reads them instead of emulating
(``latency.armsim.shipped``, keyed by the converted file's digest, runtime, view and threads).

1. Every model is written from lodevem's zoo (``zoo.write``, seeded weights) and converted by
   lodevem's own conversions in the converter image (``WorkerClient.convert``), exactly the files
   ``start`` makes for the levels: tflite fp32, fp16 (float16 weights) and int8-static (PT2E,
   32 synthetic calibration inputs, seed 0), ncnn fp32 (ncnn's default run: fp16 arithmetic where
   the core has it). Files go to ``--graphs`` (not the repository).
2. Each file is profiled as the dev graphs are (``profile_armsim_dev.one_profile``: host qemu-user
   7.2, lodevem's plugin, the image's views and wheels), 1 thread, under the view of every shipped
   core its runtime has an Arm build for (LiteRT: no armv7 wheel), with its block profile priced
   by every block-pricing model and the functions it ran in.
3. The store keeps, per profile, what the cost model and the tests read (counts, per-model block
   cycles, kernels, the guest's identity) and the digests of its inputs: the zoo ``.pt`` and the
   converted file (``profiler.converted_sha256``, the product's own key), so a test can check that
   the shipped records describe what lodevem makes today.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import profile_armsim_dev as dev  # noqa: E402

from lodevem.latency.armsim.isa import CORE_ISA  # noqa: E402
from lodevem.latency.armsim.profiler import converted_sha256  # noqa: E402

DEFAULT_OUT = REPO / "lodevem" / "data" / "armsim_zoo_profiles.json"
DEFAULT_GRAPHS = REPO / ".lodevem-build" / "armsim-zoo"
MODELS = ("mobilenet_v2", "mobilenet_v3_small", "resnet18", "squeezenet1_1", "efficientnet_b0")
# (runtime, level): the converter's quantize argument (None: the float model as it is)
LEVELS: tuple[tuple[str, Optional[str]], ...] = (("tflite", None), ("tflite", "fp16"), ("tflite", "int8-static"),
                                                 ("ncnn", None))
ZOO_GRAPH_SOURCE = "lodevem zoo, converted by lodevem (scripts/profile_armsim_zoo.py)"


def shipped_cores() -> list[str]:
    """The fastest-cluster cores of the shipped phone profiles (lodevem/profiles)."""
    from lodevem.profiles import load_profiles

    return sorted({p.fastest_cluster.core for p in load_profiles()})


def converted_path(graphs: Path, model: str, runtime: str, level: Optional[str]) -> Path:
    stem = f"{model}-{level or 'fp32'}"
    return graphs / (f"{stem}.tflite" if runtime == "tflite" else f"{stem}.ncnn.param")


def convert_all(args: argparse.Namespace) -> None:
    """Write each zoo model and convert it at every level (skipping files already made)."""
    from lodevem import zoo
    from lodevem.sandbox import open_backend
    from lodevem.sandbox.client import WorkerClient

    client = WorkerClient(open_backend("docker")[0])
    for model in args.models:
        pt = zoo.write(model, args.graphs / "pt")
        for runtime, level in LEVELS:
            target = converted_path(args.graphs, model, runtime, level)
            if target.exists():
                continue
            t0 = time.perf_counter()
            run = client.convert(pt, runtime, target, zoo.DEFAULT_INPUT, args.timeout, level)
            print(f"{model} {runtime} {level or 'fp32'}: {'ok' if run.ok else run.problem()} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)


def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    sites = {}
    for site in args.site:
        label, runtime, path = site.split(":", 2)
        sites.setdefault(runtime, []).append((label, path))
    out = []
    for core in shipped_cores():
        isa, view = CORE_ISA[core]
        for model in args.models:
            for runtime, level in LEVELS:
                f = converted_path(args.graphs, model, runtime, level)
                site = next(((lab, p) for lab, p in sites.get(runtime, []) if (isa == "armv7") == ("armhf" in p)), None)
                if site is None or not f.exists():
                    continue
                out.append({"key": f"zoo:{model} {runtime} {level or 'fp32'} {view}", "graph_key": f"zoo:{model}",
                            "runtime": runtime, "isa": isa, "uarch": view, "file": f, "threads": 1,
                            "input_shape": [1, 3, 224, 224], "site": site[1], "site_label": site[0],
                            "graph_source": dev.ZOO_SOURCE, "level": level or "fp32", "model": model})
    return [j for j in out if not args.only or any(o in j["key"] for o in args.only)]


def record(job: dict[str, Any], prof: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """What the store keeps of one profile: the cost model's inputs and the inputs' digests."""
    pt = args.graphs / "pt" / f"{job['model']}.pt"
    return prof | {"graph_source": ZOO_GRAPH_SOURCE, "model": job["model"], "level": job["level"],
                   "converted_sha256": converted_sha256(Path(job["file"])),
                   "zoo_pt_sha256": hashlib.sha256(pt.read_bytes()).hexdigest() if pt.is_file() else None,
                   "input_shape": job["input_shape"]}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--graphs", type=Path, default=DEFAULT_GRAPHS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--views", type=Path)
    parser.add_argument("--plugin", type=Path)
    parser.add_argument("--guest", type=Path, default=REPO / "lodevem" / "worker" / "armsim_guest.py")
    parser.add_argument("--site", action="append", default=[], metavar="LABEL:RUNTIME:PYTHONPATH",
                        help="a runtime's guest wheels; an armhf path serves the armv7 views")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--convert-only", action="store_true", help="make the converted files, profile none")
    parser.add_argument("--profile-only", action="store_true", help="profile the converted files there are, make none")
    parser.add_argument("--redo", action="store_true", help="profile again what the store already holds")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--reprice", action="store_true",
                        help="price the stored profiles' kept block files again (<graphs>/blocks), no emulation")
    args = parser.parse_args(argv)
    if args.reprice:
        store = json.loads(args.out.read_text())
        done = dev.reprice(store, args.graphs)
        args.out.write_text(json.dumps(store, indent=1) + "\n")
        print(f"{args.out}: {done} profiles repriced from their kept block files")
        return 0
    args.graphs.mkdir(parents=True, exist_ok=True)
    if not (args.dry_run or args.profile_only):
        convert_all(args)
    if args.convert_only:
        return 0
    if not (args.views and args.plugin and args.site):
        parser.error("--views, --plugin and --site are needed to profile")
    args.blocks = True
    args.plugin_digest = "sha256:" + dev.sha256_files(REPO / "lodevem" / "sandbox" / "armsim" / "lodevem_icount.c")[:16]
    store = json.loads(args.out.read_text()) if args.out.exists() else {"profiles": []}
    store.setdefault("what", "armsim profiles of zoo models under the shipped profiles' core views "
                     "(scripts/profile_armsim_zoo.py); 1 thread, one warm-up and one counted inference")
    done = {(p["graph_key"], p["runtime"], p["level"], p["uarch"]) for p in store["profiles"]}
    for job in jobs(args):
        ident = (job["graph_key"], job["runtime"], job["level"], job["uarch"])
        if ident in done and not args.redo:
            continue
        if args.dry_run:
            print(job["key"])
            continue
        try:
            prof = record(job, dev.one_profile(job, args), args)
        except Exception as exc:  # one profile that fails is reported, the rest go on
            print(f"FAILED {job['key']}: {exc}", flush=True)
            continue
        store["profiles"] = [p for p in store["profiles"] if (p["graph_key"], p["runtime"], p["level"], p["uarch"]) != ident]
        dev.save(store, prof, args.out, job["key"], lambda p: (p["graph_key"], p["runtime"], p["level"], p["uarch"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
