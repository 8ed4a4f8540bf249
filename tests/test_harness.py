"""benchmarks/harness.py --quick on the real engine: it runs, and the inferred rows it plans give
the same verdicts as measuring every limit (the figures it prints are for the benchmark, not
asserted: the machine is shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent


def test_harness_quick_mode_compares_inferred_with_measured(docker_backend) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "harness.py"), "--quick", "--jobs", "2"],
                          capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "ratio design/naive = " in done.stdout and "old design/naive = " in done.stdout
    assert "verdicts that differ from the naive loop: design 0 [], old design 0" in done.stdout
    assert "inferred from 4096 MB" in done.stdout  # tiny_cnn's limits far above its peak were inferred
