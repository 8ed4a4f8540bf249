"""lodevem: Low-resource Device Virtual Emulator."""

__version__ = "0.1.0"
