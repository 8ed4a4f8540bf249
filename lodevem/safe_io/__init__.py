"""The one reader for every host read of a path a user or a container names, and the one helper
that makes untrusted text safe for a terminal.

Why one module: a path the user types (``--from-log``, ``--code``, a calibrations folder) or a
file a sandboxed run left behind is input, as hostile as a model file. Reading it with
``Path.read_bytes()`` trusts three things nobody checked: that it is a regular file (a FIFO
blocks the open forever, ``/dev/zero`` never ends), that it is small (a 20 GB sparse file costs
no disk and all the RAM), and that its lines are short (a regex that backtracks is quadratic on a
1 MB line). Here every read:

* looks before it opens: ``stat`` (through links: a link to a regular file is fine, a link to a
  device is refused) and, for what a container wrote, ``lstat`` with ``O_NOFOLLOW``;
* opens with ``O_NONBLOCK`` (a FIFO swapped in after the check cannot block) and checks
  ``fstat`` on the descriptor it reads, so a file swapped between the check and the open is
  caught too;
* stops at the size cap of its ``Kind`` even when ``st_size`` lies (a file still growing).

Every refusal is one ``UnsafeInput`` line naming the path (``files``); text from such files is
escaped and capped before it reaches a terminal, and JSON lodevem writes never holds NaN
(``text``). ``tests/test_hostile_inputs.py``
walks the host modules and fails on a bare ``read_text()``/``read_bytes()``/``open()`` outside
this module and an allow-list of lodevem's own data files. The caps are listed in
``docs/security.md``.
"""

from __future__ import annotations

from ..errors import UnsafeInput
from .files import (
    CACHE_RECORD,
    CALIBRATION_RECORD,
    CODE_FILE,
    CODE_TOTAL_BYTES,
    LOG,
    MODEL_FILE,
    OUTPUT_TAIL_BYTES,
    PROFILE,
    REPLY_TAIL_BYTES,
    RESULTS_FILE,
    Kind,
    folder_fd,
    hash_into,
    read_bytes,
    read_tail,
    read_text,
    regular_fd,
    sha256_file,
)
from .text import ENTRY_CHARS, LOG_LINE_CHARS, MESSAGE_CHARS, bounded_lines, clip, json_text, printable

__all__ = [
    "CACHE_RECORD", "CALIBRATION_RECORD", "CODE_FILE", "CODE_TOTAL_BYTES", "ENTRY_CHARS", "Kind", "LOG",
    "LOG_LINE_CHARS", "MESSAGE_CHARS", "MODEL_FILE", "OUTPUT_TAIL_BYTES", "PROFILE", "REPLY_TAIL_BYTES",
    "RESULTS_FILE", "UnsafeInput", "bounded_lines", "clip", "folder_fd", "hash_into", "json_text", "printable",
    "read_bytes", "read_tail", "read_text", "regular_fd", "sha256_file",
]
