"""Python's rule for a function's names: one assigned anywhere in the function is local to all of it.

So a read of it before any assignment raises ``UnboundLocalError``; it never sees the module's
global of the same name (``precision = precision or "32-true"`` in a function, with a global
``precision``). The evaluator asks here which names a function makes local, and which of its reads
sit in a loop (where an earlier iteration may have bound the name: the evaluator runs a loop's body
once, so it cannot tell), and where each name's first binding is in the source.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class FunctionScope:
    # Names the function binds (assignments, loop and ``with`` targets, imports, nested defs, ...)
    # and does not declare ``global``/``nonlocal``.
    local_names: frozenset[str]
    # The ``ast.Name`` reads (by id) inside a ``for``/``while`` of the function.
    reads_in_loops: frozenset[int]
    # Each local name: where the first statement binding it ends, in source order. A read after that
    # place may follow a binding the evaluator skipped (a loop or branch with nothing Fabric-related).
    first_bound: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, hash=False)


_SCOPES: weakref.WeakKeyDictionary[ast.AST, FunctionScope] = weakref.WeakKeyDictionary()
_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# ``match`` patterns that bind a name (Python 3.10+).
_MATCH_CAPTURES = tuple(
    getattr(ast, name) for name in ("MatchAs", "MatchStar", "MatchMapping") if hasattr(ast, name)
)


def function_scope(function: ast.AST) -> FunctionScope:
    found = _SCOPES.get(function)
    if found is None:
        found = _SCOPES[function] = _scan(function)
    return found


def _scan(function: ast.AST) -> FunctionScope:
    bound: dict[str, tuple[int, int]] = {}
    declared: set[str] = set()
    in_loops: set[int] = set()

    def bind(name: str, statement: Optional[ast.AST]) -> None:
        # Where the binding is done, as the source reads: the end of its statement (a value is read
        # before its target is bound: ``precision = precision or "32-true"``).
        end = (getattr(statement, "end_lineno", None) or 0, getattr(statement, "end_col_offset", None) or 0)
        if name not in bound or end < bound[name]:
            bound[name] = end

    body = function.body if isinstance(function.body, list) else [function.body]  # type: ignore[attr-defined]
    # (node, inside a loop, the statement it is in)
    pending: list[tuple[ast.AST, bool, Optional[ast.AST]]] = [
        (statement, False, statement) for statement in body
    ]
    while pending:
        node, looping, statement = pending.pop()
        if isinstance(node, ast.stmt):
            statement = node
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bind(node.id, statement)
            elif looping:
                in_loops.add(id(node))
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, _NESTED_SCOPES):
            # Its name is bound here; its decorators, defaults and bases run here; its body does not.
            if not isinstance(node, ast.Lambda):
                bind(node.name, node)
            outer: list[ast.AST] = list(getattr(node, "decorator_list", []))
            if isinstance(node, ast.ClassDef):
                outer += [*node.bases, *(keyword.value for keyword in node.keywords)]
            else:
                arguments = node.args
                outer += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
            pending.extend((child, looping, statement) for child in outer)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0], node)
            continue
        if isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, node)
        if isinstance(node, ast.comprehension):
            # The comprehension's own variables are its own (Python 3); a walrus in its ``ifs`` or
            # element binds here (the element is the comprehension node's other child).
            pending.extend((child, looping, statement) for child in (node.iter, *node.ifs))
            continue
        if isinstance(node, _MATCH_CAPTURES):  # ``case Point(x=px)``, ``case [*rest]``, ``case {**rest}``
            for name in ("name", "rest"):
                value = getattr(node, name, None)
                if isinstance(value, str):
                    bind(value, statement)
        inner = looping or isinstance(node, _LOOPS)
        for child in ast.iter_child_nodes(node):
            # A loop's own ``iter`` (and a ``while``'s first test) is read before any iteration: it
            # still counts as in the loop for the test, which later iterations read again.
            in_loop = inner if not (isinstance(node, ast.For) and child is node.iter) else looping
            pending.append((child, in_loop, statement))
    first_bound = {name: end for name, end in bound.items() if name not in declared}
    return FunctionScope(frozenset(first_bound), frozenset(in_loops), first_bound)
