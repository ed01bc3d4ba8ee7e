"""Answer an edit the analysis cannot see with the last result, its positions moved.

The engine runs a script without its dead statements (fabric_ls.analysis.dead_code). An edit that
changes only dead statements, blank lines and comments therefore leaves the program it runs
unchanged: every statement it runs is the one it ran before, on the same line or moved down (or
up) by the lines the edit added (or removed). Analysing the new text would give the last result
with those lines moved, so that is the answer, without running anything.

What is checked, on the text alone:

- each top-level statement of both versions, without its dead statements and with positions left
  out, reads the same;
- the lines the edit changed hold nothing the engine runs (no live statement, no compound
  statement's header, no decorator), in the old text and in the new one;
- no comment there suppresses a finding, and the parser repaired nothing elsewhere;
- no finding's span or related place lies in those lines, and no message names one of them, or a
  line after them where the edit added or removed lines (a message's "line 12" would move);
- no finding in the script is of a rule with a fix: a fix reads the source as it is, dead
  statements included (FAB006 moves the code after ``launch()``, FAB005 reads the statements after
  the backward), so an edit anywhere may change it;
- (by the Project that keeps the last result) the files it read are as they were, on disk and in the
  editor.

Anything else, and the script is analysed again. ``tests/test_edit_reuse.py`` compares the answer
with a fresh analysis of the new text on random edits.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from typing import Optional

from fabric_ls.analysis.dead_code import is_dead, live_forms
from fabric_ls.analysis.source import ParsedSource, changed_lines, statement_lines
from fabric_ls.model import Analysis, CallSite, FabricSite, Finding, Fix, Origin, Span, StrategyCandidate
from fabric_ls.records import get_record
from fabric_ls.suppression import suppressed_codes

# A line the engine names in its own words: "(Fabric at line 4)", "the call at line 9", "(line 12)".
_LINE_WORDS = re.compile(r"\bline (\d+)\b")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass
class Baseline:
    """A script's last analysis: its parsed text, and the result's parts."""

    parsed: ParsedSource
    # The findings in the script (fixes as the rules made them: edit_reuse filters them against the
    # new text's repairs, as the engine does), the findings in other files, and the rest.
    main_findings: list[Finding]
    other_findings: list[Finding]
    analysis: Analysis


@dataclass(frozen=True)
class LineMap:
    """Old 0-based lines to new: the changed lines are [start, old_end) in the old text and
    [start, new_end) in the new one; the lines after them move by ``shift``."""

    start: int
    old_end: int
    new_end: int

    @property
    def shift(self) -> int:
        return self.new_end - self.old_end

    def line(self, old: int) -> Optional[int]:
        if old < self.start:
            return old
        if old >= self.old_end:
            return old + self.shift
        return None


class _Declined(Exception):
    """The edit may change the result: analyse again."""


def reusable(baseline: Baseline, parsed: ParsedSource) -> Optional[LineMap]:
    """How ``parsed`` (a later text of the same script) moved the baseline's lines, where analysing
    it gives the baseline's result with its positions moved; None otherwise."""
    old = baseline.parsed
    if old.interactive != parsed.interactive:
        return None
    if old.text == parsed.text:
        return LineMap(0, 0, 0)  # the same text: the same analysis
    if live_forms(old) != live_forms(parsed):
        return None
    lines = LineMap(*changed_lines(old.lines, parsed.lines))
    for version, end in ((old, lines.old_end), (parsed, lines.new_end)):
        if not _repairs_within(version, lines.start, end):
            return None
        if _live_lines(version, lines.start, end) or _suppressing(version, lines.start, end):
            return None
    return lines


def moved(baseline: Baseline, lines: LineMap) -> Optional[tuple[list[Finding], list[Finding], Analysis]]:
    """The baseline's findings in the script, in other files, and its analysis, with their positions
    moved by ``lines``; None where something the result says lies in the changed lines or names a
    line that moves."""
    path = baseline.parsed.path
    try:
        _fixes_clear(baseline)
        main = [_finding(finding, path, lines) for finding in baseline.main_findings]
        others = [_finding(finding, path, lines) for finding in baseline.other_findings]
        analysis = baseline.analysis
        sites = [_site(site, path, lines) for site in analysis.fabric_sites]
        calls = [_call(call, lines) for call in analysis.call_sites]
    except _Declined:
        return None
    return main, others, replace(analysis, fabric_sites=sites, call_sites=calls)


def _fixes_clear(baseline: Baseline) -> None:
    """A fix reads the source as it is, dead statements included: where the script has a finding of
    a rule that has one, the edit may change it."""
    if any(getattr(get_record(finding.code), "fix", None) is not None for finding in baseline.main_findings):
        raise _Declined()


def _repairs_within(parsed: ParsedSource, start: int, end: int) -> bool:
    repaired = parsed.repaired_lines | set(parsed.closed_lines) | set(parsed.shifted_lines)
    return all(start <= line < end for line in repaired)


def _suppressing(parsed: ParsedSource, start: int, end: int) -> bool:
    return any(suppressed_codes(parsed.line_text(line)) is not None for line in range(start, end))


def _live_lines(parsed: ParsedSource, start: int, end: int) -> bool:
    """Whether any of the lines [start, end) holds something the engine runs."""
    for statement in parsed.tree.body:
        first, last = statement_lines(statement)
        if last < start or first >= end:
            continue
        if any(start <= line < end for line in _statement_lines(statement)):
            return True
    return False


def _statement_lines(statement: ast.AST) -> set[int]:
    """The 0-based lines of a statement the engine runs: a simple statement's lines; a compound
    statement's header, decorators and the lines between its blocks (``else:``), and its children's."""
    lines: set[int] = set()
    pending = [statement]
    while pending:
        node = pending.pop()
        if is_dead(node):
            continue
        blocks = [b for b in (getattr(node, name, None) for name in _BLOCKS) if isinstance(b, list) and b]
        first = _first_line(node)
        if not blocks:
            lines.update(range(first, _last_line(node) + 1))
            continue
        for decorator in getattr(node, "decorator_list", ()):
            lines.update(range(decorator.lineno - 1, decorator.end_lineno or decorator.lineno))
        # From the header to the first child; then from each block's end to the next block's start.
        edge = first
        for block in blocks:
            head = _first_line(block[0])
            lines.update(range(edge, max(head, edge + 1) if edge == first else head))
            edge = _last_line(block[-1]) + 1
            pending.extend(block)
    return lines


def _first_line(node: ast.AST) -> int:
    located = node if hasattr(node, "lineno") else getattr(node, "pattern", node)  # a ``case``
    return located.lineno - 1  # type: ignore[attr-defined, no-any-return]


def _last_line(node: ast.AST) -> int:
    if not hasattr(node, "end_lineno"):
        node = node.body[-1]  # type: ignore[attr-defined]  # a ``case``: its last statement
    return (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined, no-any-return]


def _span(span: Span, lines: LineMap) -> Span:
    """A span moved with its lines; declined where the changed lines are in it (its text, which a
    message or a fix may quote, changed)."""
    if _around(span.start_line, span.end_line, lines):
        raise _Declined()
    start, end = lines.line(span.start_line), lines.line(span.end_line)
    if start is None or end is None:
        raise _Declined()
    return Span(start, span.start_col, end, span.end_col)


def _around(first: int, last: int, lines: LineMap) -> bool:
    """Whether the lines first..last (0-based, old text) take in the changed lines, or the place
    between two of them where lines were added."""
    if lines.start < lines.old_end:
        return first < lines.old_end and last >= lines.start
    return first < lines.start <= last


def _words(text: str, lines: LineMap) -> str:
    """A message or note, provided no line it names moves or changed."""
    for match in _LINE_WORDS.finditer(text):
        line = int(match.group(1)) - 1
        if lines.start <= line < lines.old_end or (line >= lines.old_end and lines.shift):
            raise _Declined()
    return text


def _origin(origin: Origin, path: str, lines: LineMap) -> Origin:
    note = _words(origin.note, lines)
    if origin.path != path:
        return origin
    return replace(origin, span=_span(origin.span, lines), note=note)


def _finding(finding: Finding, path: str, lines: LineMap) -> Finding:
    _words(finding.message, lines)
    related = tuple(_origin(origin, path, lines) for origin in finding.related)
    via = _origin(finding.via, path, lines) if finding.via is not None else None
    if finding.path != path:
        return replace(finding, related=related, via=via)
    fix = finding.fix
    if fix is not None:
        edits = tuple(replace(edit, span=_span(edit.span, lines)) for edit in fix.edits)
        fix = Fix(fix.title, edits, fix.safe)
    return replace(finding, span=_span(finding.span, lines), related=related, via=via, fix=fix)


def _site(site: FabricSite, path: str, lines: LineMap) -> FabricSite:
    candidates = tuple(_candidate(candidate, path, lines) for candidate in site.candidates)
    return replace(site, span=_span(site.span, lines), candidates=candidates)


def _candidate(candidate: StrategyCandidate, path: str, lines: LineMap) -> StrategyCandidate:
    if candidate.condition is not None:
        _words(candidate.condition, lines)
    provenance = tuple(_origin(origin, path, lines) for origin in candidate.provenance)
    return replace(candidate, provenance=provenance)


def _call(call: CallSite, lines: LineMap) -> CallSite:
    fabric = _span(call.fabric_span, lines) if call.fabric_span is not None else None
    return replace(call, span=_span(call.span, lines), fabric_span=fabric)

