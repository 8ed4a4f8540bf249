"""armsim takes the phone's code path: each stored profile saw its phone core's identity and ran
the micro-kernels the runtime selects on that core (issue 35 item 2). Pure: the stored dev profiles
(``data/armsim_dev_profiles.json``) and the shipped zoo profiles (``data/armsim_zoo_profiles.json``),
made by scripts/profile_armsim_dev.py and scripts/profile_armsim_zoo.py."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from lodevem.latency.armsim.shipped import SHIPPED_PROFILES, shipped_records
from lodevem.sandbox.armsim.make_views import VIEWS, midr

REPO = Path(__file__).resolve().parents[1]
DEV = json.loads((REPO / "lodevem" / "data" / "armsim_dev_profiles.json").read_text())["profiles"]
ZOO = json.loads(SHIPPED_PROFILES.read_text())["profiles"]
ARMV82 = {"cortex-a55", "cortex-a75", "cortex-a76"}
ARMV82_ONLY = {"asimddp", "fphp", "asimdhp"}  # Linux hwcap names of dot product and fp16 arithmetic
GEMM_F32, GEMM_QS8 = r"xnn_f32_i?gemm_", r"xnn_qs8_\w*i?gemm_"  # XNNPACK's (indirect) GEMM micro-kernels


def _top(profile: dict, pattern: str) -> str:
    """The largest function whose name matches ``pattern`` (XNNPACK's GEMMs: where the time goes)."""
    names = [k["symbol"] for k in profile["kernels"] if re.search(pattern, k["symbol"])]
    assert names, (profile["graph_key"], profile["uarch"], profile["kernels"][:3])
    return names[0]


def _zoo(model: str, runtime: str, level: str, view: str) -> dict:
    found = [p for p in ZOO if (p["model"], p["runtime"], p["level"], p["uarch"]) == (model, runtime, level, view)]
    assert len(found) == 1, (model, runtime, level, view)
    return found[0]


@pytest.mark.parametrize("profile", [p for p in DEV + ZOO if p.get("identity")],
                         ids=lambda p: f"{p['graph_key']}-{p['runtime']}-{p['uarch']}-{p['precision']}")
def test_every_profile_saw_its_phone_cores_identity(profile: dict) -> None:
    """MIDR in /proc/cpuinfo, sysfs and (AArch64) the MIDR_EL1 register read; HWCAPs of the core's
    ISA: dot product and fp16 arithmetic on the A55/A75/A76, none of them on the A53/A72/A73/A7."""
    arch, impl, variant, part, rev, architecture, features = VIEWS[profile["uarch"]]
    ident = profile["identity"]
    assert int(ident["CPU part"], 16) == part and int(ident["CPU variant"], 16) == variant
    assert int(ident["sysfs_midr"], 16) == midr(impl, variant, part, rev, architecture)
    if arch == "arm64":
        assert int(ident["mrs_midr"], 16) == midr(impl, variant, part, rev, architecture)
        assert set(ident["hwcap"]) == set(features.split()) - {"evtstrm"}  # qemu-user sets no event stream
    hw = set(ident["hwcap"])
    assert (ARMV82_ONLY <= hw) if profile["uarch"] in ARMV82 else not (ARMV82_ONLY & hw)


@pytest.mark.parametrize("model", sorted({p["model"] for p in ZOO}))
def test_xnnpack_selects_each_cores_own_gemm_kernels(model: str) -> None:
    """LiteRT 2.3.0's XNNPACK (cpuinfo reads the MIDR and HWCAPs): the A53's and A55's tuned f32
    GEMMs under their views, a big-core kernel under the A75's; for int8-static the A53 runs the
    widening multiply-accumulate (no dot product on ARMv8.0), the A55 and A75 SDOT kernels."""
    f32 = {v: _top(_zoo(model, "tflite", "fp32", v), GEMM_F32) for v in ("cortex-a53", "cortex-a55", "cortex-a75")}
    assert "cortex_a53" in f32["cortex-a53"] and "cortex_a55" in f32["cortex-a55"], f32
    assert not any(core in f32["cortex-a75"] for core in ("cortex_a53", "cortex_a55")), f32
    q8 = {v: _top(_zoo(model, "tflite", "int8-static", v), GEMM_QS8) for v in ("cortex-a53", "cortex-a55", "cortex-a75")}
    assert "neondot" not in q8["cortex-a53"] and "mlal" in q8["cortex-a53"], q8
    assert "neondot" in q8["cortex-a55"] and "neondot" in q8["cortex-a75"], q8
    for view in ("cortex-a53", "cortex-a55", "cortex-a75"):  # fp16 weights are dequantized at load: fp32 kernels
        fp16 = _zoo(model, "tflite", "fp16", view)
        assert fp16["precision"] == "fp32" and _top(fp16, GEMM_F32) == f32[view]


@pytest.mark.parametrize("model", sorted({p["model"] for p in ZOO}))
def test_ncnn_takes_fp16_arithmetic_only_where_the_core_has_it(model: str) -> None:
    for view in ("cortex-a7", "cortex-a53", "cortex-a55", "cortex-a75"):
        p = _zoo(model, "ncnn", "fp32", view)
        fp16 = view in ARMV82
        assert p["precision"] == ("fp16" if fp16 else "fp32") and (p["counts"]["simd_fp16"] > 0) == fp16, view


def test_ncnn_int8_runs_sdot_where_the_core_has_it_and_its_a53_path_on_the_a53() -> None:
    for p in DEV:
        if p["runtime"] == "ncnn" and p["precision"] == "int8" and p["isa"] != "armv7":
            assert (p["counts"]["simd_dot"] > 0) == (p["uarch"] in ARMV82), (p["graph_key"], p["uarch"])
    # ncnn 2025 picks its A53/A55-tuned kernels from the MIDR: the ldr d + ldr x + ins idiom
    a53 = [p for p in DEV if p["runtime_version"] == "ncnn 1.0.20250503" and p["precision"] == "fp32"]
    assert a53 and all(p["uarch"] == "cortex-a53" and p["ins_gpr"] > 0.01 * p["total_instructions"] for p in a53)


def test_shipped_profiles_describe_what_lodevem_makes_today() -> None:
    """The shipped zoo profiles' inputs: the zoo ``.pt`` lodevem writes now has the stored digest
    (its weights are seeded), each record has the product's key (the converted file's digest), and
    the store covers every shipped phone profile's fastest core for each runtime."""
    from lodevem import zoo
    from lodevem.latency.armsim.isa import uarch_for_core
    from lodevem.profiles import load_profiles

    records = shipped_records()
    assert len(records) == len(ZOO) and all(prof.blocks and prof.blocks.cycles for prof, _ in records)
    for model in sorted({p["model"] for p in ZOO}):
        digests = {p["zoo_pt_sha256"] for p in ZOO if p["model"] == model}
        built = zoo.build(model)
        import io

        import torch

        buffer = io.BytesIO()
        torch.save(built, buffer)
        assert digests == {hashlib.sha256(buffer.getvalue()).hexdigest()}, model
    views = {uarch_for_core(p.fastest_cluster.core) for p in load_profiles()}
    for model in {p["model"] for p in ZOO}:
        for view in views:
            assert any(p["model"] == model and p["runtime"] == "ncnn" and p["uarch"] == view for p in ZOO)
            if view != "cortex-a7":  # LiteRT publishes no armv7 wheel
                assert {p["level"] for p in ZOO if (p["model"], p["runtime"], p["uarch"]) == (model, "tflite", view)} \
                    == {"fp32", "fp16", "int8-static"}


def test_a_job_for_a_shipped_file_reads_its_profile_without_a_sandbox(tmp_path: Path, monkeypatch) -> None:
    """The profiler keys shipped profiles as it keys its cache: the converted file's digest, runtime,
    view, threads and input shape; anything else (here another input shape) needs the sandbox."""
    from lodevem.latency.armsim import profiler as profiler_mod
    from lodevem.latency.armsim.profiler import ArmsimProfiler, ProfileJob

    prof, rec = next((p, r) for p, r in shipped_records() if r["runtime"] == "tflite" and r["uarch"] == "cortex-a55")
    converted = tmp_path / "model.tflite"
    converted.write_bytes(b"stand-in: the digest is what matters")
    monkeypatch.setattr(profiler_mod, "converted_sha256", lambda path: prof.model_sha256)
    profiler = ArmsimProfiler(None, None, 60)
    job = ProfileJob(converted, "tflite", "armv8.2", uarch="cortex-a55", input_shape=tuple(rec["input_shape"]))
    got = profiler.profile(job)
    assert got.profile is prof and got.cached and profiler.shipped == 1 and profiler.made == 0
    other = profiler.profile(ProfileJob(converted, "tflite", "armv8.2", uarch="cortex-a55", input_shape=(1, 3, 96, 96)))
    assert other.profile is None and "no shipped profile" in other.error
