"""Data checked before measuring (issue 46): once the export knows the model's input and outputs,
--eval-data that cannot work (9 class folders for a 10-output model; 32x32 images for a model
taking 64x64) is refused in one line, exit 2, before any memory run (no results folder is left);
the methods text claims no evaluation that did not happen. Real worker (``--backend process``),
real PNGs decoded in its sandbox run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import with_columns
from test_paper_kit import make_row, manifest

from lodevem import zoo
from lodevem.cli import cli
from lodevem.profiles import load_profiles
from lodevem.report.methodology import run_facts
from lodevem.report.paperkit import methodology_markdown

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _tree(root: Path, classes: int, side: int = 32) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        folder = root / f"class{c}"
        folder.mkdir(parents=True)
        for i in range(2):
            Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return root


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return zoo.write("tiny_cnn", tmp_path_factory.mktemp("m"))  # 10 outputs, any input >= 16x16


@pytest.mark.parametrize(("classes", "extra", "fragment"), [
    (9, (), "has 9 class folders but tiny_cnn.pt has 10 outputs"),
    (10, ("--input-shape", "1,3,64,64"), "samples are 3x32x32 but the model takes 1x3x64x64 (tiny_cnn.pt)"),
])
def test_data_that_cannot_work_is_refused_before_any_memory_run(model: Path, tmp_path: Path, classes: int,
                                                                 extra: tuple[str, ...], fragment: str) -> None:
    data = _tree(tmp_path / f"data{classes}", classes)
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["start", str(model), "--eval-data", str(data), *extra, "--profile", "nokia_c1",
                                    "--backend", "process", "--runtime", "torch", "--runs", "1", "--warmup", "0",
                                    "--output", str(out)])
    assert done.exit_code == 2, done.output
    lines = [ln for ln in done.output.strip().splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in done.output
    assert not out.exists()  # nothing was measured: the folder the run made is gone


def test_the_methods_text_claims_no_evaluation_that_did_not_happen() -> None:
    profile = next(p for p in load_profiles() if p.id == "nokia_c1")
    row = make_row(profile, accuracy_note="not evaluated: --eval-data samples are 3x32x32 but ...")
    env = manifest([profile])
    env["extra"]["evaluation"] = "bad9/ (ImageFolder, 18 images, 9 class folders)"
    text = methodology_markdown(run_facts([row], env))
    assert "Accuracy was evaluated on" not in text
    assert "Accuracy was not evaluated: bad9/" in text
    evaluated = with_columns(row, accuracy_top1_pct=50.0, accuracy_samples=18, accuracy_note=None)
    assert "Accuracy was evaluated on bad9/" in methodology_markdown(run_facts([evaluated], env))
