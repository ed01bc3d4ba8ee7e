"""Fixes as minimal text edits on the user's own code: the edit helpers, applying edits, and
the builders two rules share (a rule's own builder lives in its rule module).

Every builder returns None when the code is not in a shape it can rewrite
faithfully; a missing fix is better than a wrong one.
"""

from __future__ import annotations

import ast
import re
from typing import Optional, Sequence

from fabric_ls.analysis.events import CallEvent, StatementPlace
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.values import Obj, SetupOptimizer
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.records import get_record

_SAFE = "safe"


def _offsets(source: str) -> list[int]:
    starts = [0]
    for match in re.finditer(r"\r\n|\r|\n", source):
        starts.append(match.end())
    return starts


def apply_edits(source: str, edits: Sequence[TextEdit]) -> str:
    """Apply non-overlapping edits (positions in code points), last first."""
    starts = _offsets(source)

    def offset(line: int, col: int) -> int:
        if line >= len(starts):
            return len(source)
        return min(starts[line] + col, len(source))

    result = source
    for edit in sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col), reverse=True):
        start = offset(edit.span.start_line, edit.span.start_col)
        end = offset(edit.span.end_line, edit.span.end_col)
        result = result[:start] + edit.new_text + result[end:]
    return result


def make_fix(rule: str, edits: list[TextEdit], safe: Optional[bool] = None) -> Optional[Fix]:
    """The record's fix for ``rule`` made of ``edits``; ``safe=False`` makes it unsafe."""
    spec = get_record(rule).fix
    if spec is None or not edits:
        return None
    is_safe = spec.safety == _SAFE if safe is None else (safe and spec.safety == _SAFE)
    return Fix(spec.title, tuple(edits), is_safe)


def newline_of(parsed: ParsedSource) -> str:
    for line in parsed.lines:
        if line.endswith("\r\n"):
            return "\r\n"
        if line.endswith("\n"):
            return "\n"
    return "\n"


def alone_on_lines(parsed: ParsedSource, statement: ast.stmt) -> bool:
    """The statement owns its lines: nothing before it, only a newline after it."""
    span = parsed.span(statement)
    before = parsed.line_text(span.start_line)[: span.start_col]
    after = parsed.line_text(span.end_line)[span.end_col :]
    return not before.strip() and not after.strip()


def delete_lines(parsed: ParsedSource, statement: ast.stmt) -> TextEdit:
    span = parsed.span(statement)
    if span.end_line + 1 < len(parsed.lines):
        return TextEdit(Span(span.start_line, 0, span.end_line + 1, 0), "")
    # Last line of the file: also remove the newline that ended the line before.
    if span.start_line > 0:
        previous = parsed.line_text(span.start_line - 1).rstrip("\r\n")
        return TextEdit(Span(span.start_line - 1, len(previous), span.end_line, span.end_col), "")
    return TextEdit(Span(span.start_line, 0, span.end_line, span.end_col), "")


def indent_of(parsed: ParsedSource, statement: ast.stmt) -> str:
    line = parsed.line_text(parsed.span(statement).start_line)
    return line[: len(line) - len(line.lstrip())]


def single_target(statement: ast.stmt) -> Optional[str]:
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return statement.targets[0].id
    return None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def enclosing_scope(parsed: ParsedSource, statement: ast.stmt) -> Optional[ast.AST]:
    """The innermost module or function whose body (at any depth of blocks) holds ``statement``."""

    def search(scope: ast.AST, node: ast.AST) -> Optional[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if child is statement:
                return scope
            found = search(child if isinstance(child, _SCOPES) else scope, child)
            if found is not None:
                return found
        return None

    return search(parsed.tree, parsed.tree)


def scope_statements(scope: ast.AST) -> list[ast.stmt]:
    """Every statement run by ``scope`` itself (not the bodies of the functions and classes it defines)."""
    found: list[ast.stmt] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                found.append(child)
            if not isinstance(child, _SCOPES):
                visit(child)

    visit(scope)
    return found


def bound_names(statements: Sequence[ast.stmt]) -> set[str]:
    """The names these statements bind in their own scope (assignments, imports, defs, loops, ...)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            for decorator in node.decorator_list:
                visit(decorator)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return names


def fix_outside_repairs(fix: Optional[Fix], parsed: ParsedSource) -> Optional[Fix]:
    """``fix``, unless it edits what the parser made up to read a half-typed text: a line it
    replaced (``pass``, blanked) or re-indented, or any top-level statement holding a re-indented
    line (its blocks were a guess, and a fix reads them). Every rule's fix goes through here."""
    if fix is None or not (parsed.repaired_lines - set(parsed.closed_lines)):
        return fix
    guessed = [(line, line) for line in parsed.repaired_lines if line not in parsed.closed_lines]
    for statement in parsed.tree.body:
        first, last = statement.lineno - 1, (statement.end_lineno or statement.lineno) - 1
        if any(first <= line <= last for line in parsed.shifted_lines):
            guessed.append((first, last))
    for edit in fix.edits:
        if any(edit.span.start_line <= last and first <= edit.span.end_line for first, last in guessed):
            return None
    return fix


def repaired_between(parsed: ParsedSource, first_line: int, last_line: int) -> bool:
    """Whether the parser repaired any of these lines (0-based, inclusive): a half-typed text."""
    repaired = parsed.repaired_lines | set(parsed.closed_lines)
    return any(first_line <= line <= last_line for line in repaired)


def insert_at_end(parsed: ParsedSource, node: ast.AST, text: str) -> TextEdit:
    """An edit that writes ``text`` right after ``node``."""
    span = parsed.span(node)
    return TextEdit(Span(span.end_line, span.end_col, span.end_line, span.end_col), text)


def same_block(first: Optional[StatementPlace], second: Optional[StatementPlace]) -> bool:
    return (
        first is not None
        and second is not None
        and first.block is second.block
        and first.index < second.index
    )


def split_setup_fix(event: CallEvent, rule: str) -> Optional[Fix]:
    """FAB002/FAB011: ``model, opt = setup(model, opt)`` → set the module up, build the optimizer,
    then ``setup_optimizers``."""
    place = event.place
    parsed = event.parsed
    if place is None or not event.fabric_text or len(event.node.args) != 2 or event.node.keywords:
        return None
    statement = place.statement
    if (
        not isinstance(statement, ast.Assign)
        or statement.value is not event.node
        or len(statement.targets) != 1
    ):
        return None
    target = statement.targets[0]
    if not isinstance(target, ast.Tuple) or len(target.elts) != 2:
        return None
    if not all(isinstance(e, ast.Name) for e in target.elts):
        return None
    model_target, optimizer_target = (e.id for e in target.elts)  # type: ignore[attr-defined]
    model_arg, optimizer_arg = event.node.args
    if not isinstance(model_arg, ast.Name) or model_arg.id != model_target:
        return None
    indent = indent_of(parsed, statement)
    newline = newline_of(parsed)
    fabric = event.fabric_text
    edits: list[TextEdit] = []
    lines = [f"{model_target} = {fabric}.setup_module({model_target})"]
    if isinstance(optimizer_arg, ast.Name):
        optimizer = event.args[1]
        inner = optimizer.inner if isinstance(optimizer, SetupOptimizer) else optimizer
        created = inner.created_place if isinstance(inner, Obj) else None
        if not same_block(created, place) or not alone_on_lines(parsed, created.statement):  # type: ignore
            return None
        if single_target(created.statement) != optimizer_arg.id:  # type: ignore[union-attr]
            return None
        between = place.block[created.index + 1 : place.index]  # type: ignore[union-attr]
        if any(optimizer_arg.id in names_in(s) for s in between):
            return None
        edits.append(delete_lines(parsed, created.statement))  # type: ignore[union-attr]
        lines.append(parsed.segment(created.statement))  # type: ignore[union-attr]
        lines.append(f"{optimizer_target} = {fabric}.setup_optimizers({optimizer_arg.id})")
    else:
        lines.append(f"{optimizer_target} = {fabric}.setup_optimizers({parsed.segment(optimizer_arg)})")
    edits.append(TextEdit(parsed.span(statement), (newline + indent).join(lines)))
    return make_fix(rule, edits)


def move_optimizer_after_setup_fix(event: CallEvent, rule: str) -> Optional[Fix]:
    """FAB010/FAB012: build the optimizer after ``model = fabric.setup_module(model)``."""
    place = event.place
    parsed = event.parsed
    if place is None or len(event.args) != 1:
        return None
    optimizer = event.args[0]
    inner = optimizer.inner if isinstance(optimizer, SetupOptimizer) else optimizer
    if not isinstance(inner, Obj) or not inner.params:
        return None
    created = inner.created_place
    model = inner.params[0].source
    setup_place = model.setup_place
    if not (same_block(created, setup_place) and same_block(setup_place, place)):
        return None
    model_name = single_target(setup_place.statement)  # type: ignore[union-attr]
    setup_call = getattr(setup_place.statement, "value", None)  # type: ignore[union-attr]
    if model_name is None or not isinstance(setup_call, ast.Call) or not setup_call.args:
        return None
    if not isinstance(setup_call.args[0], ast.Name) or setup_call.args[0].id != model_name:
        return None
    if not alone_on_lines(parsed, created.statement):  # type: ignore[union-attr]
        return None
    optimizer_name = single_target(created.statement)  # type: ignore[union-attr]
    if optimizer_name is None:
        return None
    between = place.block[created.index + 1 : setup_place.index]  # type: ignore[union-attr]
    if any(optimizer_name in names_in(s) for s in between):
        return None
    setup_span = parsed.span(setup_place.statement)  # type: ignore[union-attr]
    text = newline_of(parsed) + indent_of(parsed, setup_place.statement) + parsed.segment(created.statement)  # type: ignore
    return make_fix(
        rule,
        [
            delete_lines(parsed, created.statement),  # type: ignore[union-attr]
            TextEdit(
                Span(setup_span.end_line, setup_span.end_col, setup_span.end_line, setup_span.end_col), text
            ),
        ],
    )


def keyword_fix(
    rule: str,
    parsed: ParsedSource,
    call: Optional[ast.Call],
    keyword: str,
    new_text: str,
    position: Optional[int] = None,
) -> Optional[Fix]:
    """Replace the value of ``keyword=`` (or the positional argument) in ``call``."""
    if call is None:
        return None
    for item in call.keywords:
        if item.arg == keyword:
            return make_fix(rule, [TextEdit(parsed.span(item.value), new_text)])
    if position is not None and len(call.args) > position:
        return make_fix(rule, [TextEdit(parsed.span(call.args[position]), new_text)])
    return None
