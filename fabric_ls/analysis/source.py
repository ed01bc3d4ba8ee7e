"""Parse Python text into an ``ast`` tree that survives half-typed code.

Positions: ``ast`` counts columns in UTF-8 bytes; everything else in fabric-ls
counts code points, so conversion lives here.
"""

from __future__ import annotations

import ast
import gc
import io
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from fabric_ls.model import Span, SyntaxProblem

# Lines blanked one at a time before giving up on a broken file.
_MAX_REPAIRS = 40
_INDENT = re.compile(r"[ \t]*")
# Python's tokenizer ends lines at these only (``str.splitlines`` also splits at \x0c, \u2028, ...).
_SURROGATE = re.compile("[\ud800-\udfff]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_CLOSER_OF = {"(": ")", "[": "]", "{": "}"}
_ON_LINE = re.compile(r"on line (\d+)")
_TRY = re.compile(r"[ \t]*try[ \t]*:")
# A comment at the end of a line (a rough cut: a ``#`` inside a string on that line ends it too).
_TRAILING_COMMENT = re.compile(r"#[^'\"]*$")
# Tokens that carry no code: where a line's code ends is the end of its last other token.
_NOT_CODE = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


def split_lines(text: str) -> list[str]:
    """Lines as the Python tokenizer sees them, each with its own line ending."""
    return _LINE.findall(text)


def changed_lines(old: list[str], new: list[str]) -> tuple[int, int, int]:
    """Where ``new`` differs from ``old`` (two versions' lines): the first line that differs, and
    where the changed lines end (exclusive) in ``old`` and in ``new``; the lines after them are the
    same, moved by ``new_end - old_end``. The shared end never overlaps the shared start."""
    start, most = 0, min(len(old), len(new))
    while start < most and old[start] == new[start]:
        start += 1
    tail = 0
    while tail < most - start and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return start, len(old) - tail, len(new) - tail


def statement_lines(statement: ast.AST) -> tuple[int, int]:
    """The 0-based first and last lines of a statement, its decorators included."""
    first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])  # type: ignore[attr-defined]
    return first - 1, (statement.end_lineno or statement.lineno) - 1  # type: ignore[attr-defined]


def _ending(line: str) -> str:
    stripped = line.rstrip("\r\n")
    return line[len(stripped) :]


@dataclass
class ParsedSource:
    """A parsed file: its tree, its lines, and the first syntax error (if any)."""

    path: str
    text: str
    tree: ast.Module
    lines: list[str]
    syntax_error: Optional[str] = None
    syntax_problem: Optional[SyntaxProblem] = None
    # Lines (0-based) replaced to make the rest parse.
    repaired_lines: set[int] = field(default_factory=set)
    # Line (0-based) -> column (code points) where the repair put the brackets a half-typed call
    # leaves open; the document itself has no such brackets.
    closed_lines: dict[int, int] = field(default_factory=dict)
    # Line (0-based) -> how many columns longer the repair made its indentation (a line typed at
    # the wrong indentation, given the block's): the tree's columns on it are that much further right.
    shifted_lines: dict[int, int] = field(default_factory=dict)
    # Names read by Fabric calls anywhere in the file (computed once by the interpreter).
    interesting_names: Optional[frozenset[str]] = None
    # The program runs in an interactive session (a notebook's cells): Lightning's `_IS_INTERACTIVE`.
    interactive: bool = False
    # Facts a rule derives from the tree once per parsed file, by name (the tree never changes).
    derived: dict[str, Any] = field(default_factory=dict)
    # segment()'s texts, by node (held, so a node made during the analysis is never mistaken for another).
    _segments: dict[ast.AST, str] = field(default_factory=dict, repr=False, compare=False)

    def col(self, line0: int, byte_col: int) -> int:
        """Convert an ``ast`` byte column on line ``line0`` to a code-point column."""
        if line0 < 0 or line0 >= len(self.lines):
            return byte_col
        if line0 in self.shifted_lines:
            byte_col = max(byte_col - self.shifted_lines[line0], 0)
        text = self.lines[line0]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> Span:
        """The code-point span of an ``ast`` node (which must have positions)."""
        line0 = node.lineno - 1  # type: ignore[attr-defined]
        end0 = (getattr(node, "end_lineno", None) or node.lineno) - 1  # type: ignore[attr-defined]
        end_col = getattr(node, "end_col_offset", None)
        start = self.col(line0, node.col_offset)  # type: ignore[attr-defined]
        end = self.col(end0, end_col) if end_col is not None else start
        if end0 in self.closed_lines:
            end = min(end, self.closed_lines[end0])
        return Span(line0, start, end0, end)

    def unfinished(self, node: ast.AST) -> bool:
        """Whether the node ends in a bracket the repair added: a call still being typed."""
        end0 = (getattr(node, "end_lineno", None) or 0) - 1
        end_col = getattr(node, "end_col_offset", None)
        return (
            end0 in self.closed_lines
            and end_col is not None
            and self.col(end0, end_col) > self.closed_lines[end0]
        )

    def segment(self, node: ast.AST) -> str:
        """The source text of a node (``ast.get_source_segment`` re-splits the file on every call).
        Kept per node: every entry function reads the texts of the same helpers' expressions."""
        found = self._segments.get(node)
        if found is None:
            found = self._segments[node] = self._segment(node)
        return found

    def _segment(self, node: ast.AST) -> str:
        if getattr(node, "end_lineno", None) is None:
            return ""
        span = self.span(node)
        if span.start_line == span.end_line:
            return self.line_text(span.start_line)[span.start_col : span.end_col]
        parts = [self.line_text(span.start_line)[span.start_col :]]
        parts.extend(self.line_text(n) for n in range(span.start_line + 1, span.end_line))
        parts.append(self.line_text(span.end_line)[: span.end_col])
        return "".join(parts)

    def line_text(self, line0: int) -> str:
        return self.lines[line0] if 0 <= line0 < len(self.lines) else ""


def _try_parse(text: str) -> ast.Module:
    collecting = gc.isenabled()
    gc.disable()  # the collector costs half the parse time on big files and finds nothing to free
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    finally:
        if collecting:
            gc.enable()


def normalize_text(text: str) -> str:
    """What is parsed of ``text``: the same length, so every column stays put, without the NULs
    and lone surrogates Python cannot parse."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", " "))


def parse_part(text: str) -> Optional[ast.Module]:
    """``text``'s tree; a ``SyntaxError`` raises, anything else that stops a parse gives None."""
    try:
        return _try_parse(text)
    except (ValueError, RecursionError, MemoryError):
        return None


def parse_clean(text: str) -> Optional[ast.Module]:
    """The tree of ``text`` if it parses as it is, else None."""
    try:
        return _try_parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def parse_source(
    text: str,
    path: str = "<string>",
    quick: Optional[Callable[[str], Union[ast.Module, SyntaxError, None]]] = None,
    settled: int = 0,
    trailing: frozenset[int] = frozenset(),
) -> ParsedSource:
    """Parse ``text``; on a syntax error, blank offending lines until the rest parses.

    Blanking keeps line numbers, so findings on the lines that do parse stay exact.
    Nothing raises: a file that cannot be repaired yields an empty module. From an earlier
    version that parsed (fabric_ls.analysis.reparse): ``quick`` is tried on each repaired text
    first (the tree a whole parse gives, or None); the first ``settled`` lines are complete
    statements, so brackets left open are looked for after them; from each line of ``trailing`` on,
    the text is complete statements too, so the look stops at one once it has what it needs.
    """
    text = normalize_text(text)
    lines = split_lines(text)
    # The text as it failed: the repairs' first candidate is often that very text.
    failed: Optional[SyntaxError] = None
    try:
        vouched = quick(text) if quick is not None else None
        if isinstance(vouched, SyntaxError):
            raise vouched
        return ParsedSource(path, text, vouched or _try_parse(text), lines)
    except (SyntaxError, ValueError) as error:
        first_error = _describe(error)
        problem = _problem(error)
        failed = error if isinstance(error, SyntaxError) else None
    except (RecursionError, MemoryError):
        first_error = "an expression is nested too deeply to analyse"
        problem = SyntaxProblem(first_error, Span(0, 0, 0, 0))
    # Repairs work on "\n" endings: a placeholder after a bare "\r" must not merge two lines.
    work = [line.rstrip("\r\n") + "\n" if line.endswith(("\r", "\n")) else line for line in lines]
    closed: Optional[dict[int, int]] = None
    # The lines before brackets were closed, where tokenizing started, and the first opener's line.
    unclosed: Optional[tuple[list[str], int, int]] = None
    repaired: set[int] = set()
    emptied: set[int] = set()
    # (line, its new content) of each line ``_refit`` mended: each at most once.
    refits: set[tuple[int, str]] = set()
    # Line -> how many columns longer its indentation became (ParsedSource.shifted_lines).
    shifted: dict[int, int] = {}
    for _ in range(_MAX_REPAIRS):
        try:
            candidate = "".join(work)
            if failed is not None:
                error_of_text, failed = failed, None
                if candidate == text:
                    raise error_of_text  # parsing it again would raise the same
            vouched = quick(candidate) if quick is not None else None
            if isinstance(vouched, SyntaxError):
                raise vouched  # what a whole parse of the candidate raises (reparse_attempt)
            tree = vouched or _try_parse(candidate)
            closed = closed or {}
            closed = {line: column - shifted.get(line, 0) for line, column in closed.items()}
            return ParsedSource(
                path, text, tree, lines, first_error, problem, repaired | set(closed), closed, shifted
            )
        except SyntaxError as error:
            if not work:
                break
            line0 = min(max((error.lineno or 1) - 1, 0), len(work) - 1)
            if closed is None and (error.msg or "").endswith("was never closed"):
                # Tokenizing costs more than a parse: only for a file that ends inside brackets.
                untouched = settled if all(n >= settled for n in repaired | emptied) else 0
                unclosed = (list(work), untouched, line0)
                # Repaired lines among them: those statements are not what they were.
                intact = trailing if all(n < min(trailing, default=0) for n in repaired | emptied) else ()
                closed = _close_brackets(work, untouched, stops=frozenset(intact))
                if closed:
                    continue
            elif unclosed is not None:
                before, untouched, opened = unclosed
                unclosed = None
                if closed and opened < line0 <= max(closed):
                    # What the brackets took in does not parse: the code below was there before,
                    # and only the opener's line is being typed.
                    work[:] = before
                    closed = _close_brackets(work, untouched, on_opener_line=True)
                    if closed:
                        continue
            refit = _refit(error, work, line0, refits)
            if refit is not None:
                line, mended = refit
                if mended.lstrip(" \t") == work[line].lstrip(" \t"):
                    # Only its indentation changes: its code (and brackets closed on it) moves with it.
                    moved = len(_indent(mended)) - len(_indent(work[line]))
                    shifted[line] = shifted.get(line, 0) + moved
                    if closed and line in closed:
                        closed[line] += moved
                work[line] = mended
                repaired.add(line)
                continue
            if line0 in emptied:
                # The error sits on a line already emptied: a bracket opened earlier.
                line0 = max((n for n in range(line0) if n not in emptied and work[n].strip()), default=-1)
                if line0 < 0:
                    break
            if line0 in repaired:
                work[line0] = _ending(work[line0])
                emptied.add(line0)
            else:
                work[line0] = _placeholder(work[line0], work, line0)
                repaired.add(line0)
        except (RecursionError, MemoryError):
            # No line number: the deepest expression is almost always on the longest line.
            longest = max(
                (n for n in range(len(work)) if n not in emptied), key=lambda n: len(work[n]), default=-1
            )
            if longest < 0:
                break
            work[longest] = _ending(work[longest])
            emptied.add(longest)
            repaired.add(longest)
        except ValueError:
            break
    empty = ast.Module(body=[], type_ignores=[])
    return ParsedSource(path, text, empty, lines, first_error, problem, repaired)


def _close_brackets(
    work: list[str], first: int = 0, on_opener_line: bool = False, stops: frozenset[int] = frozenset()
) -> dict[int, int]:
    """Close, in place, the brackets still open at the end of the file (none is open before line
    ``first``: tokenizing starts there; each line of ``stops`` starts complete statements that run to
    the end, where tokenizing stops once every open bracket's closing line is known).

    Returns each line changed and the column the closing brackets were put at.

    An editor's last lines are often a call being typed: ``fabric.setup_optimizers(optimizer``.
    A bracket opened on line L ends before the first later line that starts no deeper than L
    does (and not with a closing bracket): that is where the typing went on with a new statement.
    The closers go right after the last token of the line before, so no other code moves.
    Nothing changes when the brackets that are closed do not match. ``on_opener_line``: every
    bracket is closed on the line of the last one opened (a line typed above code that was there).
    """
    code_ends: dict[int, int] = {}  # line -> column where its last token ends
    line_starts: dict[int, tuple[int, str]] = {}  # line -> column and text of its first token
    open_brackets: list[tuple[str, int]] = []  # closer, line of the opener
    try:
        for token in tokenize.generate_tokens(io.StringIO("".join(work[first:])).readline):
            if token.type in _NOT_CODE:
                continue
            if token.type == tokenize.ERRORTOKEN and token.string[:1] in "\"'":
                return {}  # an unterminated string: its brackets are text
            line = first + token.start[0] - 1
            if line in stops and line not in line_starts and _ends_known(open_brackets, line_starts, work):
                break  # the rest is complete statements: no bracket of theirs stays open
            line_starts.setdefault(line, (token.start[1], token.string))
            code_ends[first + token.end[0] - 1] = token.end[1]
            if token.string in _CLOSER_OF:
                open_brackets.append((_CLOSER_OF[token.string], first + token.start[0] - 1))
            elif token.string in (")", "]", "}"):
                if not open_brackets or open_brackets[-1][0] != token.string:
                    return {}
                open_brackets.pop()
    except (tokenize.TokenError, SyntaxError):
        pass  # "EOF in multi-line statement": the case this repairs
    if not open_brackets:
        return {}
    last_line = max(code_ends)
    starting_lines = sorted(line_starts)
    close_at: list[int] = []
    for _, opened in open_brackets:
        if on_opener_line:
            close_at.append(open_brackets[-1][1])
            continue
        depth = len(work[opened]) - len(work[opened].lstrip(" \t"))
        goes_on = next(
            (
                line
                for line in starting_lines
                if line > opened and line_starts[line][0] <= depth and line_starts[line][1][:1] not in ")]}"
            ),
            last_line + 1,
        )
        line = max(n for n in code_ends if n < goes_on)
        # Inside a bracket closed earlier, close there too, so the brackets nest.
        line = min([line] + [outer for outer in close_at if outer >= opened])
        close_at.append(line)
    for line in sorted(set(close_at)):
        inner_first = reversed(list(zip(open_brackets, close_at)))
        closers = "".join(closer for (closer, _), at in inner_first if at == line)
        column = code_ends[line]
        work[line] = work[line][:column] + closers + work[line][column:]
    return {line: code_ends[line] for line in close_at}


def _ends_known(
    open_brackets: list[tuple[str, int]], line_starts: dict[int, tuple[int, str]], work: list[str]
) -> bool:
    """Every open bracket has a later line that starts no deeper than its opener's (where it ends)."""
    for _, opened in open_brackets:
        depth = len(work[opened]) - len(work[opened].lstrip(" \t"))
        if not any(
            line > opened and column <= depth and text[:1] not in ")]}"
            for line, (column, text) in line_starts.items()
        ):
            return False
    return True


def _refit(
    error: SyntaxError, work: list[str], line0: int, done: set[tuple[int, str]]
) -> Optional[tuple[int, str]]:
    """The line a block-structure error is really about, and its mended text (None when this
    error is not one of those, or that line was given that text already).

    A line typed at the wrong indentation, or a block opener still without its body, makes
    Python report the error on the lines after it: blanking those one at a time would empty the
    rest of the block (and take up to ``_MAX_REPAIRS`` whole parses). The line itself is the one
    to mend, so everything around it keeps its meaning:

    - "unexpected indent": the line above dedented out of the block (``x = 1`` typed at column
      0 inside a function); it gets the indentation of the block it sits in;
    - "unindent does not match": the line itself gets the indentation of the lines around it;
    - "expected an indented block after ... on line N": the opener on line N becomes ``pass``;
    - "expected 'except' or 'finally' block": the ``try:`` becomes ``if True:``, its body kept.
    """
    message = error.msg or ""
    target: Optional[int] = None
    text: Optional[str] = None
    if message == "unexpected indent":
        above = _code_line_before(work, line0)
        if above >= 0 and not _opens_block(work[above]):
            if _dedented_out(work, above) and _width(work[above]) < _width(work[line0]):
                target, text = above, _indent(work[line0]) + work[above].lstrip(" \t")
            else:
                # This line is the one too deep: it joins the block of the line above.
                target, text = line0, _indent(work[above]) + work[line0].lstrip(" \t")
    elif message.startswith("unindent does not match"):
        above = _code_line_before(work, line0)
        intruder = _closed_the_block_of(work, line0)
        if intruder >= 0:
            # A line above dedented out of the block this one still belongs to.
            outer = _code_line_before(work, intruder)
            target, text = intruder, _indent(work[outer]) + work[intruder].lstrip(" \t")
        elif above >= 0 and _block_of_one(work, above, line0):
            # The block's first line set a level the lines after it do not keep: it is the odd one.
            target, text = above, _indent(work[line0]) + work[above].lstrip(" \t")
        elif above >= 0:
            indent = _indent(work[above])
            if _opens_block(work[above]):
                below = _code_line_after(work, line0)
                deeper = below >= 0 and _width(work[below]) > _width(work[above])
                indent = _indent(work[below]) if deeper else indent + "    "
            target, text = line0, indent + work[line0].lstrip(" \t")
    elif message.startswith("expected an indented block"):
        found = _ON_LINE.search(message)
        opener = int(found.group(1)) - 1 if found else _code_line_before(work, line0 + 1)
        below = _code_line_after(work, opener) if 0 <= opener < len(work) else -1
        after = _code_line_after(work, below) if below >= 0 else -1
        if after >= 0 and _width(work[after]) > _width(work[opener]) > _width(work[below]):
            # The opener's body is there, below a line typed at the wrong indentation.
            target, text = below, _indent(work[after]) + work[below].lstrip(" \t")
        elif 0 <= opener < len(work):
            target, text = opener, f"{_indent(work[opener])}pass{_ending(work[opener])}"
    elif message == "expected 'except' or 'finally' block":
        width = _width(work[line0])
        opener = next(
            (n for n in range(line0 - 1, -1, -1) if _TRY.match(work[n]) and _width(work[n]) >= width), -1
        )
        if opener >= 0:
            target, text = opener, f"{_indent(work[opener])}if True:{_ending(work[opener])}"
    if target is None or text is None or (target, text.lstrip(" \t")) in done or work[target] == text:
        return None
    # Each line is given each new content once (its indentation changed, or ``pass``): no loop.
    done.add((target, text.lstrip(" \t")))
    return target, text


def _closed_the_block_of(work: list[str], line0: int) -> int:
    """The line above ``line0`` that closed the block ``line0``'s indentation belongs to, or -1.

    The nearest shallower line above is that line when the block's own indentation is found above
    it (the ``def`` of the method an ``if x:`` typed at column 0 cut short); when no line above has
    ``line0``'s indentation, ``line0`` itself is the one typed wrong.
    """
    width = _width(work[line0])
    shallower = next(
        (n for n in range(line0 - 1, -1, -1) if _is_code(work[n]) and _width(work[n]) < width), -1
    )
    if shallower < 0 or not _dedented_out(work, shallower):
        return -1
    if _width(work[_code_line_after(work, shallower)]) != _width(work[_code_line_before(work, shallower)]):
        return -1  # the lines under it are a block of its own (a new ``if __name__ ...:``)
    enclosing = next(
        (n for n in range(shallower - 1, -1, -1) if _is_code(work[n]) and _width(work[n]) <= width), -1
    )
    return shallower if enclosing >= 0 and _width(work[enclosing]) == width else -1


def _block_of_one(work: list[str], first: int, line0: int) -> bool:
    """Whether ``first`` is the only line of a block so far, and ``line0`` (next to it) could be
    that block's level too: deeper than the opener, shallower than ``first``."""
    opener = _code_line_before(work, first)
    return (
        opener >= 0
        and _opens_block(work[opener])
        and _width(work[opener]) < _width(work[line0]) < _width(work[first])
    )


def _dedented_out(work: list[str], line0: int) -> bool:
    """Whether a line sits shallower than the block the line above it is in (or opens)."""
    above = _code_line_before(work, line0)
    if above < 0:
        return False
    if _opens_block(work[above]):
        return _width(work[line0]) <= _width(work[above])
    return _width(work[line0]) < _width(work[above])


def _indent(line: str) -> str:
    return _INDENT.match(line).group(0)  # type: ignore[union-attr]


def _width(line: str) -> int:
    return len(_indent(line).expandtabs(8))


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _code_line_before(work: list[str], line0: int) -> int:
    return next((n for n in range(line0 - 1, -1, -1) if _is_code(work[n])), -1)


def _code_line_after(work: list[str], line0: int) -> int:
    return next((n for n in range(line0 + 1, len(work)) if _is_code(work[n])), -1)


def _opens_block(line: str) -> bool:
    return _TRAILING_COMMENT.sub("", line).rstrip().endswith(":")


def _placeholder(line: str, work: list[str], line0: int) -> str:
    """A statement that keeps the block structure: ``pass`` at the line's indent."""
    newline = _ending(line)
    stripped = line.strip()
    if not stripped:
        return line
    indent = _INDENT.match(line).group(0)  # type: ignore[union-attr]
    if stripped.endswith(":"):
        # A block opener: keep a block so the indented body below still parses.
        return f"{indent}if True:{newline}"
    return f"{indent}pass{newline}"


def _problem(error: BaseException) -> SyntaxProblem:
    """Python's message at Python's position (``offset`` counts code points, 1-based)."""
    if not isinstance(error, SyntaxError):
        return SyntaxProblem(str(error), Span(0, 0, 0, 0))
    line0 = max((error.lineno or 1) - 1, 0)
    col0 = max((error.offset or 1) - 1, 0)
    end0 = max((getattr(error, "end_lineno", None) or line0 + 1) - 1, line0)
    end_col0 = max((getattr(error, "end_offset", None) or col0 + 1) - 1, 0)
    if (end0, end_col0) < (line0, col0):
        end0, end_col0 = line0, col0
    return SyntaxProblem(error.msg or "invalid syntax", Span(line0, col0, end0, end_col0))


def _describe(error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        where = f"line {error.lineno}" if error.lineno else "unknown line"
        return f"{error.msg} ({where})"
    return str(error)
