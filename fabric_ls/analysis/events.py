"""What the interpreter hands to the rules: one Fabric API call, as it happens."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Optional

from fabric_ls.analysis.resolve_strategy import ResolvedStrategy
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.trail import new_uid
from fabric_ls.analysis.values import Value


@dataclass(frozen=True)
class PerPath:
    """A plain field of a Fabric's state (``launched``, ``models_setup``) that the paths joined at a
    branch left different: its value under each guard (disjoint guards). A rule never sees one:
    a call is checked once per value, under that value's guard."""

    options: tuple[tuple[int, Any], ...]


# The plain fields of FabricState that may hold a PerPath.
PER_PATH_FIELDS = ("launched", "launch_count", "models_setup")


@dataclass
class FabricState:
    """One Fabric object in one run: its strategy and what has been done to it."""

    path: str
    node: ast.Call
    strategy: ResolvedStrategy
    provenance: tuple[Any, ...] = ()
    launched: bool = False
    launch_count: int = 0
    models_setup: int = 0
    # The object went through code we cannot read (a library call, an entry point's
    # caller): it may have been launched or set models up there.
    escaped: bool = False
    # Where the Fabric(...) statement and the strategy object's call are, for fixes.
    place: Optional["StatementPlace"] = None
    parsed: Optional[ParsedSource] = None
    strategy_call: Optional[ast.Call] = None
    strategy_path: str = ""
    uid: int = field(default_factory=new_uid)
    # Where the object exists (a guard, fabric_ls.analysis.guards): a Fabric made on one side of a branch.
    existence_guard: int = 1


@dataclass
class StatementPlace:
    """Where a statement sits: its block (a list of statements) and index, for fixes."""

    statement: ast.stmt
    block: list[ast.stmt]
    index: int


@dataclass
class CallEvent:
    """A call on a Fabric object (or ``loss.backward()`` on a model output)."""

    method: str
    node: ast.Call
    parsed: ParsedSource
    fabric: FabricState
    args: list[Value]
    keywords: dict[str, Value]
    place: Optional[StatementPlace]
    # Source text that names the Fabric object here (``fabric``, ``self.fabric``).
    fabric_text: str = "fabric"
    # The innermost call in the analysed script on the way here (for calls in other files).
    via: Optional[ast.AST] = None
    # Every call being evaluated on the way here, outermost first, this call last: the helper
    # calls a rule may look around (FAB033: a helper called under ``if fabric.global_rank == 0``).
    callers: tuple[tuple[ParsedSource, ast.Call], ...] = ()

    @property
    def strategy(self) -> ResolvedStrategy:
        return self.fabric.strategy


@dataclass
class Violation:
    """A rule's verdict on one event: where, the message arguments, and the fix plan."""

    node: ast.AST
    args: dict[str, Any] = field(default_factory=dict)
    fix: Any = None  # fabric_ls.model.Fix, built by the rule from fabric_ls.fixes helpers
