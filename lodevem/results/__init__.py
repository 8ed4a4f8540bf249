"""The records of a benchmark run, defined once and shared by runner, measure and reporter.

A ``ModelFile`` is one model file from the command line to its rows: the user's path and label,
and what the run learns about it (the variant file derived for a level, its ONNX export). A
``PairResult`` is one (model x device profile) row: the predicted latency with its source,
the memory verdict measured under the profile's RAM limit, and enough identity (hashes,
backend, enforcement) to tell later what produced each number, in typed parts
(``row_parts``); its CSV and JSON columns are the one flattening of those parts (``columns``).
"""

from __future__ import annotations

from ..sandbox.artifacts import ConversionResult, ExportResult  # the sandbox's records, re-exported
from ..wire.verdict import VERDICTS
from .measurements import (
    MEASUREMENT_LAYOUT,
    Accuracy,
    ConvertedFile,
    Fallback,
    FloorResult,
    HostTimings,
    MeasuredModel,
    MemoryMeasurement,
    OomPhase,
    PeakMemory,
    SandboxFacts,
)
from .model_file import ModelFile, label_models
from .notes import quantization_note
from .pair import COMPUTED_ROW_FIELDS, DEVICE_ROW_FIELDS, ROW_SOURCES, PairResult, budget_verdict, pair_result
from .row_parts import (
    LatencyBand,
    PhoneMeasurement,
    RowAccuracy,
    RowConverted,
    RowDevice,
    RowHost,
    RowLatency,
    RowMemory,
    RowModel,
)

__all__ = ["Accuracy", "ModelFile", "PairResult", "pair_result", "label_models", "MemoryMeasurement",
           "FloorResult", "ExportResult", "ConversionResult", "VERDICTS", "COMPUTED_ROW_FIELDS", "DEVICE_ROW_FIELDS",
           "ROW_SOURCES", "budget_verdict", "RowModel", "RowDevice", "RowLatency", "LatencyBand", "RowMemory",
           "ConvertedFile", "HostTimings", "RowAccuracy", "RowConverted", "RowHost", "PhoneMeasurement",
           "quantization_note", "RESULTS_SCHEMA_VERSION", "MEASUREMENT_LAYOUT",
           "Fallback", "MeasuredModel", "OomPhase", "PeakMemory", "SandboxFacts"]

RESULTS_SCHEMA_VERSION = 1
