"""armsim against the REAL lodevem-armsim image: qemu-user, lodevem's counting plugin, the Arm
builds of ncnn and LiteRT on converted zoo models (converted in the real converter image).

Small models at small inputs keep each emulation to seconds. The cost model is armfit's; the
plumbing test that needs a latency uses a clearly named placeholder cost function, never shown to
a user. See docs/armsim.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lodevem import zoo
from lodevem.latency.armsim.costmodel import COST_MODEL_VERSION
from lodevem.latency.armsim.isa import covered, isa_for_core
from lodevem.latency.armsim.predictor import ArmsimPredictor
from lodevem.latency.armsim.profiler import ArmsimProfiler, ProfileJob, profile_key
from lodevem.profiles import load_profiles
from lodevem.sandbox import image
from lodevem.sandbox.artifacts import ConvertCache
from lodevem.sandbox.client import WorkerClient
from lodevem.store import ArtifactStore
from lodevem.wire.profile_section import DISJOINT_CLASSES, InstructionProfile
from lodevem.wire.protocol import WORKER_VERSION

pytestmark = pytest.mark.docker

SMALL = (1, 3, 64, 64)


@pytest.fixture(scope="session")
def armsim_backend(docker_backend):
    """The session's DockerBackend with the armsim and converter images built when missing."""
    for spec in image.specs_for_runtimes(["armsim"]):
        if not image.image_status(spec=spec).present:
            image.build_image(spec=spec)
    return docker_backend


@pytest.fixture(scope="session")
def converted(armsim_backend, tmp_path_factory: pytest.TempPathFactory, shared_store: ArtifactStore) -> dict[str, Path]:
    """tiny_cnn and mobilenet_v2 converted to ncnn and tflite at 64x64, once per session."""
    folder = tmp_path_factory.mktemp("armsim-models")
    client = WorkerClient(armsim_backend)
    converts = ConvertCache(client, shared_store, 900)
    out = {}
    for name in ("tiny_cnn", "mobilenet_v2"):
        path = zoo.write(name, folder)
        from lodevem.worker.load.formats import file_sha256

        for runtime in ("ncnn", "tflite"):
            result = converts.convert(path, file_sha256(str(path)), runtime, SMALL)
            assert result.path is not None, result.error
            out[f"{name}.{runtime}"] = result.path
        if name == "tiny_cnn":  # the int8-static level as LiteRT runs it (PT2E while converting)
            result = converts.convert(path, file_sha256(str(path)), "tflite", SMALL, quantize="int8-static")
            assert result.path is not None, result.error
            out[f"{name}.tflite-int8"] = result.path
    return out


def _profile(backend, path: Path, runtime: str, isa: str, cache: Path | None = None, **kw) -> InstructionProfile:
    profiler = ArmsimProfiler(WorkerClient(backend), cache, 900)
    result = profiler.profile(ProfileJob(path, runtime, isa, input_shape=SMALL, **kw))
    assert result.profile is not None, result.error
    return result.profile


def test_profile_counts_are_deterministic(armsim_backend, converted) -> None:
    first = _profile(armsim_backend, converted["tiny_cnn.ncnn"], "ncnn", "armv8.0")
    second = _profile(armsim_backend, converted["tiny_cnn.ncnn"], "ncnn", "armv8.0")
    assert first.counts == second.counts
    assert first.total_instructions > 10_000
    assert sum(first.counts[c] for c in DISJOINT_CLASSES) == first.total_instructions
    assert first.runtime == "ncnn" and first.runtime_version.startswith("ncnn 1.0.")
    assert (first.isa, first.qemu_cpu, first.uarch, first.precision) == ("armv8.0", "cortex-a53", "cortex-a53", "fp32")
    assert first.counts["simd_fp16"] == 0 and first.counts["simd_dot"] == 0  # ARMv8.0 has neither


def test_fp16_path_has_fewer_simd_instructions_than_fp32(armsim_backend, converted) -> None:
    """ncnn's default on an ARMv8.2 core is fp16 arithmetic: 8 lanes per NEON op instead of 4."""
    v80 = _profile(armsim_backend, converted["mobilenet_v2.ncnn"], "ncnn", "armv8.0")
    v82 = _profile(armsim_backend, converted["mobilenet_v2.ncnn"], "ncnn", "armv8.2")
    assert v80.precision == "fp32" and v82.precision == "fp16"
    assert v82.counts["simd_fp16"] > 0.5 * v82.counts["simd_arith"]
    assert v82.counts["simd_arith"] < 0.8 * v80.counts["simd_arith"], (v80.counts, v82.counts)
    forced = _profile(armsim_backend, converted["mobilenet_v2.ncnn"], "ncnn", "armv8.2", precision="fp32")
    assert forced.precision == "fp32" and forced.counts["simd_fp16"] == 0


def test_litert_runs_fp32_on_armv82_by_default(armsim_backend, converted) -> None:
    """XNNPACK takes fp16 only when told to: a float .tflite runs fp32 kernels on ARMv8.2 too."""
    prof = _profile(armsim_backend, converted["tiny_cnn.tflite"], "tflite", "armv8.2")
    assert prof.precision == "fp32" and prof.runtime_version.startswith("ai-edge-litert")
    assert prof.counts["simd_fp16"] < 0.01 * prof.counts["simd_arith"]


def test_the_guest_sees_its_phone_core_and_the_profile_names_its_kernels(armsim_backend, converted) -> None:
    """The image's views and the worker's -cpu midr=: the A55's MIDR by cpuinfo, sysfs and mrs,
    the ARMv8.2 HWCAPs; XNNPACK's A55-tuned GEMM by name; the in-order model prices the blocks."""
    prof = _profile(armsim_backend, converted["mobilenet_v2.tflite"], "tflite", "armv8.2", uarch="cortex-a55")
    assert prof.identity["CPU part"] == "0xd05" and int(prof.identity["mrs_midr"], 16) == 0x411FD050
    assert {"asimddp", "fphp", "asimdhp"} <= set(prof.identity["hwcap"])
    assert any("f32_gemm" in k.symbol and "cortex_a55" in k.symbol for k in prof.kernels[:3]), prof.kernels[:3]
    assert prof.blocks is not None and prof.blocks.cycles["inorder-a55"][0] > 0


def test_int8_path_differs_and_uses_dot_products_on_armv82(armsim_backend, converted) -> None:
    fp32 = _profile(armsim_backend, converted["tiny_cnn.tflite"], "tflite", "armv8.2")
    int8 = _profile(armsim_backend, converted["tiny_cnn.tflite-int8"], "tflite", "armv8.2")
    int8_v80 = _profile(armsim_backend, converted["tiny_cnn.tflite-int8"], "tflite", "armv8.0")
    assert (fp32.precision, int8.precision, int8_v80.precision) == ("fp32", "int8", "int8")
    assert int8.counts != fp32.counts
    assert int8.counts["simd_dot"] > 0 and fp32.counts["simd_dot"] == 0  # XNNPACK's QS8 SDOT kernels
    assert int8_v80.counts["simd_dot"] == 0  # ARMv8.0 has no dot product: other kernels
    assert int8.total_instructions < int8_v80.total_instructions


def test_cache_keys_and_cached_rerun(armsim_backend, converted, tmp_path: Path) -> None:
    path = converted["tiny_cnn.ncnn"]
    base = ProfileJob(path, "ncnn", "armv8.0", 1, "auto", None, SMALL)
    keys = {profile_key(job, WORKER_VERSION) for job in (
        base, ProfileJob(path, "ncnn", "armv8.2", 1, "auto", None, SMALL),
        ProfileJob(path, "ncnn", "armv8.0", 2, "auto", None, SMALL),
        ProfileJob(path, "ncnn", "armv8.0", 1, "fp32", None, SMALL),
        ProfileJob(path, "ncnn", "armv8.0", 1, "auto", "cortex-a73", SMALL),
        ProfileJob(converted["mobilenet_v2.ncnn"], "ncnn", "armv8.0", 1, "auto", None, SMALL))}
    assert len(keys) == 6
    assert profile_key(base, WORKER_VERSION) != profile_key(base, WORKER_VERSION + "x")
    first = ArmsimProfiler(WorkerClient(armsim_backend), tmp_path, 900)
    made = first.profile(base)
    assert made.profile is not None and not made.cached and first.made == 1
    again = ArmsimProfiler(WorkerClient(armsim_backend), tmp_path, 900)
    hit = again.profile(base)
    assert hit.cached and again.made == 0 and hit.profile == made.profile


def test_the_container_has_no_network_and_a_timeout(armsim_backend, converted, monkeypatch) -> None:
    from docker.models.containers import ContainerCollection

    created: list[dict] = []
    real_create = ContainerCollection.create  # docker-py makes a new collection per access: patch the class

    def recording_create(self, *args, **kwargs):  # the real call, its arguments kept
        created.append(kwargs)
        return real_create(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "create", recording_create)
    profiler = ArmsimProfiler(WorkerClient(armsim_backend), None, timeout_s=2)
    result = profiler.profile(ProfileJob(converted["mobilenet_v2.tflite"], "tflite", "armv8.0", input_shape=SMALL))
    monkeypatch.undo()
    assert result.profile is None and "timeout" in result.error, result
    assert created and all(kw["network_disabled"] and kw["read_only"] and kw.get("mem_limit") for kw in created)


def test_armv7_is_ncnn_only_and_profiles(armsim_backend, converted) -> None:
    assert not covered("tflite", "Cortex-A7") and covered("ncnn", "Cortex-A7")
    prof = _profile(armsim_backend, converted["tiny_cnn.ncnn"], "ncnn", "armv7")
    assert prof.qemu_cpu == "cortex-a7" and prof.total_instructions > 10_000
    assert prof.counts["simd_arith"] > 0
    assert prof.blocks is not None and prof.blocks.cycles["inorder-a7"][0] > 0  # A32/T32 blocks priced too


def placeholder_cost_for_plumbing_tests(profile, core, clock_ghz, threads):
    """NOT a latency: instructions / clock, for checking the predictor's plumbing only."""
    ms = profile.total_instructions / (clock_ghz * 1e6)
    return ms, ms * 0.9, ms * 1.1, "placeholder cost (plumbing test)"


def test_predictor_cells_name_their_source(armsim_backend, converted, tmp_path: Path) -> None:
    profiles = {p.id: p for p in load_profiles()}
    a55 = next(p for p in profiles.values() if p.fastest_cluster.core == "Cortex-A55")
    a7 = next(p for p in profiles.values() if p.fastest_cluster.core == "Cortex-A7")
    predictor = ArmsimPredictor(ArmsimProfiler(WorkerClient(armsim_backend), tmp_path, 900), "ncnn",
                                cost_model=placeholder_cost_for_plumbing_tests)
    cells = predictor.predict(converted["tiny_cnn.ncnn"], [a55, a7], threads=1, input_shape=SMALL)
    cell = cells[a55.id]
    assert cell.latency_ms is not None and cell.runtime == "ncnn"
    assert cell.latency_source.startswith(f"armsim:{COST_MODEL_VERSION} ncnn armv8.2 (Cortex-A55@")
    assert isa_for_core("Cortex-A7") == "armv7"
    assert cells[a7.id].latency_source.startswith(f"armsim:{COST_MODEL_VERSION} ncnn armv7")
    missing = ArmsimPredictor(ArmsimProfiler(WorkerClient(armsim_backend), tmp_path, 900), "tflite",
                              cost_model=placeholder_cost_for_plumbing_tests).predict_one(
        converted["tiny_cnn.ncnn"].with_name("absent.tflite"), a55, 1, SMALL)
    assert missing.latency_ms is None and "not found" in (missing.note or "")


class DataDependent(__import__("torch").nn.Module):
    """Control flow on a tensor's value: TorchScript keeps it, litert-torch cannot convert it."""

    def __init__(self) -> None:
        super().__init__()
        import torch

        self.conv = torch.nn.Conv2d(3, 8, 3)

    def forward(self, x):
        y = self.conv(x)
        if bool(y.sum() > 0):
            return y.relu()
        return -y


@pytest.mark.fresh_store  # it counts the profiles its run made
def test_start_with_armsim_keeps_going_past_a_failed_conversion(armsim_backend, tmp_path: Path, monkeypatch) -> None:
    import warnings

    import torch

    from lodevem.latency.armsim import predictor as predictor_module
    from lodevem.profiles import select_profiles
    from lodevem.runner import RunConfig, run_benchmark

    # armfit's cost model stands in as a placeholder (the armsim kind reads it from the predictor module)
    monkeypatch.setattr(predictor_module, "default_cost_model", lambda: placeholder_cost_for_plumbing_tests)
    bad = tmp_path / "data_dependent.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(DataDependent().eval()).save(str(bad))
    good = zoo.write("tiny_cnn", tmp_path)
    a53 = [p for p in load_profiles() if p.fastest_cluster.core == "Cortex-A53"][:1]
    config = RunConfig.of(models=(good, bad), profiles=tuple(select_profiles(a53, ids=[a53[0].id])), warmup=1, runs=2,
                       output=tmp_path / "out", backend="docker", runtime="tflite", jobs=2, predictor="armsim",
                       timeout_s=600)
    outcome = run_benchmark(config, backend=armsim_backend)
    rows = {r.model.label: r for r in outcome.rows}
    assert rows["tiny_cnn.pt"].latency.source.startswith(f"armsim:{COST_MODEL_VERSION} tflite armv8.0 (Cortex-A53@")
    assert rows["tiny_cnn.pt"].latency.ms is not None and rows["tiny_cnn.pt"].verdict == "fits"
    failed = rows["data_dependent.pt"]  # no .tflite to emulate: no armsim latency, RAM under torch (issue 38)
    assert failed.latency.ms is None and "tflite conversion failed" in (failed.latency.note or "")
    assert failed.memory.runtime_shown == "torch (fallback)" and failed.memory.peak_rss_mb is not None
    assert (outcome.manifest.run.predictor or {})["armsim"]["profiles_made"] == 1
