"""Instruction profiles of converted models, made in the armsim sandbox and cached on disk.

Why cached: one profile emulates a whole inference (and the interpreter's start) instruction by
instruction, seconds to a minute each; a rerun of unchanged inputs must cost nothing. The key is
everything the counts depend on (``profile_key``): the converted files' bytes, runtime and its
pinned Arm wheel version, ISA, uarch view, precision path, threads, input shape, the plugin and
view sources and the worker version. Kept small (one function for the key, ``JsonCache`` for the
storage) so it can move into lodevem's shared artifact store.

A failure (a model the Arm runtime cannot load, a timeout) is remembered for the run, never
cached: the next run tries again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...wire.profile_section import InstructionProfile
from ...wire.protocol import artifact_files
from ..cache import JsonCache, digest, file_digest
from .isa import runtime_isas
from .shipped import shipped_records

PROFILE_FORMAT = 1
_PACKAGE = Path(__file__).resolve().parent.parent.parent  # lodevem/
# What decides the counts besides the model: our plugin and cpu views, the guest script and the
# image recipe (the worker version covers the guest script too; listed for readers).
_SOURCES = ("sandbox/armsim/lodevem_icount.c", "sandbox/armsim/make_views.py", "worker/armsim/armsim_guest.py",
            "worker/armsim/armsim_profile.py", "worker/armsim/armsim_blocks.py", "worker/armsim/armsim_inorder.py",
            "worker/armsim/armsim_cores.py", "worker/armsim/armsim_arm32.py", "worker/armsim/armsim_symbols.py")
ARM_HALVES = "runtimes/*/arm.py"  # each runtime's Arm half, which the guest script runs


def pinned_versions() -> dict[str, str]:
    """The Arm guests' runtime pins (``wire.registry``: the armsim image installs them)."""
    from ...wire.registry import ARMSIM_AARCH64_REQUIREMENTS, ARMSIM_ARMV7L_REQUIREMENTS

    pins = {}
    for requirement in ARMSIM_AARCH64_REQUIREMENTS + tuple(f"{r}#armv7l" for r in ARMSIM_ARMV7L_REQUIREMENTS):
        name, _, version = requirement.partition("==")
        pins[name] = version
    return pins


def sources_digest() -> str:
    """sha256 over the plugin, the cpu views, the guest script and Dockerfile.armsim (when the
    checkout has it): a change to any of them is another profile."""
    parts = []
    for rel in (*_SOURCES, *sorted(p.relative_to(_PACKAGE).as_posix() for p in _PACKAGE.glob(ARM_HALVES))):
        path = _PACKAGE / rel
        parts.append([rel, path.read_text() if path.is_file() else None])
    dockerfile = _PACKAGE.parent / "Dockerfile.armsim"
    parts.append(["Dockerfile.armsim", dockerfile.read_text() if dockerfile.is_file() else None])
    return digest(parts)


@dataclass(frozen=True)
class ProfileJob:
    """One profile to make: a converted model under a runtime on an emulated core."""

    converted: Path  # a .tflite, or an ncnn .param (its .bin beside it)
    runtime: str  # tflite | ncnn
    isa: str  # armv7 | armv8.0 | armv8.2
    threads: int = 1
    precision: str = "auto"  # auto (the runtime's default on that ISA) | fp32 | fp16
    uarch: Optional[str] = None  # the core the guest's /proc/cpuinfo names; None: the ISA's default
    input_shape: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class ProfileResult:
    """A profile, or why there is none (``error``, one line)."""

    profile: Optional[InstructionProfile]
    error: str = ""
    cached: bool = False


def converted_sha256(converted: Path) -> str:
    """One digest over every file of a converted model (an ncnn model is .param + .bin)."""
    return digest([file_digest(Path(f)) for f in artifact_files(str(converted))])


def profile_key(job: ProfileJob, worker_version: str, model_sha256: Optional[str] = None, warmup: int = 0,
                inferences: int = 1) -> str:
    """The cache key of ``job``: everything its counts depend on."""
    return digest({"format": PROFILE_FORMAT, "model_sha256": model_sha256 or converted_sha256(job.converted),
                   "runtime": job.runtime, "isa": job.isa, "uarch": job.uarch, "precision": job.precision,
                   "threads": job.threads, "input_shape": list(job.input_shape) if job.input_shape else None,
                   "warmup": warmup, "inferences": inferences,
                   "versions": pinned_versions(), "sources": sources_digest(), "worker": worker_version})


class ArmsimProfiler:
    """Makes and caches profiles through a WorkerClient (Docker backend: the lodevem-armsim image),
    handed in by the face (``latency.kinds.SandboxAccess``: this package imports no sandbox code).

    ``cache_dir``: where profiles are kept (``<output>/.cache/armsim``); None keeps none.
    ``warmup``/``inferences``: uncounted and counted inferences per profile. No warm-up by
    default: both runtimes pack weights while loading (ncnn in load_model, XNNPACK when LiteRT
    applies the delegate), and a warmed-up inference counted within 0.01 % of a first one
    (mobilenet_v2, tflite and ncnn, ARMv8.0: 196.56 M vs 196.57 M, 184.51 M vs 184.52 M),
    while a warm-up costs a whole emulated inference. Thread-safe: a profile wanted twice at
    once is made once.
    """

    def __init__(self, client: Any, cache_dir: Optional[Path], timeout_s: float, *,
                 use_cache: bool = True, warmup: int = 0, inferences: int = 1) -> None:
        self.client, self.timeout_s = client, timeout_s
        self.cache = JsonCache(Path(cache_dir) if cache_dir is not None else None, enabled=use_cache)
        self.warmup, self.inferences = warmup, inferences
        self._lock = threading.Lock()
        self._done: dict[str, ProfileResult] = {}
        self._key_locks: dict[str, threading.Lock] = {}
        self.made = 0
        self.hits = 0
        self.shipped = 0  # profiles read from the ones lodevem ships (shipped.py), no emulation
        self.emulation_s = 0.0

    def profile(self, job: ProfileJob) -> ProfileResult:
        if job.isa not in runtime_isas(job.runtime):
            return ProfileResult(None, f"armsim has no {job.runtime} build for {job.isa}")
        missing = [f for f in artifact_files(str(job.converted)) if not Path(f).is_file()]
        if missing:
            return ProfileResult(None, f"{missing[0]}: converted model file not found")
        sha = converted_sha256(job.converted)
        shipped = self._shipped(job, sha)
        if shipped is not None:
            return shipped
        if self.client is None:
            return ProfileResult(None, "no sandbox to emulate in and no shipped profile of this file")
        key = profile_key(job, self.client.worker_version, sha, self.warmup, self.inferences)
        with self._lock:  # one lock per key: different profiles run in parallel, the same one once
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key in self._done:
                return self._done[key]
            kept = self.cache.get(key)
            parsed = InstructionProfile.parse(kept) if kept is not None else None
            if parsed is not None:
                with self._lock:
                    self.hits += 1
                result = ProfileResult(parsed, cached=True)
            else:
                result = self._make(job, sha)
                if result.profile is not None:
                    self.cache.put(key, result.profile.to_dict())
            self._done[key] = result
            return result

    def _shipped(self, job: ProfileJob, sha: str) -> Optional[ProfileResult]:
        """The profile lodevem ships for exactly this converted file (``shipped``: the zoo models
        under the shipped profiles' views), when the job asks what it was made with: the runtime's
        default precision path, 1 thread, the same input shape."""
        if job.precision != "auto" or job.uarch is None:
            return None
        want = (sha, job.runtime, job.uarch, job.threads)
        for prof, record in shipped_records():
            if (prof.model_sha256, prof.runtime, prof.uarch, prof.threads) == want \
                    and (job.input_shape is None or list(job.input_shape) == record.get("input_shape")):
                with self._lock:
                    self.shipped += 1
                return ProfileResult(prof, cached=True)
        return None

    def _make(self, job: ProfileJob, sha: str) -> ProfileResult:
        run = self.client.armsim_profile(job.converted, job.runtime, job.isa, job.precision, job.threads,
                                         job.input_shape, self.timeout_s, uarch=job.uarch, warmup=self.warmup,
                                         inferences=self.inferences)
        with self._lock:
            self.made += 1
            self.emulation_s += run.outcome.wall_s
        reply = run.reply
        if not run.ok or reply is None or reply.profile is None:
            return ProfileResult(None, run.failure_message("the armsim profile came back without counts"))
        import dataclasses

        return ProfileResult(dataclasses.replace(reply.profile, model_sha256=sha))


def describe(profiler: Optional[ArmsimProfiler]) -> dict[str, Any]:
    """For the manifest: how many profiles were made and read from the cache, and the cost."""
    if profiler is None:
        return {}
    return {"profiles_made": profiler.made, "profiles_cached": profiler.hits, "profiles_shipped": profiler.shipped,
            "emulation_s": round(profiler.emulation_s, 1), "sources_sha256": sources_digest()[:16]}
