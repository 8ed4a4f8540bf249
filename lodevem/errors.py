"""lodevem's own exceptions, one module of them.

Library code raises these with a one-line message that names the file or option at fault and
what was expected; only ``cli.py`` turns them into Click errors and exit codes, so the library
never prints and never exits.
"""

from __future__ import annotations

import pickle


class LodevemError(Exception):
    """A failure lodevem can explain in one line. Exit code 1 (runtime failure)."""

    exit_code = 1


class InputError(LodevemError):
    """Bad input from the user: a malformed profile, an unusable model file, a bad option.

    Exit code 2, like Click's own usage errors.
    """

    exit_code = 2


class UnsafeInput(InputError):
    """A path a user or a container named that is not a regular file, or is larger than its kind
    allows (``lodevem.safe_io``). ``detail``: the message without the path, for callers that name
    the file their own way; ``path`` is the path as shown (escaped, capped)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path, self.detail = path, detail


class BadRecord(InputError):
    """A record read back that is not what lodevem writes (``safe_io.records``): ``where`` (the
    file), ``field`` (the field, '' for the whole file) and ``problem``, on one line."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        shown = _one_line(where)
        super().__init__(f"{shown}: " + (f"field '{field}': " if field else "") + problem)
        self.where, self.field, self.problem = shown, field, problem


def _one_line(text: str, limit: int = 300) -> str:
    """A file name from a folder someone else wrote, safe on one terminal line: every character
    that is not printable escaped, capped. (``safe_io.text.printable`` does this for everything
    else; this ground-floor module imports nothing of lodevem's, and safe_io imports it.)"""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return out if len(out) <= limit else f"{out[:limit]}… ({len(out) - limit} more characters)"


class ProfileError(InputError):
    """A device profile file that does not validate, or a profile/tier that does not exist."""


class ModelFileError(InputError):
    """A model file lodevem cannot benchmark (not a model, state_dict only, corrupt...)."""


class BudgetBroken(LodevemError):
    """A CI budget gate broke (``--max-latency``, ``--fail-on-oom``, ``--fail-on-tight``): exit code 3,
    after the results are shown and written."""

    exit_code = 3


class PartialFailure(LodevemError):
    """A row the user asked for is missing a figure (an ``error`` or ``no peak`` memory cell, a
    latency that could not be predicted, a top-1 --eval-data could not give): exit code 4, after
    the results are shown and written, so a script notices what a human reads under the table.
    Distinct from 1 (no row got any memory figure) and 3 (a budget gate broke)."""

    exit_code = 4


class BackendUnavailable(LodevemError):
    """The isolation backend asked for (Docker engine, image, cgroup) is not usable."""


class SandboxError(LodevemError):
    """The sandbox answered outside the worker protocol: a worker of another version (an image
    built from other lodevem code) or a reply that does not parse. Exit code 1; the message says
    to rebuild the image."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; unwinds like Ctrl-C (cleanup runs) and carries the signal, so
    the exit code can be 128 + its number (130 for Ctrl-C, 143 for SIGTERM).

    ``note``: what the interrupted command kept, in one line for the user. A command that saves
    partial results re-raises with its own (``with_note``); the default says nothing was."""

    NOTHING_SAVED = "Nothing was saved."

    def __init__(self, signum: int, note: str = NOTHING_SAVED) -> None:
        super().__init__(f"signal {signum}")
        self.signum, self.note = signum, note

    @classmethod
    def from_interrupt(cls, exc: KeyboardInterrupt, note: str) -> "Interrupted":
        """The same interruption (its signal; a bare Ctrl-C is SIGINT) with what was kept."""
        import signal

        return cls(getattr(exc, "signum", signal.SIGINT), note)


class DeviceError(LodevemError):
    """A phone over adb (``lodevem.device``) or adb itself answered, but not with what lodevem
    asked for: a refused push, a benchmark binary that failed, no adb. Exit code 1."""


class DeviceDisconnected(DeviceError):
    """adb says the phone is gone (unplugged, the remote session closed, offline)."""


class Cancelled(LodevemError):
    """A run was stopped because lodevem is shutting down (Ctrl-C / SIGTERM)."""


class EstimatorError(LodevemError):
    """The estimator's parameter file is missing or malformed (a packaging problem, exit code 1)."""


class CostModelUnavailable(LookupError):
    """The armsim cost model does not cover this core or kind (or its parameters are malformed);
    the message says why in one line. A LookupError, not a LodevemError: the armsim predictor
    turns it into an unavailable cell or the estimator's fallback, never a failed run."""


class DeriveFailed(LodevemError):
    """Some compression levels could not be derived; ``written`` holds the variants that were.

    ``failures`` maps each failed level to its one-line reason, so the CLI can show what was
    written before it reports the error.
    """

    def __init__(self, model: object, failures: dict[str, str], written: list) -> None:
        self.failures, self.written = failures, written
        detail = "; ".join(f"{level}: {message}" for level, message in failures.items())
        super().__init__(f"{model}: could not derive {', '.join(failures)} ({detail})")


# Signals inside the predictor-pickle loader (latency/sklearn_compat.py). They never reach the
# user: the loader turns each into an InputError naming the .pkl file.

class PickleRefused(pickle.UnpicklingError):
    """A global outside the loader's allow-list; carries the ``module.name`` the file asked for."""

    def __init__(self, qualname: str) -> None:
        super().__init__(qualname)
        self.qualname = qualname


class UnsoundPredictor(ValueError):
    """Loaded, but not a sound predictor; the message says what is wrong, in a few words."""


class RefusedYaml(Exception):
    """A YAML construct a profile may not use (alias, tag, merge key, deep nesting, duplicate key),
    found at ``field`` on ``line``; the profile loader turns it into a ProfileError naming the file."""

    def __init__(self, field: str, problem: str, mark: object) -> None:
        super().__init__(problem)
        line = getattr(mark, "line", None)
        self.field, self.problem, self.line = field, problem, line + 1 if line is not None else None
