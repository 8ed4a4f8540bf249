"""What a new user meets first: `inspect` on several files (one bad), the --code hint, profile
IDs typed as labels, and `check` on a host without nn-Meter's predictor data.

The inspect tests run the real sandbox (Docker); the hint and the profile matching are host-only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lodevem.cli import cli
from lodevem.doctor import check_nnmeter
from lodevem.errors import ProfileError
from lodevem.profiles import load_profiles, match_profile_id, select_profiles
from lodevem.sandbox.usercode import with_code_hint

MYNET = '''
import torch
from torch import nn


class MyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))
'''

SAVE = '''
import sys
import torch
from mynet.model import MyNet
torch.save(MyNet().eval(), sys.argv[1] + "/mynet.pt")
torch.save(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval(), sys.argv[1] + "/plain.pt")
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's folder: package mynet/, models/ with a file pickled from it, a plain file, junk."""
    root = tmp_path_factory.mktemp("project")
    (root / "mynet").mkdir()
    (root / "mynet" / "__init__.py").write_text("")
    (root / "mynet" / "model.py").write_text(MYNET)
    (root / "save.py").write_text(SAVE)
    (root / "models").mkdir()
    subprocess.run([sys.executable, "save.py", "models"], cwd=root, check=True)
    (root / "models" / "junk.pt").write_bytes(b"not a model at all" * 10)
    return root


@pytest.mark.docker
def test_inspect_reports_every_file_and_fails_at_the_end(docker_backend, project: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    files = ["models/junk.pt", "models/absent.pt", "models/mynet.pt", "models/plain.pt"]
    result = CliRunner().invoke(cli, ["inspect", *files, "--backend", "docker"])
    assert result.exit_code == 2, result.output
    text = result.output
    assert "Traceback" not in text
    # the good file after three bad ones is still described
    assert "models/plain.pt" in text and "torch.nn.modules.container.Sequential" in text
    assert "models/absent.pt: model file not found" in text and "junk.pt" in text
    # the hint names a folder that exists, as the user would type it from here
    assert "module 'mynet' is not importable" in text and "(found: --code mynet/)" in text
    assert "3 of 4 file(s) could not be inspected" in text

    as_json = CliRunner().invoke(cli, ["inspect", *files, "--backend", "docker", "--json"])
    assert as_json.exit_code == 2
    records = json.loads(as_json.stdout)
    assert [r["path"] for r in records] == files
    assert [bool(r.get("error")) for r in records] == [True, True, True, False]
    assert records[3]["params"] == 112


def test_code_hint_names_only_paths_that_exist(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    model = tmp_path / "models" / "m.pt"
    missing_pkg = "m.pt is a pickled module ...: module 'cocoa.model' is not importable; pass ... with --code"
    hint = with_code_hint(missing_pkg, model, cwd=tmp_path)
    assert "found" not in hint and "no cocoa/ or cocoa.py in the current folder or models/" in hint
    (tmp_path / "cocoa").mkdir()
    assert with_code_hint(missing_pkg, model, cwd=tmp_path).endswith("(found: --code cocoa/)")
    # a class pickled from __main__: the script that defines it, found by its text (never imported)
    main = "m.pt ...: class 'ScriptNet' was defined in the script that saved it (__main__); pass that script"
    assert "no .py file in" in with_code_hint(main, model, cwd=tmp_path)
    (tmp_path / "other.py").write_text("class Other:\n    pass\n")
    (tmp_path / "models" / "mytrain.py").write_text("import torch\n\nclass ScriptNet(torch.nn.Module):\n    pass\n")
    assert with_code_hint(main, model, cwd=tmp_path).endswith(
        "(found: --code models/mytrain.py defines class ScriptNet)")
    # a name that is not an identifier is never turned into a path
    assert with_code_hint("module '../etc' is not importable", model, cwd=tmp_path) == \
        "module '../etc' is not importable"


def test_profile_ids_match_ignoring_case_with_a_did_you_mean() -> None:
    profiles = load_profiles()
    assert [p.id for p in select_profiles(profiles, ids=["Nokia_C1"])] == ["nokia_c1"]
    assert match_profile_id({"nokia_c1": None, "jiophone2": None}, "JioPhone2") == "jiophone2"
    with pytest.raises(ProfileError, match=r"unknown profile 'nokia_c2', did you mean 'nokia_c1'"):
        select_profiles(profiles, ids=["nokia_c2"])
    with pytest.raises(ProfileError, match=r"unknown profile 'zzz', expected one of"):
        select_profiles(profiles, ids=["zzz"])


@pytest.mark.parametrize("command", [["predict", "mobilenet_v2"], ["start", "nothing.pt"], ["calibrate"]])
def test_every_command_taking_a_profile_suggests(command: list[str], tmp_path: Path) -> None:
    args = [*command, "--profile" if command[0] != "calibrate" else "", "Nokia-C1"]
    result = CliRunner().invoke(cli, [a for a in args if a])
    assert result.exit_code == 2, result.output
    assert "did you mean 'nokia_c1'" in result.output and "Traceback" not in result.output


def test_check_warns_when_nnmeter_has_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LODEVEM_NNMETER_DATA", str(tmp_path))
    item = check_nnmeter()
    assert item.status == "warn" and not item.required
    assert "predictor data is missing" in item.detail and str(tmp_path) in item.detail
    assert "lodevem fetch-predictors" in item.hint
    result = CliRunner().invoke(cli, ["check", "--backend", "process"])
    assert "! nn-Meter" in result.output and "✓ nn-Meter" not in result.output
    assert "fetch-predictors" in result.output
