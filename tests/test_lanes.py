"""The test lanes are written once: the Makefile's -m expressions are conftest's, every marker
combination falls in exactly one lane, and .ci/run runs the fast lane before the others."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import conftest

ROOT = Path(__file__).resolve().parent.parent


def test_the_makefile_runs_conftests_lanes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    lanes = dict(re.findall(r"^(\w+_LANE)\s*:=\s*(.+)$", makefile, re.MULTILINE))
    assert lanes == {"FAST_LANE": conftest.FAST_LANE, "DOCKER_LANE": conftest.DOCKER_LANE,
                     "SLURM_LANE": conftest.SLURM_LANE}


def test_every_test_is_in_exactly_one_lane() -> None:
    for docker, slurm, slow in itertools.product((False, True), repeat=3):
        names = {"docker": docker, "slurm": slurm, "slow": slow}
        chosen = [lane for lane in (conftest.FAST_LANE, conftest.DOCKER_LANE, conftest.SLURM_LANE)
                  if eval(lane, {}, names)]  # noqa: S307 - pytest's -m grammar is Python's for and/or/not
        assert len(chosen) == 1, (names, chosen)


def test_ci_runs_the_fast_lane_first_and_every_lane() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    # a lane runs as a phase or in the background beside one (`background NAME LOG make ...`)
    order = [m.group(1) for m in re.finditer(
        r"^(?:phase \"[^\"]+\"|background [\w-]+ \S+) make --no-print-directory ((?:test|lane)-\w+)", script,
        re.MULTILINE)]
    assert sorted(order) == ["lane-slurm", "test-docker", "test-fast"] and order[0] == "test-fast"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lane-slurm:\n\t\$\(PYTEST\) -m \"\$\(SLURM_LANE\)\"$", makefile, re.MULTILINE)
    assert "finish slurm-lane" in script  # the background lane's exit status is waited for and kept
    assert script.index("test-fast") < script.index("finish images")  # a failure stops CI before it waits
