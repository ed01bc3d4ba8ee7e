"""Suppression comments: the one grammar the engine applies and the server's "Ignore" action writes.

``# noqa`` hides every finding on its line; ``# noqa: FAB001, FAB009`` (commas or spaces) hides
those codes. ``# fabric-ls: ignore`` and ``# fabric-ls: ignore[FAB001]`` do the same. Codes are
matched exactly, as ruff does: ``# noqa: FAB0`` hides nothing, so a typo never silences an error.
A comment counts on the first or the last line of the finding (a call may span several lines).
"""

from __future__ import annotations

import re
from typing import Optional

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*fabric-ls:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)


def _codes(text: str) -> frozenset[str]:
    return frozenset(code.upper() for code in re.split(r"[,\s]+", text) if code)


def noqa_match(line: str) -> Optional[re.Match[str]]:
    """The line's ``# noqa`` comment, for the edit that extends its list."""
    return _NOQA.search(line) if "#" in line else None


def suppressed_codes(line: str) -> Optional[frozenset[str]]:
    """What a line's comments suppress: None for nothing, an empty set for everything, else the codes."""
    if "#" not in line:
        return None
    named: set[str] = set()
    found = False
    for pattern in (_NOQA, _IGNORE):
        for match in pattern.finditer(line):
            found = True
            codes = match.group("codes")
            if not codes or not codes.strip():
                return frozenset()
            named |= _codes(codes)
    return frozenset(named) if found else None


def is_suppressed(line: str, code: str) -> bool:
    codes = suppressed_codes(line)
    return codes is not None and (not codes or code.upper() in codes)


def suppressed_on(lines: "list[str] | tuple[str, ...]", first: int, last: int, code: str) -> bool:
    """Whether a comment on the finding's first or last line suppresses ``code``."""
    return any(0 <= line < len(lines) and is_suppressed(lines[line], code) for line in {first, last})
