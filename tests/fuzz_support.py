"""Shared pieces of the fuzz tests and of ``bench/fuzz.py``: seed scripts, mutations, and the
invariants every analysis must keep.

The seeds are the examples, every rule's VALID/INVALID samples, the realistic scripts in
``tests/fuzz_corpus/`` and the LSP test scripts; more real Fabric scripts are picked up from
``bench/.cache/corpus/`` (ignored by git) and from the folders listed in ``FABRIC_LS_FUZZ_CORPUS``
(only when asked: ``seeds(extra=True)``), so CI fuzzes a fixed, committed set.

A mutation is a plain value (``Mutation``) so that hypothesis can draw and shrink it, the bench can
draw it from ``random.Random``, and a reproducer can print it. Positions are taken modulo the
script's size, so any integers make a valid mutation.

The invariants (``examine``):

- the engine never raises, and its work stays within the step budget (``MAX_WORK``: counted, the
  same on any machine; ``bench/fuzz.py`` also times each analysis, against ``TIME_LIMIT``);
- every finding's span, and every fix edit's span, lies inside the document;
- a fix's edits do not overlap;
- a fix applied to a script that parses yields a script that parses, and so do all the fixes that
  ``check --fix`` would apply together (those whose edits do not overlap);
- after the fix, the rule no longer fires at the place it fixed (the finding's span and the
  edited text, mapped into the fixed script), and the fixed script has fewer findings of that
  rule than before (a repeat folded into a finding counts as one more): a fix repairs what it says
  and does not hand the same finding back.
"""

from __future__ import annotations

import ast
import io
import os
import random
import re
import textwrap
import time
import tokenize
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from fabric_ls.analysis.explore import MAX_TOTAL_STEPS
from fabric_ls.analysis.source import normalize_text
from fabric_ls.analysis.state import MAX_STEPS
from fabric_ls.engine import REPEAT_NOTE, analyze_source
from fabric_ls.fixes import apply_edits
from fabric_ls.model import Analysis, Finding, Span, TextEdit
from fabric_ls.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
LOCAL_CORPUS = ROOT / "bench" / ".cache" / "corpus"
TIME_LIMIT = 2.0
# The budget of one analysis (fabric_ls.analysis.explore): runs stop at MAX_TOTAL_STEPS, checked
# between runs, so one run's own budget may come on top.
MAX_WORK = MAX_TOTAL_STEPS + MAX_STEPS
# Where rule samples (which have no file of their own) are analysed: a folder with no modules.
SAMPLE_DIR = ROOT / "tests" / "fuzz_corpus" / "samples"

_LINE_END = re.compile(r"\r\n|\r|\n")


# ----- seeds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """A script to mutate, and the path it is analysed under (its folder resolves its imports)."""

    name: str
    path: str
    source: str


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def example_seeds() -> list[Seed]:
    paths = sorted((ROOT / "examples").rglob("*.py"))
    return [Seed(str(p.relative_to(ROOT)), str(p), _read(p)) for p in paths]


def rule_seeds() -> list[Seed]:
    seeds = []
    for module in ALL_RULES:
        path = str(SAMPLE_DIR / "train.py")
        for index, source in enumerate(module.VALID):
            seeds.append(Seed(f"{module.RULE}-valid{index}", path, source))
        for index, case in enumerate(module.INVALID):
            seeds.append(Seed(f"{module.RULE}-invalid{index}", path, case.source))
    return seeds


def corpus_seeds() -> list[Seed]:
    folders = [CORPUS, ROOT / "tests" / "lsp" / "scripts"]
    paths = sorted(p for folder in folders for p in folder.rglob("*.py"))
    return [Seed(str(p.relative_to(ROOT)), str(p), _read(p)) for p in paths]


def extra_seeds() -> list[Seed]:
    """Real Fabric scripts kept outside git: ``bench/.cache/corpus`` and ``$FABRIC_LS_FUZZ_CORPUS``."""
    folders = [LOCAL_CORPUS]
    folders += [Path(p) for p in os.environ.get("FABRIC_LS_FUZZ_CORPUS", "").split(os.pathsep) if p]
    seeds = []
    for folder in folders:
        if folder.is_dir():
            for path in sorted(folder.rglob("*.py")):
                seeds.append(Seed(str(path), str(path), _read(path)))
    return seeds


def seeds(extra: bool = False) -> list[Seed]:
    found = example_seeds() + rule_seeds() + corpus_seeds()
    return found + extra_seeds() if extra else found


# ----- mutations ---------------------------------------------------------------------------


def split_lines(source: str) -> list[str]:
    """Lines with their endings, split where Python (and LSP) end lines: ``\\r\\n``, ``\\r``, ``\\n``."""
    lines = []
    start = 0
    for match in _LINE_END.finditer(source):
        lines.append(source[start : match.end()])
        start = match.end()
    if start < len(source):
        lines.append(source[start:])
    return lines


def _ending(line: str) -> str:
    match = _LINE_END.search(line)
    return line[match.start() :] if match else ""


def delete_line(source: str, index: int) -> str:
    lines = split_lines(source)
    if not lines:
        return source
    del lines[index % len(lines)]
    return "".join(lines)


def duplicate_line(source: str, index: int) -> str:
    lines = split_lines(source)
    if not lines:
        return source
    index %= len(lines)
    line = lines[index]
    if not _ending(line):
        line += "\n"
    lines.insert(index, line)
    return "".join(lines)


def swap_lines(source: str, first: int, second: int) -> str:
    lines = split_lines(source)
    if len(lines) < 2:
        return source
    first %= len(lines)
    second %= len(lines)
    a, b = lines[first], lines[second]
    # Keep each position's own line ending, so the last line stays unterminated if it was.
    lines[first] = b[: len(b) - len(_ending(b))] + _ending(a)
    lines[second] = a[: len(a) - len(_ending(a))] + _ending(b)
    return "".join(lines)


def truncate(source: str, offset: int) -> str:
    return source[: offset % (len(source) + 1)]


def insert_text(source: str, offset: int, text: str) -> str:
    offset %= len(source) + 1
    return source[:offset] + text + source[offset:]


def insert_bytes(source: str, offset: int, data: bytes) -> str:
    """Insert raw bytes the way an editor that decodes with ``errors="replace"`` would see them."""
    return insert_text(source, offset, data.decode("utf-8", errors="replace"))


def reindent(source: str, index: int, delta: int) -> str:
    """Change one line's indentation by ``delta`` spaces (removing at most what is there)."""
    lines = split_lines(source)
    if not lines:
        return source
    index %= len(lines)
    line = lines[index]
    body = line.lstrip(" \t")
    indent = line[: len(line) - len(body)]
    if delta >= 0:
        indent += " " * delta
    else:
        indent = indent[: max(len(indent) + delta, 0)]
    lines[index] = indent + body
    return "".join(lines)


def tabify(source: str, index: int) -> str:
    """Replace one line's leading four-space groups with tabs (mixing tabs and spaces in a block)."""
    lines = split_lines(source)
    if not lines:
        return source
    index %= len(lines)
    line = lines[index]
    body = line.lstrip(" ")
    lines[index] = "\t" * ((len(line) - len(body)) // 4) + " " * ((len(line) - len(body)) % 4) + body
    return "".join(lines)


# Fragments an editor or a bad merge leaves in Python code.
# fmt: off
FRAGMENTS = (
    "(", ")", "[", "]", "{", "}", ":", ",", ".", "=", "\\", "'", '"', '"""', "#", "@", "*", "**",
    "\n", "\r\n", "\r", "    ", "\t", "\x00", "\x0c", "\u2028", "\x85", "\ufeff", "é", "𝛉", "🎉", "\ud800",
    "fabric.", "fabric.setup(", "fabric.launch(", "model = ", "optimizer", "lambda ", "def ", "class ",
    "if True:\n", "return ", "yield ", "await ", "async ", "with ", "import torch\n", "from . import ",
    "global fabric\n", "del model\n", "*args", "...", "not ", " if x else ", "f'{", "'''",
)
# fmt: on

KINDS = ("delete", "duplicate", "swap", "truncate", "bytes", "fragment", "indent", "dedent", "tabify")


@dataclass(frozen=True)
class Mutation:
    """One edit of a script; ``where``/``other`` are taken modulo the script's lines or length."""

    kind: str
    where: int
    other: int = 0
    data: bytes = b""

    def apply(self, source: str) -> str:
        if self.kind == "delete":
            return delete_line(source, self.where)
        if self.kind == "duplicate":
            return duplicate_line(source, self.where)
        if self.kind == "swap":
            return swap_lines(source, self.where, self.other)
        if self.kind == "truncate":
            return truncate(source, self.where)
        if self.kind == "bytes":
            return insert_bytes(source, self.where, self.data)
        if self.kind == "fragment":
            return insert_text(source, self.where, FRAGMENTS[self.other % len(FRAGMENTS)])
        if self.kind == "indent":
            return reindent(source, self.where, 1 + self.other % 8)
        if self.kind == "dedent":
            return reindent(source, self.where, -(1 + self.other % 8))
        if self.kind == "tabify":
            return tabify(source, self.where)
        raise ValueError(f"unknown mutation {self.kind!r}")


def apply_all(source: str, mutations: Sequence[Mutation]) -> str:
    for mutation in mutations:
        source = mutation.apply(source)
    return source


def random_mutation(rng: random.Random) -> Mutation:
    kind = rng.choice(KINDS)
    data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6))) if kind == "bytes" else b""
    return Mutation(kind, rng.randrange(1 << 20), rng.randrange(1 << 20), data)


def random_mutations(rng: random.Random, most: int = 3) -> list[Mutation]:
    return [random_mutation(rng) for _ in range(rng.randint(1, most))]


# Deterministic families: every position of a script, one mutation each.


def every_line_deleted(source: str) -> Iterator[str]:
    for index in range(len(split_lines(source))):
        yield delete_line(source, index)


def every_line_duplicated(source: str) -> Iterator[str]:
    for index in range(len(split_lines(source))):
        yield duplicate_line(source, index)


def every_adjacent_swap(source: str) -> Iterator[str]:
    for index in range(len(split_lines(source)) - 1):
        yield swap_lines(source, index, index + 1)


def every_truncation(source: str, step: int = 1) -> Iterator[str]:
    for offset in range(0, len(source) + 1, step):
        yield source[:offset]


def every_reindent(source: str) -> Iterator[str]:
    for index in range(len(split_lines(source))):
        yield reindent(source, index, 1)
        yield reindent(source, index, -100)
        yield tabify(source, index)


def random_byte_insertions(source: str, count: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        yield insert_bytes(source, rng.randrange(len(source) + 1), data)


# ----- invariants --------------------------------------------------------------------------


@dataclass
class Problem:
    kind: str  # "crash", "timeout", "span", "fix"
    detail: str


@dataclass
class Report:
    """What examining one script found; ``analysis`` is None when the engine raised."""

    analysis: Optional[Analysis]
    seconds: float
    problems: list[Problem] = field(default_factory=list)


def parses(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def line_starts(source: str) -> list[int]:
    return [0] + [m.end() for m in _LINE_END.finditer(source)]


def offset_of(source: str, starts: list[int], line: int, col: int) -> int:
    return starts[line] + col


def span_problem(source: str, starts: list[int], span: Span) -> Optional[str]:
    """Why ``span`` does not lie inside ``source`` (columns within their line), or None."""
    if span.start_line < 0 or span.start_col < 0 or span.end_line < 0 or span.end_col < 0:
        return f"negative position in {span}"
    if (span.start_line, span.start_col) > (span.end_line, span.end_col):
        return f"span ends before it starts: {span}"
    for line, col in ((span.start_line, span.start_col), (span.end_line, span.end_col)):
        if line >= len(starts):
            # One past the last line is the end of a file whose last line has a line ending.
            if line == len(starts) and col == 0 and source.endswith(("\n", "\r")):
                continue
            return f"line {line} past the end ({len(starts)} lines) in {span}"
        end = starts[line + 1] if line + 1 < len(starts) else len(source)
        text = source[starts[line] : end]
        width = len(text) - len(_ending(text))
        if col > width:
            return f"column {col} past the end of line {line} ({width} code points) in {span}"
    return None


def span_text(source: str, starts: list[int], span: Span) -> str:
    return source[
        offset_of(source, starts, span.start_line, span.start_col) : offset_of(
            source, starts, span.end_line, span.end_col
        )
    ]


def code_problem(source: str, starts: list[int], span: Span, being_typed: bool = False) -> Optional[str]:
    """Why the text under a finding's span is not a piece of Python code (an expression or a statement).

    Findings sit on ``ast`` nodes, so a span that is off by some columns or lines shows up as text
    that does not parse on its own. In a file that does not parse (``being_typed``), a call whose
    closing brackets are not typed yet counts as code once they are added, as the engine does.
    """
    # The engine reads NUL bytes as spaces and lone surrogates as U+FFFD (ast refuses both).
    text = normalize_text(span_text(source, starts, span))
    if being_typed:
        text = _with_brackets_closed(text)
    if (
        parses("(" + text + "\n)")
        or parses(textwrap.dedent(text))
        or parses(textwrap.dedent("if 1:\n " + text))
    ):
        return None
    return f"the text under {span} is not code: {text!r}"


def _with_brackets_closed(text: str) -> str:
    closers = {"(": ")", "[": "]", "{": "}"}
    still_open: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in closers:
                still_open.append(closers[token.string])
            elif token.type == tokenize.OP and token.string in ")]}" and still_open:
                still_open.pop()
    except (tokenize.TokenError, SyntaxError):
        pass
    return text + "".join(reversed(still_open))


def _edit_offsets(source: str, starts: list[int], edits: Sequence[TextEdit]) -> list[tuple[int, int, str]]:
    return sorted(
        (
            offset_of(source, starts, e.span.start_line, e.span.start_col),
            offset_of(source, starts, e.span.end_line, e.span.end_col),
            e.new_text,
        )
        for e in edits
    )


def map_offset(offset: int, edits: list[tuple[int, int, str]], at_end: bool) -> int:
    """Where ``offset`` of the original lands in the edited text (inside an edit: its new text)."""
    shift = 0
    for start, end, text in edits:
        if start < offset < end:
            return start + shift + (len(text) if at_end else 0)
        if end < offset or (end == offset and (start < end or not at_end)):
            shift += len(text) - (end - start)
        else:
            break
    return offset + shift


def fixed_places(
    source: str, starts: list[int], finding: Finding, edits: list[tuple[int, int, str]]
) -> list[tuple[int, int]]:
    """Offset ranges of the fixed text that the fix is about: the finding's span and each edit's text."""
    start = offset_of(source, starts, finding.span.start_line, finding.span.start_col)
    end = offset_of(source, starts, finding.span.end_line, finding.span.end_col)
    places = [(map_offset(start, edits, False), map_offset(end, edits, True))]
    shift = 0
    for edit_start, edit_end, text in edits:
        places.append((edit_start + shift, edit_start + shift + len(text)))
        shift += len(text) - (edit_end - edit_start)
    return places


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


Analyzer = Callable[[str, str], Analysis]


def _timed(analyzer: Analyzer, source: str, path: str) -> tuple[Optional[Analysis], float, Optional[str]]:
    began = time.perf_counter()
    try:
        analysis = analyzer(source, path)
    except Exception:  # the invariant under test: nothing escapes the engine
        return None, time.perf_counter() - began, traceback.format_exc()
    return analysis, time.perf_counter() - began, None


def examine(
    source: str,
    path: str,
    analyzer: Analyzer = analyze_source,
    time_limit: Optional[float] = None,
    check_fixes: bool = True,
) -> Report:
    """Analyse ``source`` and check every invariant of the module docstring."""
    analysis, seconds, crash = _timed(analyzer, source, path)
    report = Report(analysis, seconds)
    if crash is not None:
        report.problems.append(Problem("crash", crash))
        return report
    assert analysis is not None
    if analysis.steps > MAX_WORK:
        report.problems.append(Problem("budget", f"the analysis took {analysis.steps} steps"))
    if time_limit is not None and seconds > time_limit:
        report.problems.append(Problem("timeout", f"analysis took {seconds:.2f} s"))
    starts = line_starts(source)
    for finding in analysis.findings:
        why = span_problem(source, starts, finding.span)
        # A call over several lines may hold a line blanked by the syntax-error repair.
        if not why and (analysis.syntax_error is None or finding.span.start_line == finding.span.end_line):
            why = code_problem(source, starts, finding.span, being_typed=analysis.syntax_error is not None)
        if why:
            report.problems.append(Problem("span", f"{finding.code} finding: {why}"))
    if not check_fixes:
        return report
    source_parses = parses(source)
    for finding in analysis.findings:
        if finding.fix is not None:
            report.problems.extend(
                _fix_problems(source, path, starts, finding, analysis, source_parses, analyzer, time_limit)
            )
    if source_parses and not report.problems:
        report.problems.extend(_fix_all_problems(source, analysis))
    return report


def _fix_all_problems(source: str, analysis: Analysis) -> list[Problem]:
    """``check --fix`` applies every fix whose edits do not overlap one already taken: still Python."""
    taken: list[tuple[int, int, int, int]] = []
    edits: list[TextEdit] = []
    applied = []
    for finding in analysis.findings:
        if finding.fix is None:
            continue
        spans = [
            (e.span.start_line, e.span.start_col, e.span.end_line, e.span.end_col) for e in finding.fix.edits
        ]
        if any(not (a[2:] <= b[:2] or b[2:] <= a[:2]) for a in spans for b in taken):
            continue
        taken.extend(spans)
        edits.extend(finding.fix.edits)
        applied.append(f"{finding.code}@{finding.span.start_line + 1}")
    if len(applied) < 2:
        return []
    fixed = apply_edits(source, edits)
    if not parses(fixed):
        return [Problem("fix", f"the fixes {applied} applied together do not parse:\n{fixed}")]
    return []


def _fix_problems(
    source: str,
    path: str,
    starts: list[int],
    finding: Finding,
    analysis: Analysis,
    source_parses: bool,
    analyzer: Analyzer,
    time_limit: Optional[float],
) -> list[Problem]:
    assert finding.fix is not None
    where = f"{finding.code} fix at {finding.span.start_line + 1}:{finding.span.start_col + 1}"
    problems = []
    for edit in finding.fix.edits:
        why = span_problem(source, starts, edit.span)
        if why:
            return [Problem("fix", f"{where}: edit outside the document: {why}")]
    edits = _edit_offsets(source, starts, finding.fix.edits)
    for (_, end, _), (start, _, _) in zip(edits, edits[1:]):
        if start < end:
            return [Problem("fix", f"{where}: overlapping edits {finding.fix.edits}")]
    fixed = apply_edits(source, finding.fix.edits)
    if source_parses and not parses(fixed):
        problems.append(Problem("fix", f"{where}: the fixed script does not parse:\n{fixed}"))
    again, seconds, crash = _timed(analyzer, fixed, path)
    if crash is not None:
        return problems + [Problem("crash", f"re-analysing after the {where}:\n{crash}")]
    assert again is not None
    if again.steps > MAX_WORK:
        problems.append(Problem("budget", f"re-analysing after the {where} took {again.steps} steps"))
    if time_limit is not None and seconds > time_limit:
        problems.append(Problem("timeout", f"re-analysing after the {where} took {seconds:.2f} s"))
    fixed_starts = line_starts(fixed)
    places = fixed_places(source, starts, finding, edits)
    for other in again.findings:
        if other.code != finding.code or span_problem(fixed, fixed_starts, other.span):
            continue
        span = other.span
        other_range = (
            offset_of(fixed, fixed_starts, span.start_line, span.start_col),
            offset_of(fixed, fixed_starts, span.end_line, span.end_col),
        )
        if any(_overlaps(other_range, place) for place in places):
            problems.append(
                Problem("fix", f"{where}: the rule fires again at the fixed place ({span}):\n{fixed}")
            )
            break
    before = _error_places(analysis.findings, finding.code)
    after = _error_places(again.findings, finding.code)
    if after >= before:
        problems.append(
            Problem("fix", f"{where}: {finding.code} findings went from {before} to {after}:\n{fixed}")
        )
    return problems


def _error_places(findings: Sequence[Finding], code: str) -> int:
    """How many calls raise ``code``: each finding, and the later calls folded into it (the same
    error, reported once), which a fix of the first one brings to light."""
    return sum(
        1 + sum(origin.note.startswith(REPEAT_NOTE) for origin in f.related)
        for f in findings
        if f.code == code
    )


def show(source: str) -> str:
    """The script for a failure message; line by line ``repr`` when it holds invisible characters."""
    if all(c.isprintable() or c in "\n\t" for c in source):
        return source
    return "\n".join(repr(line) for line in split_lines(source))


def describe(problems: Sequence[Problem], limit: int = 5) -> str:
    shown = [f"[{p.kind}] {p.detail}" for p in problems[:limit]]
    more = f"\n... and {len(problems) - limit} more" if len(problems) > limit else ""
    return "\n\n".join(shown) + more
