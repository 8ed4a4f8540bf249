"""The README is the CLI's reference: generated from --help, complete, and naming every setting."""

from __future__ import annotations

import ast
import difflib
import inspect
from pathlib import Path
from typing import Optional

import click
from click.testing import CliRunner

from lodevem.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PACKAGE = ROOT / "lodevem"
REGENERATE = "run `cog -r README.md` and commit the result"

# Environment variables the package reads that are not lodevem settings: the process backend
# passes the caller's PYTHONPATH on to its child, with lodevem's own folder put first.
NOT_SETTINGS = {"PYTHONPATH"}
# Read on lodevem's behalf by a dependency, so no grep of the package finds them.
READ_BY_DEPENDENCIES = {"DOCKER_HOST", "SLURM_CONF"}  # docker-py's docker.from_env(); Slurm's sbatch/sacct
# What the scan must find at least, so that a scanner that finds nothing cannot pass.
KNOWN_READS = {"LODEVEM_PROFILES", "LODEVEM_NNMETER_DATA", "COLUMNS", "XDG_CACHE_HOME"}


def help_text(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="lodevem", terminal_width=80,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def all_help() -> str:
    return "\n".join([help_text()] + [help_text(name) for name in sorted(cli.commands)])


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


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _read_key(node: ast.AST) -> Optional[ast.AST]:
    """The name argument of an environment read, or None when ``node`` is not one.

    Reads: ``os.environ.get(K)``, ``os.getenv(K)``, ``os.environ[K]``, ``K in os.environ``.
    A copy (``{**os.environ}``) names no variable and is not a read here.
    """
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value):
            return node.args[0]
        if (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                isinstance(func, ast.Name) and func.id == "getenv"):
            return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
        return node.slice
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and _is_environ(node.comparators[0])):
        return node.left
    return None


def environment_reads() -> dict[str, list[str]]:
    """Every variable name the package reads from the environment -> where (``path:line``).

    A name given as a module-level string constant (``ENV_VAR = "..."``) is resolved; any other
    computed name fails the test, since it could not be checked against the docs.
    """
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        constants = {
            target.id: stmt.value.value
            for stmt in tree.body
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
            for target in stmt.targets if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            key = _read_key(node)
            if key is None:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = key.value
            elif isinstance(key, ast.Name) and key.id in constants:
                name = constants[key.id]
            else:
                raise AssertionError(f"{where}: environment read with a computed name: {ast.unparse(key)}")
            found.setdefault(name, []).append(where)
    return found


def click_envvars() -> dict[str, str]:
    """Variables Click reads for an option (``envvar=``) -> ``command --option``."""
    found: dict[str, str] = {}
    for name, command in cli.commands.items():
        for param in command.params:
            envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
            for var in envvars:
                found[var] = f"lodevem {name} {param.opts[0]}"
                assert isinstance(param, click.Option) and param.show_envvar, (
                    f"{found[var]} reads ${var} but its help does not show it (show_envvar=True)")
    return found


def test_every_environment_variable_is_in_help_and_readme() -> None:
    reads = environment_reads()
    assert KNOWN_READS <= set(reads), f"the scan missed known reads; it found {sorted(reads)}"
    documented_in = {**{var: ", ".join(where) for var, where in reads.items()}, **click_envvars(),
                     **{var: "a dependency" for var in READ_BY_DEPENDENCIES}}
    help_output, readme = all_help(), README.read_text()
    for var in sorted(set(documented_in) - NOT_SETTINGS):
        assert var in help_output, f"${var} (read in {documented_in[var]}) appears in no --help"
        assert var in readme, f"${var} (read in {documented_in[var]}) does not appear in README.md"


def _import_time_nodes(tree: ast.Module) -> list[ast.AST]:
    """The nodes that run when the module is imported: everything but function and lambda
    bodies (their decorators and default values do run)."""
    nodes, stack = [], list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack += node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]
            continue
        if isinstance(node, ast.Lambda):
            stack += node.args.defaults + [d for d in node.args.kw_defaults if d]
            continue
        nodes.append(node)
        stack += list(ast.iter_child_nodes(node))
    return nodes


def test_no_environment_read_at_import_time() -> None:
    """Settings come in as parameters or Click options, not from the environment at import time
    (the console's width, fixed when ``lodevem.cli`` is imported, is the one exception)."""
    allowed = {"lodevem/cli.py": {"COLUMNS"}}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for node in _import_time_nodes(ast.parse(path.read_text(), str(path))):
            key = _read_key(node)
            if key is not None:
                name = key.value if isinstance(key, ast.Constant) else ast.unparse(key)
                assert name in allowed.get(relative, set()), (
                    f"{relative}:{node.lineno} reads ${name} at import time; take it as a parameter")
