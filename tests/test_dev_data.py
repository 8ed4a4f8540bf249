"""The dev latency data (benchmarks/data/arm-cpu-latency-dev.csv) keeps its sources and its held-out checks.

Pure checks over the CSV and its README: every row is usable by the fit as written (a known core,
a zoo graph at the input size the fit assumes, a positive latency, threads >= 1), says where it
comes from and how it was measured (runtime version, quantization scheme, XNNPACK, statistic,
publication date), and no row comes from a source kept out as an independent check (data README,
"Sources kept out").
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "arm-cpu-latency-dev.csv"
README = REPO / "benchmarks" / "data" / "README.md"
sys.path.insert(0, str(REPO / "scripts"))

import fit_estimator as fe  # noqa: E402

COLUMNS = ["device", "soc", "core", "clock_ghz", "threads", "model", "input", "avg_ms", "min_ms", "runtime",
           "precision", "source", "runtime_version", "quant", "xnnpack", "latency_stat", "published"]
QUANTS = {"none", "int8-static", "int8-dynamic", "fp16-weights"}
XNNPACK = {"yes", "no", "unknown", "n/a"}
STATS = {"mean", "min", "median", "unspecified"}
DATE = re.compile(r"^(\d{4}(-\d{2}(-\d{2})?)?|unknown)$")

# Sources kept out of the dev data (the data README says why). Two are grandfathered: the rows of
# ncnn's benchmark table and of XNNPACK's README that were in the file before the rule; no more.
KEPT_OUT = ("NobuoTsukamoto/benchmarks", "hosted_models", "hosted-models", "Paddle-Lite", "PaddlePaddle")
NCNN_README = "Tencent/ncnn benchmark/README.md"
NCNN_README_BOARDS = {
    "Kirin 970 (Cortex-A73 2.4GHz x 4 + Cortex-A53 1.8GHz x 4)",
    "Qualcomm MSM8916 Snapdragon 410 (Cortex-A53 1.2GHz x 4)",
    "Banana Pi M2 Zero 2 AllWinner H2+, Cortex-A7 (ARMv7-A) (1.2GHz x 4)",
    "Rockchip RK3588 (Cortex-A76 2.4GHz x 4 + Cortex-A55 1.8GHz x 4)",
    "Rock3A, Rockchip RK3568 (Cortex-A55 2.0GHz x 4) ubuntu 20.04",
    "Rockchip RK3399 (Cortex-A72 1.8GHz x 2 + Cortex-A53 1.5GHz x 4)",
    "OrangePi4 LTS, Rockchip RK3399 (Cortex-A72 1.8GHz x 2 + Cortex-A53 1.5GHz x 4)",
    "NanoPi R2S, Rockchip RK3328 (Cortex-A53 1.3GHz x 4) Armbian focal (21.05.1) aarch64",
    "AXERA AX620A (Cortex-A7 1.0GHz * 4)",
    "Arduino UNO Q - QRB2210 (ARM Cortex-A53 @ 2.0GHz x 4)",
}
NCNN_README_ROWS, XNNPACK_README_ROWS = 299, 20
# SoCs of ncnn benchmark-table boards that are NOT in the dev data (held out): no ncnn row from any
# other source may sit on them either, or the held-out board's SoC would be a SoC the fit has seen.
HELD_OUT_NCNN_SOCS = ("BCM2837", "BCM2710", "RP3A0", "RK3566", "H616", "A311D", "i.MX 7", "i.MX7", "RK3228",
                      "RZ/G2L", "T527", "X3", "AX630C")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    with open(DATA, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_every_row_is_usable_by_the_fit_as_written(rows: list[dict[str, str]]) -> None:
    from lodevem import zoo

    loaded = fe.load_rows(DATA)  # the strict loader: soc named, positive clock/latency/threads
    # every line but those of a runtime lodevem does not predict (TFLite's own kernels, kept
    # beside their XNNPACK twins; TFLite float rows whose delegate the source leaves unstated) is
    # loaded, in order; most of the data is fitted
    predicted = [(n, r) for n, r in enumerate(rows, start=2) if fe.other_runtime(r) is None]
    assert 0 < len(rows) - len(predicted) < len(rows) / 4
    assert len(loaded) == len(predicted)
    graphs = fe.graph_maps()
    for (n, r), row in zip(predicted, loaded):
        where = f"{DATA.name}:{n}"
        assert r["source"].strip() and r["soc"].strip() and r["device"].strip(), where
        assert row.core in fe.ALL_CORES, (where, row.core)
        assert row.graph_key in graphs, (where, row.model)
        bench = graphs[row.graph_key]
        assert bench.zoo in zoo.names(), (where, bench.zoo)
        # the fit prices the graph at the map's input size and never reads the input column
        assert r["input"] == f"1x3x{bench.input_hw}x{bench.input_hw}", (where, r["input"])
        assert row.avg_ms > 0 and row.threads >= 1 and row.clock_ghz > 0, where
        if r["min_ms"]:
            assert 0 < float(r["min_ms"]) <= row.avg_ms, where


def test_every_row_says_how_it_was_measured(rows: list[dict[str, str]]) -> None:
    for n, r in enumerate(rows, start=2):
        where = f"{DATA.name}:{n}"
        assert r["runtime_version"].strip(), where
        assert r["quant"] in QUANTS and r["xnnpack"] in XNNPACK and r["latency_stat"] in STATS, where
        assert DATE.match(r["published"]), (where, r["published"])
        tflite = r["runtime"] in ("tflite", "tflite-xnnpack", "litert")
        assert (r["xnnpack"] != "n/a") == tflite, where
        if r["runtime"] == "tflite-xnnpack":
            assert r["xnnpack"] == "yes", where
        # precision is the arithmetic; quant the file's scheme: an int8 row names its int8 scheme, and a
        # TFLite fp16-weights file is dequantized at load (fp32 arithmetic)
        assert (r["precision"] == "int8") == r["quant"].startswith("int8"), where
        if r["quant"] == "fp16-weights":
            assert r["precision"] == "fp32", where
        if r["latency_stat"] == "min":
            assert r["min_ms"] == r["avg_ms"], where


def test_no_row_comes_from_a_kept_out_source(rows: list[dict[str, str]]) -> None:
    for n, r in enumerate(rows, start=2):
        assert not any(k.lower() in r["source"].lower() for k in KEPT_OUT), (n, r["source"])
    ncnn_table = [r for r in rows if NCNN_README in r["source"]]
    assert {r["device"] for r in ncnn_table} == NCNN_README_BOARDS and len(ncnn_table) == NCNN_README_ROWS
    xnnpack_readme = [r for r in rows if "google/XNNPACK README" in r["source"]]
    assert len(xnnpack_readme) == XNNPACK_README_ROWS and {r["published"] for r in xnnpack_readme} == {"2020"}
    other_ncnn = [r for r in rows if r["runtime"] == "ncnn" and NCNN_README not in r["source"]]
    assert other_ncnn
    for r in other_ncnn:
        assert not any(s in r["soc"] for s in HELD_OUT_NCNN_SOCS), (r["device"], r["soc"])


def test_the_readme_names_every_soc_and_the_row_count(rows: list[dict[str, str]]) -> None:
    text = README.read_text()
    for soc in sorted({r["soc"] for r in rows}):
        assert f"`{soc}`" in text, f"{README.name} does not list the SoC `{soc}` (Boards that share a SoC)"
    assert f"{len(rows)} published latencies" in text


MEMORY = REPO / "benchmarks" / "data" / "soc-memory-new.csv"
MEMORY_COLUMNS = ["soc", "cluster_core", "l1d_kib", "l2_kib", "l2_shared", "l3_kib", "dram_type", "dram_channels",
                  "dram_bus_bits", "dram_mts", "peak_dram_gbs", "source"]


def test_soc_memory_file_names_dev_socs_and_guesses_nothing(rows: list[dict[str, str]]) -> None:
    """soc-memory-new.csv (data README, third pass): one sourced line per SoC it describes, each a SoC of the dev
    data; a figure is a positive number or ``unknown`` (never a range or a guess written as text)."""
    with open(MEMORY, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == MEMORY_COLUMNS
        lines = list(reader)
    assert lines
    socs = {r["soc"] for r in rows}
    cores = {(r["soc"], r["core"]) for r in rows}
    for n, m in enumerate(lines, start=2):
        where = f"{MEMORY.name}:{n}"
        assert m["soc"] in socs and (m["soc"], m["cluster_core"]) in cores, where
        assert len(m["source"].strip()) > 20, where
        for col in ("l1d_kib", "l2_kib", "l3_kib", "dram_channels", "dram_bus_bits", "dram_mts", "peak_dram_gbs"):
            assert m[col] == "unknown" or float(m[col]) >= 0, (where, col)
        assert m["l2_shared"] in ("yes", "no", "unknown"), where
        assert m["dram_type"].strip(), where
    assert len({m["soc"] for m in lines}) == len(lines)
