"""Parse an edited text again, reusing the top-level statements the edit left alone.

An editor sends the whole text on every keystroke, and most of it is what parsed a moment ago
(``ast.parse`` costs ~13 µs a line: 4 ms of a 300-line script's 30). The statements that end
before the first changed line keep their nodes; those that start after the last changed line
keep theirs too when the edit kept the line count (their positions are then unchanged). Only
the lines in between are parsed, at their own line numbers.

The tree is the one a whole parse gives: the reused statements are complete, so a part that
parses on its own, starting and ending at a statement boundary, tokenizes as it would in the
file. Where that cannot be vouched for (the part does not parse; a statement shares a line with
it or ends in a backslash; a ``__future__`` import that changes the grammar), the answer is
None and the caller parses the whole text. ``tests/test_reparse.py`` compares the two trees.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar, Union

from fabric_ls.analysis.source import (
    ParsedSource,
    _is_code,
    changed_lines,
    normalize_text,
    parse_part,
    split_lines,
    statement_lines,
)

_Answer = TypeVar("_Answer")


def reparse(text: str, path: str, previous: ParsedSource) -> Optional[ParsedSource]:
    """``text`` parsed with ``previous`` (a clean parse of an earlier version) reused, or None."""
    text = normalize_text(text)
    tree = reparsed_tree(text, previous)
    return ParsedSource(path, text, tree, split_lines(text)) if tree is not None else None


def reparsed_tree(text: str, previous: ParsedSource) -> Optional[ast.Module]:
    """The tree of ``text`` (already normalised) that a whole parse gives, built by re-parsing only
    what differs from ``previous``; None where that cannot be vouched for (see the module's text)."""
    found = reparse_attempt(text, previous)
    return found if isinstance(found, ast.Module) else None


def reparse_attempt(text: str, previous: ParsedSource) -> Union[ast.Module, SyntaxError, None]:
    """What a whole parse of ``text`` (normalised) gives, from re-parsing only what differs from
    ``previous``: its tree, or the ``SyntaxError`` it raises; None where neither can be vouched for.

    An error in the part is the whole parse's error when it lies before the part's last line of
    code and is not one that reads on to the end of the text (a bracket never closed, a string
    never ended): the tokens up to it are the same in both, and the parser stops at the first
    statement it cannot read. A text being typed is repaired from these errors (``parse_source``)
    without parsing the whole file for each repair.

    The last answer is kept on ``previous``: the server asks for the text itself twice (``reparse``,
    then the repair's first step)."""
    return _for_last_text(previous, "last attempt", text, _attempt)


def _attempt(text: str, previous: ParsedSource) -> Union[ast.Module, SyntaxError, None]:
    found = _boundaries(text, previous)
    if found is None:
        return None
    new, kept_before, kept_after, start = found.lines, found.kept_before, found.kept_after, found.start
    if new == previous.lines:
        return previous.tree
    body = previous.tree.body
    end = statement_lines(body[kept_after])[0] if kept_after < len(body) else len(new)
    part = new[start:end]
    if part and part[-1].rstrip("\r\n").endswith("\\"):
        return None  # it would continue into the next statement
    try:
        tree = parse_part("\n" * start + "".join(part))
    except SyntaxError as error:
        return error if _same_error_whole(error, new, start, end) else None
    if tree is None:
        return None
    return ast.Module(body=[*body[:kept_before], *tree.body, *body[kept_after:]], type_ignores=[])


# A first line that goes on the statement before it.
_CONTINUES = re.compile(r"(else|elif|except|finally)\b")
# Errors that read on to the end of the text: the rest of the file could end them differently.
_READS_TO_THE_END = ("was never closed", "unexpected EOF", "unterminated triple-quoted", "EOF while")


def _same_error_whole(error: SyntaxError, lines: list[str], start: int, end: int) -> bool:
    """Whether a whole parse raises this error of the part ``lines[start:end]`` (see reparse_attempt)."""
    message = error.msg or ""
    if error.lineno is None or any(marker in message for marker in _READS_TO_THE_END):
        return False
    first = next((n for n in range(start, end) if _is_code(lines[n])), None)
    if first is None or lines[first][:1] in " \t" or _CONTINUES.match(lines[first]):
        # The part's first line may belong to the statement before it (``else:``, a line indented
        # into the function above); the tokenizer's indentation levels are then not a fresh start's.
        return False
    last_code = next(n for n in range(end - 1, first - 1, -1) if _is_code(lines[n]))
    last = (getattr(error, "end_lineno", None) or error.lineno) - 1
    return start <= error.lineno - 1 and last < last_code


def settled_lines(text: str, previous: ParsedSource) -> int:
    """How many leading lines of ``text`` (normalised) are statements of ``previous`` it left as
    they were: a tokenizer that starts after them starts where a whole file's would be."""
    found = _boundaries(text, previous)
    return found.start if found is not None else 0


def trailing_starts(text: str, previous: ParsedSource) -> frozenset[int]:
    """The first lines (0-based, in ``text``) of the trailing statements of ``previous`` that ``text``
    (normalised) left as they were, moved down or up by the lines the edit added or removed: from any
    of them on, the text is complete statements."""
    found = _boundaries(text, previous)
    if found is None:
        return frozenset()
    moved = len(found.lines) - len(previous.lines)
    return frozenset(statement_lines(s)[0] + moved for s in previous.tree.body[found.unchanged_after :])


@dataclass(frozen=True)
class _Boundaries:
    """Where an edit lies among the top-level statements of the version it was made on."""

    # The edited text's lines.
    lines: list[str]
    # How many leading statements it keeps, and the first line after them.
    kept_before: int
    start: int
    # The first of the trailing statements it left as they were (moved, where lines were added or
    # removed), and the first it keeps as nodes (the same, where the line count did not change:
    # their positions are then unchanged; else none).
    unchanged_after: int
    kept_after: int


def _boundaries(text: str, previous: ParsedSource) -> Optional[_Boundaries]:
    """Where ``text`` differs from ``previous``, by statements. The last answer is kept on
    ``previous`` (``settled_lines``, ``trailing_starts`` and ``reparse_attempt`` ask for the same text)."""
    return _for_last_text(previous, "last boundaries", text, _find_boundaries)


def _for_last_text(
    previous: ParsedSource, name: str, text: str, compute: Callable[[str, ParsedSource], _Answer]
) -> _Answer:
    """``compute(text, previous)``, kept on ``previous`` under ``name`` for the last text asked:
    one keystroke asks for the same text's answer more than once, the next one for another text."""
    last = previous.derived.get(name)
    if last is not None and last[0] == text:
        return last[1]  # type: ignore[no-any-return]
    answer = compute(text, previous)
    previous.derived[name] = (text, answer)
    return answer


def _find_boundaries(text: str, previous: ParsedSource) -> Optional[_Boundaries]:
    if previous.syntax_error is not None or previous.repaired_lines or previous.closed_lines:
        return None
    if "barry_as_FLUFL" in text:
        return None  # a __future__ import that changes how `<>` parses, for the whole file
    old, new = previous.lines, split_lines(text)
    body = previous.tree.body
    first, old_end, _ = changed_lines(old, new)
    if first == len(old) == len(new):
        return _Boundaries(new, len(body), len(new), len(body), len(body))
    ranges = previous.derived.get("statement lines")
    if ranges is None:
        # Kept on the parsed version: a repair re-parses from it once per attempt.
        ranges = previous.derived["statement lines"] = [statement_lines(statement) for statement in body]
    kept_before = _statements_before(ranges, first, old)
    unchanged_after = _statements_after(ranges, old_end - 1, kept_before, old)
    kept_after = unchanged_after if len(new) == len(old) else len(body)
    start = ranges[kept_before - 1][1] + 1 if kept_before else 0
    return _Boundaries(new, kept_before, start, unchanged_after, kept_after)


def _statements_before(ranges: list[tuple[int, int]], first_changed: int, old: list[str]) -> int:
    """How many leading statements end before the first changed line, on lines of their own."""
    count = 0
    while count < len(ranges) and ranges[count][1] < first_changed:
        count += 1
    while count and (
        (count < len(ranges) and ranges[count][0] <= ranges[count - 1][1])
        or old[ranges[count - 1][1]].rstrip("\r\n").endswith("\\")
    ):
        count -= 1  # `a = 1; b = 2` or a trailing backslash: the next lines belong to it
    return count


def _statements_after(ranges: list[tuple[int, int]], last_changed: int, before: int, old: list[str]) -> int:
    """The index of the first of the trailing statements that start after the last changed line."""
    index = len(ranges)
    while index > before and ranges[index - 1][0] > last_changed:
        index -= 1
    while index < len(ranges) and index > 0 and ranges[index][0] <= ranges[index - 1][1]:
        index += 1  # it shares its first line with a statement parsed again
    return index
