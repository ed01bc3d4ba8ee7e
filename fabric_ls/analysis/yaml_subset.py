"""The part of YAML that configuration files use, read as OmegaConf reads it.

Hydra's configs (and ``OmegaConf.load``) are YAML: block mappings and sequences, flow ``[a, b]``
and ``{a: 1}``, plain and quoted scalars, comments. This reads that subset into Python data and
nothing else: a node written with anything else (an anchor, a tag, a block scalar, a date) is
``UNSUPPORTED``, which the analysis reads as a value it does not know. A document it cannot follow
at all gives None. Scalars resolve as OmegaConf's loader resolves them (YAML 1.1: ``yes`` is
true, ``1e-3`` is a float), which ``tests/test_hydra_yaml.py`` checks against OmegaConf itself;
with ``dialect=PLAIN_YAML`` as PyYAML's ``safe_load`` does (the same, but a float needs a dot and
a signed exponent: ``1e-3`` and ``1.0e5`` are strings), checked against PyYAML.

A reader of our own rather than PyYAML: the bundled server carries no compiled dependency, and
reading a file never runs anything it says.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional


class _Unsupported:
    """A node written with YAML this reader does not follow."""

    def __repr__(self) -> str:
        return "UNSUPPORTED"


UNSUPPORTED: Any = _Unsupported()
# A configuration file larger than this is not read (the analysis treats it as unknown).
MAX_YAML_CHARS = 1_000_000

_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_FALSE = frozenset({"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)$")
# OmegaConf's floats: a dot or an exponent after digits (``1e-3`` too, unlike plain YAML 1.1), or a
# leading dot without a sign (``.5``; ``-.5`` stays a string), or infinity and NaN.
_FLOAT = re.compile(
    r"([-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+]?[0-9]+)?|[-+]?[0-9]([0-9_]*[0-9])?[eE][-+]?[0-9]+|\.[0-9_]+([eE][-+][0-9]+)?)$"
)
# PyYAML's own float resolver (yaml/resolver.py), for plain ``yaml.safe_load``.
_PLAIN_FLOAT = re.compile(r"([-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?|\.[0-9][0-9_]*([eE][-+][0-9]+)?)$")
_INFINITY = re.compile(r"([-+]?)\.(inf|Inf|INF)$")
_NAN = re.compile(r"\.(nan|NaN|NAN)$")
# Forms YAML 1.1 resolves to something else than a string (octal, hex, sexagesimal, dates).
_OTHER_FORMS = re.compile(
    r"[-+]?(0[0-9_]+|0x[0-9a-fA-F_]+|0b[01_]+|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)$|\d{4}-\d\d?-\d\d?"
)
_PACKAGE = re.compile(r"#\s*@package\s+(\S+)")

# How scalars resolve: as OmegaConf's loader (Hydra, ``OmegaConf.load``) or PyYAML's ``safe_load``.
OMEGACONF = "omegaconf"
PLAIN_YAML = "yaml"


class YamlError(Exception):
    """The document's structure is not one this reader follows."""


def package_directive(text: str) -> Optional[str]:
    """``# @package _global_`` in the header comments of a Hydra config file."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return None
        found = _PACKAGE.match(stripped)
        if found:
            return found.group(1)
    return None


def load_yaml(text: str, dialect: str = OMEGACONF) -> Optional[Any]:
    """The document as Python data (dicts, lists, scalars, ``UNSUPPORTED`` nodes), or None. A
    document with nothing in it is an empty mapping (as Hydra reads an empty config file;
    PyYAML's ``safe_load`` gives None for it, which the caller reads as such)."""
    if len(text) > MAX_YAML_CHARS:
        return None
    try:
        lines = _lines(text)
        if not lines:
            return {}
        reader = _BlockReader(lines, _plain_scalar if dialect == PLAIN_YAML else _scalar)
        value = reader.block(lines[0][0])
        if reader.position != len(lines):
            raise YamlError("text after the document")
        return value
    except (YamlError, RecursionError, IndexError):
        return None


def _lines(text: str) -> list[list[Any]]:
    """The meaningful lines: [indent, content without its comment]."""
    found: list[list[Any]] = []
    for raw in text.replace("\t", "    ").splitlines():
        content = _strip_comment(raw).rstrip()
        stripped = content.strip()
        if not stripped or content == "---":
            continue
        if content == "...":
            break  # the end of the document (a marker at the start of a line only)
        if content.startswith(("%", "--- ")):
            raise YamlError("a directive, or content on the document's first line")
        found.append([len(content) - len(content.lstrip(" ")), stripped])
    return found


def _strip_comment(line: str) -> str:
    """The line without its comment: a ``#`` after a space, outside a quoted scalar (a quote opens
    one only where a scalar starts: a plain scalar may hold quotes)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"" and _starts_scalar(line, index):
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def _starts_scalar(line: str, index: int) -> bool:
    before = line[:index].rstrip(" \t")
    if not before or before[-1] in "[{" or (before[-1] == "," and ("[" in before or "{" in before)):
        return True  # the line's first scalar, or one in a flow collection
    # After ``key:`` or the ``-``/``?`` of an item or a key, with a space between.
    return before[-1] in ":-?" and line[index - 1] in " \t"


class _BlockReader:
    def __init__(self, lines: list[list[Any]], scalar: Callable[[str], Any]) -> None:
        self.lines = lines
        self.position = 0
        self.scalar = scalar

    def block(self, indent: int) -> Any:
        content = self.lines[self.position][1]
        if content == "-" or content.startswith("- "):
            return self.sequence(indent)
        if _split_key(content) is None:
            value = self.scalar_or_flow(content)
            self.position += 1
            return value
        return self.mapping(indent)

    def mapping(self, indent: int) -> Any:
        result: dict[Any, Any] = {}
        unsupported = False
        while self.position < len(self.lines):
            line_indent, content = self.lines[self.position]
            if line_indent < indent:
                break
            if line_indent > indent or content.startswith("- ") or content == "-":
                raise YamlError("misplaced line")
            split = _split_key(content)
            if split is None:
                raise YamlError("not a key")
            key_text, rest = split
            if key_text == "<<" or key_text.startswith(("?", "&", "!", "*")):
                unsupported = True
            key = self.scalar(key_text)
            unsupported = unsupported or key is UNSUPPORTED
            self.position += 1
            result[key] = self.value_after(rest, indent, allow_sequence=True)
        return UNSUPPORTED if unsupported else result

    def sequence(self, indent: int) -> list[Any]:
        result: list[Any] = []
        while self.position < len(self.lines):
            line_indent, content = self.lines[self.position]
            if line_indent < indent:
                break
            if line_indent > indent or not (content == "-" or content.startswith("- ")):
                if line_indent == indent:
                    break  # a mapping's next key after an indentless sequence
                raise YamlError("misplaced item")
            rest = content[1:].lstrip(" ")
            if not rest:
                self.position += 1
                result.append(self.value_after("", indent, allow_sequence=False))
                continue
            column = line_indent + len(content) - len(rest)
            if rest.startswith("- ") or rest == "-" or _split_key(rest) is not None:
                # ``- key: value``: a mapping (or a sequence) that starts on the item's line.
                self.lines[self.position] = [column, rest]
                result.append(self.block(column))
                continue
            self.position += 1
            result.append(self.inline(rest, indent))
        return result

    def value_after(self, rest: str, indent: int, allow_sequence: bool) -> Any:
        """What follows ``key:`` (or a bare ``-``): on the line, or the block below it."""
        if rest:
            return self.inline(rest, indent)
        if self.position < len(self.lines):
            next_indent, next_content = self.lines[self.position]
            is_item = next_content == "-" or next_content.startswith("- ")
            if next_indent > indent or (allow_sequence and next_indent == indent and is_item):
                return self.block(next_indent)
        return None

    def inline(self, rest: str, indent: int) -> Any:
        if rest[0] in "|>" or rest[0] in "&!*":
            # A block scalar, an anchor, a tag or an alias: skip what belongs to it.
            while self.position < len(self.lines) and self.lines[self.position][0] > indent:
                self.position += 1
            return UNSUPPORTED
        if rest[0] in "[{":
            while _unbalanced(rest) and self.position < len(self.lines):
                rest += " " + self.lines[self.position][1]
                self.position += 1
        elif self.position < len(self.lines) and self.lines[self.position][0] > indent:
            raise YamlError("a scalar that goes on over several lines")
        return self.scalar_or_flow(rest)

    def scalar_or_flow(self, text: str) -> Any:
        if text[0] in "[{":
            reader = _FlowReader(text, self.scalar)
            value = reader.value()
            reader.skip_spaces()
            if reader.index != len(text):
                raise YamlError("text after a flow collection")
            return value
        if text[0] in "'\"":
            value, end = _quoted(text, 0)
            if text[end:].strip():
                raise YamlError("text after a quoted scalar")
            return value
        return self.scalar(text)


def _split_key(content: str) -> Optional[tuple[str, str]]:
    """``key: rest`` → (key, rest); None where the line is not a mapping entry."""
    if content[0] in "'\"":
        try:
            _, end = _quoted(content, 0)
        except YamlError:
            return None
        after = content[end:]
        if after == ":" or after.startswith(": "):
            return content[:end], after[1:].strip()
        return None
    if content[0] in "[{":
        return None
    index = 0
    while True:
        index = content.find(":", index)
        if index < 0:
            return None
        if index + 1 == len(content) or content[index + 1] == " ":
            return content[:index].rstrip(), content[index + 1 :].strip()
        index += 1


def _unbalanced(text: str) -> bool:
    depth, quote = 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
    return depth > 0


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if quote == "'" and char == "'":
            if text[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), index + 1
        if quote == '"' and char == "\\":
            escaped = text[index + 1 : index + 2]
            mapped = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\0", " ": " "}.get(escaped)
            if mapped is None:
                raise YamlError("an escape this reader does not follow")
            out.append(mapped)
            index += 2
            continue
        if quote == '"' and char == '"':
            return "".join(out), index + 1
        out.append(char)
        index += 1
    raise YamlError("unclosed quote")


def _scalar(text: str) -> Any:
    if text[:1] in ("'", '"'):
        value, end = _quoted(text, 0)
        return value if end == len(text) else UNSUPPORTED
    if text[:1] in "&!*|>%@`" or (text[:1] == "?" and text != "???"):
        return UNSUPPORTED  # ``?`` opens a complex key; ``???`` is OmegaConf's missing value
    if text in _NULLS:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _OTHER_FORMS.match(text):
        return UNSUPPORTED
    infinity = _INFINITY.match(text)
    if infinity:
        return float(infinity.group(1) + "inf")
    if _NAN.match(text):
        return float("nan")
    if _FLOAT.match(text):
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return UNSUPPORTED  # ``._``: OmegaConf's loader fails on it too
    return text


def _plain_scalar(text: str) -> Any:
    """A scalar as PyYAML's ``safe_load`` resolves it: OmegaConf's floats without a dot, or with an
    unsigned exponent, stay strings there."""
    value = _scalar(text)
    special = _INFINITY.match(text) or _NAN.match(text)
    if isinstance(value, float) and not special and not _PLAIN_FLOAT.match(text):
        return text
    return value


class _FlowReader:
    """``[a, {b: 1}]`` on one (joined) line."""

    def __init__(self, text: str, scalar: Callable[[str], Any]) -> None:
        self.text = text
        self.index = 0
        self.scalar = scalar

    def skip_spaces(self) -> None:
        while self.index < len(self.text) and self.text[self.index] == " ":
            self.index += 1

    def value(self) -> Any:
        self.skip_spaces()
        if self.index >= len(self.text):
            raise YamlError("unclosed flow collection")
        char = self.text[self.index]
        if char == "[":
            return self.collection("]")
        if char == "{":
            return self.collection("}")
        if char in "'\"":
            value, self.index = _quoted(self.text, self.index)
            return value
        if char == "#":
            raise YamlError("a comment inside a flow collection")
        start = self.index
        while self.index < len(self.text):
            char = self.text[self.index]
            if char in ",]}":
                break
            if char == ":" and self.text[self.index + 1 : self.index + 2] in (" ", ",", "]", "}", ""):
                break
            self.index += 1
        return self.scalar(self.text[start : self.index].strip())

    def collection(self, close: str) -> Any:
        self.index += 1
        items: list[Any] = []
        mapping: dict[Any, Any] = {}
        while True:
            self.skip_spaces()
            if self.index >= len(self.text):
                raise YamlError("unclosed flow collection")
            if self.text[self.index] == close:
                self.index += 1
                if close == "]":
                    return items
                return UNSUPPORTED if any(key is UNSUPPORTED for key in mapping) else mapping
            entry = self.value()
            self.skip_spaces()
            if close == "}":
                if self.text[self.index : self.index + 1] != ":":
                    raise YamlError("a flow mapping entry without a value")
                self.index += 1
                mapping[entry] = self.value()
            else:
                items.append(entry)
            self.skip_spaces()
            if self.text[self.index : self.index + 1] == ",":
                self.index += 1
            elif self.text[self.index : self.index + 1] != close:
                raise YamlError("a flow collection's entries not separated by commas")
