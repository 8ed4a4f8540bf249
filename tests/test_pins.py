"""Version pins are written once (lodevem/sandbox/image.py, each runtime's folder and the runtime
registry); the files
that cannot import Python (pyproject.toml, the Makefile) must say the same, or a user's
`pip install lodevem[runtimes]` and the images would measure different runtimes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from lodevem.runtimes import ADAPTERS
from lodevem.sandbox.image import TORCH_PIN
from lodevem.wire.registry import RUNTIMES

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is in the standard library from 3.11")
def test_the_runtimes_extra_pins_what_the_images_pin() -> None:
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["runtimes"]
    converters = {f"{spec.converter.package}=={spec.converter.version}" for spec in RUNTIMES.values()
                  if spec.converter is not None and spec.converter.package == "pnnx"}
    # each runtime with an image of its own: its package as its folder pins it (beside numpy)
    own = {r for a in ADAPTERS.values() if a.own_image for r in a.own_image.requirements
           if r.partition("==")[0] == a.spec.package}
    assert len(own) == 2 and set(extra) == own | converters


def test_the_makefile_installs_the_pinned_torch() -> None:
    spec = re.search(r"^TORCH_SPEC \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert spec is not None and spec.group(1).strip() == TORCH_PIN
