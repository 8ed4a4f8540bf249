"""The README is the CLI's reference: generated from --help and complete."""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path

from lodevem.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REGENERATE = "run `cog -r README.md` and commit the result"


def test_readme_command_reference_matches_the_cli(tmp_path: Path) -> None:
    """Regenerate the cog blocks into a copy and compare, so a drift fails with a diff."""
    from cogapp import Cog

    regenerated = tmp_path / "README.md"
    status = Cog().main(["cog", "-I", str(ROOT), "-o", str(regenerated), str(README)])
    assert status == 0, "cog failed on README.md"
    old, new = README.read_text(), regenerated.read_text()
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README.md",
                                        "README.md (regenerated)", n=1))
    assert old == new, f"README.md's command reference is out of date: {REGENERATE}\n{diff}"


def test_command_reference_covers_every_command() -> None:
    readme = README.read_text()
    reference = readme[readme.index("## Command reference"):readme.index("## Exit codes")]
    assert "[[[cog" in reference and "[[[end]]]" in reference
    assert "$ lodevem --help\n" in reference
    for name in cli.commands:
        assert f"$ lodevem {name} --help\n" in reference, f"no `lodevem {name} --help` in the reference: {REGENERATE}"


def test_every_command_has_an_example_of_itself() -> None:
    for name, command in cli.commands.items():
        doc = inspect.cleandoc(command.help or "")
        assert "\nExample:\n" in doc, f"`lodevem {name}` has no Example: block in its docstring"
        example = doc.split("\nExample:\n", 1)[1]
        assert f"lodevem {name}" in example, f"`lodevem {name}`'s Example: block does not run it"
