"""Entry point of ``python -m lodevem.worker``: read the request, run it, print the one result line.

See the package docstring (``lodevem/worker/__init__.py``) for the protocol.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Optional

from ..wire.protocol import EXIT_ERROR, EXIT_OK, WorkerError, first_line, progress
from ..wire.replies import WorkerFailure, WorkerReply, reply_for
from ..wire.requests import WorkerRequest
from .actions import Late
from .dispatch import run
from .memory import MemoryPhases, proc_status_kb


class _ArgParser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting 2: errors must be JSON."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise WorkerError("bad_request", f"bad command line: {message}")


def read_request(argv: list[str]) -> WorkerRequest:
    parser = _ArgParser(prog="python -m lodevem.worker", add_help=False)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--request", help="request JSON, or - for stdin")
    group.add_argument("--request-file", help="path of a request JSON file")
    args = parser.parse_args(argv)
    if args.request_file is not None:
        try:
            with open(args.request_file) as fh:
                return WorkerRequest.from_json(fh.read())
        except OSError as exc:
            raise WorkerError("bad_request", f"cannot read request file: {exc}") from None
    return WorkerRequest.from_json(sys.stdin.read() if args.request == "-" else args.request)


def main(argv: Optional[list[str]] = None) -> int:
    rss_start = proc_status_kb()["VmRSS"]  # before anything heavy is imported
    # The protocol line goes to a private copy of stdout; fd 1 now points at stderr so prints
    # from the model (Python or C++) cannot corrupt the result.
    result_out = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)
    progress("start")
    mem = MemoryPhases(rss_start)
    res = WorkerReply()  # the envelope alone until the request is read
    code = EXIT_OK
    late: Late = None
    try:
        req = read_request(sys.argv[1:] if argv is None else argv)
        res = reply_for(req.action)  # the action's own record
        late = run(req, res, mem)
        res.ok = True
    except WorkerError as exc:
        res.error, code = WorkerFailure(exc.kind, exc.message), EXIT_ERROR
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        res.error, code = WorkerFailure("internal", first_line(repr(exc))), EXIT_ERROR
    res.memory = mem.finish()
    if late is not None:  # after the memory summary: its work must not count as the model's
        try:
            late()
        except WorkerError as exc:
            res.ok, res.error, code = False, WorkerFailure(exc.kind, exc.message), EXIT_ERROR
        except Exception as exc:  # informative only; the measurement stands
            traceback.print_exc(file=sys.stderr)
            progress(f"a step after the measurement failed: {first_line(repr(exc))}")
    error = res.error or WorkerFailure("internal", "no error recorded")
    progress("done" if res.ok else f"error {error.kind}: {error.message}")
    sys.stdout.flush()
    result_out.write(res.to_json() + "\n")
    result_out.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
