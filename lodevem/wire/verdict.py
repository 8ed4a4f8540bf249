"""The verdict of a (model, device profile) row: one enum, so a misspelt verdict is an error at
import time rather than a comparison that is silently never true.

Why in the worker package, like the precision vocabulary (``wire.precision``): the sandbox
names the failure kinds of a run with it, ``memory.verdicts`` decides a run's verdict,
``results`` stores it and ``report`` shows it, and those packages may not import each other for
a word; every one of them already imports the worker package, which imports nothing of the host.
Stdlib only, no I/O.

The members are ``str``-valued and print as their value, so the CSV, the JSON, the run-state
file and f-strings carry the same text as before the enum existed (``fits``, ``tight``, ...),
and a value read back from any of them compares equal to its member.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

__all__ = ["Verdict", "VERDICTS"]


class Verdict(str, Enum):
    """A row's verdict, best first (``VERDICTS`` keeps this order for sorting).

    ``FITS``: it ran and its peak stayed within the device's app budget; ``TIGHT``: it ran under
    the RAM limit but its peak is above the app budget (a phone's low-memory killer would likely
    stop it); ``OOM``: killed at the RAM limit (or its peak RSS exceeded it); ``THRASHING``:
    stopped while paging without progress; ``TIMEOUT``: no result within the wall-clock limit;
    ``ERROR``: it could not run (the worker's or the backend's message says why).
    """

    FITS = "fits"
    TIGHT = "tight"
    OOM = "oom"
    THRASHING = "thrashing"
    TIMEOUT = "timeout"
    ERROR = "error"

    def __str__(self) -> str:  # "fits", not "Verdict.FITS": CSV cells and messages show the value
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    __hash__ = str.__hash__  # a member finds the entry its text keys in a dict, on every Python

    @property
    def ran(self) -> bool:
        """The model completed under the RAM limit (fits or tight): its peak is a figure."""
        return self in (Verdict.FITS, Verdict.TIGHT)

    @property
    def fits(self) -> Optional[bool]:
        """True within the app budget; False over it (tight) or when it did not complete under
        the RAM limit; None when it could not run at all (error)."""
        if self is Verdict.FITS:
            return True
        return None if self is Verdict.ERROR else False


VERDICTS: tuple[Verdict, ...] = tuple(Verdict)
