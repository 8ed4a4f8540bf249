"""The estimator's parameters file read into records (``latency.estimator_params``): the shipped
file reads back whole, and every malformed or out-of-range file is one ``EstimatorError`` naming
the file, never a traceback. No torch: the records only."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from lodevem.errors import EstimatorError
from lodevem.latency.estimator import DEFAULT_PARAMS, Estimator
from lodevem.latency.estimator_params import EstimatorParams, read_params

SHIPPED = json.loads(DEFAULT_PARAMS.read_text())


def test_the_shipped_file_reads_into_the_estimator() -> None:
    fit = EstimatorParams.parse(SHIPPED, DEFAULT_PARAMS)
    est = Estimator.load()
    assert (est.version, est.theta, est.cores, est.runtimes, est.fp16) == (
        fit.version, fit.theta, fit.cores, fit.runtimes, fit.fp16)
    assert est.held_out_rows == fit.held_out_rows and est.accuracy == fit.accuracy
    assert est.provenance == fit.provenance and est.params == SHIPPED


def _first(mapping: dict[str, Any]) -> str:
    return next(iter(mapping))


BREAKS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "no version": lambda p: p.pop("version"),
    "a core that is a list": lambda p: p["cores"].__setitem__(_first(p["cores"]), [1, 2]),
    "a runtime that is a list": lambda p: p["runtimes"].__setitem__(_first(p["runtimes"]), []),
    "uncertainty that is a list": lambda p: p.__setitem__("uncertainty", [1]),
    "a negative cycles per unit": lambda p: p["terms"][_first(p["terms"])].__setitem__("cycles_per_unit", -1.0),
    "a parallel fraction over 1": lambda p: p["cores"][_first(p["cores"])].__setitem__(
        "parallel_fraction_compute", 1.5),
    "a term mapped to nothing known": lambda p: p["runtimes"][_first(p["runtimes"])].__setitem__(
        "term_map", {"gemm": "winograd_macs"}),
    "a zero fp16 divisor": lambda p: p["precision"]["fp16"].__setitem__("memory_speedup", 0.0),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_a_broken_file_is_one_error_naming_it(name: str, tmp_path: Path) -> None:
    params = copy.deepcopy(SHIPPED)
    BREAKS[name](params)
    path = tmp_path / "estimator_params.json"
    path.write_text(json.dumps(params))
    with pytest.raises(EstimatorError, match=str(path)):
        Estimator.load(path)


@pytest.mark.parametrize("text", ["[1, 2]", '"v4"', "null"])
def test_a_file_that_is_not_an_object_is_malformed(text: str, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(EstimatorError, match="malformed estimator parameters"):
        Estimator.load(path)


def test_unreadable_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(EstimatorError, match="cannot read"):
        read_params(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(EstimatorError, match="not valid JSON"):
        read_params(tmp_path / "bad.json")
