"""Issue 47: nothing lodevem reads back is trusted — the shared store, the output folder's
records, a results folder handed to ``lodevem report``, names that reach the methods text.

Each test is one defect class; its cases are the ways the class was seen to break.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from helpers import with_columns

from lodevem.results import Accuracy, MemoryMeasurement
from lodevem.safe_io.records import BadRecord, parse_json
from lodevem.store import FORMAT_VERSION, ArtifactStore

MAKER = {"model_sha256": "abc", "worker_version": "w1"}


def _publish(store: ArtifactStore, kind: str = "converted", **files: bytes) -> None:
    with store.staging() as staged:
        for name, data in files.items():
            (staged / name).write_bytes(data)
        artifact, error = store.publish(kind, staged, list(files), MAKER)
    assert error == "" and artifact is not None


def _outside_untouched(outside: Path) -> None:
    assert list(outside.iterdir()) == [], "the store wrote through a planted link"


@pytest.mark.parametrize("planted", ["converted", ".staging"])
def test_no_link_under_the_store_root_is_followed(tmp_path: Path, planted: str) -> None:
    shared, outside = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    outside.mkdir()
    (shared / planted).symlink_to(outside)  # anyone who can write the shared folder can do this
    store = ArtifactStore(tmp_path / "own", shared=shared)
    with store.staging() as staged:  # where a sandbox run writes: inside the store
        assert staged.resolve().is_relative_to(shared.resolve())
        _outside_untouched(outside)
    _publish(store, m_tflite=b"TFL3 bytes")
    _outside_untouched(outside)
    assert not (shared / planted).is_symlink() and (shared / "converted" / "m_tflite").is_file()
    assert any("was a link" in w and planted in w for w in store.warnings)
    assert store.lookup("converted", ["m_tflite"], MAKER) is not None


def test_no_link_in_place_of_a_stored_file_is_followed(tmp_path: Path) -> None:
    store, secret = ArtifactStore(tmp_path / "store"), tmp_path / "secret"
    secret.write_bytes(b"not yours")
    _publish(store, m_tflite=b"TFL3 bytes")
    main = tmp_path / "store" / "converted" / "m_tflite"
    main.unlink()
    main.symlink_to(secret)  # a sidecar vouching for a link
    fresh = ArtifactStore(tmp_path / "store")
    assert fresh.lookup("converted", ["m_tflite"], MAKER) is None
    assert secret.read_bytes() == b"not yours" and len(fresh.warnings) == 1
    _publish(fresh, m_tflite=b"TFL3 bytes")  # set aside above: made again
    sidecar = tmp_path / "store" / "converted" / "m_tflite.json"
    sidecar.unlink()
    sidecar.symlink_to(secret)  # and a sidecar that is a link
    assert ArtifactStore(tmp_path / "store").lookup("converted", ["m_tflite"], MAKER) is None
    fresh.put_record("measure", "k", {"a": 1})
    os.replace(tmp_path / "store" / "measure" / "k.json", secret)
    (tmp_path / "store" / "measure" / "k.json").symlink_to(tmp_path / "elsewhere.json")
    fresh.put_record("measure", "k", {"a": 2})  # replaces the link, never writes through it
    assert not (tmp_path / "elsewhere.json").exists()


def test_an_artifact_whose_bytes_differ_from_its_record_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    _publish(store, m_tflite=b"TFL3 good model")
    main = tmp_path / "store" / "converted" / "m_tflite"
    before = main.stat()
    main.write_bytes(b"TFL3 evil model")  # same size...
    os.utime(main, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and the mtime restored
    fresh = ArtifactStore(tmp_path / "store")  # the next run
    assert fresh.lookup("converted", ["m_tflite"], MAKER) is None
    assert len(fresh.warnings) == 1 and "sha256" in fresh.warnings[0] and "\n" not in fresh.warnings[0]
    assert not main.exists() and any(p.name.startswith(".set-aside-") for p in main.parent.iterdir())
    _publish(fresh, m_tflite=b"TFL3 good model")  # made again
    kept = fresh.lookup("converted", ["m_tflite"], MAKER)
    assert kept is not None and fresh.file_sha256(kept.path) == hashlib.sha256(b"TFL3 good model").hexdigest()


def test_an_artifacts_content_is_hashed_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lodevem.safe_io import folders as fs

    _publish(ArtifactStore(tmp_path / "store"), m_tflite=b"TFL3" * 1000)
    calls: list[str] = []
    original = fs.Folder.sha256
    monkeypatch.setattr(fs.Folder, "sha256", lambda self, name, cap: (calls.append(name), original(self, name, cap))[1])
    run = ArtifactStore(tmp_path / "store")
    for _ in range(5):
        assert run.lookup("converted", ["m_tflite"], MAKER) is not None
    assert calls == ["m_tflite"]
    assert ArtifactStore(tmp_path / "store").lookup("converted", ["m_tflite"], MAKER) is not None
    assert calls == ["m_tflite", "m_tflite"]  # a new run checks again


@pytest.mark.parametrize("edit", [
    lambda r: r.update(files="x"),
    lambda r: r["files"].update(m_tflite=[1, 2]),
    lambda r: r["files"].update(m_tflite=["10", 2, "ab"]),
    lambda r: r["files"].update({"../../etc/passwd": None}),
    lambda r: r.update(format_version="2"),
    lambda r: r.update(info=[1]),
], ids=["files-text", "short-stats", "text-size", "path-name", "version-text", "info-list"])
def test_an_edited_sidecar_is_set_aside_never_a_traceback(tmp_path: Path, edit) -> None:
    store = ArtifactStore(tmp_path / "store")
    _publish(store, m_tflite=b"TFL3 bytes")
    sidecar = tmp_path / "store" / "converted" / "m_tflite.json"
    record = json.loads(sidecar.read_text())
    edit(record)
    sidecar.write_text(json.dumps(record))
    fresh = ArtifactStore(tmp_path / "store")
    assert fresh.lookup("converted", ["m_tflite"], MAKER) is None
    assert len(fresh.warnings) == 1 and "not a record lodevem wrote" in fresh.warnings[0]


@pytest.mark.parametrize("kind,value,field", [
    ("accuracy", {"top1_pct": 250.0, "top5_pct": 260.0, "samples": 100}, "top1_pct"),
    ("accuracy", {"top1_pct": 80.0, "top5_pct": 70.0, "samples": 100}, "top5_pct"),
    ("accuracy", {"top1_pct": "82", "samples": 100}, "top1_pct"),
    ("accuracy", {"top1_pct": 82.0, "samples": 0}, "samples"),
    ("measure", {"peak": {"rss_mb": "x"}}, "peak.rss_mb"),
    ("measure", {"peak": {"rss_mb": -5.0}}, "peak.rss_mb"),
    ("measure", {"peak": [1]}, "peak"),
    ("measure", {"verdict": "great"}, "verdict"),
    ("measure", {"limit_mb": True}, "limit_mb"),
    ("measure", {"phase": "somewhere"}, "phase"),
    ("measure", {"converted": {"size_bytes": -1}}, "converted.size_bytes"),
    ("measure", {"fallback": {"reason": 3, "measured_under": "torch"}}, "fallback.reason"),
])
def test_an_impossible_figure_in_a_stored_record_is_set_aside_and_measured_again(
        tmp_path: Path, kind: str, value: dict, field: str) -> None:
    good = {"verdict": "fits", "limit_mb": 512, "runtime": "tflite", "threads": 1, "error": None, "phase": None,
            "peak": {"rss_mb": 100.0, "runtime_baseline_mb": 50.0, "model_increment_mb": 50.0, "cgroup_mb": None},
            "sandbox": {"backend": "docker", "limit_enforcement": "cgroup", "wall_s": 1.0, "image_id": "i",
                        "worker_version": "w"}, "model": {"sha256": "s"}}
    parse = Accuracy.from_record if kind == "accuracy" else MemoryMeasurement.from_dict
    store = ArtifactStore(tmp_path / "store")
    store.put_record(kind, "k", value if kind == "accuracy" else {**good, **value})
    assert store.get_record(kind, "k", parse) is None
    assert len(store.warnings) == 1 and f"'{field}'" in store.warnings[0], store.warnings
    assert store.get_record(kind, "k", parse) is None and len(store.warnings) == 1  # set aside: now a miss
    store.put_record(kind, "k", good if kind == "measure" else {"top1_pct": 82.0, "top5_pct": 95.0, "samples": 10})
    assert store.get_record(kind, "k", parse) is not None


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": NaN}', '{"a": Infinity}', "\xff\xfe",
                                  "not json", '{"a": ' * 50 + "1" + "}" * 50])
def test_a_record_that_is_not_bounded_json_is_one_line(text: str) -> None:
    with pytest.raises(BadRecord) as caught:
        parse_json(text.encode("latin-1") if text.startswith("\xff") else text, "rec.json")
    assert str(caught.value).startswith("rec.json: ") and "\n" not in str(caught.value)


def test_a_store_record_of_another_format_is_a_miss_not_a_warning(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    (tmp_path / "store" / "measure").mkdir(parents=True)
    (tmp_path / "store" / "measure" / "k.json").write_text(json.dumps(
        {"format_version": FORMAT_VERSION - 1, "value": {}}))
    assert store.get_record("measure", "k") is None and store.warnings == []


# -- records of the output folder read back (--resume, reruns) -----------------------------------

def _planning_run(tmp_path: Path, out: Path, **kw):
    from fakes import FakeBackend
    from test_runner_planning import NEED, config

    models = []
    for name in ("small.pt", "big.pt"):
        path = tmp_path / "models" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(name.encode())
        models.append(path)
    fake = FakeBackend(NEED)
    from lodevem.runner import run_benchmark

    return run_benchmark(config(models, out, infer=False, **kw), backend=fake), fake


@pytest.mark.parametrize("field,value", [("latency_ms", "fast"), ("peak_rss_mb", "x"), ("accuracy_top1_pct", 250.0),
                                         ("verdict", "great"), ("ram_mb", None), ("threads", True)])
def test_a_run_state_with_a_wrong_type_or_impossible_figure_is_measured_again(
        tmp_path: Path, field: str, value: object) -> None:
    from lodevem.runner import STATE_FILE

    out = tmp_path / "out"
    first, _ = _planning_run(tmp_path, out, no_cache=True)
    state = json.loads((out / STATE_FILE).read_text())
    state["rows"][0][field] = value
    (out / STATE_FILE).write_text(json.dumps(state))
    resumed, fake = _planning_run(tmp_path, out, no_cache=True, resume=True)
    assert len(resumed.rows) == len(first.rows) and len(fake.calls) > 0  # measured again
    said = [w for w in resumed.warnings if "not a run state lodevem wrote" in w]
    assert len(said) == 1 and f"rows[0].{field}" in said[0] and "\n" not in said[0]


def test_a_run_state_that_is_a_link_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    from lodevem.runner import STATE_FILE

    out = tmp_path / "out"
    _planning_run(tmp_path, out, no_cache=True)
    other = tmp_path / "other-state.json"
    os.replace(out / STATE_FILE, other)
    (out / STATE_FILE).symlink_to(other)
    before = other.read_bytes()
    resumed, fake = _planning_run(tmp_path, out, no_cache=True, resume=True)
    assert len(fake.calls) > 0 and any("link" in w and "started afresh" in w for w in resumed.warnings)
    assert other.read_bytes() == before


def test_a_bad_measurement_record_is_measured_again_not_a_traceback(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _, fake = _planning_run(tmp_path, out)
    measured = len(fake.calls)
    records = sorted((out / ".cache" / "measure").glob("*.json"))
    payload = json.loads(records[0].read_text())
    payload["value"]["peak"]["rss_mb"] = "x"
    records[0].write_text(json.dumps(payload))
    again, fake = _planning_run(tmp_path, out, overwrite=True)
    assert len(fake.calls) == 1 and measured > 1  # only the edited one
    said = [w for w in again.warnings if "peak.rss_mb" in w]
    assert len(said) == 1 and "set it aside" in said[0]


# -- `lodevem report DIR` -----------------------------------------------------------------------

STORED = Path(__file__).parent / "data" / "report_run" / "benchmark_results.json"


def _report(folder: Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from lodevem.cli import cli

    result = CliRunner().invoke(cli, ["report", str(folder)])
    return result.exit_code, result.output


def _edited(edit) -> str:
    payload = json.loads(STORED.read_text())
    edit(payload)
    return json.dumps(payload)


@pytest.mark.parametrize("content,said", [
    ("not json at all", "not JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested more than"),
    ('{"a": ' * 40 + "1" + "}" * 40, "nested more than"),
    ("[1, 2]", "expected a JSON object"),
    (_edited(lambda p: p.update(results="rows")), "field 'results'"),
    (_edited(lambda p: p["results"][0].update(latency_ms="fast")), "results[0].latency_ms"),
    (_edited(lambda p: p["results"][1].update(peak_rss_mb=[1])), "results[1].peak_rss_mb"),
    (_edited(lambda p: p["results"][0].update(accuracy_top1_pct=250)), "results[0].accuracy_top1_pct"),
    (_edited(lambda p: p["results"][0].update(latency_ms=1.0)).replace('"latency_ms": 1.0', '"latency_ms": NaN'),
     "NaN"),
    (_edited(lambda p: p["results"][0].update(latency_ms=1.0)).replace('"latency_ms": 1.0', '"latency_ms": Infinity'),
     "Infinity"),
    (_edited(lambda p: p.update(environment=[1])), "field 'environment'"),
    (_edited(lambda p: p["results"][0].pop("model_label")), "results[0].model_label"),
    # the manifest's run description (report.run_record): typed, a wrong type is named by its path
    (_edited(lambda p: p["environment"]["extra"]["config"].update(runs="many")), "environment.extra.config.runs"),
    (_edited(lambda p: p["environment"]["extra"]["config"].update(threads=0)), "environment.extra.config.threads"),
    (_edited(lambda p: p["environment"]["extra"].update(settings=[1])), "environment.extra.settings"),
    (_edited(lambda p: p["environment"]["extra"].update(settings={"warmup": True})),
     "environment.extra.settings.warmup"),
    (_edited(lambda p: p["environment"]["extra"].update(evaluation={"a": 1})), "environment.extra.evaluation"),
    (_edited(lambda p: p["environment"]["extra"].update(predictor="auto")), "environment.extra.predictor"),
    (_edited(lambda p: p["environment"]["extra"]["model_code"].update(code="mynet.py")),
     "environment.extra.model_code.code"),
    (_edited(lambda p: p["environment"]["extra"].update(combined=[{"command": 1, "created_utc": "", "models": []}])),
     "environment.extra.combined.command"),
    (_edited(lambda p: p["environment"].update(extra="settings")), "environment.extra"),
], ids=["non-json", "deep-100k", "deep-40", "a-list", "results-text", "latency-text", "peak-list", "top1-250",
        "nan", "infinity", "environment-list", "missing-field", "config-runs-text", "config-threads-0",
        "settings-list", "settings-bool", "evaluation-object", "predictor-text", "code-text", "combined-command",
        "extra-text"])
def test_lodevem_report_on_a_crafted_results_file_is_one_line_exit_2(tmp_path: Path, content: str, said: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "benchmark_results.json").write_text(content)
    code, output = _report(folder)
    assert code == 2 and said in output and "Traceback" not in output, output
    assert len(output.strip().splitlines()) == 1 and not (folder / "report.html").exists()
    assert "benchmark_results.json" in output  # the file is named


@pytest.mark.parametrize("target", ["a run outside", "linked non-JSON"])
def test_lodevem_report_renders_nothing_from_outside_the_folder(tmp_path: Path, target: str) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text(STORED.read_text() if target == "a run outside" else "\x00 not json")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "benchmark_results.json").symlink_to(outside)
    code, output = _report(folder)
    assert code == 2 and "link" in output and len(output.strip().splitlines()) == 1, output
    assert not (folder / "report.html").exists()


def test_lodevem_report_renders_a_good_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "benchmark_results.json").write_text(STORED.read_text())
    code, output = _report(folder)
    assert code == 0, output
    page = (folder / "report.html").read_text()
    assert ">nan<" not in page and ">inf<" not in page and 'data-sort="nan"' not in page


# -- names a user chose, in the methods text, Markdown, LaTeX and HTML ---------------------------

HOSTILE_NAMES = ["{cite:evil}", "{code:\\input{/etc/passwd}}", "<img src=x onerror=alert(1)>",
                 "two\n\nparagraphs", "right\u200fto\u202eleft", "\u4e2d\u6587\u6a21\u578b", "tab\there\x1b[2J",
                 "[click](javascript:alert(1))", "\\end{document}", "50%_&_$x^2$~#"]


def _named_run(name: str) -> tuple[list, dict]:

    from lodevem.report.files import read_json

    rows, environment = read_json(STORED)
    rows = [with_columns(r, profile_label=f"{name} {r.device.label}", model_label=f"{name}.pt",
                    latency_calibrations=(f"{name} x0.9",)) for r in rows]
    environment = {**environment, "evaluation": f"{name}.npz (100 samples)"}
    return rows, environment


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_name_never_becomes_a_token_or_markup_in_the_methods_text(tmp_path: Path, name: str) -> None:
    from lodevem.report.html import report_html
    from lodevem.report.paperkit import write_paper_kit

    rows, environment = _named_run(name)
    write_paper_kit(rows, environment, tmp_path)  # a {cite:evil} once ended the run here (KeyError)
    md = (tmp_path / "methodology.md").read_text()
    tex = (tmp_path / "methodology.tex").read_text()
    bib = (tmp_path / "references.bib").read_text()
    page = report_html(rows, environment, tmp_path)
    assert "evil" not in bib and "[evil]" not in md and "\\cite{evil}" not in tex
    assert "\\texttt{\\textbackslash{}input" not in tex and "\\input{/etc" not in tex and "\\end{document}" not in tex
    prose = __import__("re").sub(r"(`+).*?\1", "", md)  # in a code span Markdown shows text as it is
    assert "<img" not in prose and "<img" not in page and not __import__("re").search(r"(?<!\\)\]\(java", prose)
    assert "\n\nparagraphs" not in md and "\u202e" not in md + tex and "\x1b" not in md + tex + page
    if name.startswith("{cite"):
        assert "{cite:evil}" in md  # shown as the text it is


@pytest.mark.skipif(__import__("shutil").which("pdflatex") is None, reason="TeX Live is not installed")
def test_every_tex_a_run_writes_compiles_without_shell_escape_for_any_accepted_name(tmp_path: Path) -> None:
    import subprocess

    from lodevem.report.files import latex_table
    from lodevem.report.paperkit import write_paper_kit

    rows: list = []
    environment: dict = {}
    for i, name in enumerate(HOSTILE_NAMES):
        named, environment = _named_run(name)
        rows += [with_columns(r, profile_id=f"{r.device.profile_id}-{i}") for r in named[:1]]
    (tmp_path / "benchmark_results.tex").write_text(latex_table(rows))
    write_paper_kit(rows, environment, tmp_path)
    (tmp_path / "paper.tex").write_text("\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage[utf8]{inputenc}"
                                        "\\usepackage{booktabs}\\begin{document}\\input{benchmark_results.tex}"
                                        "\\input{methodology.tex}\\end{document}\n")
    done = subprocess.run(["pdflatex", "-no-shell-escape", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    log = (tmp_path / "paper.log").read_text(errors="replace")
    assert not [line for line in log.splitlines() if line.startswith("! ")]  # no TeX error
    assert "(/etc/passwd" not in log  # nothing was \input


# -- content decides the format ------------------------------------------------------------------

@pytest.fixture(scope="module")
def format_files(tmp_path_factory) -> dict[str, Path]:
    import io
    import pickle
    import zipfile

    import torch

    folder = tmp_path_factory.mktemp("formats")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    torch.onnx.export(model, (torch.randn(1, 3, 16, 16),), folder / "m.onnx", dynamo=False)
    torch.jit.save(torch.jit.script(model), folder / "m.ts")
    torch.save(model.state_dict(), folder / "m.pth")  # zip holding data.pkl
    (folder / "legacy.pkl").write_bytes(pickle.dumps({"a": 1}, protocol=2))
    (folder / "m.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3" + b"\x00" * 64)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("m/archive_format", "pt2")
        zf.writestr("m/models/model.json", "{}")
    (folder / "m.pt2").write_bytes(buffer.getvalue())
    return {"onnx": folder / "m.onnx", "torchscript": folder / "m.ts", "pickle": folder / "m.pth",
            "legacy": folder / "legacy.pkl", "tflite": folder / "m.tflite", "exported_program": folder / "m.pt2"}


@pytest.mark.parametrize("name", ["model.pt", "model.onnx", "model.pt2", "model.pth", "model.tflite", "model"])
def test_the_bytes_decide_the_format_whatever_the_name(format_files: dict[str, Path], tmp_path: Path,
                                                       name: str) -> None:
    from lodevem.safe_io.sniff import ContentFormat, content_suffix, name_mismatch, sniff

    for kind, source in format_files.items():
        renamed = tmp_path / kind / name
        renamed.parent.mkdir(exist_ok=True)
        renamed.write_bytes(source.read_bytes())
        expected = ContentFormat.PICKLE if kind == "legacy" else ContentFormat(kind)
        assert sniff(renamed) == expected == sniff(source)
        assert content_suffix(renamed) == content_suffix(source)
        said = name_mismatch(renamed, name)
        agrees = name == "model" or {"onnx": name == "model.onnx", "tflite": name == "model.tflite",
                                     "exported_program": name in ("model.pt", "model.pth", "model.pt2")}.get(
            kind, name in ("model.pt", "model.pth"))
        assert (said is None) == agrees, (kind, name, said)
        assert said is None or ("\n" not in said and expected.value.split("_")[0] in said.lower().replace(".", "_")
                                or "torch" in said.lower())


def test_onnx_bytes_named_pt_get_the_same_figure_as_named_onnx(format_files: dict[str, Path], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lodevem.cli import cli

    figures = {}
    for name in ("m.onnx", "m.pt"):
        model = tmp_path / name
        model.write_bytes(format_files["onnx"].read_bytes())
        out = tmp_path / f"out-{name}"
        result = CliRunner().invoke(cli, ["start", str(model), "--profile", "jiophone2", "--backend", "process",
                                          "--runtime", "torch", "--input-shape", "1,3,16,16", "--output", str(out)])
        assert result.exit_code == 0, result.output
        row = json.loads((out / "benchmark_results.json").read_text())["results"][0]
        figures[name] = row
        assert (name == "m.pt") == ("its bytes are ONNX" in result.output)
    assert figures["m.pt"]["runtime"] == figures["m.onnx"]["runtime"] and figures["m.pt"]["verdict"] == "fits"
    assert figures["m.pt"]["latency_ms"] == pytest.approx(figures["m.onnx"]["latency_ms"], rel=1e-6)
    assert figures["m.pt"]["peak_rss_mb"] == pytest.approx(figures["m.onnx"]["peak_rss_mb"], rel=0.25)


# -- an option that does not apply ---------------------------------------------------------------

@pytest.mark.parametrize("data", ["npz", "none"])
def test_an_option_that_would_not_apply_is_refused_up_front(format_files: dict[str, Path], tmp_path: Path,
                                                           data: str) -> None:
    import numpy as np
    from click.testing import CliRunner

    from lodevem.cli import cli

    extra = []
    if data == "npz":
        np.savez(tmp_path / "samples.npz", inputs=np.zeros((4, 3, 16, 16), np.float32), labels=np.zeros(4, np.int64))
        extra = ["--eval-data", str(tmp_path / "samples.npz")]
    result = CliRunner().invoke(cli, ["start", str(format_files["onnx"]), "--profile", "jiophone2", "--backend",
                                      "process", "--preprocess", "imagenet", "--output", str(tmp_path / "out"), *extra])
    assert result.exit_code == 2 and "--preprocess applies to an ImageFolder tree" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out" / "benchmark_results.csv").exists()


@pytest.mark.parametrize("tamper", ["bytes", "info"])
def test_a_swapped_or_edited_normalised_data_copy_is_rebuilt_from_the_users_data(tmp_path: Path, tamper: str) -> None:
    import numpy as np

    from lodevem.accuracy.data import prepare_eval_data

    rng = np.random.default_rng(0)
    source = tmp_path / "val.npz"
    np.savez(source, inputs=rng.standard_normal((8, 3, 4, 4)).astype(np.float32), labels=np.arange(8) % 4)
    first = prepare_eval_data(source, 8, ArtifactStore(tmp_path / "store"))
    sidecar = first.path.with_name(first.path.name + ".json")
    if tamper == "bytes":  # another data set's copy, same size, mtime restored
        other = tmp_path / "other.npz"
        np.savez(other, inputs=np.zeros((8, 3, 4, 4), np.float32), labels=np.zeros(8, np.int64))
        before = first.path.stat()
        data = other.read_bytes()
        first.path.write_bytes(data[:before.st_size].ljust(before.st_size, b"\0"))
        os.utime(first.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        record = json.loads(sidecar.read_text())
        record["info"]["available"] = "x"
        sidecar.write_text(json.dumps(record))
    store = ArtifactStore(tmp_path / "store")
    again = prepare_eval_data(source, 8, store)
    assert again.sha256 == first.sha256 and again.samples == 8 and again.classes == 4
    assert len(store.warnings) == 1 and "set it aside and made it again" in store.warnings[0]


def test_a_staging_folder_swapped_for_a_link_while_the_sandbox_writes_is_refused(tmp_path: Path) -> None:
    shared, outside = tmp_path / "shared", tmp_path / "victim"
    outside.mkdir()
    store = ArtifactStore(tmp_path / "own", shared=shared)
    with store.staging() as staged:
        (outside / staged.name).mkdir()
        (outside / staged.name / "m.tflite").write_bytes(b"planted")
        os.rename(shared / ".staging", tmp_path / "moved")
        (shared / ".staging").symlink_to(outside)  # the writer of the shared folder swaps it meanwhile
        artifact, error = store.publish("converted", staged, ["m.tflite"], MAKER)
    assert artifact is None and "replaced" in error
    assert not (shared / "converted" / "m.tflite").exists() and (outside / staged.name / "m.tflite").exists()
