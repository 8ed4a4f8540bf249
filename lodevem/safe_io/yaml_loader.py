"""A profile's YAML, read strictly: ``yaml.SafeLoader`` minus what a profile never needs and a
hostile file abuses, and one-line error texts built from values nobody checked yet.

Why in safe_io: profile folders are ones anyone can drop a file into (``--profiles-dir``,
``LODEVEM_PROFILES``), so their YAML is read with the same distrust as a model file's fields:
bounded depth, no aliases or merge keys, core tags only, no duplicate keys, and every quoted
value escaped and cut.
"""

from __future__ import annotations

import reprlib
from typing import Any, Optional

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent
from yaml.nodes import MappingNode, Node, ScalarNode

from ..errors import RefusedYaml
from .text import printable

__all__ = ["MAX_YAML_DEPTH", "QUOTE_CHARS", "ProfileYamlLoader", "clip", "escaped", "quote", "yaml_problem"]

MAX_YAML_DEPTH = 32  # a real profile is three levels deep (mapping > cpu list > cluster)
QUOTE_CHARS = 80  # longest value quoted in an error


def escaped(text: str) -> str:
    """``text`` with control characters (a newline in a key or file name) escaped, so an error
    built from user data stays on one line (``safe_io.printable``, uncapped: ``clip`` caps)."""
    return printable(text, None, newlines=False)


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    text = escaped(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote(value: object) -> str:
    """A short repr of a value from a profile file, for an error message.

    ``reprlib`` bounds the work (nested lists and long strings are elided while the repr is built),
    so even a large value costs little; the result is then cut to ``QUOTE_CHARS``.
    """
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = QUOTE_CHARS
    shortener.maxlevel = 3
    return clip(shortener.repr(value))


class ProfileYamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also refuses what a profile never needs and a hostile file abuses.

    - Anchors and aliases: 600 bytes of nested aliases ("billion laughs") expand to gigabytes.
    - Explicit tags other than the plain core ones (``!!python/...`` is refused by SafeLoader
      anyway; ``!!binary``, ``!!set``, ``!foo`` have no meaning in a profile).
    - Merge keys (``<<``): another way to copy values around, and they hide duplicate keys.
    - Nesting deeper than ``MAX_YAML_DEPTH``: the composer recurses once per level, so
      ``[[[[...]]]]`` a few thousand deep would end in a RecursionError.
    - Duplicate keys: YAML keeps the last one silently, which hides a typo-ed second ``ram_mb``.

    Each refusal is a ``yaml.YAMLError`` naming the field (``cpu.0.core`` style) and the line.
    """

    _ALLOWED_TAGS = frozenset({"!"} | {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                                             "seq", "map")})
    _MERGE_TAG = "tag:yaml.org,2002:merge"

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self._location: list[str] = []  # field path of the node being composed
        self._depth = 0  # nodes being composed, keys included (a key can be a nested mapping too)
        self._fields: dict[int, str] = {}  # id(node) -> its field path, for constructor errors

    def _field(self) -> str:
        return clip(".".join(self._location)) if self._location else "(top level)"

    def _refuse(self, problem: str, mark: Any, field: Optional[str] = None) -> RefusedYaml:
        return RefusedYaml(field or self._field(), problem, mark)

    def compose_node(self, parent: Optional[Node], index: object) -> Optional[Node]:
        # ``index`` is the key node for a mapping value, the position for a list item, None for a key.
        part = index.value if isinstance(index, ScalarNode) else str(index) if isinstance(index, int) else None
        if part is not None:
            self._location.append(part)
        self._depth += 1
        try:
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML is untyped
            if isinstance(event, AliasEvent):
                raise self._refuse(f"YAML alias '*{clip(event.anchor or '')}' is not allowed in a profile "
                                   "(write the value out)", event.start_mark)
            if isinstance(event, NodeEvent) and event.anchor is not None:
                raise self._refuse(f"YAML anchor '&{clip(event.anchor)}' is not allowed in a profile",
                                   event.start_mark)
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in self._ALLOWED_TAGS:
                shown = clip(tag.replace("tag:yaml.org,2002:", "!!"))
                raise self._refuse(f"YAML tag '{shown}' is not allowed in a profile "
                                   "(only plain values, lists and mappings)", event.start_mark)
            if isinstance(event, CollectionStartEvent) and self._depth > MAX_YAML_DEPTH:
                raise self._refuse(f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
            node = super().compose_node(parent, index)  # type: ignore[arg-type]  # a key node, an int or None
            if node is None:
                return None
            if node.tag == self._MERGE_TAG:
                raise self._refuse("YAML merge keys ('<<') are not allowed in a profile", node.start_mark)
            self._fields[id(node)] = self._field()
            return node
        finally:
            self._depth -= 1
            if part is not None:
                self._location.pop()

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # a date like 2020-13-45, an int of 5000 digits
            raise self._refuse(clip(str(exc), 200), node.start_mark, self._fields.get(id(node))) from None

    def construct_mapping(self, node: Node, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            first: dict[Any, Node] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # an unhashable key: SafeConstructor explains it below
                    break
                if earlier is not key_node:
                    parent = self._fields.get(id(node), "(top level)")
                    name = clip(str(key) if parent == "(top level)" else f"{parent}.{key}")
                    raise self._refuse(f"given twice, on lines {earlier.start_mark.line + 1} and "
                                       f"{key_node.start_mark.line + 1} (YAML would silently keep the last)",
                                       None, name)
        return super().construct_mapping(node, deep)  # type: ignore[arg-type]  # PyYAML refuses a non-mapping


def yaml_problem(exc: "yaml.YAMLError | RefusedYaml") -> str:
    """One line for a PyYAML error (its own ``str()`` spans several lines and quotes the input)."""
    if isinstance(exc, RefusedYaml):
        return f"field '{exc.field}': {exc.problem}" + (f" (line {exc.line})" if exc.line else "")
    if isinstance(exc, yaml.reader.ReaderError):
        if exc.encoding == "unicode":
            return f"control character #x{exc.character:04x} at position {exc.position} is not allowed"
        return (f"not {exc.encoding.upper()} text: {exc.reason} "
                f"(byte #x{exc.character:02x} at position {exc.position})")
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or type(exc).__name__
    return f"not valid YAML{where}: {clip(problem, 200)}"
