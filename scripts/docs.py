#!/usr/bin/env python3
"""Regenerate every pasted command output in README.md and docs/, and docs/cli.md's reference.

Why: pasted outputs re-pasted by hand drift from what the commands print. Every output block in
the docs sits between two markers::

    <!-- docs.py: ID -->
    ```
    $ lodevem list
    ...
    ```
    <!-- /docs.py -->

and ``BLOCKS`` below says, per ID, which command(s) produce it, what they need and how
expensive they are. This script runs them with the real engine (Docker, torch, the shipped
profiles) in a scratch folder and rewrites what is between the markers; ``cog`` rewrites
``docs/cli.md``. ``tests/test_docs.py`` imports this file: it re-runs the cheap blocks and
compares their ``shape`` with the stored text, and checks the stored tables of the others
against the current reporter's columns.

Usage (from the repository root, with lodevem's venv)::

    python scripts/docs.py                   # cog + every block this machine can run
    python scripts/docs.py --cheap           # cog + the blocks that run no container (~1 min)
    python scripts/docs.py start-tier2 zoo   # only these blocks
    python scripts/docs.py --list            # every block: cost, file, command
    python scripts/docs.py --with-benchmarks --with-slurm   # also the benchmark and Slurm blocks
    python scripts/docs.py --cli-only        # only docs/cli.md (cog)

Costs: ``cheap`` (no container), ``sandbox`` (one or two containers), ``run`` (a ``start``:
minutes; ``start-runtimes`` also needs the litert, ncnn and converter images), ``bench`` (a
benchmark script, with ``--with-benchmarks``), ``slurm`` (needs a running Slurm cluster and
``SLURM_CONF``, with ``--with-slurm``), ``recorded`` (never re-run here: the doc says how it was
made; the test checks its columns). A block whose command fails or exits with another code than
expected is left as it was and reported; the others are still written. Exit 1 when any block
failed.

The scratch folder (``--workdir``, default ``$XDG_CACHE_HOME/lodevem/docs-work``) is kept, so a
rerun is served from lodevem's caches and the README's example project is built once. Its home
folder is a private ``home/`` (no nn-Meter data, no calibrations of yours), shown as ``~`` in
the outputs; paths inside the scratch folder are shown relative to it.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = ("README.md", "docs")  # every Markdown file of these is scanned for markers
CLI_REFERENCE = REPO / "docs" / "cli.md"
WIDTH = "160"  # COLUMNS of every pasted output: the results table with its verdict columns needs ~150 (docs/cli.md uses 80, set in its cog block)
COSTS = ("cheap", "sandbox", "run", "bench", "slurm", "recorded")
MARKER = re.compile(r"^<!-- docs\.py: (?P<id>[a-z0-9-]+) -->\n(?P<body>.*?)^<!-- /docs\.py -->\n",
                    re.M | re.S)
FENCE = "`" * 3


# --------------------------------------------------------------------------- what a block runs


@dataclass(frozen=True)
class Step:
    """One command of a block: ``argv`` runs, ``shown`` is the ``$`` line the docs print.

    ``kind``: ``lodevem`` (``python -m lodevem.cli ARGV``), ``shell`` (``ARGV`` as a program),
    ``python`` (the fenced Python block just above the marker, run as a script: the doc's own
    code is what runs), ``file`` (the content of ``argv[0]`` in the scratch folder, no ``$`` line).
    """

    argv: tuple[str, ...]
    shown: str = ""
    kind: str = "lodevem"
    expect: int = 0
    show_status: bool = False  # print ``$ echo $?`` and the exit code after the output


@dataclass(frozen=True)
class Block:
    id: str
    cost: str
    steps: tuple[Step, ...] = ()
    needs: tuple[str, ...] = ()  # setups (SETUPS) run first, in order
    fence: str = ""  # the fence's language, e.g. "markdown"
    render: str = "fence"  # "fence", or "csv-table": a Markdown table from a run's CSV
    note: str = ""  # for "recorded" blocks: how the stored text was made
    cwd: str = ""  # a subfolder of the scratch folder the commands run in ("project": the README's)


def lodevem(*argv: str, expect: int = 0, show_status: bool = False) -> Step:
    return Step(tuple(argv), "lodevem " + " ".join(_quote(a) for a in argv), expect=expect,
                show_status=show_status)


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[A-Za-z0-9_./:=,*@%+-]+", arg) else "'" + arg + "'"


PROJECT = "project"
DEMO_MODELS = ("mobilenet_v2", "mobilenet_v3_small", "resnet18")
QUICK_FILES = ("your_fp32.pt", "your_weights.pt", "your_int8.pt", "your_pruned.pt")
QUICK_START = ("start", *QUICK_FILES, "--code", "mynet.py", "--arch", "mynet:MyNet", "--tier", "tier2")

BLOCKS: tuple[Block, ...] = (
    Block("list", "cheap", (lodevem("list"),)),
    Block("list-bad-profile", "cheap", (lodevem("list", "--profiles-dir", "bad-profiles/", expect=2,
                                                show_status=True),), needs=("bad-profiles",)),
    Block("zoo", "cheap", (lodevem("zoo"),)),
    Block("predict", "cheap", (lodevem("predict", "mobilenet_v2", "resnet18", "--profile", "jiophone2",
                                       "--profile", "nokia_c1"),), needs=("no-calibrations",)),
    Block("calibrate", "cheap", (
        Step(("calibrate", "add", "jiophone2", "mobilenet_v2=412.5", "--runtime", "tflite", "--note", "stock governor"),
             'lodevem calibrate add jiophone2 mobilenet_v2=412.5 --runtime tflite --note "stock governor"'),
        lodevem("predict", "mobilenet_v2", "resnet18", "--profile", "jiophone2", "--profile", "nokia_c1")),
        needs=("no-calibrations",)),
    Block("api-loop", "cheap", (Step((), kind="python"),), needs=("jiophone2-calibrated",)),
    Block("api-code", "sandbox", (Step((), kind="python"),), needs=("project", "no-calibrations"), cwd=PROJECT),
    Block("calibrate-from-log", "cheap", (lodevem(
        "calibrate", "from-log", "benchncnn.txt", "my_phone", "mobilenet_v2", "resnet18", "shufflenet_v2_x1_0",
        "efficientnet_b0", "--profiles-dir", "my-phones/"),), needs=("no-calibrations", "my-phone")),
    Block("fetch-offline", "cheap", (lodevem("fetch-predictors", "--nnmeter-data", "nnm/", "--timeout", "10",
                                             expect=1, show_status=True),), needs=("offline",)),
    Block("check", "sandbox", (lodevem("check"),)),
    Block("derive", "sandbox", (lodevem("derive", "models/mobilenet_v2.pt", "--levels", "pruned", "--out", "models/"),),
          needs=("demo-models",)),
    Block("inspect", "sandbox", (lodevem("inspect", "models/mobilenet_v2_pruned.pt"),), needs=("demo-models",)),
    Block("quick-inspect", "sandbox", (lodevem("inspect", "your_int8.pt", "your_pruned.pt", "--code", "mynet.py"),),
          needs=("project",), cwd=PROJECT),
    Block("code-errors", "sandbox", (
        lodevem("start", "your_fp32.pt", "--profile", "nokia_c1", "--output", "errors", expect=2),
        lodevem("start", "your_weights.pt", "--code", "mynet.py", "--arch", "mynet:MyNet", "--arch-kwargs",
                '{"width": 8}', "--profile", "nokia_c1", "--output", "errors", expect=2)),
        needs=("project",), cwd=PROJECT),
    Block("quick-start", "run", (lodevem(*QUICK_START),), needs=("project",), cwd=PROJECT),
    Block("quick-start-csv", "run", needs=("quick-start-run",), render="csv-table", cwd=PROJECT),
    Block("start-tier2", "run", (lodevem("start", "models/*.pt", "--tier", "tier2"),), needs=("demo-models",)),
    Block("methodology-excerpt", "run", (Step(("results/methodology.md",), kind="file"),),
          needs=("start-tier2-run",), fence="markdown"),
    Block("start-tier3-floor", "run", (lodevem("start", "models/mobilenet_v2.pt", "models/resnet18.pt", "--tier",
                                               "tier3", "--find-floor", "--output", "results/tier3"),),
          needs=("demo-models",)),
    Block("start-levels", "run", (lodevem("start", "models/mobilenet_v2.pt", "--levels", "all", "--tier", "tier2",
                                          "--output", "results/levels"),), needs=("demo-models",)),
    Block("start-runtimes", "run", (lodevem("start", "models/mobilenet_v2.pt", "models/resnet18.pt", "--profile",
                                            "nokia_8110_4g", "--runtime", "torch,onnxruntime,tflite,ncnn",
                                            "--output", "results/kaios"),), needs=("demo-models",)),
    Block("slurm", "slurm", (lodevem("start", "models/mobilenet_v2.pt", "models/mobilenet_v3_small.pt", "--tier",
                                     "tier3", "--backend", "slurm", "--slurm-workdir", "/var/tmp/lodevem-shared",
                                     "--output", "results/slurm"),), needs=("demo-models", "slurm")),
    Block("bench-latency-accuracy", "bench", (Step((sys.executable, str(REPO / "benchmarks" / "latency_accuracy.py"),
                                                    "--quick"),
                                                   "python benchmarks/latency_accuracy.py --quick",
                                                   kind="shell"),)),
    Block("bench-harness", "bench", (Step((sys.executable, str(REPO / "benchmarks" / "harness.py")),
                                          "python benchmarks/harness.py", kind="shell"),)),
    Block("bench-cached-rerun", "bench", (Step((sys.executable, str(REPO / "benchmarks" / "cached_rerun.py"),
                                                "--reruns", "5"),
                                               "python benchmarks/cached_rerun.py --reruns 5", kind="shell"),)),
    Block("held-out-errors", "cheap", (Step((sys.executable, "-m", "lodevem.latency.bands"),
                                            "python -m lodevem.latency.bands", kind="shell"),)),
    Block("bench-runtime-memory", "recorded",
          note="`python benchmarks/runtime_memory.py --fresh-builds` rebuilds every image without cache: run it "
               "by hand and paste its output"),
    Block("quantized-files", "recorded",
          note="columns picked by hand from the CSV of a run over one small CNN saved every way the table names "
               "(the scenario of tests/test_quantized.py)"),
)
BY_ID = {block.id: block for block in BLOCKS}
# Figures the docs show, copied from the run of a block: (file in its scratch folder, docs path).
IMAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "start-tier2": (("results/latency_heatmap.png", "docs/img/latency_heatmap_tier2.png"),)}


# --------------------------------------------------------------------------- the scratch folder


@dataclass
class Scratch:
    """The folder the documented commands run in, with a private home folder."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    @property
    def home(self) -> Path:
        return self.root / "home"

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # the sandbox runs as uid 1000 and reads the project's files
        for sub in (self.home / ".cache", self.home / ".config"):
            sub.mkdir(parents=True, exist_ok=True)
        keep = ("PATH", "DOCKER_HOST", "SLURM_CONF", "LANG", "LC_ALL", "TMPDIR")
        self.env = {k: v for k, v in os.environ.items() if k in keep}
        self.env.update(HOME=str(self.home), XDG_CACHE_HOME=str(self.home / ".cache"),
                        XDG_CONFIG_HOME=str(self.home / ".config"), COLUMNS=WIDTH, PYTHONPATH=str(REPO),
                        PYTHONDONTWRITEBYTECODE="1")

    def run(self, argv: Sequence[str], cwd: str = "", timeout_s: float = 3600) -> tuple[int, str]:
        folder = self.root / cwd
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
        done = subprocess.run(list(argv), cwd=folder, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
        return done.returncode, self.normalise(done.stdout, folder)

    def lodevem(self, *argv: str, cwd: str = "", fresh: bool = False) -> tuple[int, str]:
        """``lodevem ARGV``; ``fresh``: a ``start`` that must run as a new run into its folder."""
        if fresh and argv[:1] == ("start",):
            self.clear_results(self.root / cwd / _option(argv, "--output", "results"))
        return self.run([sys.executable, "-m", "lodevem.cli", *self.expand(argv, cwd)], cwd=cwd)

    def expand(self, argv: Sequence[str], cwd: str = "") -> list[str]:
        """Globs expanded as the shell of the ``$`` line would (sorted, relative to the folder)."""
        folder, out = self.root / cwd, []
        for arg in argv:
            found = sorted(str(p.relative_to(folder)) for p in folder.glob(arg)) if "*" in arg else []
            out += found or [arg]
        return out

    @staticmethod
    def clear_results(folder: Path) -> None:
        """Remove the files of the previous documented run, so the new one is never a ``--resume``
        of, or a clash with, it; folders (the caches, other runs' ``--output`` inside this one)
        stay, so a rerun is served from the caches."""
        if folder.is_dir():
            for entry in folder.iterdir():
                if entry.is_file() or entry.is_symlink():
                    entry.unlink()

    def normalise(self, text: str, folder: Optional[Path] = None) -> str:
        """Machine paths out: the private home is ``~``, the folder a command ran in ``.``; no
        trailing blanks; no progress bar (its last frame, with a wall time, is not a result)."""
        text = _PROGRESS.sub("", text).lstrip("\n")
        text = text.replace(str(self.home), "~")
        for where in (folder or self.root, self.root):  # the deeper folder first
            text = text.replace(str(where) + "/", "").replace(str(where), ".")
        text = text.replace(str(REPO) + "/", "").replace(str(REPO), ".")
        return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


_PROGRESS = re.compile(r"^.*━.*\bETA\b.*\n", re.M)


def _option(argv: Sequence[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv[:-1] else default


def _python_fence(doc: str, name: str) -> str:
    """The fenced Python block of ``doc`` whose first line is ``# NAME``."""
    found = re.search(rf"^{FENCE}python\n# {re.escape(name)}\n(.*?)^{FENCE}\n", doc, re.M | re.S)
    if not found:
        raise SetupError(f"README.md has no {FENCE}python block starting with '# {name}'")
    return f"# {name}\n" + found.group(1)


class SetupError(Exception):
    """A block's setup could not be made: the block is skipped and reported."""


def setup_project(s: Scratch) -> None:
    """The README's quick-start project, from the README's own code blocks."""
    readme = (REPO / "README.md").read_text()
    sources = {name: _python_fence(readme, name) for name in ("mynet.py", "save_variants.py")}
    project = s.root / PROJECT
    project.mkdir(exist_ok=True)
    stamp = project / ".project-stamp"
    wanted = "\n".join(sources.values())
    if stamp.exists() and stamp.read_text() == wanted and all((project / f).exists() for f in QUICK_FILES):
        return
    for name, text in sources.items():
        (project / name).write_text(text)
    code, out = s.run([sys.executable, "save_variants.py"], cwd=PROJECT, timeout_s=600)
    if code != 0:
        raise SetupError(f"save_variants.py failed ({code}): {out.strip()[-400:]}")
    for name in (*QUICK_FILES, *sources):
        (project / name).chmod(0o644)
    stamp.write_text(wanted)


def setup_demo_models(s: Scratch) -> None:
    """``make demo``'s models: three zoo models and a pruned sibling (exactly these in models/)."""
    models = s.root / "models"
    wanted = {f"{m}.pt" for m in DEMO_MODELS} | {"mobilenet_v2_pruned.pt"}
    if models.is_dir() and {p.name for p in models.iterdir()} == wanted:
        return
    shutil.rmtree(models, ignore_errors=True)
    for argv in (("zoo", *DEMO_MODELS, "--out", "models/"),
                 ("derive", "models/mobilenet_v2.pt", "--levels", "pruned", "--out", "models/")):
        code, out = s.lodevem(*argv)
        if code != 0:
            raise SetupError(f"lodevem {' '.join(argv)} failed ({code}): {out.strip()[-400:]}")


def setup_bad_profiles(s: Scratch) -> None:
    """A profile folder whose one file lacks its ``name``."""
    folder = s.root / "bad-profiles"
    folder.mkdir(exist_ok=True)
    template = (REPO / "profiles" / "custom_template.yaml").read_text()
    (folder / "bad.yaml").write_text(re.sub(r"^name: .*\n", "", template, flags=re.M))


def setup_my_phone(s: Scratch) -> None:
    """``my-phones/`` with the profile template filled in as is, and the benchncnn test log."""
    folder = s.root / "my-phones"
    folder.mkdir(exist_ok=True)
    shutil.copyfile(REPO / "profiles" / "custom_template.yaml", folder / "my_phone.yaml")
    shutil.copyfile(REPO / "tests" / "fixtures" / "benchmark_logs" / "benchncnn.txt", s.root / "benchncnn.txt")


def setup_no_calibrations(s: Scratch) -> None:
    shutil.rmtree(s.home / ".config" / "lodevem" / "calibrations", ignore_errors=True)


def setup_jiophone2_calibrated(s: Scratch) -> None:
    """The calibration the API example says is in place (the ``calibrate`` block's first step)."""
    setup_no_calibrations(s)
    code, out = s.lodevem(*BY_ID["calibrate"].steps[0].argv)
    if code != 0:
        raise SetupError(f"calibrate failed ({code}): {out.strip()[-400:]}")


def setup_offline(s: Scratch) -> None:
    """The block shows the message of a machine without network: skip it on a connected one."""
    import socket

    try:
        socket.getaddrinfo("github.com", 443)
    except OSError:
        shutil.rmtree(s.root / "nnm", ignore_errors=True)
        return
    raise SetupError("github.com resolves here: the documented offline message cannot be reproduced")


def setup_slurm(s: Scratch) -> None:
    if not os.environ.get("SLURM_CONF") or shutil.which("sbatch") is None:
        raise SetupError("no Slurm cluster (start one with `sudo bash scripts/slurm-cluster.sh up` "
                         "and export the SLURM_CONF it prints)")


def _run_of(block_id: str) -> Callable[[Scratch], None]:
    """A setup that makes sure ``block_id``'s run happened in this invocation (its files are read)."""
    def setup(s: Scratch) -> None:
        block = BY_ID[block_id]
        for need in block.needs:
            _setup(s, need)
        for step in block.steps:
            code, out = s.lodevem(*step.argv, cwd=block.cwd, fresh=step.expect == 0)
            if code != step.expect:
                raise SetupError(f"{step.shown} exited {code}: {out.strip()[-400:]}")
    return setup


SETUPS: dict[str, Callable[[Scratch], None]] = {
    "project": setup_project, "demo-models": setup_demo_models, "bad-profiles": setup_bad_profiles,
    "my-phone": setup_my_phone, "no-calibrations": setup_no_calibrations,
    "jiophone2-calibrated": setup_jiophone2_calibrated, "offline": setup_offline, "slurm": setup_slurm,
    "quick-start-run": _run_of("quick-start"), "start-tier2-run": _run_of("start-tier2"),
}
# Setups that must run again for every block that needs them (they reset state).
_ALWAYS = {"no-calibrations", "jiophone2-calibrated", "bad-profiles", "my-phone", "offline"}


def _setup(s: Scratch, name: str) -> None:
    if name in s.done and name not in _ALWAYS:
        return
    SETUPS[name](s)
    s.done.add(name)


# --------------------------------------------------------------------------- running and rendering


def run_block(s: Scratch, block: Block, doc: str, marker_at: int) -> str:
    """The new text between the markers, or SetupError."""
    for need in block.needs:
        _setup(s, need)
    if block.render == "csv-table":
        return quick_start_csv(s.root / block.cwd / "results" / "benchmark_results.csv")
    body = _run_steps(s, block, doc, marker_at)
    s.done.add(f"{block.id}-run")  # a block that reads this run's files need not run it again
    for made, shown in IMAGES.get(block.id, ()):  # the docs' figures are this run's, copied as drawn
        source = s.root / block.cwd / made
        if not source.is_file():
            raise SetupError(f"{made} was not written by the run")
        shutil.copyfile(source, REPO / shown)
    return body


def _run_steps(s: Scratch, block: Block, doc: str, marker_at: int) -> str:
    parts: list[str] = []
    for step in block.steps:
        if step.kind == "file":
            path = s.root / block.cwd / step.argv[0]
            if not path.is_file():
                raise SetupError(f"{step.argv[0]} was not written by the run")
            parts.append(s.normalise(path.read_text()))
            continue
        if step.kind == "python":
            code_text = _python_before(doc, marker_at)
            script = s.root / block.cwd / f".{block.id}.py"
            script.write_text(code_text)
            code, out = s.run([sys.executable, script.name], cwd=block.cwd)
        elif step.kind == "shell":
            code, out = s.run(step.argv, cwd=block.cwd)
        else:
            code, out = s.lodevem(*step.argv, cwd=block.cwd, fresh=step.expect == 0)
        if code != step.expect:
            raise SetupError(f"`{step.shown or block.id}` exited {code}, expected {step.expect}: {out.strip()[-600:]}")
        if step.kind != "python":
            parts.append(f"$ {step.shown}\n")
        parts.append(out)
        if step.show_status:
            parts.append(f"$ echo $?\n{code}\n")
    return f"{FENCE}{block.fence}\n{''.join(parts)}{FENCE}\n"


def _python_before(doc: str, marker_at: int) -> str:
    blocks = re.findall(rf"^{FENCE}python\n(.*?)^{FENCE}\n", doc[:marker_at], re.M | re.S)
    if not blocks:
        raise SetupError("no python block above the marker")
    return blocks[-1]


QUICK_CSV_COLUMNS = ("model_label", "model_format", "precision", "quantization", "sparsity", "zero_channels",
                     "latency_ms", "latency_if_channels_removed_ms", "peak_rss_mb", "verdict")


def quick_start_csv(path: Path) -> str:
    """The quick start's CSV rows on the Nokia C1, as a Markdown table of the columns that tell the
    variants apart (those the CSV has: a column renamed upstream is left out, not invented)."""
    with path.open(newline="") as f:
        rows = [row for row in csv.DictReader(f) if row.get("profile_id") == "nokia_c1"]
    if not rows:
        raise SetupError(f"{path} has no nokia_c1 row")
    columns = [c for c in QUICK_CSV_COLUMNS if c in rows[0]]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in sorted(rows, key=lambda r: r["model_label"]):
        lines.append("| " + " | ".join(_short_number(row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _short_number(cell: str) -> str:
    """A CSV float to 4 significant digits (the CSV keeps every digit; a table for reading need not)."""
    if re.fullmatch(r"-?\d+\.\d{3,}", cell):
        return f"{float(cell):.4g}"
    return cell


def doc_paths() -> list[Path]:
    paths = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
    return [p for p in paths if p.is_file()]


def markers(text: str) -> list[re.Match[str]]:
    return list(MARKER.finditer(text))


def regenerate(s: Scratch, wanted: Callable[[Block], bool]) -> tuple[list[str], list[str], list[str]]:
    """Rewrite every wanted block in place, each file written after each block (an interrupted run
    keeps what it made): (written, skipped, failed) descriptions."""
    written, skipped, failed = [], [], []
    for path in doc_paths():
        for index in range(len(markers(path.read_text()))):
            text = path.read_text()
            m = markers(text)[index]
            block = BY_ID.get(m["id"])
            where = f"{path.relative_to(REPO)}:{m['id']}"
            if block is None:
                failed.append(f"{where}: no such block in scripts/docs.py")
                continue
            if not wanted(block):
                skipped.append(f"{where} ({block.cost}{': ' + block.note if block.note else ''})")
                continue
            started = time.monotonic()
            try:
                body = run_block(s, block, text, m.start())
            except (SetupError, subprocess.TimeoutExpired, OSError) as e:
                failed.append(f"{where}: {e}")
                print(f"  {where}: FAILED ({time.monotonic() - started:.0f} s)", flush=True)
                continue
            written.append(f"{where} ({time.monotonic() - started:.0f} s)")
            print(f"  {where}: ok ({time.monotonic() - started:.0f} s)", flush=True)
            text = path.read_text()  # unchanged unless edited meanwhile: splice into the current text
            m = markers(text)[index]
            if m["body"] != body:
                path.write_text(text[:m.start("body")] + body + text[m.end("body"):])
    return written, skipped, failed


def run_cog() -> int:
    from cogapp import Cog

    return Cog().main(["cog", "-r", "-I", str(REPO), str(CLI_REFERENCE)])


# --------------------------------------------------------------------------- shapes (for the test)


@dataclass(frozen=True)
class TableShape:
    title: str  # digits replaced by N
    columns: tuple[str, ...]
    rows: int


@dataclass(frozen=True)
class Shape:
    """What must stay the same between a stored output and a fresh one: the ``$`` lines, each
    table's title, columns and row count, how many lines of each kind (✓, ✗, Error:, ...), exit codes."""

    commands: tuple[str, ...]
    tables: tuple[TableShape, ...]
    line_kinds: tuple[tuple[str, int], ...]
    statuses: tuple[str, ...]


LINE_KINDS = ("✓", "✗", "Error:", "warning:", "note:", "wrote ")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip()[1:-1].split(line.strip()[0])]


def shape(text: str) -> Shape:
    """The shape of a pasted output (the text between the fences)."""
    lines = text.splitlines()
    commands, statuses, tables = [], [], []
    kinds = {kind: 0 for kind in LINE_KINDS}
    title, columns, rows = "", (), 0
    for i, line in enumerate(lines):
        if line.startswith("$ "):
            commands.append(line)
            if line == "$ echo $?" and i + 1 < len(lines):
                statuses.append(lines[i + 1])
        elif line.startswith("┏"):
            title, rows = (re.sub(r"\d[\d,.]*", "N", lines[i - 1]) if i else ""), 0
        elif line.startswith("┃"):
            columns = tuple(_cells(line))
        elif line.startswith("│") and columns:
            filled = sum(1 for cell in _cells(line) if cell)
            rows += filled * 2 > len(columns)
        elif line.startswith("└") and columns:
            tables.append(TableShape(title, columns, rows))
            columns = ()
        for kind in LINE_KINDS:
            kinds[kind] += line.lstrip().startswith(kind)
    return Shape(tuple(commands), tuple(tables), tuple(sorted(kinds.items())), tuple(statuses))


def stored_blocks() -> dict[str, tuple[Path, str]]:
    """Every marked block in the docs: id -> (file, text between the fences)."""
    found: dict[str, tuple[Path, str]] = {}
    for path in doc_paths():
        for m in markers(path.read_text()):
            body = m["body"]
            inner = re.sub(rf"^{FENCE}\w*\n", "", body, count=1)
            inner = inner[: inner.rfind(FENCE)] if inner.rstrip().endswith(FENCE) else inner
            if m["id"] in found:
                raise ValueError(f"block {m['id']} appears twice ({found[m['id']][0]} and {path})")
            found[m["id"]] = (path, inner)
    return found


# --------------------------------------------------------------------------- command line


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ids", nargs="*", help="only these blocks (default: every block this machine can run)")
    parser.add_argument("--cheap", action="store_true", help="only the blocks that run no container")
    parser.add_argument("--with-benchmarks", action="store_true", help="also the benchmark blocks (minutes)")
    parser.add_argument("--with-slurm", action="store_true", help="also the Slurm block (needs SLURM_CONF)")
    parser.add_argument("--cli-only", action="store_true", help="only regenerate docs/cli.md with cog")
    parser.add_argument("--list", action="store_true", help="list the blocks and exit")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="scratch folder (default $XDG_CACHE_HOME/lodevem/docs-work)")
    args = parser.parse_args(argv)

    if args.list:
        stored = stored_blocks()
        for block in BLOCKS:
            where = stored[block.id][0].relative_to(REPO) if block.id in stored else "(not in the docs)"
            shown = "; ".join(step.shown for step in block.steps if step.shown) or block.note or block.render
            print(f"{block.id:24} {block.cost:9} {str(where):22} {shown}")
        return 0
    unknown = [i for i in args.ids if i not in BY_ID]
    if unknown:
        parser.error(f"unknown block(s) {', '.join(unknown)}; see --list")
    started = time.monotonic()
    if run_cog() != 0:
        print("docs.py: cog failed on docs/cli.md", file=sys.stderr)
        return 1
    print("docs/cli.md: regenerated with cog")
    if args.cli_only:
        return 0

    costs = {"cheap"} if args.cheap else {"cheap", "sandbox", "run"}
    costs |= {"bench"} if args.with_benchmarks else set()
    costs |= {"slurm"} if args.with_slurm else set()

    def wanted(block: Block) -> bool:
        if block.cost == "recorded":
            return False
        return block.id in args.ids if args.ids else block.cost in costs

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    scratch = Scratch((args.workdir or cache / "lodevem" / "docs-work").resolve())
    scratch.prepare()
    print(f"running the documented commands in {scratch.root}")
    written, skipped, failed = regenerate(scratch, wanted)
    print(f"\n{len(written)} block(s) regenerated, {len(skipped)} left as they were, {len(failed)} failed "
          f"({time.monotonic() - started:.0f} s)")
    for line in skipped:
        print(f"  kept: {line}")
    for line in failed:
        print(f"  FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
