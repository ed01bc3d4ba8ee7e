"""Fixes as minimal text edits on the user's own code, and applying them.

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


def _delete_lines(parsed: ParsedSource, statement: ast.stmt) -> TextEdit:
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


def repaired_between(parsed: ParsedSource, first_line: int, last_line: int) -> bool:
    """Whether the parser repaired any of these lines (0-based, inclusive): a half-typed text."""
    repaired = parsed.repaired_lines | set(parsed.closed_lines)
    return any(first_line <= line <= last_line for line in repaired)


def insert_at_end(parsed: ParsedSource, node: ast.AST, text: str) -> TextEdit:
    """An edit that writes ``text`` right after ``node``."""
    span = parsed.span(node)
    return TextEdit(Span(span.end_line, span.end_col, span.end_line, span.end_col), text)


def _same_block(first: Optional[StatementPlace], second: Optional[StatementPlace]) -> bool:
    return (
        first is not None
        and second is not None
        and first.block is second.block
        and first.index < second.index
    )


def join_setup_fix(event: CallEvent) -> Optional[Fix]:
    """FAB001: ``model = setup_module(m)`` (or ``setup(m)``) + ``opt = setup_optimizers(o)`` →
    ``model, opt = setup(m, o)``.

    When ``setup_optimizers`` is the body of an ``if`` that follows the model's setup, the joint
    setup goes into the ``if`` and an ``else`` sets the model up alone, as before.
    """
    place = event.place
    parsed = event.parsed
    if place is None or place.statement is None or not event.fabric_text or len(event.args) != 1:
        return None
    statement = place.statement
    optimizer_target, constants = _optimizer_target(statement, event.node)
    if optimizer_target is None:
        return None
    optimizer_name = parsed.segment(optimizer_target)  # as written (``ast`` normalises identifiers)
    optimizer = event.args[0]
    inner = optimizer.inner if isinstance(optimizer, SetupOptimizer) else optimizer
    if not isinstance(inner, Obj) or not inner.params:
        return None
    setup_place = inner.params[0].source.setup_place
    if setup_place is None:
        return None
    conditional = None if _same_block(setup_place, place) else _if_holding(setup_place, place)
    if conditional is None and not _same_block(setup_place, place):
        return None
    setup_statement = setup_place.statement
    model_name = single_target(setup_statement)
    setup_call = getattr(setup_statement, "value", None)
    if model_name is None or not isinstance(setup_call, ast.Call) or len(setup_call.args) != 1:
        return None
    if not isinstance(setup_call.func, ast.Attribute) or setup_call.func.attr not in (
        "setup_module",
        "setup",
    ):
        return None
    if setup_call.keywords or not alone_on_lines(parsed, setup_statement):
        return None  # keywords such as move_to_device= would be lost in the joint call
    module_arg = setup_call.args[0]
    edits: list[TextEdit] = []
    if isinstance(module_arg, ast.Name):
        if module_arg.id != model_name:
            return None
        edits.append(_delete_lines(parsed, setup_statement))
    else:
        edits.append(TextEdit(parsed.span(setup_call), parsed.segment(module_arg)))
    # Code between the two calls that uses the set-up model would now see the raw one.
    end = place.index if conditional is None else setup_place.block.index(conditional)
    between = setup_place.block[setup_place.index + 1 : end]
    if conditional is not None:
        if model_name in names_in(conditional.test) or _other_setups(conditional, statement):
            return None
        between = [*between, *conditional.body[: place.index]]
    safe = conditional is None and not any(_uses_beyond_parameters(model_name, s) for s in between)
    optimizer_text = parsed.segment(event.node.args[0]) if event.node.args else ""
    if not optimizer_text:
        return None
    new_text = f"{model_name}, {optimizer_name} = {event.fabric_text}.setup({model_name}, {optimizer_text})"
    if constants:
        lines = [f"{parsed.segment(target)} = {parsed.segment(value)}" for target, value in constants]
        new_text = (newline_of(parsed) + indent_of(parsed, statement)).join([*lines, new_text])
    edits.append(TextEdit(parsed.span(statement), new_text))
    if conditional is not None:
        newline = newline_of(parsed)
        alone = f"{model_name} = {parsed.segment(setup_call.func)}({model_name})"
        text = f"{newline}{indent_of(parsed, conditional)}else:{newline}{indent_of(parsed, statement)}{alone}"
        edits.append(insert_at_end(parsed, conditional, text))
    return make_fix("FAB001", edits, safe)


def _optimizer_target(
    statement: ast.stmt, call: ast.Call
) -> tuple[Optional[ast.expr], list[tuple[ast.expr, ast.expr]]]:
    """The name ``setup_optimizers`` assigns to, and the other (name, constant) pairs of a tuple
    assignment such as ``step, optimizer = 0, fabric.setup_optimizers(optimizer)``: split into one
    assignment each, which is the same when the other values are constants."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None, []
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Name):
        return (target, []) if value is call else (None, [])
    if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)):
        return None, []
    if len(target.elts) != len(value.elts) or not all(isinstance(e, ast.Name) for e in target.elts):
        return None, []
    if call not in value.elts:
        return None, []
    index = value.elts.index(call)
    others = [(t, v) for k, (t, v) in enumerate(zip(target.elts, value.elts)) if k != index]
    if not all(isinstance(v, ast.Constant) for _, v in others):
        return None, []
    return target.elts[index], others


def _uses_beyond_parameters(name: str, statement: ast.stmt) -> bool:
    """``statement`` uses ``name`` other than as ``name.parameters()`` (the same tensors, set up or not)."""
    harmless = {
        id(node.func.value)
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("parameters", "named_parameters")
        and isinstance(node.func.value, ast.Name)
    }
    return any(
        isinstance(node, ast.Name) and node.id == name and id(node) not in harmless
        for node in ast.walk(statement)
    )


def _other_setups(conditional: ast.If, statement: ast.stmt) -> bool:
    """The ``if`` sets up more than this optimizer: the ``else`` would not mirror it."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("setup", "setup_module", "setup_optimizers")
        for other in conditional.body
        if other is not statement
        for node in ast.walk(other)
    )


def _if_holding(setup_place: StatementPlace, place: StatementPlace) -> Optional[ast.If]:
    """The ``if`` without ``else``, after the setup in its block, whose body holds ``place``."""
    for statement in setup_place.block[setup_place.index + 1 :]:
        if isinstance(statement, ast.If) and statement.body is place.block and not statement.orelse:
            return statement
    return None


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
        if not _same_block(created, place) or not alone_on_lines(parsed, created.statement):  # type: ignore
            return None
        if single_target(created.statement) != optimizer_arg.id:  # type: ignore[union-attr]
            return None
        between = place.block[created.index + 1 : place.index]  # type: ignore[union-attr]
        if any(optimizer_arg.id in names_in(s) for s in between):
            return None
        edits.append(_delete_lines(parsed, created.statement))  # type: ignore[union-attr]
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
    if not (_same_block(created, setup_place) and _same_block(setup_place, place)):
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
            _delete_lines(parsed, created.statement),  # type: ignore[union-attr]
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


def fabric_backward_fix(event: CallEvent) -> Optional[Fix]:
    """FAB016: ``loss.backward()`` → ``fabric.backward(loss)``."""
    node = event.node
    if not event.fabric_text or not isinstance(node.func, ast.Attribute) or node.args or node.keywords:
        return None
    tensor = event.parsed.segment(node.func.value)
    return make_fix("FAB016", [TextEdit(event.parsed.span(node), f"{event.fabric_text}.backward({tensor})")])


def insert_launch_fix(event: CallEvent) -> Optional[Fix]:
    """FAB009: call ``fabric.launch()`` right after the Fabric is created."""
    place = event.fabric.place
    if place is None or event.fabric.path != event.parsed.path:
        return None
    name = single_target(place.statement)
    if name is None or not alone_on_lines(event.parsed, place.statement):
        return None
    text = newline_of(event.parsed) + indent_of(event.parsed, place.statement) + f"{name}.launch()"
    return make_fix("FAB009", [insert_at_end(event.parsed, place.statement, text)])


def closest_strategy_name_fix(event: CallEvent) -> Optional[Fix]:
    """FAB021: a misspelt registry name → the closest registered one."""
    from difflib import get_close_matches

    from fabric_ls.analysis.strategies import REGISTRY

    for keyword in event.node.keywords:
        value = keyword.value
        if keyword.arg == "strategy" and isinstance(value, ast.Constant) and isinstance(value.value, str):
            matches = get_close_matches(value.value.lower(), [*REGISTRY, "auto"], n=1, cutoff=0.6)
            if matches:
                return make_fix(
                    "FAB021", [TextEdit(event.parsed.span(value), repr(matches[0]).replace("'", '"'))]
                )
    return None
