"""lodevem's version, at the ground floor: this module imports nothing.

Why its own module: the caches, the manifest, the image labels and the reports all record the
version, and reading it from the package face (``from .. import __version__``) made every one of
them depend on ``lodevem/__init__.py`` and what it imports.
"""

__version__ = "0.1.0"
