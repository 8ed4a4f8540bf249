"""Benchmarks that cannot rot: every script in benchmarks/ runs in its --quick mode, as a user
would run it (a new interpreter, the real engine), and must print its figures.

No figure is compared with a target here: the machine is shared, and the targets are judged by
the full runs (each script's docstring says which). What the test catches is a benchmark that
no longer runs, or that stopped printing what its docstring promises.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_slurm import slurm_conf  # noqa: F401  (the fixture that brings the cluster up)

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


@dataclass(frozen=True)
class Quick:
    """One benchmark's quick run: extra arguments and the lines its output must contain."""

    script: str
    figures: tuple[str, ...]  # regular expressions, each must match a line of stdout
    args: tuple[str, ...] = ()
    needs: tuple[str, ...] = field(default=("docker",))


QUICK = {q.script: q for q in (
    Quick("armsim_time.py", (r"^\s+profiles: 1 \(armv8\.0/cortex-a53\) in \d+\.\d+ s wall",
                             r"^\s+cached rerun: 0 profiles made, 1 from the cache")),
    Quick("conversion_levels.py", (r"^ncnn\s+int8-static\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+int8-static$",
                                   r"^ncnn\s+fp16\s+.*\s+fp16$", r"^all conversions \(4\) in \d+\.\d+ s wall")),
    Quick("cached_rerun.py", (r"^first run\s+\d+\.\d+ s", r"^cached reruns\s+\d+\.\d+ s",
                              r"^rerun / first\s+\d+\.\d+", r"every measurement cached: True",
                              r"^rerun imported heavy modules: none")),
    Quick("eval_cost.py", (r"^host peak RSS preparing 40 samples: \d+ MB",
                           r"^host peak RSS preparing 160 samples: \d+ MB",
                           r"^evaluate mobilenet_v2 under tflite: 40 samples in \d+\.\d+ s wall")),
    Quick("hostile_inputs.py", (r"^log line of \d+ KB: lodevem's parser \d+\.\d+ ms CPU",
                                r"^a model printing \d+ MB \(process backend\): host peak RSS .* reply ok: True",
                                r"^read-back cases: (\d+) of \1 held$"),
          needs=()),
    Quick("latency_accuracy.py", (r"^LODO per core \(1-thread float, (NOT )?nested\): Cortex-A53=\d",
                                  r"^\s+Cortex-A55 1-thread\s+<= 15%: (MET|NOT MET) \(",
                                  r"^LODO folds=soc nested=(yes|no) predictor=default 1t_fp32=\S+ threads=\S+ fp16=\S+ "
                                  r"int8=\S+ a53_1t=\S+ a55_1t=\S+ a7_1t=\S+$",
                                  r"^\s+90% band coverage on held-out SoCs in 85-95%: (MET|NOT MET) \(\d",
                                  r"^\s+one-shot calibration <= 8%: (MET|NOT MET) \(\d",
                                  r"^\s+per-model A55/A53 ratio error on board pairs <= 10%: (MET|NOT MET) \(\d",
                                  r"^\s+API warm call <= 5 ms: (MET|NOT MET) \(\d+\.\d+ ms",
                                  r"^ISSUE44 coverage=\S+ oneshot=\S+ ratio_a55_a53=\S+ warm_ms=\S+"), needs=()),
    Quick("predict_api.py", (r"^first call: median \d+\.\d+ s", r"^cached call: median \d+\.\d+ ms",
                             r"^nn\.Module \(mobilenet_v2\) passed directly"), needs=()),
    Quick("runtime_memory.py", (r"^conversions \(\d+ s\)", r"^tiny_cnn\s+ncnn\s+True\s+\d+\.\d+",
                                r"^tiny_cnn\s+torch\s+fits\s+\d+\.\d+", r"^lodevem-bench:\S+\s+\d+")),
    Quick("slurm_vs_docker.py", (r"^slurm\s+\(one job per run\):\s+\d+\.\d+ s", r"^slurm/docker = \d+\.\d+",
                                 r"^verdicts agree: 2/2"), needs=("docker", "slurm")),
    Quick("first_run.py", (r"^images make demo builds: lodevem-bench:\S+, lodevem-litert:\S+, lodevem-convert:\S+ "
                           r"\(make test builds",
                           r"^start \(1 model x nokia_c1, cold\)\s+\d+\.\d+ s", r"^total \(demo steps\)\s+\d+\.\d+ s")),
    Quick("compression_table.py", (r"^\s+mobilenet_v2\s+int8-static\s+tflite\s+peak\s+\d",
                                   r"^\s+mobilenet_v2\s+int8-static\s+ncnn\s+peak\s+\d", r"^\s+rows with a peak: 10 of 10",
                                   r"^\s+cold run\s+\d+\.\d+ s wall", r"^\s+cached run\s+\d+\.\d+ s wall")),
    Quick("worker_overheads.py", (r"cache hit \d+\.\d+ s \(median of 1",
                                  r"verdict timeout, back after \d+\.\d+ s")),
)}


# Quick runs another test file makes, with more checks than printed figures.
ELSEWHERE = {"harness.py": "test_harness.py"}


def test_every_benchmark_has_a_quick_run() -> None:
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert scripts == sorted([*QUICK, *ELSEWHERE]), "a benchmark without a quick run in the tests rots unseen"
    for script, test_file in ELSEWHERE.items():
        text = (ROOT / "tests" / test_file).read_text()
        assert script in text and '"--quick"' in text, f"tests/{test_file} no longer runs {script} --quick"


def _lane(quick: Quick) -> list[pytest.MarkDecorator]:
    """The lane a quick run belongs in: what it needs (a benchmark on the engine is a Docker-lane test)."""
    return [getattr(pytest.mark, need) for need in quick.needs]


@pytest.mark.parametrize("name", [pytest.param(name, marks=_lane(QUICK[name])) for name in sorted(QUICK)])
def test_quick_mode_prints_its_figures(name: str, request: pytest.FixtureRequest) -> None:
    quick = QUICK[name]
    source = (BENCHMARKS / name).read_text()
    if '"--quick"' not in source:  # latency_accuracy.py gets its own with the armfit branch
        pytest.skip(f"benchmarks/{name} has no --quick mode on this branch yet")
    if "docker" in quick.needs:
        request.getfixturevalue("docker_backend")
    if "slurm" in quick.needs:
        request.getfixturevalue("slurm_conf")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(BENCHMARKS / name), "--quick", *quick.args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{name} --quick exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    missing = [f for f in quick.figures if not re.search(f, done.stdout, re.MULTILINE)]
    assert not missing, f"{name} --quick did not print {missing}:\n{done.stdout[-3000:]}"
