"""How a script reaches a call: the statements on the way, and what ran before (FAB031, FAB032).

Plain ``ast`` over one file: the top level runs in order, a module-level function runs where the
top level (or a function it runs) calls it by name, and ``if __name__ == "__main__":`` runs only
when the file is the main script, not when a spawned process imports it as ``__mp_main__``.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The node and its descendants, not entering nested definitions (their bodies do not run here)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, _DEFINITIONS):
            yield from _own_nodes(child)


def _contains(node: ast.AST, target: ast.AST) -> bool:
    return any(item is target for item in _own_nodes(node))


def _blocks(statement: ast.stmt, as_main: bool) -> list[list[ast.stmt]]:
    """The blocks of a compound statement that can run (a main guard's body only as ``__main__``)."""
    if isinstance(statement, ast.If) and is_main_guard(statement.test) and not as_main:
        return [statement.orelse]
    blocks = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(statement, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            blocks.append(block)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    for case in getattr(statement, "cases", ()):
        blocks.append(case.body)
    return blocks


class LaunchPath:
    """The ways one module's code runs; ``as_main`` says whether ``__name__`` is ``"__main__"``."""

    def __init__(self, tree: ast.Module, as_main: bool) -> None:
        self.tree = tree
        self.as_main = as_main
        self.functions = {
            statement.name: statement
            for statement in tree.body
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
        }

    def path_to(self, target: ast.AST) -> Optional[list[ast.stmt]]:
        """The statements that lead to ``target``, outermost first (the first one is at the top
        level), or None when running the module never gets there."""
        return self._in_block(self.tree.body, target, frozenset())

    def _in_block(
        self, block: list[ast.stmt], target: ast.AST, calling: frozenset[str]
    ) -> Optional[list[ast.stmt]]:
        for statement in block:
            found = self._in_statement(statement, target, calling)
            if found is not None:
                return found
        return None

    def _in_statement(
        self, statement: ast.stmt, target: ast.AST, calling: frozenset[str]
    ) -> Optional[list[ast.stmt]]:
        if isinstance(statement, _DEFINITIONS):
            return None
        if _contains(statement, target):
            blocks = _blocks(statement, self.as_main)
            if not blocks:
                return [statement]
            for block in blocks:
                found = self._in_block(block, target, calling)
                if found is not None:
                    return [statement, *found]
            # In the statement's own expressions (an `if` test, a `with` item).
            header = [n for n in ast.iter_child_nodes(statement) if not isinstance(n, ast.stmt)]
            return [statement] if any(_contains(n, target) for n in header) else None
        for name in self.called_functions(statement):
            if name in calling:
                continue
            found = self._in_block(self.functions[name].body, target, calling | {name})
            if found is not None:
                return [statement, *found]
        return None

    def called_functions(self, statement: ast.stmt) -> list[str]:
        """Module-level functions this statement calls by name, where it runs (not in its definitions)."""
        roots: list[ast.AST] = [statement]
        if isinstance(statement, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            roots = [n for n in ast.iter_child_nodes(statement) if not isinstance(n, ast.stmt)]
            for block in _blocks(statement, self.as_main):
                roots.extend(block)
        names = []
        for root in roots:
            if isinstance(root, _DEFINITIONS):
                continue
            for node in _own_nodes(root):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in self.functions
                ):
                    names.append(node.func.id)
        return names

    def ran_before(self, path: list[ast.stmt]) -> Iterator[ast.AST]:
        """Every node that runs before the last statement of ``path``: the earlier statements of each
        block on the way, and the module-level functions they call."""
        block = self.tree.body
        for step in path:
            for statement in block:
                if statement is step:
                    break
                if isinstance(statement, _DEFINITIONS):
                    continue
                yield from self._running(statement, frozenset())
            inner = [b for b in _blocks(step, self.as_main) if any(s in b for s in path)]
            if inner:
                block = inner[0]
            elif isinstance(step, ast.stmt) and step is not path[-1]:
                # The next step is in a function this statement calls.
                following = path[path.index(step) + 1]
                function = next((f for f in self.functions.values() if following in f.body), None)
                block = function.body if function is not None else []

    def _running(self, statement: ast.stmt, calling: frozenset[str]) -> Iterator[ast.AST]:
        yield from _own_nodes(statement)
        for name in self.called_functions(statement):
            if name not in calling:
                for inner in self.functions[name].body:
                    if not isinstance(inner, _DEFINITIONS):
                        yield from self._running(inner, calling | {name})
