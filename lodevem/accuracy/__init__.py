"""Accuracy beside latency and RAM (``--eval-data``): every row's model evaluated in the sandbox
under the runtime the row is measured with (``evaluate``), its drop against the fp32 row, and
whether a pruned variant was fine-tuned (``--finetune-data``). The record is ``results.Accuracy``;
the data is read by ``accuracy.data``; the sandbox side is ``worker.evaluate.evaluate``/``worker.derive.finetune``.
"""

from __future__ import annotations

from .evaluate import NOTE_FINETUNED, NOTE_NOT_FINETUNED, EvaluationJob, evaluate_model, finetuned, with_drops

__all__ = ["NOTE_FINETUNED", "NOTE_NOT_FINETUNED", "EvaluationJob", "evaluate_model", "finetuned", "with_drops"]
