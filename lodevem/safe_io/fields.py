"""Typed values out of parsed JSON that lodevem did not just make (a worker's reply, a results
file's manifest read back, a parameters file): the worker protocol's reader, ``wire.fields``,
re-exported here for the host's readers. One definition: the worker parses its own requests with
it and the host its replies."""

from __future__ import annotations

from ..wire.fields import integer, items, mapping, number, text

__all__ = ["integer", "items", "mapping", "number", "text"]
