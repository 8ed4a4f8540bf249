"""Issue 47's read-back cases, tried on the host (no Docker): each returns True when it held.

Imported by ``benchmarks/hostile_inputs.py`` (section 3), which prints ``read-back cases: N of M held``
and the name of every case that broke. A case holds when lodevem gives the true figure or one
line (no traceback), writes nothing outside the folder it was given, and shows no impossible
figure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import traceback
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "tests" / "data" / "report_run" / "benchmark_results.json"
MAKER = {"model_sha256": "abc", "worker_version": "w1"}
CASES: list[tuple[str, Callable[[Path], bool]]] = []


def case(name: str) -> Callable[[Callable[[Path], bool]], Callable[[Path], bool]]:
    def add(fn: Callable[[Path], bool]) -> Callable[[Path], bool]:
        CASES.append((name, fn))
        return fn
    return add


def _publish(store, kind: str, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
    with store.staging() as staged:
        (staged / name).write_bytes(data)
        store.publish(kind, staged, [name], MAKER)


def _planted(tmp: Path, planted: str) -> bool:
    from lodevem.store import ArtifactStore

    shared, outside = tmp / "shared", tmp / "victim"
    shared.mkdir()
    outside.mkdir()
    (shared / planted).symlink_to(outside)
    store = ArtifactStore(tmp / "own", shared=shared)
    with store.staging() as staged:  # where the sandbox would write: inside the store, not through the link
        inside = staged.resolve().is_relative_to(shared.resolve()) and not any(outside.iterdir())
        (staged / "m.tflite").write_bytes(b"TFL3")
        store.publish("converted", staged, ["m.tflite"], MAKER)
    return inside and not any(outside.iterdir()) and (shared / "converted" / "m.tflite").is_file()


@case("store: a kind folder planted as a link outside")
def _kind_link(tmp: Path) -> bool:
    return _planted(tmp, "converted")


@case("store: .staging planted as a link outside")
def _staging_link(tmp: Path) -> bool:
    return _planted(tmp, ".staging")


def _tampered(tmp: Path, kind: str, name: str) -> bool:
    from lodevem.store import ArtifactStore

    _publish(ArtifactStore(tmp), kind, name, b"good bytes")
    path = tmp / kind / name
    before = path.stat()
    path.write_bytes(b"evil bytes")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    fresh = ArtifactStore(tmp)
    return fresh.lookup(kind, [name], MAKER) is None and len(fresh.warnings) == 1


@case("store: a converted .tflite overwritten (same size, mtime restored)")
def _tflite(tmp: Path) -> bool:
    return _tampered(tmp, "converted", "m.tflite")


@case("store: a normalised data copy swapped")
def _evaldata(tmp: Path) -> bool:
    return _tampered(tmp, "evaldata", "d.npz")


@case("store: an ONNX export swapped")
def _export(tmp: Path) -> bool:
    return _tampered(tmp, "onnx", "m.onnx")


@case("store: an accuracy record with top-1 250 %")
def _accuracy(tmp: Path) -> bool:
    from lodevem.results import Accuracy
    from lodevem.store import ArtifactStore

    store = ArtifactStore(tmp)
    store.put_record("accuracy", "k", {"top1_pct": 250.0, "samples": 100})
    return store.get_record("accuracy", "k", Accuracy.from_record) is None and len(store.warnings) == 1


@case("store: a measurement record with peak 'x'")
def _peak(tmp: Path) -> bool:
    from lodevem.results import MemoryMeasurement
    from lodevem.store import ArtifactStore

    store = ArtifactStore(tmp)
    store.put_record("measure", "k", {"verdict": "fits", "limit_mb": 512, "runtime": "torch", "threads": 1,
                                        "peak": {"rss_mb": "x"}})
    return store.get_record("measure", "k", MemoryMeasurement.from_dict) is None and len(store.warnings) == 1


@case("store: an edited sidecar")
def _sidecar(tmp: Path) -> bool:
    from lodevem.store import ArtifactStore

    _publish(ArtifactStore(tmp), "converted", "m.tflite", b"TFL3")
    (tmp / "converted" / "m.tflite.json").write_text('{"format_version": 2, "kind": "converted", "maker": {}, '
                                                    '"files": {"m.tflite": ["a", "b"]}}')
    fresh = ArtifactStore(tmp)
    return fresh.lookup("converted", ["m.tflite"], MAKER) is None


def _report(tmp: Path, content: "str | None", link_to: "str | None" = None) -> bool:
    from click.testing import CliRunner

    from lodevem.cli import cli

    folder = tmp / "run"
    folder.mkdir()
    target = folder / "benchmark_results.json"
    if link_to is not None:
        (tmp / "outside.json").write_text(link_to)
        target.symlink_to(tmp / "outside.json")
    else:
        target.write_text(content or "")
    result = CliRunner().invoke(cli, ["report", str(folder)])
    return (result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
            and not (folder / "report.html").exists())


def _edited(edit: Callable[[dict], None]) -> str:
    payload = json.loads(STORED.read_text())
    edit(payload)
    return json.dumps(payload)


@case("report DIR: benchmark_results.json a link to a run outside")
def _report_link(tmp: Path) -> bool:
    return _report(tmp, None, link_to=STORED.read_text())


@case("report DIR: a linked non-JSON file")
def _report_link_garbage(tmp: Path) -> bool:
    return _report(tmp, None, link_to="\x00 not json")


@case("report DIR: a non-JSON file")
def _report_garbage(tmp: Path) -> bool:
    return _report(tmp, "not json")


@case("report DIR: wrong types (latency 'fast', results a text)")
def _report_types(tmp: Path) -> bool:
    one = _report(tmp / "a", _edited(lambda p: p["results"][0].update(latency_ms="fast"))) if (tmp / "a").mkdir() \
        is None else False
    two = _report(tmp / "b", _edited(lambda p: p.update(results="rows"))) if (tmp / "b").mkdir() is None else False
    return one and two


@case("report DIR: JSON nested 100,000 deep")
def _report_deep(tmp: Path) -> bool:
    return _report(tmp, "[" * 100_000 + "]" * 100_000)


@case("report DIR: NaN and Infinity")
def _report_nan(tmp: Path) -> bool:
    text = _edited(lambda p: p["results"][0].update(latency_ms=1.5)).replace('"latency_ms": 1.5', '"latency_ms": NaN')
    return _report(tmp, text)


@case("--resume: a run state row with latency 'fast'")
def _state(tmp: Path) -> bool:
    from lodevem.errors import InputError
    from lodevem.runner.state import RunState

    rows = json.loads(STORED.read_text())["results"]
    rows[0]["latency_ms"] = "fast"
    (tmp / "state.json").write_text(json.dumps({"schema_version": 1, "config_key": "k", "rows": rows}))
    try:
        RunState.load(tmp / "state.json")
    except InputError as exc:
        return "latency_ms" in str(exc) and "\n" not in str(exc)
    return False


def _kit(tmp: Path, name: str) -> tuple[str, str, str, str]:
    from lodevem.report.files import latex_table, read_json
    from lodevem.report.html import report_html
    from lodevem.report.paperkit import write_paper_kit
    from lodevem.results import PairResult

    rows, env = read_json(STORED)
    rows = [PairResult.from_dict({**r.to_dict(), "profile_label": f"{name} {r.device.label}",
                                  "model_label": f"{name}.pt"}) for r in rows]
    env = {**env, "evaluation": f"{name}.npz"}
    write_paper_kit(rows, env, tmp)
    (tmp / "benchmark_results.tex").write_text(latex_table(rows))
    return ((tmp / "methodology.md").read_text(), (tmp / "methodology.tex").read_text(),
            (tmp / "references.bib").read_text(), report_html(rows, env, tmp))


@case("methods: a label holding {cite:evil}")
def _cite(tmp: Path) -> bool:
    md, tex, bib, _ = _kit(tmp, "{cite:evil}")
    return "\\cite{evil}" not in tex and "evil" not in bib and "{cite:evil}" in md


@case("methods: a data file name holding {code:...}")
def _code(tmp: Path) -> bool:
    _, tex, _, _ = _kit(tmp, "{code:\\input{/etc/passwd}}")
    return "\\texttt{\\textbackslash{}input" not in tex and "\\input{/etc" not in tex


@case("methods: a label with <img onerror=...>")
def _img(tmp: Path) -> bool:
    import re

    md, _, _, page = _kit(tmp, "<img src=x onerror=alert(1)>")
    return "<img" not in re.sub(r"(`+).*?\1", "", md) and "<img" not in page


def _compiles(tmp: Path, name: str) -> bool:
    if shutil.which("pdflatex") is None:
        return False
    _kit(tmp, name)
    (tmp / "paper.tex").write_text("\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage[utf8]{inputenc}"
                                   "\\usepackage{booktabs}\\begin{document}\\input{benchmark_results.tex}"
                                   "\\input{methodology.tex}\\end{document}\n")
    done = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                          cwd=tmp, capture_output=True, text=True, timeout=300)
    return done.returncode == 0


@case("LaTeX: a blank line in a file name")
def _blank(tmp: Path) -> bool:
    return _compiles(tmp, "two\n\nparagraphs")


@case("LaTeX: a right-to-left mark and CJK in a label")
def _rtl(tmp: Path) -> bool:
    return _compiles(tmp, "right\u200fleft \u4e2d\u6587")


def _same_suffix(tmp: Path, source: Path, other: str) -> bool:
    from lodevem.safe_io.sniff import content_suffix, name_mismatch

    renamed = tmp / other
    renamed.write_bytes(source.read_bytes())
    return content_suffix(renamed) == content_suffix(source) and name_mismatch(renamed, other) is not None


def _models(tmp: Path) -> tuple[Path, Path]:
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)).eval()
    torch.onnx.export(model, (torch.randn(1, 3, 8, 8),), tmp / "m.onnx", dynamo=False)
    torch.jit.save(torch.jit.script(model), tmp / "m.pt")
    return tmp / "m.onnx", tmp / "m.pt"


@case("format: ONNX bytes named .pt")
def _onnx_pt(tmp: Path) -> bool:
    onnx, _ = _models(tmp)
    return _same_suffix(tmp, onnx, "onnx-bytes.pt")


@case("format: TorchScript bytes named .onnx")
def _ts_onnx(tmp: Path) -> bool:
    _, script = _models(tmp)
    return _same_suffix(tmp, script, "torchscript-bytes.onnx")


def _preprocess(tmp: Path, npz: bool) -> bool:
    import numpy as np
    from click.testing import CliRunner

    from lodevem.cli import cli

    onnx, _ = _models(tmp)
    extra = []
    if npz:
        np.savez(tmp / "s.npz", inputs=np.zeros((2, 3, 8, 8), np.float32), labels=np.zeros(2, np.int64))
        extra = ["--eval-data", str(tmp / "s.npz")]
    result = CliRunner().invoke(cli, ["start", str(onnx), "--profile", "jiophone2", "--backend", "process",
                                      "--preprocess", "imagenet", "--output", str(tmp / "out"), *extra])
    return result.exit_code == 2 and "--preprocess" in result.output


@case("--preprocess with an .npz")
def _pre_npz(tmp: Path) -> bool:
    return _preprocess(tmp, True)


@case("--preprocess without --eval-data")
def _pre_none(tmp: Path) -> bool:
    return _preprocess(tmp, False)


def run_cases() -> tuple[int, list[str]]:
    """(held, the names of the cases that broke, each with its one-line reason)."""
    held, broken = 0, []
    for name, fn in CASES:
        with tempfile.TemporaryDirectory() as folder:
            try:
                ok = fn(Path(folder))
            except Exception as exc:  # a traceback is a broken case
                ok = False
                name = f"{name} ({type(exc).__name__}: {str(exc)[:80]}; "\
                       f"{traceback.extract_tb(exc.__traceback__)[-1].name})"
        if ok:
            held += 1
        else:
            broken.append(name)
    return held, broken
