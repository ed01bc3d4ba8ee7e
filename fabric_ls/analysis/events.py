"""What the interpreter hands to the rules: one Fabric API call, as it happens."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from fabric_ls.analysis.guards import TRUE
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


@dataclass(frozen=True)
class StrategyOption:
    """One strategy a ``Fabric(...)`` may resolve to, with where it came from."""

    strategy: ResolvedStrategy
    provenance: tuple[Any, ...] = ()
    strategy_call: Optional[ast.Call] = None
    strategy_path: str = ""


class _SeveralStrategies:
    """The ``strategy`` of a Fabric that has several (``FabricState.options``): read one option."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a Fabric with several strategies has no single `{name}`: read its options")

    def __repr__(self) -> str:
        return "SEVERAL_STRATEGIES"


SEVERAL_STRATEGIES: Any = _SeveralStrategies()


@dataclass
class FabricState:
    """One Fabric object in one run: its strategy and what has been done to it.

    A ``Fabric(...)`` whose arguments take several values (``--strategy`` is 'ddp' or 'fsdp') is
    one object with several strategies: ``options`` holds each under its guard, and ``strategy``,
    ``provenance``, ``strategy_call`` and ``strategy_path`` are only read from an option. The
    interpreter reads them per option (a value per strategy, or a split where it needs one), and
    a rule sees one option at a time (``with_option``). One object rather than one per strategy:
    everything built from it (set-up models, their outputs) is built once.
    """

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
    # The strategies it may have, each under its guard, when it has several (see above).
    options: tuple[tuple[int, StrategyOption], ...] = ()
    # with_option's copies, by option and per-path values (they never change once made).
    _copies: dict[tuple[Any, ...], "FabricState"] = field(default_factory=dict, compare=False, repr=False)
    _option_guards: Optional[tuple[int, ...]] = field(default=None, compare=False, repr=False)
    # (option index, strategy fields a rule read) → their values (fabric_ls.analysis.verdicts).
    _option_keys: dict[tuple[int, tuple[str, ...]], tuple[Any, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def strategy_options(self) -> tuple[tuple[int, StrategyOption], ...]:
        """Every strategy it may have, each under its guard (one, under TRUE, for most Fabrics)."""
        if self.options:
            return self.options
        return (
            (TRUE, StrategyOption(self.strategy, self.provenance, self.strategy_call, self.strategy_path)),
        )

    def feasible_options(self, guards: Any, path_guard: int) -> tuple[int, ...]:
        """The indices of the strategies the path allows (``guards``: the analysis' Guards)."""
        if self._option_guards is None:
            self._option_guards = tuple(guard for guard, _ in self.options)
        return guards.feasible_options(path_guard, self._option_guards)  # type: ignore[no-any-return]

    def with_option(self, index: int) -> "FabricState":
        """This Fabric as it is now, with its ``index``-th strategy: what a rule reads."""
        key = (index, self.launched, self.launch_count, self.models_setup, self.escaped, self.existence_guard)
        found = self._copies.get(key)
        if found is None:
            option = self.options[index][1]
            found = copy.copy(self)
            found.strategy, found.provenance = option.strategy, option.provenance
            found.strategy_call, found.strategy_path = option.strategy_call, option.strategy_path
            found.options, found._copies, found._option_guards, found._option_keys = (), {}, None, {}
            self._copies[key] = found
        return found


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
    # Made inside a ``try`` whose handler catches what Lightning raises (``except RuntimeError``,
    # ``except Exception``): after an error here the calls that follow still run.
    caught: bool = False

    @property
    def strategy(self) -> ResolvedStrategy:
        return self.fabric.strategy


@dataclass
class Violation:
    """A rule's verdict on one event: where, the message arguments, and the fix plan."""

    node: ast.AST
    args: dict[str, Any] = field(default_factory=dict)
    fix: Any = None  # fabric_ls.model.Fix, built by the rule from fabric_ls.fixes helpers
