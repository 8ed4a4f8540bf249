"""A fresh machine's first run: `make demo` builds only the image the demo needs, and an image
build leaves no dangling build-stage images behind (real Docker engine).

The fresh-machine timings themselves are figures of benchmarks/first_run.py, not asserts here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lodevem.sandbox import image

ROOT = Path(__file__).resolve().parent.parent


def dry_run(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", target, "BIN=.venv/bin"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


BUILD = re.compile(r'lodevem"? build-image (?:--jobs \d+ )?--runtime (\S+)')


def test_make_demo_builds_only_the_tflite_images_and_make_test_builds_all() -> None:
    assert "DEMO_RUNTIMES=tflite " in dry_run("demo") and "bash scripts/demo.sh" in dry_run("demo")
    script = (ROOT / "scripts" / "demo.sh").read_text()
    demo = BUILD.findall(script)  # the benchmark image alone, then the rest of DEMO_RUNTIMES'
    assert sorted(demo) == ['"$RUNTIMES"', "torch"] and 'RUNTIMES="${DEMO_RUNTIMES:-tflite}"' in script
    assert [s.tag for s in image.specs_for_runtimes(["tflite"])] == [
        image.BENCH.tag, image.IMAGES["litert"].tag, image.CONVERT.tag]  # bench first: convert is layered on it
    assert image.CONVERT.layered_on == "bench"
    full = BUILD.findall(dry_run("test"))
    assert full and set(full[0].split(",")) == {"torch", "onnxruntime", "tflite", "ncnn", "armsim"}


def test_demo_script_measures_under_the_demo_runtimes() -> None:
    script = (ROOT / "scripts" / "demo.sh").read_text()
    starts = [line for line in script.splitlines() if re.search(r'lodevem"? start ', line)]
    assert len(starts) == 2 and all('--runtime "$RUNTIMES"' in line for line in starts)  # the images make demo built


@pytest.mark.docker
def test_a_build_leaves_no_dangling_stage_images(docker_backend) -> None:
    """A --no-cache build of the smallest image (LiteRT) under a throw-away tag: every image its
    log names is afterwards either a layer of the final image or gone."""
    import docker.errors

    client = image.docker_client(timeout=600)
    log: list[str] = []
    info = image.build_image(log.append, spec=image.IMAGES["litert"], tag="lodevem-litert:dangling-test", nocache=True)
    try:
        steps = list(dict.fromkeys(m for line in log for m in re.findall(r"^ ---> ([0-9a-f]{12})$", line)))
        assert len(steps) >= 5, log[-5:]
        ancestry = {e["Id"].removeprefix("sha256:")[:12] for e in client.api.history(info.id)}
        left = []
        for short in steps:
            try:
                found = client.images.get(short)
            except docker.errors.ImageNotFound:
                continue
            if short not in ancestry and not found.tags:
                left.append(short)
        assert left == [], f"untagged images left by the build: {left}"
        assert any(s not in ancestry for s in steps), "the deps stage should have produced images"
    finally:
        client.images.remove(info.id, force=True)
