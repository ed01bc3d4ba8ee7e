"""FAB006: a spawning launcher (``ddp_spawn``, ``xla``, …) and ``launch()`` without a function."""

from __future__ import annotations

import ast
from typing import Any, Optional, Sequence

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.strategies import uses_spawn_launcher
from fabric_ls.fixes import (
    alone_on_lines,
    bound_names,
    enclosing_scope,
    make_fix,
    newline_of,
    repaired_between,
    single_target,
)
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB006"
METHODS = ("launch",)
# Fires on arguments that are absent: not on a call whose closing bracket is not typed yet.
JUDGES_MISSING_ARGUMENTS = True


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if strategy.class_name is None or event.args or "function" in event.keywords:
        return None
    if not uses_spawn_launcher(strategy.class_name, strategy.start_method):
        return None
    return Violation(event.node, {}, launch_with_function_fix(event))


_FUNCTION_NAMES = ("train", "run", "main")
_UNIT = "    "


def launch_with_function_fix(event: CallEvent) -> Optional[Fix]:
    """Move the statements after ``fabric.launch()`` into ``def train(fabric): ...``, call
    ``fabric.launch(train)``.

    The function is defined before the ``Fabric(...)`` statement. Under the ``spawn`` and
    ``forkserver`` start methods every worker imports the script and looks the function up by
    name, so the function must sit at module level and the ``Fabric``/``launch`` lines behind an
    ``if __name__ == "__main__":`` guard (Lightning's ``_check_missing_main_guard``); the guard is
    added when missing. Declined where moving code into a function could change what it does:
    it is not at the top level of the module (or its main guard) or of a function; it binds
    names that other code reads; it returns, yields or declares ``global``; re-indenting would
    change a multi-line string; under ``spawn``, it reads names only the main process binds.
    """
    place, parsed, fabric = event.place, event.parsed, event.fabric_text
    if place is None or not fabric.isidentifier():
        return None
    # Asked again for each strategy the Fabric may have: the rewrite depends on these alone.
    spawned = event.strategy.start_method in ("spawn", "forkserver")
    key = (id(event.node), id(place.statement), place.index, fabric, spawned)
    known: dict[tuple[Any, ...], Optional[Fix]] = parsed.derived.setdefault("launch_with_function_fix", {})
    if key not in known:
        known[key] = _launch_with_function_fix(event, spawned)
    return known[key]


def _launch_with_function_fix(event: CallEvent, spawned: bool) -> Optional[Fix]:
    place, parsed, fabric = event.place, event.parsed, event.fabric_text
    assert place is not None
    statement = place.statement
    if not isinstance(statement, ast.Expr) or statement.value is not event.node:
        return None
    if not alone_on_lines(parsed, statement):
        return None
    tail = place.block[place.index + 1 :]
    head = place.block[: place.index]
    if not tail or not alone_on_lines(parsed, tail[-1]) or not _movable(tail):
        return None
    if any(_calls_launch(s) for s in tail):
        return None  # a second launch() would run inside the launched function
    if repaired_between(parsed, 0, tail[-1].end_lineno):  # type: ignore[arg-type]
        return None  # a half-typed text: the lines moved may not be what the user will have
    tree = parsed.tree
    guard = _main_guard(tree, place.block)
    scope = enclosing_scope(parsed, statement)
    in_function = isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and place.block is scope.body
    if guard is None and not in_function and place.block is not tree.body:
        return None
    if spawned and in_function:
        return None  # a function defined in a function cannot be pickled for the workers
    moved = bound_names(tail)
    if fabric in moved or moved & _names(tree, skip=tail):
        return None
    name = next((n for n in _FUNCTION_NAMES if n not in _names(tree)), None)
    if name is None:
        return None
    creation = next((s for s in head if single_target(s) == fabric), None)
    anchor = guard if guard is not None else creation if creation is not None else statement
    region = head if guard is not None else head[head.index(anchor) :] if anchor in head else []
    wrap = spawned and guard is None
    if spawned:
        # Bound only in the main process: the workers re-import the script and never run it.
        main_only = bound_names(region)
        outside = _names(tree, skip=[guard] if guard is not None else [*region, statement, *tail])
        if (main_only - {fabric}) & _names(ast.Module(body=tail, type_ignores=[])) or main_only & outside:
            return None
        if wrap and not _movable(region):
            return None
    return _rewrite(parsed, anchor, statement, tail, name, fabric, wrap)


def _rewrite(
    parsed: ParsedSource,
    anchor: ast.stmt,
    launch: ast.stmt,
    tail: list[ast.stmt],
    name: str,
    fabric: str,
    wrap: bool,
) -> Optional[Fix]:
    """One edit from the anchor's first line to the end of the tail: the function, then the
    lines from the anchor to the launch (behind a main guard when ``wrap``), then the launch."""
    outer = _line_indent(parsed, anchor.lineno - 1)
    launch_indent = _line_indent(parsed, launch.lineno - 1)
    last = tail[-1].end_lineno  # type: ignore[assignment]
    body = _reindented(parsed, launch.end_lineno, last, launch_indent, outer + _UNIT)  # type: ignore[arg-type]
    if body is None:
        return None
    first = _first_line(anchor)
    middle = [parsed.line_text(n).rstrip("\r\n") for n in range(first, launch.lineno - 1)]
    call = f"{launch_indent}{fabric}.launch({name})"
    if wrap:
        middle = [f'{outer}if __name__ == "__main__":', *(_UNIT + t if t.strip() else t for t in middle)]
        call = _UNIT + call
    # PEP 8 spacing: two blank lines around a module-level function, one inside a function.
    spacing = 1 if outer else 2
    blank_before = 0
    while blank_before < first and not parsed.line_text(first - 1 - blank_before).strip():
        blank_before += 1
    lead = [""] * (spacing - blank_before) if first > blank_before and not outer else []
    lines = [*lead, f"{outer}def {name}({fabric}):", *body, *[""] * spacing, *middle, call]
    end_line = last - 1  # type: ignore[operator]
    span = Span(first, 0, end_line, len(parsed.line_text(end_line).rstrip("\r\n")))
    return make_fix(RULE, [TextEdit(span, newline_of(parsed).join(lines))])


def _first_line(statement: ast.stmt) -> int:
    """0-based first line of a statement, decorators included."""
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)]) - 1


def _line_indent(parsed: ParsedSource, line0: int) -> str:
    text = parsed.line_text(line0)
    return text[: len(text) - len(text.lstrip())]


def _reindented(parsed: ParsedSource, start: int, end: int, old: str, new: str) -> Optional[list[str]]:
    """Lines ``start..end-1`` (0-based) moved from indentation ``old`` to ``new``."""
    lines = []
    for line0 in range(start, end):
        text = parsed.line_text(line0).rstrip("\r\n")
        if not text.strip():
            lines.append("")
        elif text.startswith(old):
            lines.append(new + text[len(old) :])
        else:
            return None
    return lines


def _main_guard(tree: ast.Module, block: list[ast.stmt]) -> Optional[ast.If]:
    """The module-level ``if __name__ == "__main__":`` whose body is ``block``."""
    for statement in tree.body:
        if isinstance(statement, ast.If) and statement.body is block and not statement.orelse:
            test = statement.test
            if (
                isinstance(test, ast.Compare)
                and isinstance(test.left, ast.Name)
                and test.left.id == "__name__"
                and len(test.comparators) == 1
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value == "__main__"
            ):
                return statement
    return None


def _movable(statements: list[ast.stmt]) -> bool:
    """Nothing in these statements behaves differently one function deeper, or re-indented."""
    for statement in statements:
        for node in _same_scope_nodes(statement):
            if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)):
                return False
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return False
        for node in ast.walk(statement):
            if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno != node.lineno:
                return False  # a multi-line string: re-indenting would change its text
    return True


def _calls_launch(statement: ast.stmt) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "launch"
        for node in ast.walk(statement)
    )


def _same_scope_nodes(statement: ast.stmt) -> list[ast.AST]:
    found: list[ast.AST] = []
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _names(tree: ast.Module, skip: Sequence[Optional[ast.stmt]] = ()) -> set[str]:
    """Every identifier the code uses or defines, outside the ``skip`` statements."""
    skipped = {id(s) for s in skip}
    names: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return names


VALID = [
    """from lightning.fabric import Fabric


def train(fabric):
    pass


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch()
""",
        4,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
for _ in range(2):
    loss = model(torch.randn(8, 4, device=fabric.device)).sum()
    fabric.backward(loss)
    optimizer.step()
""",
        5,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    for _ in range(2):
        loss = model(torch.randn(8, 4, device=fabric.device)).sum()
        fabric.backward(loss)
        optimizer.step()


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch()
    model = fabric.setup(torch.nn.Linear(4, 2))
""",
        6,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup(torch.nn.Linear(4, 2))


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_fork")
    fabric.launch()
    model = fabric.setup(torch.nn.Linear(4, 2))
    fabric.print(model(torch.randn(2, 4, device=fabric.device)).shape)


main()
""",
        7,
        """import torch
from lightning.fabric import Fabric


def main():
    def train(fabric):
        model = fabric.setup(torch.nn.Linear(4, 2))
        fabric.print(model(torch.randn(2, 4, device=fabric.device)).shape)

    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_fork")
    fabric.launch(train)


main()
""",
    ),
]
