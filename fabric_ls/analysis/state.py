"""What a run carries: its frames and modules, the decisions it took, its limits, the known API names."""

from __future__ import annotations

import ast
import builtins
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from fabric_ls.analysis.dead_code import dead_statements
from fabric_ls.analysis.events import CallEvent
from fabric_ls.analysis.join import (
    PendingReturn,
)
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.trail import Trail, new_uid
from fabric_ls.analysis.values import (
    Const,
    Value,
)

FABRIC_CLASSES = frozenset(
    {
        "lightning.Fabric",
        "lightning.fabric.Fabric",
        "lightning.fabric.fabric.Fabric",
        "lightning_fabric.Fabric",
        "lightning_fabric.fabric.Fabric",
    }
)
# ``Fabric.__init__``'s parameters (all keyword-only, lightning 2.6.6 fabric.py), those that decide the
# strategy first.
STRATEGY_ARGUMENTS = ("accelerator", "strategy", "devices", "num_nodes", "precision")
FABRIC_PARAMETERS = frozenset({*STRATEGY_ARGUMENTS, "plugins", "callbacks", "loggers"})
# Calls that pass parameters through rather than consume them.
PARAMS_PASSTHROUGH = frozenset({"list", "tuple", "filter", "iter", "sorted", "chain", "itertools.chain"})

MAX_STEPS = 40_000
# Calls nested this deep are followed (a class-based trainer is often 10-15 deep); past it the call is
# an unknown value, and the analysis says some paths were not checked.
MAX_DEPTH = 32
# A function calling itself (directly or not) is followed this deep, then its result is unknown.
MAX_RECURSION_DEPTH = 10
MAX_DECISIONS = 14
MAX_EXPRESSION_DEPTH = 150
# Nodes of the guard table (fabric_ls.analysis.guards) of one analysis: conditions past this are not followed.
MAX_GUARD_NODES = 200_000


@dataclass
class Decision:
    key: str
    index: int
    count: int


class Decisions:
    """Which way each fork goes in this run: replayed from ``prefix``, then the first option."""

    # Whether choices made here narrow the run's guard (not in _NoForks).
    narrows = True

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.taken: list[Decision] = []
        # Past MAX_DECISIONS the other options are not explored: the analysis is incomplete.
        self.truncated = False

    def choose(self, key: str, count: int) -> int:
        position = len(self.taken)
        if position >= MAX_DECISIONS:
            self.truncated = True
            self.taken.append(Decision(key, 0, 1))
            return 0
        index = self.prefix[position] if position < len(self.prefix) else 0
        index = min(index, count - 1)
        self.taken.append(Decision(key, index, count))
        return index


class ModuleEnv:
    """One module's globals in one run."""

    def __init__(self, parsed: ParsedSource, is_main: bool) -> None:
        self.parsed = parsed
        self.path = parsed.path
        self.is_main = is_main
        name = "__main__" if is_main else os.path.splitext(os.path.basename(parsed.path))[0]
        self.globals: dict[str, Value] = {"__name__": Const(name), "__file__": Const(parsed.path)}
        self.executed = False
        self.imports: dict[str, str] = {}
        self.uid = new_uid()
        # The statements the evaluator skips (fabric_ls.analysis.dead_code), by id: the analysed script's
        # (a helper module runs as it is; an edit of the script is what may be answered without a run).
        self.dead = dead_statements(parsed) if is_main else frozenset()


@dataclass
class SharedAcrossRuns:
    """What does not depend on the path, computed once for all runs of one analysis."""

    # Helper modules' top levels (run once, without forks).
    helper_modules: dict[str, ModuleEnv] = field(default_factory=dict)
    # Whether a statement / function can touch anything Fabric-related, by node id.
    statement_relevance: dict[int, bool] = field(default_factory=dict)
    function_relevance: dict[int, bool] = field(default_factory=dict)
    # Fabric(...) arguments → the strategy Lightning builds (it may read a DeepSpeed config file:
    # once per analysis, so every run reads the same).
    resolved: dict[Any, Any] = field(default_factory=dict)
    # Hydra compositions by (config folder, name, fixed overrides): the files are read once.
    hydra_compositions: dict[Any, Any] = field(default_factory=dict)


class Frame:
    def __init__(
        self, module: ModuleEnv, function: Optional[ast.AST] = None, trail: Optional[Trail] = None
    ) -> None:
        self.module = module
        self.function = function
        self.locals: Optional[dict[str, Value]] = {} if function is not None else None
        self.trail = trail
        self.uid = new_uid()
        self.pending_returns: list[PendingReturn] = []
        # The names the function makes local (fabric_ls.analysis.scopes), once they are asked for.
        self.local_names: Optional[frozenset[str]] = None
        # The frame of the function this one was defined in (a closure reads its names).
        self.enclosing: Optional["Frame"] = None

    def lookup(self, name: str) -> Optional[Value]:
        if self.locals is not None and name in self.locals:
            return self.locals[name]
        if self.enclosing is not None:
            return self.enclosing.lookup(name)
        return self.module.globals.get(name)

    def bind(self, name: str, value: Value) -> None:
        if self.trail is None:
            if self.locals is not None:
                self.locals[name] = value
            else:
                self.module.globals[name] = value
        elif self.locals is not None:
            self.trail.set_item(self.locals, name, value, self)
        else:
            self.trail.set_item(self.module.globals, name, value, self.module)


# A rule check on one call: (rule, violation) or None.
Checker = Callable[[CallEvent], Optional[tuple[str, Any]]]


@dataclass
class Observed:
    """A Fabric call seen by a run, the guard it happens under and what the rules said."""

    event: CallEvent
    guard: int
    verdict: Optional[tuple[str, Any]]
    # The run's step count when it was seen: what the run did before it, in the program's order.
    at: int = 0


# Where the script ended by itself (its own ``raise``/``sys.exit``): the paths, and the run's step
# count there.
ExitPoint = tuple[int, int]


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}

_BUILTINS = frozenset(dir(builtins))

_TENSOR_RETURNING = frozenset({"forward", "generate", "__call__", "training_step", "validation_step"})


class _NoForks(Decisions):
    """Every undecided choice takes its first option, and the guard stays as it was."""

    narrows = False

    def __init__(self) -> None:
        super().__init__([])

    def choose(self, key: str, count: int) -> int:
        return 0
