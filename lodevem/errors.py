"""lodevem's own exceptions, one module of them.

Library code raises these with a one-line message that names the file or option at fault and
what was expected; only ``cli.py`` turns them into Click errors and exit codes, so the library
never prints and never exits.
"""

from __future__ import annotations


class LodevemError(Exception):
    """A failure lodevem can explain in one line. Exit code 1 (runtime failure)."""

    exit_code = 1


class InputError(LodevemError):
    """Bad input from the user: a malformed profile, an unusable model file, a bad option.

    Exit code 2, like Click's own usage errors.
    """

    exit_code = 2


class ProfileError(InputError):
    """A device profile file that does not validate, or a profile/tier that does not exist."""


class ModelFileError(InputError):
    """A model file lodevem cannot benchmark (not a model, state_dict only, corrupt...)."""


class BackendUnavailable(LodevemError):
    """The isolation backend asked for (Docker engine, image, cgroup) is not usable."""
