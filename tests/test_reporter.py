"""The reporter and manifest: formats records it is given, never measures.

Rows are built here from the shipped profiles, covering every cell format the README shows:
fits, OOM, thrashing, error, and a latency no predictor could give. No Docker, no torch.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import row_of, with_columns
from rich.console import Console

from lodevem import __version__
from lodevem.errors import BadRecord, InputError
from lodevem.latency.statement import BAND_SHORT
from lodevem.profiles import Profile, load_profiles
from lodevem.report.environment import collect_manifest
from lodevem.report.manifest import Manifest
from lodevem.report.plots import latency_heatmap, min_ram_bar
from lodevem.report.run_record import RunDescription
from lodevem.report.scatter import latency_vs_ram
from lodevem.reporter import (
    csv_columns,
    latex_escape,
    latex_table,
    model_summaries,
    read_json,
    results_table,
    write_all,
    write_csv,
    write_json,
    write_latex,
)
from lodevem.results import PairResult
from lodevem.results.columns import COLUMNS
from lodevem.wire.verdict import Verdict

PROFILE_IDS = ("nokia_8110_4g", "tecno_spark8", "nokia_c1")  # deliberately not in tier order


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    by_id = {p.id: p for p in load_profiles()}
    return [by_id[pid] for pid in PROFILE_IDS]


def make_row(profile: Profile, model: str = "cocoa_fp32.pt", verdict: str = "fits",
             latency: float | None = 123.456, peak: float | None = 241.7, **changes: Any) -> PairResult:
    cluster = profile.fastest_cluster
    row = row_of(
        model_label=model, model_path=f"models/{model}", model_sha256="ab" * 32, level="fp32",
        model_format="torchscript", model_file_mb=13.6, params=3_504_872,
        profile_id=profile.id, profile_label=profile.label, tier=profile.tier,
        chipset=profile.chipset, ram_mb=profile.ram_mb, core=cluster.core,
        clock_ghz=cluster.clock_ghz, threads=1, latency_ms=latency,
        latency_source=f"estimator:v1 ({cluster.core}@{cluster.clock_ghz}GHz)",
        latency_uncertainty="\u00b125 % (MAPE, leave-one-device-out)", latency_note=None,
        verdict=verdict, peak_rss_mb=peak, runtime_baseline_mb=217.0, model_increment_mb=24.7,
        cgroup_peak_mb=250.0, limit_mb=profile.ram_mb, limit_enforcement="cgroup-v1",
        backend="docker", runtime="torchscript", memory_error=None, memory_cached=False,
        latency_kind="estimator", latency_runtime="tflite", latency_held_out_pct=25.0,
    )
    source = changes.get("latency_source")
    if source is not None and "latency_kind" not in changes:  # the kind the source names (a test's shorthand)
        changes["latency_kind"] = {"nn-meter": "nn-meter", "estimator": "estimator"}.get(source.split(":")[0], "")
    return with_columns(row, **changes)


@pytest.fixture(scope="module")
def rows(profiles: list[Profile]) -> list[PairResult]:
    kaios, spark, c1 = profiles
    return [
        make_row(kaios, verdict="oom", peak=None, latency=2480.0),
        make_row(spark, latency=1234.5),
        make_row(c1, latency=None, latency_source="none", latency_note="no predictor for Cortex-A7"),
        make_row(kaios, model="tiny_cnn.pt", latency=8.25, peak=31.0,
                 latency_source="nn-meter:cortexA76cpu_tflite21\u2192Cortex-A7@1.1GHz",
                 host_latency_mean_ms=2.0, host_latency_std_ms=0.5,
                 host_latency_unstable="std is 25 % of the mean"),
        make_row(spark, model="tiny_cnn.pt", latency=3.1, peak=31.0),
        make_row(c1, model="tiny_cnn.pt", verdict="error", peak=None,
                 memory_error="worker crashed: exit code 1"),
        make_row(kaios, model="big_resnet.pt", verdict="oom", peak=None),
        make_row(spark, model="big_resnet.pt", verdict="thrashing", peak=None),
        make_row(c1, model="big_resnet.pt", verdict="oom", peak=None),
    ]


def render(table: Any) -> str:
    console = Console(record=True, width=140)
    console.print(table)
    return console.export_text()


def test_console_table_has_readme_columns_and_oom_row(rows: list[PairResult], profiles: list[Profile]) -> None:
    text = render(results_table(rows, profiles))
    for column in ("Model File", "Device Profile", "Latency (ms)", "Peak RAM (MB)", "Fits in RAM", "App budget (MB)",
                   "Headroom (MB)"):
        assert column in text
    header = next(line for line in text.splitlines() if "Model File" in line)
    assert header.rstrip(" \u2503").endswith("Headroom (MB)")  # the verdict in Fits in RAM, budget columns after it
    assert header.index("Peak RAM (MB)") < header.index("Fits in RAM") < header.index("App budget (MB)")
    cocoa = text[text.index("cocoa_fp32.pt"):text.index("tiny_cnn.pt")].splitlines()
    oom_line = next(line for line in cocoa if "Nokia 8110" in line)
    assert re.search(r"\sOOM\s*\W\s*\u2014\s*\W\s*\u2717\s", oom_line), oom_line
    assert "1,234.5*" in text and "8.2\u2020" in text  # every number says its predictor
    assert "thrashing" in text and "n/a" in text and "? no peak" in text
    assert "123.5*" in next(line for line in text.splitlines() if "no peak" in line)  # its latency stands
    assert "* offline estimator: \u00b125.0% (Cortex-A" in text  # the caption explains the marks, one % per kind
    # devices in tier order (tier1, tier2, tier3) inside each model, whatever the profile order
    assert ["Spark" in cocoa[0], "Nokia C1" in cocoa[1], "8110" in cocoa[2]] == [True] * 3


def _wide_rows(profiles: list[Profile], models: tuple[str, ...]) -> list[PairResult]:
    """Every profile (the longest labels included) for each model, every verdict the table draws."""
    verdicts = ("fits", "tight", "oom", "thrashing", "timeout", "error")
    rows = []
    for m, model in enumerate(models):
        for i, profile in enumerate(profiles):
            verdict = verdicts[(i + m) % len(verdicts)]
            ran = verdict in ("fits", "tight")
            rows.append(make_row(profile, model=model, verdict=verdict, latency=1234.5 / (i + 1),
                                 peak=241.7 if ran else None, latency_low_ms=1000.0 / (i + 1),
                                 latency_high_ms=1500.0 / (i + 1), app_budget_mb=profile.app_budget_mb,
                                 headroom_mb=(profile.app_budget_mb - 241.7) if ran and profile.app_budget_mb
                                 else None))
    return rows


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("models", [("mobilenet_v2.pt", "tiny_cnn.pt"),
                                    ("mobilenet_v2.pt@int8-static [tflite]", "resnet18.pt@pruned [ncnn]")])
def test_console_table_reads_at_any_width(width: int, models: tuple[str, ...]) -> None:
    """Issue 29: every device name stays whole on one line at 80, 100, 120 and 200 columns; no
    line is wider than the terminal; optional columns go first and the footer names them; the
    promised columns are always there (stacked per model when the model column does not fit)."""
    every = load_profiles()
    table = results_table(_wide_rows(every, models), every)
    console = Console(record=True, width=width)
    console.print(table)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "\u2026" not in text  # nothing cut to an ellipsis
    for profile in every:
        assert any(profile.label in line for line in lines), (width, profile.label)
    layout = table.layout(width)
    headers = {c.header for c in layout.columns}
    assert {"Device Profile", "Latency (ms)", "Peak RAM (MB)", "Fits in RAM"} <= headers
    assert "\u2713 fits" in text and "! tight" in text and "\u2717 OOM" in text
    assert "1,234.5* (1,000.0\u20131,500.0)" in text  # the number, its mark and its range, on one line
    flat = " ".join(text.split())  # the footer as a reader sees it, whatever its wrapping
    if layout.dropped:
        assert f"not shown at this width: {', '.join(layout.dropped)} (a " in flat.lower().replace(
            "app budget (mb)", "App budget (MB)").replace("headroom (mb)", "Headroom (MB)")
        assert "the CSV and JSON have them all" in flat
    else:
        assert "not shown at this width" not in flat.lower()
    if layout.stacked:
        assert all(any(line.strip() == model for line in lines) for model in models)
    if width == 200:  # wide enough for everything: one table, nothing left out
        assert not layout.stacked and not layout.dropped
    # optional columns go before any promised one, the highest priority number first
    shown = [c.header for c in layout.columns]
    assert layout.dropped == tuple(h for h in ("App budget (MB)", "Headroom (MB)") if h not in shown)
    if "Headroom (MB)" in layout.dropped:
        assert "App budget (MB)" in layout.dropped


def test_console_footer_at_80_columns_names_what_it_left_out(profiles: list[Profile]) -> None:
    every = load_profiles()
    table = results_table(_wide_rows(every, ("mobilenet_v2.pt",)), every)
    console = Console(record=True, width=80)
    console.print(table)
    flat = " ".join(console.export_text().split())
    assert "Not shown at this width: App budget (MB)" in flat or "not shown at this width: App budget (MB)" in flat
    assert f"a {table.full_width()}-column terminal shows one table with every column" in flat


def test_a_verdict_is_one_enum_and_the_files_keep_its_text(rows: list[PairResult], profiles: list[Profile],
                                                           tmp_path: Path) -> None:
    """Rows hold ``Verdict`` members whatever they were built from; the CSV and the JSON carry the
    same words as before the enum (``oom``, ``fits``), and reading them back gives the members."""
    assert all(isinstance(r.verdict, Verdict) for r in rows)  # make_row passes the text
    assert rows[0].verdict is Verdict.OOM and rows[0].verdict == "oom" and f"{rows[0].verdict}" == "oom"
    with write_csv(rows, tmp_path / "r.csv").open(newline="") as handle:
        assert [r["verdict"] for r in csv.DictReader(handle)] == [r.verdict.value for r in rows]
    path = write_json(rows, {}, tmp_path / "r.json")
    assert [r["verdict"] for r in json.loads(path.read_text())["results"]] == [r.verdict.value for r in rows]
    back, _ = read_json(path)
    assert [r.verdict for r in back] == [r.verdict for r in rows] and all(isinstance(r.verdict, Verdict) for r in back)
    with pytest.raises(BadRecord, match="'fit'"):  # a misspelt verdict fails where it is made
        make_row(profiles[0], verdict="fit")
    with pytest.raises(ValueError, match="'fit'"):
        replace(rows[0].memory, verdict="fit")


def test_summaries(rows: list[PairResult]) -> None:
    cocoa, tiny, big = model_summaries(rows)  # the unstable host timings: only with --verbose
    note = model_summaries(rows, verbose=True)[-1]
    assert cocoa.startswith("cocoa_fp32.pt: fits on 2 of 3 devices; lowest tier it runs on: tier2")
    assert "does not fit: OOM on 1" in cocoa
    assert "no latency on 1 device: no predictor for Cortex-A7" in cocoa
    assert tiny.startswith("tiny_cnn.pt: fits on 2 of 3 devices; lowest tier it runs on: tier3")
    assert note.startswith("note: host-CPU timings (CSV host_latency_*) were unstable for 1 of 9 pairs")
    assert big == "big_resnet.pt: fits nowhere (0 of 3 devices: OOM on 2, thrashing on 1)"
    everywhere = [r for r in rows if r.model.label == "tiny_cnn.pt" and r.verdict == "fits"]
    assert "fits on both devices" in model_summaries(everywhere)[0]


def test_csv_has_every_field_one_row_per_pair(rows: list[PairResult], tmp_path: Path) -> None:
    path = write_csv(rows, tmp_path / "r.csv")
    with path.open(newline="") as handle:
        records = list(csv.DictReader(handle))
    assert list(records[0]) == [*COLUMNS, "fits", "failure_reason"] == csv_columns()
    assert len(records) == len(rows)
    assert records[0]["verdict"] == "oom" and records[0]["latency_ms"] == "2480.0"  # predicted kept
    assert records[0]["fits"] == "False" and records[2]["latency_ms"] == ""
    assert records[0]["params"] == "3504872"


def test_csv_cells_a_spreadsheet_would_run_are_text(profiles: list[Profile], tmp_path: Path) -> None:
    hostile = [make_row(profiles[0], model=name) for name in ("=HYPERLINK(\"http://x\")", "+1.pt", "@SUM(A1).pt",
                                                             "-2.pt", "plain.pt")]
    with write_csv(hostile, tmp_path / "r.csv").open(newline="") as handle:
        labels = [r["model_label"] for r in csv.DictReader(handle)]
    assert labels == ["'=HYPERLINK(\"http://x\")", "'+1.pt", "'@SUM(A1).pt", "'-2.pt", "plain.pt"]
    assert (tmp_path / "r.csv").stat().st_mode & 0o777 == 0o644  # shareable, not mkstemp's 0600


def test_json_round_trips_with_manifest(rows: list[PairResult], profiles: list[Profile], tmp_path: Path) -> None:
    manifest = {"command_line": ["lodevem", "start", "x.pt"], "lodevem": {"version": __version__}}
    path = write_json(rows, manifest, tmp_path / "r.json")
    payload = json.loads(path.read_text())
    assert payload["schema_version"] == 1 and payload["lodevem_version"] == __version__
    assert payload["environment"] == manifest and len(payload["summary"]) == 4
    back, env = read_json(path)
    assert back == list(rows) and env == manifest
    path.write_text(path.read_text().replace('"schema_version": 1', '"schema_version": 99'))
    with pytest.raises(InputError, match=r"r\.json: results schema_version 99, expected 1"):
        read_json(path)


def test_latex_is_balanced_booktabs(rows: list[PairResult], profiles: list[Profile], tmp_path: Path) -> None:
    text = write_latex(rows, tmp_path / "r.tex", profiles).read_text()
    assert text.count(r"\toprule") == 1 and text.count(r"\bottomrule") == 1
    assert text.count(r"\midrule") == 3  # one over each model's heading row
    assert text.count(r"\begin{tabular}") == text.count(r"\end{tabular}") == 1 + 2  # + two stacked headers
    assert text.index(r"\toprule") < text.index(r"\midrule") < text.index(r"\bottomrule")
    body = text[text.index(r"\toprule"):text.index(r"\bottomrule")]
    lines = [line for line in body.splitlines() if line.rstrip().endswith(r"\\")]
    headings = [line for line in lines if line.startswith(r"\multicolumn{5}")]
    assert len(headings) == 3 and len(lines) == 1 + 3 + len(rows)  # header, a heading per model, a row per pair
    spec = re.search(r"\\begin\{tabular\}\{([a-z]+)\}", text).group(1)
    assert spec == "lcrrc" and all(line.count("&") == len(spec) - 1 for line in lines if line not in headings)
    assert r"cocoa\_fp32.pt" in text and "cocoa_fp32" not in text.replace(r"\_", "")
    assert r"OOM & -- & no \\" in text and r"\usepackage{booktabs}" in text and "Model &" not in text
    assert r"1,234.5\textsuperscript{*}" in text and "pifont" not in text
    ding = latex_table(rows, profiles, marks="ding", notes=True)
    assert r"\ding{55}" in ding and r"\usepackage{pifont}" in ding and r"\footnotesize" in ding
    assert latex_escape("a_b&c%d$#{}~^\\") == (r"a\_b\&c\%d\$\#\{\}\textasciitilde{}"
                                                r"\textasciicircum{}\textbackslash{}")
    with pytest.raises(InputError, match="marks"):
        latex_table(rows, marks="emoji")


def test_plots_write_png_and_pdf(rows: list[PairResult], profiles: list[Profile], tmp_path: Path) -> None:
    with_floor = [with_columns(r, min_ram_mb=300.0 if r.model.label == "cocoa_fp32.pt" else 40.0) for r in rows]
    paths = (latency_heatmap(with_floor, profiles, tmp_path) + latency_vs_ram(with_floor, profiles, tmp_path)
             + min_ram_bar(with_floor, tmp_path))
    assert sorted(p.name for p in paths) == sorted(
        f"{stem}.{ext}" for stem in ("latency_heatmap", "latency_vs_ram", "min_ram") for ext in ("png", "pdf"))
    for path in paths:
        head = path.read_bytes()[:8]
        assert path.stat().st_size > 1000 and head.startswith(b"\x89PNG" if path.suffix == ".png" else b"%PDF")
    assert min_ram_bar(rows, tmp_path / "none") == []  # no --find-floor, no figure
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_write_all_without_plots(rows: list[PairResult], profiles: list[Profile], tmp_path: Path) -> None:
    paths = write_all(rows, profiles, {"command_line": []}, tmp_path / "out", plots=False)
    assert [p.name for p in paths] == ["benchmark_results.csv", "benchmark_results.json",
                                       "benchmark_results.tex", "methodology.md", "methodology.tex",
                                       "references.bib", "report.html"]
    assert all(p.is_file() for p in paths)


def test_manifest_has_reproducibility_keys(profiles: list[Profile]) -> None:
    argv = ["lodevem", "start", "models/my model.pt", "--tier", "tier2"]
    models = [{"label": "my model.pt", "path": "models/my model.pt", "sha256": "cd" * 32}]
    typed = collect_manifest(argv, profiles, models, image_id="sha256:1234", backend="process",
                             run=RunDescription.from_dict({"config": {"runs": 50, "warmup": 5}}, "a test's manifest"))
    assert typed.command_line == tuple(argv) and typed.lodevem.version == __version__
    assert typed.backend.name == "process" and typed.host.cgroup_version in ("v1", "v2", None)
    manifest = typed.to_dict()
    for key in ("created_utc", "command_line", "command", "lodevem", "python", "packages", "host",
                "backend", "profiles", "models", "extra"):
        assert key in manifest
    assert manifest["command_line"] == argv and "'models/my model.pt'" in manifest["command"]
    assert manifest["lodevem"]["version"] == __version__ and "git_commit" in manifest["lodevem"]
    assert {"torch", "nn-meter", "onnx", "onnxruntime", "docker", "pandas"} <= set(manifest["packages"])
    for key in ("cpu_model", "cpu_count", "kernel", "os", "cgroup_version"):
        assert key in manifest["host"]
    assert manifest["backend"] == {"name": "process", "image_id": "sha256:1234", "images": {},
                                   "docker_server_version": None}
    assert [p["sha256"] for p in manifest["profiles"]] == [p.sha256 for p in profiles]
    assert all(len(p["sha256"]) == 64 for p in manifest["profiles"])
    assert manifest["models"] == models and manifest["extra"]["config"]["runs"] == 50
    assert manifest["created_utc"].endswith("Z")
    json.dumps(manifest)  # storable as is
    assert Manifest.from_dict(json.loads(json.dumps(manifest))) == typed  # and read back whole
    assert Manifest.from_dict({}).command_line == () and Manifest.from_dict({"host": []}).host.machine is None


def test_the_console_under_a_small_table_stays_short(profiles: list[Profile]) -> None:
    """Issue 39: at 80 columns a two-row table used to carry ~20 lines of prose. By default the
    lines under it say what the numbers are and one line per model; --verbose adds the rest."""
    kaios, spark, _ = profiles
    rows = [make_row(spark, model="net.pt", latency=15.9, peak=53.0, latency_kind="armsim", latency_low_ms=11.9,
                     latency_high_ms=19.9, latency_held_out_pct=25.0, host_latency_unstable="std is 16 % of the mean"),
            make_row(kaios, model="net.pt", latency=48.9, peak=53.0, latency_low_ms=32.9, latency_high_ms=64.8,
                     latency_held_out_pct=32.6, host_latency_unstable="std is 12 % of the mean")]

    def under_table(verbose: bool) -> list[str]:
        console = Console(record=True, width=80)
        console.print(results_table(rows, profiles, verbose=verbose))
        for line in model_summaries(rows, verbose=verbose):
            console.print(line, markup=False)
        lines = console.export_text().splitlines()
        return lines[max(i for i, line in enumerate(lines) if line.startswith("\u2514")) + 1:]

    short, full = under_table(False), under_table(True)
    assert len(short) <= 14, "\n".join(short)
    assert len(full) > len(short)
    text = " ".join(" ".join(short).split())
    assert "\u2021 armsim emulated core: \u00b125.0% (Cortex-A53, fp32)" in text  # one % per mark and kind
    assert "* offline estimator: \u00b132.6% (Cortex-A7, fp32)" in text
    assert BAND_SHORT in text  # latency.statement: the one wording of the band
    assert "unstable" not in text and "unstable" in " ".join(full)
