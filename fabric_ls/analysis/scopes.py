"""Python's rule for a function's names: one assigned anywhere in the function is local to all of it.

So a read of it before any assignment raises ``UnboundLocalError``; it never sees the module's
global of the same name (``precision = precision or "32-true"`` in a function, with a global
``precision``). The evaluator asks here which names a function makes local, and which of its reads
sit in a loop (where an earlier iteration may have bound the name: the evaluator runs a loop's body
once, so it cannot tell).
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass


@dataclass(frozen=True)
class FunctionScope:
    # Names the function binds (assignments, loop and ``with`` targets, imports, nested defs, ...)
    # and does not declare ``global``/``nonlocal``.
    local_names: frozenset[str]
    # The ``ast.Name`` reads (by id) inside a ``for``/``while`` of the function.
    reads_in_loops: frozenset[int]


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
    bound: set[str] = set()
    declared: set[str] = set()
    in_loops: set[int] = set()
    body = function.body if isinstance(function.body, list) else [function.body]  # type: ignore[attr-defined]
    # (node, inside a loop)
    pending: list[tuple[ast.AST, bool]] = [(statement, False) for statement in body]
    while pending:
        node, looping = pending.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            elif looping:
                in_loops.add(id(node))
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, _NESTED_SCOPES):
            # Its name is bound here; its decorators, defaults and bases run here; its body does not.
            if not isinstance(node, ast.Lambda):
                bound.add(node.name)
            outer: list[ast.AST] = list(getattr(node, "decorator_list", []))
            if isinstance(node, ast.ClassDef):
                outer += [*node.bases, *(keyword.value for keyword in node.keywords)]
            else:
                arguments = node.args
                outer += [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
            pending.extend((child, looping) for child in outer)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            continue
        if isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        if isinstance(node, ast.comprehension):
            # The comprehension's own variables are its own (Python 3); a walrus in its ``ifs`` or
            # element binds here (the element is the comprehension node's other child).
            pending.extend((child, looping) for child in (node.iter, *node.ifs))
            continue
        if isinstance(node, _MATCH_CAPTURES):  # ``case Point(x=px)``, ``case [*rest]``, ``case {**rest}``
            for name in ("name", "rest"):
                value = getattr(node, name, None)
                if isinstance(value, str):
                    bound.add(value)
        inner = looping or isinstance(node, _LOOPS)
        for child in ast.iter_child_nodes(node):
            # A loop's own ``iter`` (and a ``while``'s first test) is read before any iteration: it
            # still counts as in the loop for the test, which later iterations read again.
            pending.append(
                (child, inner if not (isinstance(node, ast.For) and child is node.iter) else looping)
            )
    return FunctionScope(frozenset(bound - declared), frozenset(in_loops))
