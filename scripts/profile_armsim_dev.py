#!/usr/bin/env python
"""Count the instructions of the dev graphs under emulated Arm cores: the data the cost model fits.

    python scripts/profile_armsim_dev.py --host-root DIR --plugin libicount.so --guest armsim_guest.py \\
        [--graphs .lodevem-build/armsim-dev] [--out lodevem/data/armsim_dev_profiles.json] [--only KEY ...]

Why a script beside armsim's profiler: the dev graphs are profiled once, offline, for every
(runtime, ISA, precision path, runtime version) the dev rows need, including an ncnn of the rows'
era (1.0.20221128, the oldest ncnn with a cp311 aarch64 wheel) that the product image does not
carry. It runs the same pieces as the armsim image: Debian's qemu-user 7.2 (``qemu-aarch64 -cpu
cortex-a53 | cortex-a76``, ``qemu-arm -cpu cortex-a7``), lodevem's counting plugin
(``lodevem/sandbox/armsim/lodevem_icount.c`` compiled against Debian's qemu-plugin.h) and
armsim's guest script (``lodevem/worker/armsim/armsim_guest.py``), on a Debian bookworm userland DIR
with python3.11 whose wheel folders are given per runtime version (``--site``). One steady-state
inference is counted: the difference of the plugin's snapshots at the guest's begin and end
markers after one warm-up inference (the first packs weights).

Each profile is stored with what made it: graph file digest, runtime version, qemu cpu, plugin
digest and the command line; ``scripts/fit_armsim.py`` refits from the stored file offline.

``--blocks``: the plugin also writes the block profile (``lodevem.worker.armsim.armsim_blocks``: every
translation block executed between the markers, its bytes and count per vCPU). The raw file is
kept gzipped under ``<graphs>/blocks/`` (its sha256 in the profile); each distinct block is priced
by llvm-mca under every model of its ``MCA_MODELS`` (cached by bytes in ``<graphs>/mca-cache-*.json``)
and the profile stores, per model, the cycles of one inference (all threads, and the busiest):
the data the block cost model (armsim v2) fits on, small enough to ship.

``--ncnn-benchmark DIR --ncnn-benchmark-commit SHA``: the ncnn rows' graphs are ncnn's own
benchmark graphs, what the rows ran (``benchmark/models/<name>.param`` of a Tencent/ncnn checkout;
read from that folder, never copied into lodevem), not lodevem's pnnx conversions of the closest
zoo model. Their weights are zeros, as benchncnn's ``DataReaderFromEmpty`` gives them: each param
is staged beside a sparse all-zero ``.bin`` (a zero flag word reads as fp32 data). The profile's
``graph_source`` names the folder's origin and commit, ``graph_sha256`` the param file; the fit
prefers these profiles for ncnn rows (``fit_armsim.match_profile``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

import armsim_dev_graphs as graphs  # noqa: E402

from lodevem.worker.armsim.armsim_profile import qemu_cpu_option  # noqa: E402  (the product's -cpu value: model + MIDR)

DEFAULT_OUT = REPO / "lodevem" / "data" / "armsim_dev_profiles.json"
QEMU = {"armv8.0": ("qemu-aarch64", "cortex-a53", 125), "armv8.2": ("qemu-aarch64", "cortex-a76", 125),
        "armv7": ("qemu-arm", "cortex-a7", 159)}  # marker syscall: sched_get_priority_max (arm64 125, arm EABI 159)
# The core views a site profiles under (armsim's make_views.py names; CORE_ISA maps a core to one).
MARKER_MAGIC = 0x4C4F0000
ZOO_SOURCE = "lodevem zoo, converted by lodevem (scripts/armsim_dev_graphs.py)"
ZERO_WEIGHTS_BYTES = 512 << 20  # sparse: more than any benchmark graph reads (resnet50 fp32: ~100 MB)
CLASSES = ("simd_arith", "simd_fp16", "simd_dot", "simd_load", "simd_store", "scalar_load", "scalar_store",
           "int_alu", "branch", "other", "total", "bytes_r", "bytes_w")


def sha256_files(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def parse_marks(text: str) -> dict[str, list[list[int]]]:
    """Plugin output -> {mark id: per-vCPU rows of the 13 counters}."""
    marks: dict[str, list[list[int]]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["mark"]:
            current = parts[1]
            marks[current] = []
        elif parts[:1] == ["vcpu"] and current is not None:
            marks[current].append([int(v) for v in parts[2:]])
    return marks


def one_profile(job: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    qemu, cpu, sysno = QEMU[job["isa"]]
    root = Path(args.views) / job["uarch"]
    with tempfile.TemporaryDirectory(prefix="armfit-prof-") as tmp:
        out, report, blocks_file = Path(tmp) / "counts.txt", Path(tmp) / "report.json", Path(tmp) / "blocks.txt"
        model = Path(job["file"])
        if job.get("graph_source", ZOO_SOURCE) != ZOO_SOURCE:  # ncnn's benchmark graph: zero weights
            model = Path(tmp) / Path(job["file"]).name
            model.write_bytes(Path(job["file"]).read_bytes())
            with open(model.with_suffix(".bin"), "wb") as fh:
                fh.truncate(ZERO_WEIGHTS_BYTES)
        spec = {"runtime": job["runtime"], "model": str(model), "threads": job["threads"], "precision": "auto",
                "input_shape": job["input_shape"], "warmup": 1, "inferences": 1, "report": str(report)}
        cpu_option = qemu_cpu_option(cpu, str(root))  # the view's MIDR for mrs MIDR_EL1 too
        cmd = [qemu, "-cpu", cpu_option, "-L", str(root), "-plugin",
               f"{args.plugin},out={out},sysno={sysno},magic={MARKER_MAGIC}"
               + (f",blocks={blocks_file}" if args.blocks else ""), "-d", "plugin",
               str(root / "usr/bin/python3.11"), str(args.guest), json.dumps(spec)]
        env = dict(os.environ, PYTHONPATH=job["site"], OMP_NUM_THREADS=str(job["threads"]))
        t0 = time.perf_counter()
        run = subprocess.run(cmd, env=env, check=False, timeout=args.timeout, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, errors="replace")
        seconds = time.perf_counter() - t0
        last = (run.stderr or "").strip().splitlines()[-1:] or [f"exit code {run.returncode}"]
        rep = json.loads(report.read_text()) if report.exists() else {"ok": False, "error": f"no report ({last[0]})"}
        if not rep.get("ok"):
            raise RuntimeError(f"{job['key']}: {rep.get('error')}")
        marks = parse_marks(out.read_text())
        block_text = blocks_file.read_text() if blocks_file.exists() else None
    begin, end = marks["1"], marks["2"]
    per_thread = []
    for i, (b, e) in enumerate(zip(begin, end)):
        d = dict(zip(CLASSES, (y - x for x, y in zip(b, e))))
        per_thread.append({"thread": i, "total": d["total"], "counts": {c: d[c] for c in CLASSES[:10]}})
    counts = {c: sum(t["counts"][c] for t in per_thread) for c in CLASSES[:10]}
    # the command as data: host folders named by their role, never by this machine's paths
    shown = " ".join(["PYTHONPATH=<wheels " + job["site_label"] + ">", qemu, "-cpu", cpu_option, "-L", f"<views>/{job['uarch']}",
                      "-plugin", f"<lodevem_icount.so>,out=<counts>,sysno={sysno},magic={MARKER_MAGIC}", "-d", "plugin",
                      f"<views>/{job['uarch']}/usr/bin/python3.11", "lodevem/worker/armsim/armsim_guest.py",
                      shlex.quote(json.dumps({k: v for k, v in spec.items() if k != "report"} | {"model": Path(job["file"]).name}))])
    extra = block_record(block_text, job, args, sum(t["total"] for t in per_thread), rep.get("code_maps")) \
        if block_text else {}
    bench = job.get("graph_source", ZOO_SOURCE) != ZOO_SOURCE
    return extra | {"graph_key": job["graph_key"], "graph_file": job_graph_file(job),
            "graph_source": job.get("graph_source", ZOO_SOURCE),
            "graph_sha256": sha256_files(*([Path(job["file"])] if bench else graphs_artifacts(Path(job["file"])))),
            "runtime": job["runtime"], "runtime_version": rep["runtime_version"], "isa": job["isa"], "qemu_cpu": cpu,
            "uarch": job["uarch"],
            "precision": rep["precision"], "runtime_options": rep.get("options", {}), "threads": job["threads"],
            "counts": counts, "total_instructions": sum(t["total"] for t in per_thread), "per_thread": per_thread,
            "wheels": job["site_label"], "inferences": 1, "plugin_digest": args.plugin_digest, "seconds": round(seconds, 1),
            "identity": rep.get("identity", {}), "command": shown}


def block_record(text: str, job: dict[str, Any], args: argparse.Namespace, total: int, code_maps: Any) -> dict[str, Any]:
    """Keep the raw block file (gzipped, by digest), price its blocks under every block-pricing
    model and name the functions (micro-kernels) they ran in."""
    from lodevem.worker.armsim.armsim_blocks import BlockProfile, parse_blocks, price_summary
    from lodevem.worker.armsim.armsim_symbols import attribute, parse_maps

    raw = text.encode()
    digest = hashlib.sha256(raw).hexdigest()
    folder = Path(args.graphs) / "blocks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{digest[:16]}.txt.gz").write_bytes(gzip.compress(raw, 6))
    prof = BlockProfile(parse_blocks(text, "2"))
    if prof.instructions() != total:
        print(f"  note {job['key']}: blocks hold {prof.instructions()} instructions, the counters {total}", flush=True)
    summary = price_summary(prof, Path(args.graphs))
    kernels = [k.to_dict() for k in attribute(((b.start, b.instructions * b.executions) for b in prof.blocks),
                                               parse_maps(code_maps))]
    return {"blocks_sha256": digest, "blocks_distinct": summary["distinct"], "blocks_instructions": summary["instructions"],
            "block_llvm": summary["llvm"], "block_cycles": summary["cycles"], "ins_gpr": summary["ins_gpr"],
            "kernels": kernels}


def reprice(store: dict[str, Any], graphs_dir: Path) -> int:
    """Every stored profile whose raw block file was kept (``<graphs>/blocks/<sha>.txt.gz``)
    priced again under today's block-pricing models: a new model or override costs no emulation."""
    from lodevem.worker.armsim.armsim_blocks import BlockProfile, parse_blocks, price_summary

    done = 0
    for prof in store["profiles"]:
        path = graphs_dir / "blocks" / f"{str(prof.get('blocks_sha256', ''))[:16]}.txt.gz"
        if not prof.get("blocks_sha256") or not path.is_file():
            continue
        raw = gzip.decompress(path.read_bytes())
        if hashlib.sha256(raw).hexdigest() != prof["blocks_sha256"]:
            print(f"  {path}: digest differs from the profile's, left as it was", flush=True)
            continue
        summary = price_summary(BlockProfile(parse_blocks(raw.decode(), "2")), graphs_dir)
        prof.update(block_llvm=summary["llvm"], block_cycles=summary["cycles"], ins_gpr=summary["ins_gpr"])
        done += 1
    return done


def job_graph_file(job: dict[str, Any]) -> str:
    """The stored name of a job's graph: ncnn's benchmark graphs under ``benchncnn/`` (their
    names equal the zoo conversions' stems, and both are kept)."""
    name = Path(job["file"]).name
    return f"benchncnn/{name}" if job.get("graph_source", ZOO_SOURCE) != ZOO_SOURCE else name


def graphs_artifacts(path: Path) -> list[Path]:
    return [path, path.with_suffix(".bin")] if path.suffix == ".param" else [path]


def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (graph, runtime, core view, precision, version) a site lists that the dev rows need;
    within a site the biggest graph (resnet50) last, so one slow graph does not hold up the rest."""
    from lodevem.latency.armsim.isa import CORE_ISA

    maps = graphs.fe.graph_maps()
    rows = graphs.fe.load_rows(graphs.fe.DEFAULT_DATA)
    need = sorted({(r.graph_key, "tflite" if r.graph_key.startswith("std:") else "ncnn", r.core, r.precision)
                   for r in rows}, key=lambda n: (n[0] == "resnet50", n))
    out, seen = [], set()
    view_isa = {view: isa for isa, view in CORE_ISA.values()}
    for site in args.site:
        label, views, runtime, path = site.split(":", 3)
        for key, runtime_, core, precision in need:
            own_view = CORE_ISA[core][1]
            for view in views.split(","):
                isa = view_isa[view]
                # a row's graph is profiled under its own core's view (the runtimes pick kernels by
                # the MIDR, so another core's view runs code that core never runs), and under the
                # --also-views asked for (the invariant tests compare cores on one graph)
                if runtime_ != runtime or (view != own_view and view not in args.also_views):
                    continue
                f = graphs.graph_file(args.graphs, key, runtime, "int8" if precision == "int8" else "fp32")
                source = ZOO_SOURCE
                if args.ncnn_benchmark and runtime == "ncnn":
                    f = args.ncnn_benchmark / (key + ("_int8" if precision == "int8" else "") + ".param")
                    source = f"Tencent/ncnn benchmark/models @{args.ncnn_benchmark_commit}"
                ident = (key, runtime, view, precision, label)
                if ident in seen or not f.exists():
                    continue
                seen.add(ident)
                hw = maps[key].input_hw
                out.append({"key": f"{key} {runtime} {view} {precision} {label}", "graph_key": key, "runtime": runtime,
                            "isa": isa, "uarch": view, "file": f, "threads": 1, "input_shape": [1, 3, hw, hw],
                            "site": path, "site_label": label, "graph_source": source})
    return [j for j in out if not args.only or any(o in j["key"] for o in args.only)]


def merge(store: dict[str, Any], others: list[Path]) -> dict[str, Any]:
    """Profiles of other runs (parallel runs write their own files) into ``store``: a profile of the
    same graph file, view and runtime version replaces the stored one."""
    for path in others:
        for prof in json.loads(path.read_text())["profiles"]:
            ident = (prof["graph_file"], prof["uarch"], prof["runtime_version"])
            store["profiles"] = [p for p in store["profiles"]
                                 if (p["graph_file"], p["uarch"], p["runtime_version"]) != ident] + [prof]
    store["profiles"].sort(key=lambda p: (p["graph_key"], p["runtime"], p["uarch"], p["precision"], p["runtime_version"]))
    return store


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--views", type=Path,
                        help="the core views armsim's make_views.py makes from Debian arm64/armhf userlands")
    parser.add_argument("--plugin", type=Path, help="lodevem_icount.c compiled against qemu-plugin.h")
    parser.add_argument("--guest", type=Path)
    parser.add_argument("--site", action="append", default=[], metavar="LABEL:ISAS:RUNTIME:PYTHONPATH",
                        help="a runtime version's wheels and the views to profile under, e.g. "
                             "ncnn-20250503:cortex-a53,cortex-a55:ncnn:/x/site:/x/common")
    parser.add_argument("--graphs", type=Path, default=graphs.DEFAULT_OUT)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--blocks", action="store_true", help="also record and price the block profile")
    parser.add_argument("--redo", action="store_true", help="profile again what the store already holds")
    parser.add_argument("--dry-run", action="store_true", help="list the jobs that would run, run none")
    parser.add_argument("--ncnn-benchmark", type=Path, default=None, metavar="DIR",
                        help="profile ncnn rows on ncnn's own benchmark graphs: benchmark/models of a Tencent/ncnn checkout")
    parser.add_argument("--ncnn-benchmark-commit", default="", metavar="SHA",
                        help="the commit DIR was read from (recorded in each profile's graph_source)")
    parser.add_argument("--also-views", nargs="*", default=[], metavar="VIEW",
                        help="also profile every graph of a site's runtime under these views of the site")
    parser.add_argument("--reprice", action="store_true",
                        help="price the stored profiles' kept block files again (<graphs>/blocks), no emulation")
    parser.add_argument("--merge", type=Path, nargs="*", default=[], metavar="FILE",
                        help="only merge the profiles of these files (other runs' --out) into --out")
    args = parser.parse_args(argv)

    # the plugin's source digest (the image records its own build's digest; the source decides the counts)
    args.plugin_digest = "sha256:" + sha256_files(REPO / "lodevem" / "sandbox" / "armsim" / "lodevem_icount.c")[:16]
    store = json.loads(args.out.read_text()) if args.out.exists() else {"profiles": []}
    if args.merge:
        args.out.write_text(json.dumps(merge(store, args.merge), indent=1) + "\n")
        print(f"{args.out}: {len(store['profiles'])} profiles after merging {len(args.merge)} file(s)")
        return 0
    if args.reprice:
        done = reprice(store, Path(args.graphs))
        args.out.write_text(json.dumps(store, indent=1) + "\n")
        print(f"{args.out}: {done} profiles repriced from their kept block files")
        return 0
    if not (args.views and args.plugin and args.guest and args.site):
        parser.error("--views, --plugin, --guest and --site are needed to profile (or --merge FILE...)")
    # with --blocks, a stored profile without block cycles is not done (armv7 blocks are not costed)
    if args.ncnn_benchmark and not args.ncnn_benchmark_commit:
        parser.error("--ncnn-benchmark needs --ncnn-benchmark-commit (the provenance of the graphs)")
    done = {(p["graph_file"], p["uarch"], p.get("wheels")) for p in store["profiles"]
            if not args.blocks or p.get("block_cycles")}
    for job in jobs(args):
        if (job_graph_file(job), job["uarch"], job["site_label"]) in done and not args.redo:
            continue
        if args.dry_run:
            print(job["key"])
            continue
        try:
            prof = one_profile(job, args)
        except Exception as exc:  # one graph that fails is reported, the rest go on
            print(f"FAILED {job['key']}: {exc}", flush=True)
            continue
        ident = (prof["graph_file"], prof["uarch"], prof["runtime_version"])
        store["profiles"] = [p for p in store["profiles"] if (p["graph_file"], p["uarch"], p["runtime_version"]) != ident]
        save(store, prof, args.out, job["key"],
             lambda p: (p["graph_key"], p["runtime"], p["uarch"], p["precision"], p["runtime_version"]))
    return 0


def save(store: dict[str, Any], prof: dict[str, Any], out: Path, key: str, order: Any) -> None:
    """Add a new profile to the store (the caller removed the one it replaces), write it, say so."""
    store["profiles"].append(prof)
    store["profiles"].sort(key=order)
    out.write_text(json.dumps(store, indent=1) + "\n")
    print(f"{key}: {prof['total_instructions'] / 1e6:.1f} M instructions, {prof['precision']}, "
          f"{prof['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
