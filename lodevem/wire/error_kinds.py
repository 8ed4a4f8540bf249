"""The kinds of failure the worker names (``error.kind`` of a reply).

Why a module of its own: the protocol raises them (``WorkerError``) and the reply's records
(``sections.WorkerFailure``) read them back; both import this, neither the other.
"""

from __future__ import annotations

ERROR_KINDS = ("bad_request", "not_found", "state_dict", "optimizer_checkpoint", "not_a_model", "corrupt",
               "bad_input_shape", "model_failed", "export_failed", "unsupported_format", "level_failed",
               "weights_mismatch", "internal")
# The kinds that mean the user's file (or --input-shape) is unusable: the host stops ``start``
# before any measurement with exit code 2 (a bad input), rather than writing a row of errors.
UNUSABLE_FILE_KINDS = ("not_found", "state_dict", "optimizer_checkpoint", "not_a_model", "corrupt",
                       "unsupported_format", "bad_input_shape", "model_failed", "weights_mismatch")
