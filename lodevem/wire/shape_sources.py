"""Where a run's input shape came from: the words the worker reports and the host states.

Why on the wire: the worker says which source it used (the request's shape, one recorded in the
file, the default) and the host turns that into the row's, CSV's and methods paragraph's words
(where the *user* gave it); both sides must share one vocabulary, and the host must not import
the worker's torch-side shape checks (``worker.load.shapes``) to get it. Stdlib only.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["SOURCE_DEFAULT", "SOURCE_EVAL_DATA", "SOURCE_FINETUNE_DATA", "SOURCE_GIVEN", "SOURCE_RECORDED",
           "SOURCE_REQUEST", "SOURCE_WORDS", "host_shape_source"]

SOURCE_REQUEST = "--input-shape"  # the worker's word: the request carried a shape
SOURCE_RECORDED = "recorded in the file"
SOURCE_DEFAULT = "default"
# The host's words for a shape the request carried (rows, CSV, JSON): where the *user* gave it.
# Not a CLI flag: a CSV cell starting with "-" is quoted against spreadsheet formulas ("'--input-shape")
# and a methods paragraph must not name options.
SOURCE_GIVEN = "given"
SOURCE_EVAL_DATA = "evaluation data"
SOURCE_FINETUNE_DATA = "fine-tuning data"
# How the methods paragraph says each source.
SOURCE_WORDS = {SOURCE_GIVEN: "as given", SOURCE_EVAL_DATA: "the evaluation data's sample shape",
                SOURCE_FINETUNE_DATA: "the fine-tuning data's sample shape",
                SOURCE_RECORDED: "recorded in the model file", SOURCE_DEFAULT: "lodevem's default"}


def host_shape_source(reported: Optional[str], given_by: Optional[str]) -> Optional[str]:
    """The source a row states: the worker's ``reported`` one, where a shape the request carried
    is the user's (``given_by``: ``SOURCE_EVAL_DATA`` when the host took it from --eval-data, else
    ``SOURCE_GIVEN``). An older cached export's ``--input-shape`` reads the same way."""
    if reported == SOURCE_REQUEST:
        return given_by or SOURCE_GIVEN
    return reported
