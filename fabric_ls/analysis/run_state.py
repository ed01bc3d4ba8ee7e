"""The state one run of the evaluator shares between its parts, declared once.

``Run`` (fabric_ls.analysis.run) is assembled from mixins, one per concern (statements,
conditions, expressions, calls, library, fabric_calls, fabric_strategies); each reads the run's
state and calls the others' methods through ``self``. ``RunState`` is their common base: the
attributes ``Run.__init__`` sets, with their types, and, for the type checker only, the methods
one part calls on another. It holds no behaviour.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from fabric_ls.analysis.events import CallEvent, FabricState, StatementPlace
    from fabric_ls.analysis.exits import Handlers
    from fabric_ls.analysis.guards import Guards
    from fabric_ls.analysis.join import PendingReturn
    from fabric_ls.analysis.project import Project
    from fabric_ls.analysis.resolve_strategy import ResolvedStrategy
    from fabric_ls.analysis.source import ParsedSource
    from fabric_ls.analysis.state import (
        Checker,
        Decisions,
        ExitPoint,
        Frame,
        ModuleEnv,
        Observed,
        SharedAcrossRuns,
    )
    from fabric_ls.analysis.trail import Trail
    from fabric_ls.analysis.values import (
        ArgParser,
        Choice,
        ConfigStore,
        Const,
        ContextValue,
        FabricObj,
        FilePath,
        FunctionRef,
        Mapping,
        Namespace,
        Partial,
        Subcommands,
        Value,
    )


class RunState:
    """What every part of ``Run`` reads and writes (set in ``Run.__init__``)."""

    project: Project
    main: ParsedSource
    decisions: Decisions
    check: Checker
    reporting: bool
    guards: Guards
    # The combinations of decisions this point of the run is reached under.
    guard: int
    trail: Trail
    try_depth: int
    try_handlers: list[Handlers]
    exit_class: Optional[str]
    catching_fabric_errors: int
    hydra_config_dir: Optional[str]
    config_store: ConfigStore
    splittable: int
    script_call: Optional[ast.Call]
    call_node: Optional[ast.Call]
    call_stack: list[tuple[ParsedSource, ast.Call]]
    fabric_free_depth: int
    loop_exits: list[list[PendingReturn]]
    try_exits: list[Optional[list[PendingReturn]]]
    observed: list[Observed]
    fabric_records: list[tuple[FabricState, int]]
    exit_guards: list[ExitPoint]
    assumed_strategy: Optional[str]
    force_strategy: bool
    exited: bool
    steps: int
    depth: int
    active_calls: dict[int, int]
    calls_too_deep: bool
    modules: dict[str, ModuleEnv]
    shared: SharedAcrossRuns
    helper_modules: dict[str, ModuleEnv]
    executed_functions: set[int]
    dependencies: set[str]
    places: list[StatementPlace]
    contexts: list[ContextValue]
    eval_depth: int
    _relevance: dict[int, bool]
    _function_relevant: dict[int, bool]
    main_env: ModuleEnv

    if TYPE_CHECKING:
        # Methods one part of the run calls on another (defined in the module named above each).
        # calls.py
        def _call_function(
            self,
            function: FunctionRef,
            args: list[Value],
            keywords: dict[str, Value],
            opaque: bool = False,
            entry: bool = False,
        ) -> Value: ...
        # parameters.py
        def _bind_params(
            self,
            node: ast.AST,
            frame: Frame,
            args: list[Value],
            keywords: dict[str, Value],
            opaque: bool,
            entry: bool,
        ) -> None: ...
        # calls.py
        def _call_partial(
            self, callee: Partial, args: list[Value], keywords: dict[str, Value], opaque: bool = False
        ) -> Value: ...
        # calls.py
        def _eval_args(self, node: ast.Call, frame: Frame) -> tuple[list[Value], dict[str, Value], bool]: ...
        # calls.py
        def _generic_result(
            self,
            node: ast.Call,
            frame: Frame,
            args: list[Value],
            keywords: dict[str, Value],
            name: str = "",
            escapes: bool = True,
        ) -> Value: ...
        # conditions.py
        def _combinations(
            self,
            values: dict[Any, Value],
            expand: Optional[Callable[[Any, Value, int], list[tuple[int, Value]]]] = None,
            limit: Optional[int] = None,
        ) -> list[tuple[int, dict[Any, Value]]]: ...
        # conditions.py
        def _compute_relevance(
            self, node: ast.AST, frame: Frame, seen: set[int], returns_count: bool = True
        ) -> bool: ...
        # conditions.py
        def _concrete(self, value: Value) -> Value: ...
        # conditions.py
        def _option_guards(self, choice: Choice) -> list[int]: ...
        # conditions.py
        def _fork(self, key: str, option_guards: list[int], whole_run: bool = False) -> int: ...
        # conditions.py
        def _leaves(self, value: Value, guard: int, depth: int) -> list[tuple[int, Value]]: ...
        # conditions.py
        def _options_under(self, value: Value, guard: int) -> list[tuple[int, Value]]: ...
        # conditions.py
        def _relevant(self, node: ast.AST, frame: Frame) -> bool: ...
        # conditions.py
        def _split(self, value: Value, node: ast.AST, frame: Frame, relevant: bool = True) -> Any: ...
        # conditions.py
        def _truth(self, value: Value, node: ast.AST, frame: Frame, fork: bool = True) -> Optional[bool]: ...
        # config_files.py
        def _config_file_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value: ...
        # config_files.py
        def _file_method(
            self, file: FilePath, attr: str, node: ast.Call, frame: Frame
        ) -> Optional[Value]: ...
        # expressions.py
        def _attribute(self, owner: Value, attr: str, node: ast.AST, frame: Frame) -> Value: ...
        # expressions.py
        def _eval(self, node: Optional[ast.AST], frame: Frame) -> Value: ...
        # expressions.py
        def _lift(self, choice: Choice, function: Callable[[Value], Value]) -> Choice: ...
        # expressions.py
        def _parsed_value(self, namespace: Namespace, attr: str, text: str) -> Value: ...
        # expressions.py
        def _table_lookup(self, table: Mapping, key: Value, missing: Value) -> Optional[Value]: ...
        # fabric_calls.py
        def _dispatch_fabric_call(
            self,
            receiver: Choice,
            variants: list[tuple[int, FabricObj]],
            method: str,
            node: ast.Call,
            frame: Frame,
        ) -> Value: ...
        # fabric_calls.py
        def _emit(
            self,
            fabric: FabricObj,
            method: str,
            node: ast.Call,
            frame: Frame,
            args: list[Value],
            keywords: dict[str, Value],
        ) -> CallEvent: ...
        # fabric_calls.py
        def _fabric_call(
            self,
            fabric: FabricObj,
            method: str,
            node: ast.Call,
            frame: Frame,
            evaluated: Optional[tuple[list[Value], dict[str, Value]]] = None,
            run_target: bool = True,
        ) -> Value: ...
        # fabric_calls.py
        def _fabric_variants(self, receiver: Choice) -> Optional[list[tuple[int, FabricObj]]]: ...
        # fabric_strategies.py
        def _make_fabric(
            self,
            node: ast.Call,
            frame: Frame,
            user_class: Optional[str] = None,
            qualname: str = "lightning.fabric.Fabric",
        ) -> Value: ...
        # strings.py
        def _combined(self, parts: list[Value], build: Callable[[list[Any]], Any], text: str) -> Value: ...
        # strings.py
        def _string_method(
            self, receiver: Const, attr: str, args: list[Value], keywords: dict[str, Value], text: str
        ) -> Optional[Value]: ...
        # fabric_strategies.py
        def _fabric_from_arguments(
            self,
            args: list[Value],
            keywords: dict[str, Value],
            opaque: bool,
            node: ast.Call,
            frame: Frame,
            user_class: Optional[str] = None,
            qualname: str = "lightning.fabric.Fabric",
        ) -> Value: ...
        # fabric_strategies.py
        def _one_strategy(
            self, state: FabricState, answer: Callable[[ResolvedStrategy], Any]
        ) -> ResolvedStrategy: ...
        # fabric_strategies.py
        def _per_strategy(self, state: FabricState, read: Callable[[ResolvedStrategy], Value]) -> Value: ...
        # fabric_strategies.py
        def _strategy_object(
            self,
            qualname: str,
            keywords: dict[str, Value],
            node: ast.Call,
            frame: Frame,
            user_class: Optional[str] = None,
        ) -> Value: ...
        # fabric_strategies.py
        def _build_fabric(
            self,
            given: dict[str, Value],
            args: list[Value],
            keywords: dict[str, Value],
            opaque: bool,
            node: ast.Call,
            frame: Frame,
            qualname: str,
        ) -> Value: ...
        # fabric_strategies.py
        def _refuse_unknown_arguments(self, args: list[Value], keywords: dict[str, Value]) -> None: ...
        # hydra_calls.py
        def _hydra_call(self, qualname: str, node: ast.Call, frame: Frame) -> Optional[Value]: ...
        # hydra_calls.py
        def _config_store_call(self, attr: str, node: ast.Call, frame: Frame) -> Value: ...
        # hydra_calls.py
        def _hydra_main_config(self, decorator: ast.Call, module_frame: Frame) -> Value: ...
        # library.py
        def _argparse_call(self, parser: ArgParser, attr: str, node: ast.Call, frame: Frame) -> Value: ...
        # library.py
        def _command_line_options(self, function: ast.AST, module_frame: Frame) -> dict[str, Value]: ...
        # library.py
        def _subcommand_call(
            self, subcommands: Subcommands, attr: str, node: ast.Call, frame: Frame
        ) -> Value: ...
        # library.py
        def _external_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value: ...
        # run.py
        def _module_env(self, path: str) -> Optional[ModuleEnv]: ...
        # statements.py
        def _assign(self, target: ast.AST, value: Value, frame: Frame, statement: ast.AST) -> None: ...
        # statements.py
        def _tick(self) -> None: ...
