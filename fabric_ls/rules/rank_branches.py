"""Which code only rank zero runs: ``if fabric.global_rank == 0:``, ``if fabric.is_global_zero:``,
aliases of them, an early ``return`` of the other ranks, and ``@rank_zero_only`` functions.

Read from the source around a call (the analysis does not know ranks); shared by FAB033. A
helper module: it defines no ``RULE``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fabric_ls.analysis.fabric_api import RANK_ATTRIBUTES, RANK_CALLS, ZERO_FLAGS
from fabric_ls.analysis.source import ParsedSource

ZERO, NONZERO = "zero", "nonzero"
# Words without which a file holds no rank test (aliases too are bound to one of them).
_RANK_WORDS = (*RANK_ATTRIBUTES, *ZERO_FLAGS, *RANK_CALLS, "rank_zero")
_FLIP = {ZERO: NONZERO, NONZERO: ZERO}
_MIRRORED: dict[type, ast.cmpop] = {
    ast.Lt: ast.Gt(),
    ast.Gt: ast.Lt(),
    ast.LtE: ast.GtE(),
    ast.GtE: ast.LtE(),
}
_EXITS = (ast.Return, ast.Continue, ast.Break)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module, ast.ClassDef)


@dataclass(frozen=True)
class RankZeroOnly:
    """Why a node runs on rank zero only: the test (or decorator) and the statement it heads."""

    parsed: ParsedSource
    reason: ast.AST  # the rank test, or the ``rank_zero_only`` decorator
    kind: str  # "branch" (an ``if``/conditional expression), "early-exit", "decorator"
    # The ``if`` whose body holds the node under the rank test (kind "branch", not its ``else``).
    branch: Optional[ast.If] = None
    # The statements the other ranks run instead (the other side of that ``if``).
    other_side: tuple[ast.stmt, ...] = ()
    in_else: bool = False  # on the ``else`` side of a test that holds on the other ranks

    def describe(self) -> str:
        """Where the node sits, as a person reads it: ``under `if rank == 0` ``."""
        text = self.parsed.segment(self.reason)
        if self.kind == "decorator":
            return f"in a `@{text}` function"
        if self.kind == "early-exit":
            return f"the other ranks leave earlier, at `if {text}`"
        if self.in_else:
            return f"in the `else` of `{text}`"
        return f"under `{text}`"


class _Parents:
    """The parents of the nodes a rule asks about, found by descending from the module along the
    children whose source range can hold the node: an edit does not make the server walk the
    whole statement around a call again (the training loop is most of a script)."""

    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree
        self._parent: dict[int, ast.AST] = {}

    def of(self, node: ast.AST) -> Optional[ast.AST]:
        if node is self._tree:
            return None
        found = self._parent.get(id(node))
        if found is None and not self._descend(node, guided=True):
            # Positions that do not nest (f-strings before 3.12): look everywhere.
            self._descend(node, guided=False)
        return self._parent.get(id(node))

    def _descend(self, node: ast.AST, guided: bool) -> bool:
        stack: list[ast.AST] = [self._tree]
        while stack:
            current = stack.pop()
            for child in ast.iter_child_nodes(current):
                if child is node:
                    self._parent[id(child)] = current
                    return True
                if not guided or _may_hold(child, node):
                    self._parent[id(child)] = current
                    stack.append(child)
        return False


def _parents(parsed: ParsedSource) -> _Parents:
    found = parsed.derived.get("parents")
    if found is None:
        found = parsed.derived["parents"] = _Parents(parsed.tree)
    return found


def _may_hold(outer: ast.AST, node: ast.AST) -> bool:
    """Whether ``node`` can lie inside ``outer``, by their source ranges (no range: it may)."""
    line = getattr(outer, "lineno", None)
    inner_line = getattr(node, "lineno", None)
    if line is None or inner_line is None or getattr(outer, "end_lineno", None) is None:
        return True
    first = (line, outer.col_offset)  # type: ignore[attr-defined]
    decorators = getattr(outer, "decorator_list", None)
    if decorators:
        first = min(first, *((d.lineno, d.col_offset) for d in decorators))
    last = (outer.end_lineno, outer.end_col_offset)  # type: ignore[attr-defined]
    inner_first = (inner_line, node.col_offset)  # type: ignore[attr-defined]
    inner_last = (getattr(node, "end_lineno", None) or inner_line, getattr(node, "end_col_offset", None) or 0)
    return first <= inner_first and inner_last <= last


def _assignments(parsed: ParsedSource, scope: ast.AST) -> dict[str, list[ast.expr]]:
    """The values assigned to each plain name in ``scope`` itself (the functions and classes inside
    it bind their own names); walked once per scope, when a rank test there names a variable."""
    by_scope = parsed.derived.setdefault("assignments", {})
    cached = by_scope.get(id(scope))
    if cached is not None:
        return cached
    assigned: dict[str, list[ast.expr]] = {}
    stack: list[ast.AST] = [scope]
    while stack:
        current = stack.pop()
        for child in ast.iter_child_nodes(current):
            targets = child.targets if isinstance(child, ast.Assign) else []
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                assigned.setdefault(targets[0].id, []).append(child.value)  # type: ignore[attr-defined]
            if not isinstance(child, _SCOPES):
                stack.append(child)
    by_scope[id(scope)] = assigned
    return assigned


def _scope_of(node: ast.AST, parents: _Parents) -> ast.AST:
    current = parents.of(node)
    while current is not None and not isinstance(current, _SCOPES):
        current = parents.of(current)
    return current if current is not None else node


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1 and not isinstance(node.value, bool)


def _alias(name: str, at: ast.AST, parsed: ParsedSource, parents: _Parents) -> Optional[ast.expr]:
    """The one value ``name`` is bound to in the innermost scope around ``at`` that binds it (as
    Python looks a name up: the function, the functions around it, the module), if only one."""
    scope = _scope_of(at, parents)
    while True:
        values = _assignments(parsed, scope).get(name, [])
        if len(values) == 1:
            return values[0]
        if values or scope is parsed.tree:
            return None
        outer = _scope_of(scope, parents)
        while isinstance(outer, ast.ClassDef):  # a class body is not a scope its methods see
            outer = _scope_of(outer, parents)
        if outer is scope:
            return None  # not inside this tree
        scope = outer


def _is_rank(node: ast.expr, parsed: ParsedSource, parents: _Parents, depth: int = 0) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in RANK_ATTRIBUTES
    if isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr in RANK_CALLS and not node.args
    if isinstance(node, ast.Name) and depth < 3:
        value = _alias(node.id, node, parsed, parents)
        return value is not None and _is_rank(value, parsed, parents, depth + 1)
    return False


def rank_test(node: ast.expr, parsed: ParsedSource, depth: int = 0) -> Optional[str]:
    """ZERO when the test holds on rank zero only, NONZERO when on every other rank only."""
    parents = _parents(parsed)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = rank_test(node.operand, parsed, depth)
        return _FLIP[inner] if inner else None
    if isinstance(node, ast.BoolOp):
        found = [rank_test(value, parsed, depth) for value in node.values]
        # ``rank == 0 and x``: rank zero only; ``rank != 0 or x``: every other rank.
        wanted = ZERO if isinstance(node.op, ast.And) else NONZERO
        return wanted if wanted in found else None
    if isinstance(node, ast.Attribute) and node.attr in ZERO_FLAGS:
        return ZERO
    if isinstance(node, ast.Name) and depth < 3:
        value = _alias(node.id, node, parsed, parents)
        return rank_test(value, parsed, depth + 1) if value is not None else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if _is_rank(right, parsed, parents):  # ``0 == rank``: read it the other way round
            left, right = right, left
            op = _MIRRORED.get(type(op), op)
        if not _is_rank(left, parsed, parents):
            return None
        if _is_zero(right):
            if isinstance(op, (ast.Eq, ast.LtE)):
                return ZERO
            if isinstance(op, (ast.NotEq, ast.Gt)):
                return NONZERO
        if _is_one(right):
            if isinstance(op, ast.Lt):
                return ZERO
            if isinstance(op, ast.GtE):
                return NONZERO
    return None


def _is_rank_zero_only(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "rank_zero_only"


def _early_exit_before(
    statement: ast.stmt, block: list[ast.stmt], parsed: ParsedSource
) -> Optional[ast.expr]:
    """``if <every other rank>: return`` (or continue/break) earlier in the same block."""
    for earlier in block:
        if earlier is statement:
            return None
        if (
            isinstance(earlier, ast.If)
            and earlier.body
            and isinstance(earlier.body[-1], _EXITS)
            and not earlier.orelse
            and rank_test(earlier.test, parsed) == NONZERO
        ):
            return earlier.test
    return None


def rank_zero_only(parsed: ParsedSource, node: ast.AST) -> Optional[RankZeroOnly]:
    """Why ``node`` runs on rank zero only within its function (None: on every rank, as far as seen)."""
    has_rank_words = parsed.derived.get("rank_words")
    if has_rank_words is None:
        has_rank_words = parsed.derived["rank_words"] = any(word in parsed.text for word in _RANK_WORDS)
    if not has_rank_words:
        return None  # no rank test in the file: no tree walk on every keystroke
    # Asked once per call and per strategy the Fabric may have: the answer depends on the tree only.
    known: dict[int, Optional[RankZeroOnly]] = parsed.derived.setdefault("rank_zero_only", {})
    if id(node) not in known:
        known[id(node)] = _rank_zero_only(parsed, node)
    return known[id(node)]


def _rank_zero_only(parsed: ParsedSource, node: ast.AST) -> Optional[RankZeroOnly]:
    parents = _parents(parsed)
    child: ast.AST = node
    parent = parents.of(child)
    while parent is not None:
        if isinstance(parent, ast.If) and child is not parent.test:
            test = rank_test(parent.test, parsed)
            in_body = child in parent.body
            if test == (ZERO if in_body else NONZERO):
                other = parent.orelse if in_body else parent.body
                branch = parent if in_body else None
                return RankZeroOnly(parsed, parent.test, "branch", branch, tuple(other), not in_body)
        if isinstance(parent, ast.IfExp) and child is not parent.test:
            test = rank_test(parent.test, parsed)
            if test == (ZERO if child is parent.body else NONZERO):
                return RankZeroOnly(parsed, parent.test, "branch", in_else=child is not parent.body)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                exit_test = _early_exit_before(child, block, parsed)  # type: ignore[arg-type]
                if exit_test is not None:
                    return RankZeroOnly(parsed, exit_test, "early-exit")
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in parent.decorator_list:
                if _is_rank_zero_only(decorator):
                    return RankZeroOnly(parsed, decorator, "decorator")
            return None
        if isinstance(parent, (ast.Lambda, ast.ClassDef, ast.Module)):
            return None
        child, parent = parent, parents.of(parent)
    return None


def other_side_calls(found: RankZeroOnly, names: frozenset[str]) -> bool:
    """The other ranks' side of the branch calls one of ``names`` too (the ranks stay in step)."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
        for statement in found.other_side
        for node in ast.walk(statement)
    )


def other_ranks_call_beside(found: RankZeroOnly, names: frozenset[str]) -> bool:
    """Another ``if`` of the same block gives the other ranks their own call of one of ``names``
    ("main process first": ``if not fabric.is_global_zero: fabric.barrier()``, then rank zero's
    ``if fabric.is_global_zero: fabric.barrier()`` after its work): each rank calls it once."""
    if found.kind != "branch":
        return False
    parents = _parents(found.parsed)
    branch = parents.of(found.reason)
    holder = parents.of(branch) if branch is not None else None
    if not isinstance(branch, ast.If) or holder is None:
        return False
    for field in ("body", "orelse", "finalbody"):
        block = getattr(holder, field, None)
        if not isinstance(block, list) or branch not in block:
            continue
        for statement in block:
            if statement is branch or not isinstance(statement, ast.If):
                continue
            test = rank_test(statement.test, found.parsed)
            other_side = statement.body if test == NONZERO else statement.orelse if test == ZERO else []
            if any(
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in names
                for part in other_side
                for node in ast.walk(part)
            ):
                return True
    return False
