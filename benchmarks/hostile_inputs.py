#!/usr/bin/env python
"""Costs of hostile inputs on the host, measured in one run (ratios, not wall-time targets).

    PYTHONPATH=. .venv/bin/python benchmarks/hostile_inputs.py [--quick] [--mb 300]

1. ``--from-log`` parsing of a log whose one line repeats ``Inference timings in us:``
   (``--line-kb``, 1,024 KB by default): lodevem's line-bounded linear parser against the lazy
   ``.*?`` regex it replaced (run on a 1/16 prefix of the line, and extrapolated quadratically only
   in the printed note: the full line takes minutes).
2. A sandboxed run (process backend) whose model prints ``--mb`` MB to stderr: the host's peak
   RSS growth while it runs and what the host kept of the output (the tail buffers). Target:
   the host's growth stays far below the bytes printed.

3. Issue 47's read-back cases (``cases/hostile_readback.py``: a shared store with planted links,
   tampered artifacts and edited records; ``lodevem report`` on crafted folders; run state and
   store records with impossible figures; names that would steer the methods text, Markdown,
   LaTeX or HTML; the same bytes under another name; an option that does not apply), each tried
   on the host: ``read-back cases: N of M held`` and every broken case by name.

``--quick`` (what the tests run): a 64 KB line and 16 MB printed; the read-back cases always run.
"""

from __future__ import annotations

import argparse
import pickle
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "cases"))

_OLD = re.compile(r"Inference timings in us:.*?Inference \(avg\):\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)")


class _Loud:
    def __init__(self, mb: int) -> None:
        self.code = (f"(__import__('os').write(2, b'x' * ({mb} * 2**20)), "
                     "__import__('torch').nn.Sequential(__import__('torch').nn.Conv2d(3, 4, 3)).eval())[-1]")

    def __reduce__(self):
        return (eval, (self.code,))


def _parse(line_kb: int) -> None:
    from lodevem.errors import InputError
    from lodevem.latency.calibration import parse_benchmark_log

    phrase = "Inference timings in us: "
    line = phrase * (line_kb * 1024 // len(phrase))
    started = time.process_time()
    try:
        parse_benchmark_log(line + "\n", "hostile.log")
    except InputError:
        pass
    new_s = time.process_time() - started
    part = line[: len(line) // 16]
    started = time.process_time()
    list(_OLD.finditer(part))
    old_part_s = time.process_time() - started
    print(f"log line of {len(line) / 1024:.0f} KB: lodevem's parser {new_s * 1000:.1f} ms CPU; the old regex "
          f"{old_part_s * 1000:.0f} ms CPU on 1/16 of it ({len(part) / 1024:.0f} KB; quadratic: ~"
          f"{old_part_s * 256:.0f} s on the whole line)")


def _loud_run(mb: int) -> None:
    from lodevem.sandbox.client import WorkerClient
    from lodevem.sandbox.process_backend import ProcessBackend
    from lodevem.wire.requests import InspectRequest

    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "loud.pt"
        model.write_bytes(pickle.dumps(_Loud(mb), protocol=2))
        client = WorkerClient(ProcessBackend())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started = time.monotonic()
        run = client.run(InspectRequest(model_path=str(model), input_shape=[1, 3, 16, 16]),
                         None, 600)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kept = len(run.outcome.stdout) + len(run.outcome.stderr_tail)
    print(f"a model printing {mb} MB (process backend): host peak RSS {before:.0f} -> {after:.0f} MB "
          f"(+{after - before:.0f} MB); kept {kept / 1024:.0f} KB of output, dropped "
          f"{run.outcome.observed.get('stderr_dropped_bytes', 0) / 2**20:.0f} MB; reply ok: "
          f"{bool(run.reply and run.reply.ok)}; {wall:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (what the tests run)")
    parser.add_argument("--line-kb", type=int, default=1024)
    parser.add_argument("--mb", type=int, default=300)
    args = parser.parse_args()
    line_kb, mb = (64, 16) if args.quick else (args.line_kb, args.mb)
    _parse(line_kb)
    _loud_run(mb)
    from hostile_readback import CASES, run_cases

    held, broken = run_cases()
    print(f"read-back cases: {held} of {len(CASES)} held" + "".join(f"\n  broken: {b}" for b in broken))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
