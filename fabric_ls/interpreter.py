"""Walk a script the way Python would, with abstract values, and report Fabric calls.

One *run* executes the program once. Where the path depends on something the
source does not fix (an ``if`` on a CLI flag, on ``torch.cuda.is_available()``),
both sides run on one state (undone between them through ``fabric_ls.trail``) and
are joined where they meet: a name bound differently becomes a ``Merged`` value
whose options carry guards (``fabric_ls.guards``); Fabric calls are recorded with
the guard they happen under. A run forks only where a value must be one thing
(the strategy a ``Fabric(...)`` gets): it asks ``Decisions`` which option to take
and ``explore.py`` runs the others. Loops run their body once.
"""

from __future__ import annotations

import ast
import builtins
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from fabric_ls.events import CallEvent, FabricState, StatementPlace
from fabric_ls.guards import FALSE, TRUE, DecisionInfo, Guards
from fabric_ls.join import Break as _Break
from fabric_ls.join import CannotMerge as _CannotMerge
from fabric_ls.join import Continue as _Continue
from fabric_ls.join import (
    PendingReturn,
    StopRun,
    join_loop_exits,
    join_returns,
    resume_pending_return,
    run_alternatives,
    run_branches,
    same,
)
from fabric_ls.join import Return as _Return
from fabric_ls.join import SplitHere as _SplitHere
from fabric_ls.join import condition_key as _condition_key
from fabric_ls.join import static_truth as _static_truth
from fabric_ls.project import Project, is_external
from fabric_ls.resolve_strategy import FabricConfig, ResolvedStrategy, resolve
from fabric_ls.source import ParsedSource
from fabric_ls.strategies import STRATEGY_CLASSES, is_subclass
from fabric_ls.trail import Trail, new_uid
from fabric_ls.values import (
    UNKNOWN,
    ArgOption,
    ArgParser,
    BoundMethod,
    Choice,
    ClassRef,
    Const,
    ContextValue,
    Evidence,
    External,
    FabricObj,
    FunctionRef,
    Mapping,
    Merged,
    ModelOutput,
    ModuleRef,
    Namespace,
    Obj,
    Params,
    Seq,
    SetupDataLoader,
    SetupModule,
    SetupOptimizer,
    StrategyAttr,
    StrategyObj,
    Unknown,
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
FABRIC_METHODS = frozenset(
    {
        "setup",
        "setup_module",
        "setup_optimizers",
        "setup_dataloaders",
        "launch",
        "backward",
        "init_module",
        "clip_gradients",
        "no_backward_sync",
        # Collectives and checkpoints check the launch too (FAB009).
        "barrier",
        "broadcast",
        "all_gather",
        "all_reduce",
        "save",
        "load",
    }
)
PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
# Calls that pass parameters through rather than consume them.
PARAMS_PASSTHROUGH = frozenset({"list", "tuple", "filter", "iter", "sorted", "chain", "itertools.chain"})

MAX_STEPS = 40_000
MAX_DEPTH = 10
MAX_DECISIONS = 14
MAX_EXPRESSION_DEPTH = 150
# Nodes of the guard table (fabric_ls.guards) of one analysis: conditions past this are not followed.
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


@dataclass
class SharedAcrossRuns:
    """What does not depend on the path, computed once for all runs of one analysis."""

    # Helper modules' top levels (run once, without forks).
    helper_modules: dict[str, ModuleEnv] = field(default_factory=dict)
    # Whether a statement / function can touch anything Fabric-related, by node id.
    statement_relevance: dict[int, bool] = field(default_factory=dict)
    function_relevance: dict[int, bool] = field(default_factory=dict)
    # Summaries of helpers called with constants that returned constants (no objects:
    # an object must not be shared between runs).
    summaries: dict[tuple, Value] = field(default_factory=dict)


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

    def lookup(self, name: str) -> Optional[Value]:
        if self.locals is not None and name in self.locals:
            return self.locals[name]
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


class Run:
    """One execution of a program; both sides of undecided branches, joined."""

    def __init__(
        self,
        project: Project,
        main: ParsedSource,
        decisions: Decisions,
        check: Checker,
        assumed_strategy: Optional[str] = None,
        force_strategy: bool = False,
        shared: Optional[SharedAcrossRuns] = None,
        guards: Optional[Guards] = None,
    ) -> None:
        self.project = project
        self.main = main
        self.decisions = decisions
        self.check = check
        self.reporting = True
        self.guards = guards if guards is not None else Guards()
        # The combinations of decisions this point of the run is reached under.
        self.guard = TRUE
        self.trail = Trail()
        self.try_depth = 0
        # Statements being executed that can split on a value (see _exec_statement).
        self.splittable = 0
        # The innermost call of the analysed script being evaluated (CallEvent.via).
        self.script_call: Optional[ast.Call] = None
        # The innermost call being evaluated, and how many Fabric-free helpers are running.
        self.call_node: Optional[ast.Call] = None
        self.fabric_free_depth = 0
        # Per loop being run: the sides that left its body early (break/continue), to join.
        self.loop_exits: list[list[PendingReturn]] = []
        # Logs: only grow; both sides of a branch keep what they added.
        self.observed: list[Observed] = []
        self.fabric_records: list[tuple[FabricState, int]] = []
        self.exit_guards: list[int] = []
        self.assumed_strategy = assumed_strategy
        self.force_strategy = force_strategy
        # The run ended at the script's own ``raise``/``sys.exit``: a path the author rules out.
        self.exited = False
        self.steps = 0
        self.depth = 0
        self.modules: dict[str, ModuleEnv] = {}
        self.shared = shared if shared is not None else SharedAcrossRuns()
        self.helper_modules = self.shared.helper_modules
        self.executed_functions: set[int] = set()
        self.dependencies: set[str] = set()
        self.places: list[StatementPlace] = []
        # Context managers in force (``with fabric.init_module()``): dynamic, so helpers
        # called inside the ``with`` build their models under it too.
        self.contexts: list[ContextValue] = []
        self.eval_depth = 0
        self._relevance = self.shared.statement_relevance
        self._function_relevant = self.shared.function_relevance
        self.main_env = ModuleEnv(main, is_main=True)
        self.modules[main.path] = self.main_env

    # ----- entry points -------------------------------------------------------------

    def run_module(self) -> None:
        self._exec_module(self.main_env)

    def define_module(self) -> None:
        """Run the module's top level for its definitions only: no forks, no reports."""
        saved_decisions, saved_reporting = self.decisions, self.reporting
        self.decisions, self.reporting = _NoForks(), False
        try:
            self._exec_module(self.main_env)
        except StopRun:
            pass
        finally:
            self.decisions, self.reporting = saved_decisions, saved_reporting
            self.executed_functions.clear()
            self.exited = False
            self.guard = TRUE
            self.steps = 0

    def run_function(self, function: FunctionRef, fabric: Optional[FabricState]) -> None:
        """Run a function nobody calls (an entry point such as a CLI target)."""
        if not self.main_env.executed:
            self.define_module()
        args: list[Value] = []
        node = function.node
        params = node.args.args if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if function.owner is not None:
            args.append(Obj(None, self.main.path, cls=function.owner))
            params = params[1:]
        if params and _looks_like_fabric_param(params[0]):
            # Nobody in the program calls it: its Fabric comes from outside.
            if fabric is None:
                fabric = self._outside_fabric()
            args.append(FabricObj(fabric))
        self._call_function(function, args, {}, entry=True)

    def _outside_fabric(self) -> FabricState:
        strategy = ResolvedStrategy(
            None, unknown_reason="the Fabric object is passed in from outside the script"
        )
        if self.assumed_strategy:
            assumed = resolve(FabricConfig(strategy_name=self.assumed_strategy, strategy_given=True))
            strategy = ResolvedStrategy(
                **{**assumed.__dict__, "assumed": True, "cli": not self.force_strategy}
            )
        # Whoever passes it in has launched it, or it is single-device: do not guess FAB009.
        return FabricState(self.main.path, None, strategy, launched=True, escaped=True)  # type: ignore[arg-type]

    # ----- modules -----------------------------------------------------------------

    def _exec_module(self, env: ModuleEnv) -> None:
        env.executed = True
        frame = Frame(env, trail=self.trail)
        try:
            self._exec_block(env.parsed.tree.body, frame)
        except (_Return, _Break, _Continue):
            pass

    def _module_env(self, path: str) -> Optional[ModuleEnv]:
        env = self.modules.get(path) or self.helper_modules.get(path)
        if env is not None:
            self.modules[path] = env
            self.dependencies.add(path)
            return env
        parsed = self.project.read(path)
        if parsed is None:
            return None
        self.dependencies.add(path)
        env = ModuleEnv(parsed, is_main=False)
        self.modules[path] = env
        self.helper_modules[path] = env
        # Helper modules run without forking or reporting: their top level defines things
        # (their own findings belong to their own analysis).
        saved, saved_reporting, saved_steps = self.decisions, self.reporting, self.steps
        saved_guard, saved_exited = self.guard, self.exited
        self.decisions, self.reporting = _NoForks(), False
        try:
            self._exec_module(env)
        except StopRun:
            pass
        finally:
            self.decisions, self.reporting, self.steps = saved, saved_reporting, saved_steps
            self.guard, self.exited = saved_guard, saved_exited
        return env

    # ----- statements --------------------------------------------------------------

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS or self.guards.size > MAX_GUARD_NODES:
            raise StopRun()

    def _exec_block(self, body: list[ast.stmt], frame: Frame) -> None:
        for index, statement in enumerate(body):
            self._tick()
            self.places.append(StatementPlace(statement, body, index))
            try:
                self._exec_statement(statement, frame)
            finally:
                self.places.pop()

    def _exec_statement(self, statement: ast.stmt, frame: Frame) -> None:
        """Execute one statement; where it needs one option of several, once per option, joined."""
        trail = self.trail
        mark = trail.mark()
        start_guard = self.guard
        self.splittable += 1
        try:
            self._exec(statement, frame)
            return
        except _SplitHere as split:
            trail.undo(mark)
            self.guard = start_guard
            key, options = split.key, split.guards
        finally:
            self.splittable -= 1
            trail.release(mark)
        guards, start = self.guards, self.guard
        first = guards.and_(start, options[0])
        rest = guards.and_(start, guards.any_of(options[1:]))
        try:
            run_branches(
                self,
                frame,
                first,
                lambda: self._exec_statement(statement, frame),
                rest,
                lambda: self._exec_statement(statement, frame),
            )
        except _CannotMerge:
            # The sides cannot be one state: fork the run here (the other options are new runs).
            self._fork(key, options, whole_run=True)
            self._exec_statement(statement, frame)

    def _exec(self, node: ast.stmt, frame: Frame) -> None:
        handler = getattr(self, "_stmt_" + type(node).__name__, None)
        if handler is not None:
            handler(node, frame)
        elif isinstance(node, ast.Expr):
            self._eval(node.value, frame)

    def _stmt_Expr(self, node: ast.Expr, frame: Frame) -> None:
        self._eval(node.value, frame)

    def _stmt_Assign(self, node: ast.Assign, frame: Frame) -> None:
        value = self._eval(node.value, frame)
        for target in node.targets:
            self._assign(target, value, frame, node)

    def _stmt_AnnAssign(self, node: ast.AnnAssign, frame: Frame) -> None:
        if node.value is not None:
            self._assign(node.target, self._eval(node.value, frame), frame, node)

    def _stmt_AugAssign(self, node: ast.AugAssign, frame: Frame) -> None:
        current = self._eval(node.target, frame) if isinstance(node.target, ast.Name) else UNKNOWN
        right = self._eval(node.value, frame)
        self._assign(node.target, _binop(node.op, current, right), frame, node)

    def _stmt_FunctionDef(self, node: ast.FunctionDef, frame: Frame) -> None:
        frame.bind(node.name, FunctionRef(node, frame.module))

    _stmt_AsyncFunctionDef = _stmt_FunctionDef

    def _stmt_ClassDef(self, node: ast.ClassDef, frame: Frame) -> None:
        bases = [self._eval(base, frame) for base in node.bases]
        frame.bind(node.name, ClassRef(node, frame.module, bases))

    def _stmt_Import(self, node: ast.Import, frame: Frame) -> None:
        for alias in node.names:
            if alias.asname:
                frame.bind(alias.asname, self._import_module(alias.name, frame, 0))
            else:
                head = alias.name.split(".")[0]
                frame.bind(head, self._import_module(head, frame, 0))

    def _stmt_ImportFrom(self, node: ast.ImportFrom, frame: Frame) -> None:
        module_name = node.module or ""
        level = node.level or 0
        target: Optional[ModuleEnv] = None
        if level or not is_external(module_name):
            path = self.project.find_module(module_name, frame.module.path, level)
            if path is not None:
                target = self._module_env(path)
        for alias in node.names:
            if alias.name == "*":
                if target is not None:
                    for name, exported in target.globals.items():
                        if not name.startswith("_"):
                            frame.bind(name, exported)
                continue
            local = alias.asname or alias.name
            if target is not None:
                value: Optional[Value] = target.globals.get(alias.name)
                if value is None:
                    # ``from package import submodule``
                    sub = self.project.find_module(
                        f"{module_name}.{alias.name}" if module_name else alias.name, frame.module.path, level
                    )
                    env = self._module_env(sub) if sub else None
                    value = ModuleRef(env) if env is not None else Unknown(text=alias.name)
                frame.bind(local, value)
            elif level == 0:
                frame.bind(local, External(f"{module_name}.{alias.name}"))
            else:
                frame.bind(local, Unknown(text=alias.name))

    def _import_module(self, dotted: str, frame: Frame, level: int) -> Value:
        if is_external(dotted):
            return External(dotted)
        path = self.project.find_module(dotted, frame.module.path, level)
        if path is not None:
            env = self._module_env(path)
            if env is not None:
                return ModuleRef(env)
        return External(dotted)

    def _stmt_Return(self, node: ast.Return, frame: Frame) -> None:
        raise _Return(self._eval(node.value, frame) if node.value is not None else Const(None))

    def _stmt_Raise(self, node: ast.Raise, frame: Frame) -> None:
        self.exited = True
        raise StopRun()

    def _stmt_Break(self, node: ast.Break, frame: Frame) -> None:
        raise _Break()

    def _stmt_Continue(self, node: ast.Continue, frame: Frame) -> None:
        raise _Continue()

    def _stmt_If(self, node: ast.If, frame: Frame) -> None:
        test = self._eval(node.test, frame)
        split = self._split(test, node.test, frame, relevant=self._relevant(node, frame))
        if split is None:
            return
        if isinstance(split, bool):
            self._exec_block(node.body if split else node.orelse, frame)
            return
        then_guard, else_guard = split
        if not self.decisions.narrows:
            # Definitions only (a helper module's top level): the first side, as Python's own
            # ``if sys.version_info >= ...`` usually picks; no decision is recorded.
            self._exec_block(node.body, frame)
            return
        if then_guard == FALSE or else_guard == FALSE:
            self._exec_block(node.body if else_guard == FALSE else node.orelse, frame)
            return
        try:
            run_branches(
                self,
                frame,
                then_guard,
                lambda: self._exec_block(node.body, frame),
                else_guard,
                lambda: self._exec_block(node.orelse, frame),
            )
        except _CannotMerge:
            index = self._fork(_condition_key(node.test, frame), [then_guard, else_guard], whole_run=True)
            self._exec_block(node.body if index == 0 else node.orelse, frame)

    def _loop_body(self, node: ast.stmt, body: list[ast.stmt], frame: Frame) -> None:
        if not self._relevant(node, frame):
            return
        # A ``break``/``continue`` on one side of a branch ends the body there; joined at its end.
        self.loop_exits.append([])
        try:
            self._exec_block(body, frame)
        except (_Break, _Continue):
            pass
        finally:
            exits = self.loop_exits.pop()
        if exits:
            join_loop_exits(self, exits)

    def _stmt_For(self, node: ast.For, frame: Frame) -> None:
        iterable = self._eval(node.iter, frame)
        self._assign(node.target, _first_item(iterable), frame, node)
        self._loop_body(node, node.body, frame)
        self._exec_block(node.orelse, frame)

    _stmt_AsyncFor = _stmt_For

    def _stmt_While(self, node: ast.While, frame: Frame) -> None:
        test = self._eval(node.test, frame)
        if isinstance(test, Const) and not test.value:
            self._exec_block(node.orelse, frame)
            return
        self._loop_body(node, node.body, frame)

    def _stmt_With(self, node: ast.With, frame: Frame) -> None:
        pushed = 0
        for item in node.items:
            value = self._eval(item.context_expr, frame)
            if isinstance(value, Choice):
                value = self._concrete(value)
            if isinstance(value, ContextValue):
                self.contexts.append(value)
                pushed += 1
            if item.optional_vars is not None:
                self._assign(item.optional_vars, UNKNOWN, frame, node)
        try:
            self._exec_block(node.body, frame)
        finally:
            for _ in range(pushed):
                self.contexts.pop()

    _stmt_AsyncWith = _stmt_With

    def _stmt_Try(self, node: ast.Try, frame: Frame) -> None:
        self.try_depth += 1
        completed = False
        try:
            self._exec_block(node.body, frame)
            completed = True
        except StopRun:
            if self.steps > MAX_STEPS:
                raise
            # A raise inside ``try`` lands in a handler; we assume it is handled.
            self.exited = False
        finally:
            self.try_depth -= 1
        if completed:
            self._exec_block(node.orelse, frame)
        self._exec_block(node.finalbody, frame)

    _stmt_TryStar = _stmt_Try

    def _stmt_Global(self, node: ast.Global, frame: Frame) -> None:
        pass

    def _stmt_Match(self, node: Any, frame: Frame) -> None:
        if node.cases and self._relevant(node, frame):
            self._exec_block(node.cases[0].body, frame)

    # ----- assignment --------------------------------------------------------------

    def _assign(self, target: ast.AST, value: Value, frame: Frame, statement: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Const) and isinstance(value.value, str):
                origin = Evidence(frame.module.parsed, statement, f"`{target.id}` set here")
                value = Const(value.value, value.origins + (origin,))
            elif isinstance(value, StrategyObj):
                origin = Evidence(frame.module.parsed, statement, f"`{target.id}` set here")
                value = StrategyObj(
                    value.class_name,
                    value.user_class,
                    value.options,
                    value.package,
                    value.origins + (origin,),
                    value.node,
                    value.path,
                )
            elif isinstance(value, Obj) and not value.name:
                value.name = target.id
            frame.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = _unpack(value, len(target.elts))
            for element, item in zip(target.elts, items):
                if isinstance(element, ast.Starred):
                    self._assign(element.value, UNKNOWN, frame, statement)
                else:
                    self._assign(element, item, frame, statement)
        elif isinstance(target, ast.Attribute):
            owner = self._eval(target.value, frame)
            if isinstance(owner, Obj):
                self.trail.set_item(owner.attrs, target.attr, value, owner)
            elif isinstance(owner, Namespace):
                pass
        elif isinstance(target, ast.Subscript):
            owner = self._eval(target.value, frame)
            key = self._eval(target.slice, frame)
            if isinstance(owner, Mapping) and isinstance(key, Const):
                try:
                    self.trail.set_item(owner.items, key.value, value, owner)
                except TypeError:
                    pass

    # ----- relevance ---------------------------------------------------------------

    def _relevant(self, node: ast.AST, frame: Frame) -> bool:
        """Whether a branch or loop can change anything Fabric-related (else it is skipped)."""
        cached = self._relevance.get(id(node))
        if cached is not None:
            return cached
        self._relevance[id(node)] = True  # recursion guard: assume relevant while computing
        result = self._compute_relevance(node, frame, set())
        self._relevance[id(node)] = result
        return result

    def _compute_relevance(
        self, node: ast.AST, frame: Frame, seen: set[int], returns_count: bool = True
    ) -> bool:
        for child in ast.walk(node):
            if isinstance(child, ast.Call):
                func = child.func
                if returns_count and _is_exit_call(func):
                    return True
                if isinstance(func, ast.Attribute) and (
                    func.attr in FABRIC_METHODS or func.attr in PARAMETER_METHODS
                ):
                    return True
                callee = self._peek(func, frame)
                if isinstance(callee, BoundMethod):
                    callee = callee.function
                if isinstance(callee, ClassRef):
                    if _lightning_base(callee) is not None:
                        return True
                    init = _class_method(callee, "__init__")
                    if init is not None and id(init.node) not in seen:
                        seen.add(id(init.node))
                        if self._compute_relevance(init.node, frame, seen, returns_count=False):
                            return True
                    continue
                if isinstance(callee, FunctionRef) and id(callee.node) not in seen:
                    seen.add(id(callee.node))
                    if self._compute_relevance(callee.node, frame, seen, returns_count):
                        return True
                if isinstance(callee, External) and (
                    callee.qualname in FABRIC_CLASSES or callee.qualname.endswith("Strategy")
                ):
                    return True
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                current = frame.lookup(child.id)
                if current is not None and _tracked(current):
                    return True
                if child.id in _interesting_names(frame.module.parsed):
                    return True
            elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
                # ``self.fabric = fabric`` matters; ``self.vocab_size = n`` does not.
                if child.attr in _interesting_names(frame.module.parsed) or "fabric" in child.attr.lower():
                    return True
            elif isinstance(child, (ast.Return, ast.Yield)) and returns_count:
                return True
            elif isinstance(child, (ast.Global, ast.Nonlocal)) or (
                returns_count and isinstance(child, ast.Raise)
            ):
                # A branch that ends the program decides which paths reach the Fabric calls after it.
                return True
        return False

    def _peek(self, node: ast.AST, frame: Frame) -> Optional[Value]:
        """Evaluate a callee without side effects (names and attributes only)."""
        if isinstance(node, ast.Name):
            return frame.lookup(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._peek(node.value, frame)
            if isinstance(owner, Obj):
                method = _class_method(owner.cls, node.attr) if owner.cls else None
                return method if method is not None else owner.attrs.get(node.attr)
            if isinstance(owner, ModuleRef):
                return owner.module.globals.get(node.attr)
            if isinstance(owner, ClassRef):
                return _class_method(owner, node.attr)
        return None

    # ----- truth and choices -------------------------------------------------------

    def _concrete(self, value: Value) -> Value:
        """Resolve a Choice to one option on this path (forking the run where several remain)."""
        while isinstance(value, Choice):
            index = self._fork(value.key, self._option_guards(value))
            value = value.options[index]
        return value

    def _option_guards(self, choice: Choice) -> list[int]:
        if isinstance(choice, Merged):
            return list(choice.guards)
        decision = self.guards.decision(
            DecisionInfo(choice.key, choice.descriptions, choice.subject, choice.option_texts)
        )
        return [self.guards.option(decision, index) for index in range(len(choice.options))]

    def _fork(self, key: str, option_guards: list[int], whole_run: bool = False) -> int:
        """Take one of the options whose guard this path allows; the run forks if several do."""
        guards = self.guards
        feasible = [
            index
            for index, guard in enumerate(option_guards)
            if guards.feasible(guards.and_(self.guard, guard))
        ]
        if not feasible:
            return 0
        if len(feasible) == 1:
            index = feasible[0]
        elif self.splittable and self.decisions.narrows and not whole_run:
            raise _SplitHere(key, [option_guards[i] for i in feasible])
        else:
            index = feasible[self.decisions.choose(key, len(feasible))]
        if self.decisions.narrows:
            self.guard = guards.and_(self.guard, option_guards[index])
        return index

    def _split(self, value: Value, node: ast.AST, frame: Frame, relevant: bool = True) -> Any:
        """How a test divides the paths: a bool when it is decided, else (then guard, else guard).

        None means: the test is undecided and the statement is not worth following.
        """
        guards = self.guards
        then_parts: list[int] = []
        else_parts: list[int] = []
        variable: Optional[int] = None
        for guard, leaf in self._leaves(value, TRUE, 0):
            truth = _static_truth(leaf)
            if truth is None:
                if not relevant:
                    return None
                if isinstance(leaf, Unknown) and leaf.key:
                    own = self._value_variable(leaf)
                else:
                    if variable is None:
                        variable = self._condition_variable(node, frame)
                    own = variable
                then_parts.append(guards.and_(guard, own))
                else_parts.append(guards.and_(guard, guards.not_(own)))
            elif truth:
                then_parts.append(guard)
            else:
                else_parts.append(guard)
        then_guard = guards.and_(self.guard, guards.any_of(then_parts))
        else_guard = guards.and_(self.guard, guards.any_of(else_parts))
        if not guards.feasible(else_guard):
            return True
        if not guards.feasible(then_guard):
            return False
        if not relevant:
            return None
        return then_guard, else_guard

    def _leaves(self, value: Value, guard: int, depth: int) -> list[tuple[int, Value]]:
        """A value's plain options with the guard of each (Choices and Merged values flattened)."""
        if not isinstance(value, Choice) or depth > 6:
            return [(guard, value)]
        found: list[tuple[int, Value]] = []
        for option_guard, option in zip(self._option_guards(value), value.options):
            combined = self.guards.and_(guard, option_guard)
            if self.guards.feasible(self.guards.and_(self.guard, combined)):
                found.extend(self._leaves(option, combined, depth + 1))
        return found or [(guard, UNKNOWN)]

    def _condition_variable(self, node: ast.AST, frame: Frame) -> int:
        text = frame.module.parsed.segment(node) or "condition"
        text = " ".join(text.split())
        if len(text) > 60:
            text = text[:57] + "..."
        decision = self.guards.decision(
            DecisionInfo(_condition_key(node, frame), (f"`{text}`", f"not `{text}`"))
        )
        return self.guards.option(decision, 0)

    def _value_variable(self, leaf: Unknown) -> int:
        """The truth of an unknown value that has an identity: one decision wherever it is tested."""
        text = _short(leaf.text or "value", 60)
        decision = self.guards.decision(DecisionInfo(f"truth:{leaf.key}", (f"`{text}`", f"not `{text}`")))
        return self.guards.option(decision, 0)

    def _truth(self, value: Value, node: ast.AST, frame: Frame, fork: bool = True) -> Optional[bool]:
        """The truth of a test on this path (forking where it is undecided); None: skip."""
        split = self._split(value, node, frame, relevant=fork)
        if split is None or isinstance(split, bool):
            return split
        return self._fork(_condition_key(node, frame), list(split)) == 0

    # ----- expressions -------------------------------------------------------------

    def _eval(self, node: Optional[ast.AST], frame: Frame) -> Value:
        if node is None:
            return Const(None)
        self._tick()
        handler = getattr(self, "_expr_" + type(node).__name__, None)
        if handler is None or self.eval_depth > MAX_EXPRESSION_DEPTH:
            # Deeper than any real expression: its value is unknown, the rest goes on.
            return Unknown(text="expression")
        self.eval_depth += 1
        try:
            return handler(node, frame)
        finally:
            self.eval_depth -= 1

    def _expr_Constant(self, node: ast.Constant, frame: Frame) -> Value:
        if isinstance(node.value, str):
            return Const(node.value, (Evidence(frame.module.parsed, node, repr(node.value)),))
        return Const(node.value)

    def _expr_Name(self, node: ast.Name, frame: Frame) -> Value:
        value = frame.lookup(node.id)
        if value is None:
            if node.id in ("True", "False", "None"):
                return Const({"True": True, "False": False, "None": None}[node.id])
            if node.id in _BUILTINS:
                return External(node.id)
            return Unknown(text=node.id)
        return value

    def _expr_Attribute(self, node: ast.Attribute, frame: Frame) -> Value:
        owner = self._eval(node.value, frame)
        return self._attribute(owner, node.attr, node, frame)

    def _attribute(self, owner: Value, attr: str, node: ast.AST, frame: Frame) -> Value:
        if isinstance(owner, External):
            return External(f"{owner.qualname}.{attr}")
        if isinstance(owner, ModuleRef):
            value = owner.module.globals.get(attr)
            return value if value is not None else Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, Namespace):
            option = owner.parser.options.get(attr)
            if option is None:
                return Unknown(text=frame.module.parsed.segment(node))
            return _option_value(option)
        if isinstance(owner, FabricObj):
            if attr == "strategy":
                return StrategyAttr(owner)
            if attr == "world_size" and owner.site.strategy.world_size is not None:
                # devices * num_nodes, known before launch (fabric.py world_size).
                return Const(owner.site.strategy.world_size)
            return Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, Obj):
            if attr in owner.attrs:
                return owner.attrs[attr]
            if owner.cls is not None:
                method = _class_method(owner.cls, attr)
                if method is not None:
                    return BoundMethod(method, owner)
                class_value = _class_attribute(owner.cls, attr, self, frame)
                if class_value is not None:
                    return class_value
            # The same unread attribute of the same object is the same unknown value.
            key = f"attr:{id(owner.created_at)}.{attr}" if owner.created_at is not None else ""
            return Unknown(text=frame.module.parsed.segment(node), key=key)
        if isinstance(owner, ClassRef):
            method = _class_method(owner, attr)
            if method is not None:
                return method
            class_value = _class_attribute(owner, attr, self, frame)
            return class_value if class_value is not None else Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, ModelOutput):
            return owner
        if isinstance(owner, SetupModule):
            # ``fabric_model.module`` is the strategy's wrapped module, not a Fabric wrapper.
            if attr in ("module", "_forward_module", "_original_module"):
                return owner.inner
            return Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, Choice):
            # ``self.fabric.strategy`` where self.fabric is one of several: each option's attribute.
            return self._lift(owner, lambda option: self._attribute(option, attr, node, frame))
        if isinstance(owner, Unknown) and owner.key:
            return Unknown(text=frame.module.parsed.segment(node), key=f"{owner.key}.{attr}")
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_Subscript(self, node: ast.Subscript, frame: Frame) -> Value:
        owner = self._eval(node.value, frame)
        key = self._concrete(self._eval(node.slice, frame))
        if isinstance(owner, ModelOutput):
            return owner
        if isinstance(owner, Mapping) and isinstance(key, Const):
            try:
                found = owner.items.get(key.value)
            except TypeError:
                found = None
            if found is not None:
                return found
        if isinstance(owner, Seq) and isinstance(key, Const) and isinstance(key.value, int):
            if -len(owner.items) <= key.value < len(owner.items):
                return owner.items[key.value]
        if isinstance(owner, Const) and isinstance(key, Const):
            try:
                return Const(owner.value[key.value], owner.origins)
            except Exception:
                pass
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_Index(self, node: Any, frame: Frame) -> Value:  # Python 3.8 trees
        return self._eval(node.value, frame)

    def _expr_Tuple(self, node: ast.Tuple, frame: Frame) -> Value:
        return _literal_seq([self._eval(e, frame) for e in node.elts], is_tuple=True)

    def _expr_List(self, node: ast.List, frame: Frame) -> Value:
        return _literal_seq([self._eval(e, frame) for e in node.elts], is_tuple=False)

    def _expr_Set(self, node: ast.Set, frame: Frame) -> Value:
        return Seq([self._eval(e, frame) for e in node.elts])

    def _expr_Dict(self, node: ast.Dict, frame: Frame) -> Value:
        items: dict[Any, Value] = {}
        for key_node, value_node in zip(node.keys, node.values):
            value = self._eval(value_node, frame)
            if key_node is None:
                continue
            key = self._eval(key_node, frame)
            if isinstance(key, Const):
                try:
                    items[key.value] = value
                except TypeError:
                    pass
        return Mapping(items)

    def _expr_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Value:
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_Starred(self, node: ast.Starred, frame: Frame) -> Value:
        return self._eval(node.value, frame)

    def _expr_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Value:
        value = self._eval(node.value, frame)
        self._assign(node.target, value, frame, node)
        return value

    def _expr_IfExp(self, node: ast.IfExp, frame: Frame) -> Value:
        test = self._eval(node.test, frame)
        if (
            isinstance(test, (Choice, Unknown))
            and self._pure(node.body, frame)
            and self._pure(node.orelse, frame)
        ):
            # Both sides are plain values: keep the choice lazy; the run forks only if it is needed.
            body, orelse = self._eval(node.body, frame), self._eval(node.orelse, frame)
            text = _short(frame.module.parsed.segment(node.test))
            key = f"truth:{test.key}" if isinstance(test, Unknown) and test.key else f"ifexp:{id(node)}"
            if isinstance(test, Unknown) and test.key:
                text = _short(test.text or text, 60)
            fork = Choice(key, (body, orelse), (f"`{text}`", f"not `{text}`"))

            def pick(option: Value) -> Value:
                if isinstance(option, Const):
                    return body if option.value else orelse
                return fork if isinstance(option, Unknown) else body

            return fork if isinstance(test, Unknown) else self._lift(test, pick)
        truth = self._truth(test, node.test, frame)
        if truth is None:
            return UNKNOWN
        return self._eval(node.body if truth else node.orelse, frame)

    def _pure(self, node: ast.AST, frame: Frame) -> bool:
        # Cached by node like _relevant: what an expression can touch rarely depends on the path.
        key = -id(node)
        cached = self._relevance.get(key)
        if cached is None:
            cached = self._relevance[key] = self._compute_relevance(node, frame, set())
        return not cached

    def _lift(self, choice: Choice, function: Callable[[Value], Value]) -> Choice:
        """The same choice (same key, same conditions) with ``function`` applied to each option."""
        options = tuple(
            self._lift(option, function) if isinstance(option, Choice) else function(option)
            for option in choice.options
        )
        if isinstance(choice, Merged):
            return Merged(choice.key, options, choice.descriptions, guards=choice.guards)
        return Choice(choice.key, options, choice.descriptions, choice.subject, choice.option_texts)

    def _expr_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Value:
        first = self._eval(node.values[0], frame)
        rest_nodes = node.values[1:]
        if isinstance(first, Choice) and all(self._pure(n, frame) for n in rest_nodes):
            rest_node: ast.AST = rest_nodes[0]
            if len(rest_nodes) > 1:
                rest_node = ast.copy_location(ast.BoolOp(op=node.op, values=rest_nodes), rest_nodes[0])
            rest = self._eval(rest_node, frame)
            text = frame.module.parsed.segment(node)
            is_or = isinstance(node.op, ast.Or)

            def pick(option: Value) -> Value:
                if isinstance(option, Unknown):
                    return Unknown(text=text)
                truthy = bool(option.value) if isinstance(option, Const) else True
                if is_or:
                    return option if truthy else rest
                return rest if truthy else option

            return self._lift(first, pick)
        return self._boolop_eager(node, first, frame)

    def _boolop_eager(self, node: ast.BoolOp, first: Value, frame: Frame) -> Value:
        last: Value = UNKNOWN
        for position, operand in enumerate(node.values):
            last = self._concrete(first if position == 0 else self._eval(operand, frame))
            if not isinstance(last, Const):
                if isinstance(last, Unknown):
                    return Unknown(text=frame.module.parsed.segment(node))
                # Objects are truthy.
                if isinstance(node.op, ast.Or):
                    return last
                continue
            if isinstance(node.op, ast.And) and not last.value:
                return last
            if isinstance(node.op, ast.Or) and last.value:
                return last
        return last

    def _expr_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Value:
        operand = self._eval(node.operand, frame)
        if isinstance(operand, Choice) and isinstance(node.op, ast.Not):
            text = frame.module.parsed.segment(node)
            return self._lift(
                operand,
                lambda o: (
                    Const(not o.value)
                    if isinstance(o, Const)
                    else (Unknown(text=text) if isinstance(o, Unknown) else Const(False))
                ),
            )
        operand = self._concrete(operand)
        if isinstance(operand, Const):
            try:
                if isinstance(node.op, ast.Not):
                    return Const(not operand.value, operand.origins)
                if isinstance(node.op, ast.USub):
                    return Const(-operand.value, operand.origins)
                if isinstance(node.op, ast.UAdd):
                    return Const(+operand.value, operand.origins)
            except Exception:
                pass
        if isinstance(operand, ModelOutput):
            return operand
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_BinOp(self, node: ast.BinOp, frame: Frame) -> Value:
        left = self._eval(node.left, frame)
        right = self._eval(node.right, frame)
        result = _binop(node.op, left, right)
        if isinstance(result, Unknown) and not result.text:
            return Unknown(text=frame.module.parsed.segment(node))
        return result

    def _expr_Compare(self, node: ast.Compare, frame: Frame) -> Value:
        left = self._eval(node.left, frame)
        if len(node.ops) == 1:
            right = self._eval(node.comparators[0], frame)
            op, text = node.ops[0], frame.module.parsed.segment(node)
            # A comparison of a choice is a choice of results, decided where it is needed.
            if isinstance(left, Choice) and not isinstance(right, Choice):
                return self._lift(left, lambda option: self._compared(op, option, right, text))
            if isinstance(right, Choice) and not isinstance(left, Choice):
                return self._lift(right, lambda option: self._compared(op, left, option, text))
            return self._compared(op, left, right, text)
        for op, right_node in zip(node.ops, node.comparators):
            right = self._eval(right_node, frame)
            result = self._compare(op, left, right)
            if result is None:
                return Unknown(text=frame.module.parsed.segment(node))
            if not result:
                return Const(False)
            left = right
        return Const(True)

    def _compared(self, op: ast.cmpop, left: Value, right: Value, text: str) -> Value:
        result = self._compare(op, left, right)
        if result is None:
            return self._compared_unknown(op, left, right) or Unknown(text=text)
        return Const(result)

    def _compared_unknown(self, op: ast.cmpop, left: Value, right: Value) -> Optional[Value]:
        """``hw.strategy == "ddp"`` on an unknown with an identity: one decision per constant it is
        compared with, shared by every such test of it in the program."""
        if isinstance(right, Unknown) and right.key and isinstance(left, Const):
            left, right = right, left
        if not (isinstance(left, Unknown) and left.key):
            return None
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) and isinstance(right, Const):
            constants = [right.value]
        elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, Seq):
            items = [self._concrete(item) for item in right.items]
            if not items or not all(isinstance(item, Const) for item in items):
                return None
            constants = [item.value for item in items]  # type: ignore[attr-defined]
        else:
            return None
        if not all(isinstance(c, (str, int, float, bool, type(None))) for c in constants):
            return None
        text = _short(left.text or "value", 50)
        atoms = [
            self.guards.equality(
                left.key, constant, (f"`{text}` is {constant!r}", f"`{text}` is not {constant!r}")
            )
            for constant in constants
        ]
        if left.key.endswith((":other", ":given")):
            # "the parameter is 'tensor_parallel'" implies "the parameter was given a value".
            for atom in atoms:
                self.guards.constrain((atom, left.key.rsplit(":", 1)[0], 1))
        holds = self.guards.any_of(atoms)
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            holds = self.guards.not_(holds)
        return Merged(
            f"compare:{left.key}",
            (Const(True), Const(False)),
            ("", ""),
            guards=(holds, self.guards.not_(holds)),
        )

    def _compare(self, op: ast.cmpop, left: Value, right: Value) -> Optional[bool]:
        left = self._concrete(left)
        right = self._concrete(right)
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, Const) and right.value is None:
            if isinstance(left, Const):
                return (left.value is None) == isinstance(op, ast.Is)
            if isinstance(left, Unknown):
                return None
            return not isinstance(op, ast.Is)
        if isinstance(left, Const) and isinstance(right, Const):
            try:
                return bool(_COMPARE[type(op)](left.value, right.value))
            except Exception:
                return None
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, Const) and isinstance(right, Seq):
            constants = [v for v in (self._concrete(item) for item in right.items) if isinstance(v, Const)]
            if len(constants) == len(right.items):
                found = any(v.value == left.value for v in constants)
                return found == isinstance(op, ast.In)
        return None

    def _expr_Lambda(self, node: ast.Lambda, frame: Frame) -> Value:
        return FunctionRef(node, frame.module)

    def _expr_ListComp(self, node: ast.ListComp, frame: Frame) -> Value:
        return self._comprehension(node, frame)

    _expr_SetComp = _expr_ListComp
    _expr_GeneratorExp = _expr_ListComp

    def _expr_DictComp(self, node: ast.DictComp, frame: Frame) -> Value:
        return self._comprehension(node, frame)

    def _comprehension(self, node: Any, frame: Frame) -> Value:
        params: list[Params] = []
        for generator in node.generators:
            source = self._eval(generator.iter, frame)
            params.extend(_collect_params(source))
        if params:
            return Seq(list(params))
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_Await(self, node: ast.Await, frame: Frame) -> Value:
        return self._eval(node.value, frame)

    # ----- calls -------------------------------------------------------------------

    def _expr_Call(self, node: ast.Call, frame: Frame) -> Value:
        if frame.module is not self.main_env:
            return self._call_expression(node, frame)
        saved, self.script_call = self.script_call, node
        try:
            return self._call_expression(node, frame)
        finally:
            self.script_call = saved

    def _call_expression(self, node: ast.Call, frame: Frame) -> Value:
        saved, self.call_node = self.call_node, node
        try:
            return self._call_dispatch(node, frame)
        finally:
            self.call_node = saved

    def _call_dispatch(self, node: ast.Call, frame: Frame) -> Value:
        func = node.func
        # ``x.method(...)``: evaluate the receiver once, then dispatch.
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, frame)
            if isinstance(receiver, Choice):
                variants = self._fabric_variants(receiver)
                if variants is not None:
                    return self._dispatch_fabric_call(receiver, variants, func.attr, node, frame)
                if func.attr not in PARAMETER_METHODS and self._wrappers(receiver):
                    # ``model.eval()``/``model(x)`` on the model set up by one of several Fabric objects:
                    # each under its guard, joined (the statement is not run once per Fabric).
                    try:
                        return self._dispatch(
                            receiver,
                            lambda leaf: self._method_call(leaf, func.attr, node, frame),  # type: ignore[union-attr]
                        )
                    except _CannotMerge:
                        pass
                # One of several other objects: values built from it must stay per path (the rules
                # read plain objects), so the statement runs once per object (_exec_statement).
                receiver = self._concrete(receiver)
            return self._method_call(receiver, func.attr, node, frame)
        callee = self._eval(func, frame)
        if isinstance(callee, Choice):
            if self._wrappers(callee):
                try:
                    return self._dispatch(callee, lambda leaf: self._call_value(leaf, node, frame))
                except _CannotMerge:
                    pass
            callee = self._concrete(callee)
        return self._call_value(callee, node, frame)

    def _wrappers(self, value: Value) -> bool:
        """One of several wrappers Fabric made (set-up models, their outputs): each is used the same way."""
        if not isinstance(value, Choice):
            return False
        leaves = self._leaves(value, TRUE, 0)
        return 1 < len(leaves) and all(isinstance(leaf, (SetupModule, ModelOutput)) for _, leaf in leaves)

    def _dispatch(self, receiver: Choice, call: Callable[[Value], Value]) -> Value:
        alternatives = [
            (self.guards.and_(self.guard, guard), lambda leaf=leaf: call(leaf))
            for guard, leaf in self._leaves(receiver, TRUE, 0)
        ]
        result = run_alternatives(self, None, alternatives)  # type: ignore[arg-type]
        return result if isinstance(result, Value) else UNKNOWN

    def _method_call(self, receiver: Value, attr: str, node: ast.Call, frame: Frame) -> Value:
        if isinstance(receiver, Choice):
            receiver = self._concrete(receiver)
        if isinstance(receiver, FabricObj):
            return self._fabric_call(receiver, attr, node, frame)
        callee = self._attribute(receiver, attr, node.func, frame)
        return self._call_on(receiver, attr, callee, node, frame)

    def _eval_args(self, node: ast.Call, frame: Frame) -> tuple[list[Value], dict[str, Value], bool]:
        args: list[Value] = []
        keywords: dict[str, Value] = {}
        opaque = False
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                starred = self._eval(arg.value, frame)
                if isinstance(starred, Seq):
                    args.extend(starred.items)
                else:
                    opaque = True
                continue
            args.append(self._eval(arg, frame))
        for keyword in node.keywords:
            value = self._eval(keyword.value, frame)
            if keyword.arg is None:
                if isinstance(value, Mapping):
                    for key, item in value.items.items():
                        if isinstance(key, str):
                            keywords[key] = item
                else:
                    opaque = True
                continue
            keywords[keyword.arg] = value
        return args, keywords, opaque

    def _call_on(self, receiver: Value, attr: str, callee: Value, node: ast.Call, frame: Frame) -> Value:
        if isinstance(callee, (BoundMethod, FunctionRef, ClassRef)):
            return self._call_value(callee, node, frame)
        if isinstance(receiver, ArgParser):
            return self._argparse_call(receiver, attr, node, frame)
        if isinstance(receiver, ModelOutput):
            if attr in ("detach", "item", "tolist", "numpy", "detach_"):
                self._eval_args(node, frame)
                return Unknown(text="detached tensor")
            if attr == "backward":
                self._eval_args(node, frame)
                self._emit(receiver.fabric, "tensor.backward", node, frame, [], {}, receiver=receiver)
                return Const(None)
            return receiver
        if isinstance(receiver, (Obj, SetupModule)) and attr in PARAMETER_METHODS:
            return _params_of(receiver, node)
        if isinstance(receiver, Obj) and attr in ("load_state_dict", "to_empty"):
            _, keywords, _ = self._eval_args(node, frame)
            assign = keywords.get("assign")
            if attr == "to_empty" or (isinstance(assign, Const) and assign.value is True):
                self.trail.set_attr(receiver, "meta", False)  # real tensors replace the meta ones
            return UNKNOWN
        if isinstance(receiver, SetupModule):
            self._eval_args(node, frame)
            if attr in ("forward", "__call__"):
                return ModelOutput(receiver.fabric)
            return ModelOutput(receiver.fabric) if attr in _TENSOR_RETURNING else Unknown()
        if isinstance(receiver, Seq) and attr in ("append", "extend", "insert"):
            args, _, _ = self._eval_args(node, frame)
            added = args[-1:] if attr != "extend" else _items(args[0]) if args else []
            self.trail.extend(receiver.items, list(added), receiver)
            return Const(None)
        if isinstance(receiver, Mapping) and attr == "get":
            args, _, _ = self._eval_args(node, frame)
            if args and isinstance(args[0], Const):
                try:
                    found = receiver.items.get(args[0].value)
                except TypeError:
                    found = None
                if found is not None:
                    return found
                return args[1] if len(args) > 1 else Const(None)
            return UNKNOWN
        if (
            isinstance(receiver, Const)
            and isinstance(receiver.value, str)
            and attr in ("lower", "upper", "strip")
        ):
            self._eval_args(node, frame)
            return Const(getattr(receiver.value, attr)(), receiver.origins)
        return self._call_value(callee, node, frame)

    def _call_value(self, callee: Value, node: ast.Call, frame: Frame) -> Value:
        if isinstance(callee, BoundMethod):
            args, keywords, opaque = self._eval_args(node, frame)
            args = [callee.receiver, *args]
            return self._call_function(callee.function, args, keywords, opaque=opaque)
        if isinstance(callee, FunctionRef):
            args, keywords, opaque = self._eval_args(node, frame)
            return self._call_function(callee, args, keywords, opaque=opaque)
        if isinstance(callee, ClassRef):
            return self._instantiate(callee, node, frame)
        if isinstance(callee, SetupModule):
            self._eval_args(node, frame)
            if any(ctx.kind == "no_grad" for ctx in self.contexts):
                return Unknown(text="output computed without gradients")  # no backward hook
            return ModelOutput(callee.fabric)
        if isinstance(callee, External):
            return self._external_call(callee.qualname, node, frame)
        args, keywords, _ = self._eval_args(node, frame)
        return self._generic_result(node, frame, args, keywords)

    def _generic_result(
        self, node: ast.Call, frame: Frame, args: list[Value], keywords: dict[str, Value], name: str = ""
    ) -> Value:
        """The result of a call we do not interpret: a new object born here."""
        found: list[Params] = []
        for value in [*args, *keywords.values()]:
            found.extend(_collect_params(value))
            if isinstance(value, FabricObj):
                self.trail.set_attr(value.site, "escaped", True)
        outputs = [v for v in [*args, *keywords.values()] if isinstance(v, ModelOutput) or self._wrappers(v)]
        if outputs and not found:
            return outputs[0]  # a loss computed from a model output (of one of several Fabric objects)
        meta = any(
            ctx.kind == "meta_device" or (ctx.kind == "init_module" and ctx.empty_init)
            for ctx in self.contexts
        )
        meta = meta and self._meta_context(frame)
        place = self.places[-1] if self.places else None
        return Obj(
            node,
            frame.module.path,
            meta=meta,
            params=tuple(found),
            name=name,
            created_place=place,
            existence_guard=self.guard,
        )

    def _meta_context(self, frame: Frame) -> bool:
        """Does the innermost creation context put parameters on the meta device?"""
        for ctx in reversed(self.contexts):
            if ctx.kind == "meta_device":
                return True
            if ctx.kind == "init_module":
                if ctx.fabric is None or not ctx.empty_init:
                    return False
                strategy = ctx.fabric.site.strategy
                return strategy.is_a("FSDPStrategy") or strategy.is_a("ModelParallelStrategy")
        return False

    def _call_function(
        self,
        function: FunctionRef,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool = False,
        entry: bool = False,
    ) -> Value:
        node = function.node
        self.executed_functions.add(id(node))
        if self.depth >= MAX_DEPTH:
            return UNKNOWN
        frame = Frame(function.module, node, self.trail)
        self._bind_params(node, frame, args, keywords, opaque, entry)
        # A helper that touches nothing Fabric-related: its own conditions only decide what it
        # returns, so they are summed up as "`f(...)` returns X" (see _summarize).
        fabric_free = (
            not entry and not isinstance(node, ast.Lambda) and not self._function_relevance(function)
        )
        decisions_before = len(self.guards.decisions)
        call_node = self.call_node
        self.fabric_free_depth += fabric_free
        self.depth += 1
        result: Value = Const(None)
        try:
            if isinstance(node, ast.Lambda):
                return self._eval(node.body, frame)
            self._exec_block(node.body, frame)  # type: ignore[attr-defined]
        except _Return as returned:
            result = returned.value
        except (_Break, _Continue):
            pass
        except StopRun:
            if not (self.exited and frame.pending_returns):
                raise
            # This path ends the program; the sides that returned earlier go on.
            self.exited = False
            result = resume_pending_return(self, frame)
        finally:
            self.depth -= 1
            self.fabric_free_depth -= fabric_free
        if frame.pending_returns:
            result = join_returns(self, frame, result)
        if fabric_free and isinstance(result, Choice) and len(self.guards.decisions) > decisions_before:
            result = self._summarize(result, decisions_before, call_node, frame)
        return result

    def _summarize(
        self, result: Choice, first_own: int, call_node: Optional[ast.Call], frame: Frame
    ) -> Value:
        """A Fabric-free helper's result, free of the helper's own conditions.

        Where what it returns depends on its own tests (``torch.cuda.is_bf16_supported()``), one
        decision per call stands for them: "`get_precision()` returns 'bf16-mixed'". Where it
        depends only on the caller's decisions (its arguments), the result keeps those guards.
        """
        own = self.guards.variables_of_decisions(range(first_own, len(self.guards.decisions)))
        leaves = self._leaves(result, TRUE, 0)
        if not any(self.guards.support(guard) & own for guard, _ in leaves):
            return result
        distinct: list[Value] = []
        for _, value in leaves:
            if not any(same(value, known) for known in distinct):
                distinct.append(value)
        if len(distinct) == 1:
            return distinct[0]
        text = (
            _short(frame.module.parsed.segment(call_node) if call_node is not None else "", 50) or "a helper"
        )
        descriptions = tuple(
            f"`{text}` returns {value.value!r}"
            if isinstance(value, Const)
            else f"`{text}` returns another value"
            for value in distinct
        )
        return Choice(f"summary:{id(call_node)}", tuple(distinct), descriptions)

    # ----- helpers summarised by their return values ----------------------------------

    def _function_relevance(self, function: FunctionRef) -> bool:
        key = id(function.node)
        cached = self._function_relevant.get(key)
        if cached is None:
            self._function_relevant[key] = True  # recursion guard
            frame = Frame(function.module, function.node)
            cached = self._compute_relevance(function.node, frame, {key}, returns_count=False)
            self._function_relevant[key] = cached
        return cached

    def _bind_params(
        self,
        node: ast.AST,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool,
        entry: bool,
    ) -> None:
        arguments: ast.arguments = node.args  # type: ignore[attr-defined]
        positional = [*getattr(arguments, "posonlyargs", []), *arguments.args]
        defaults = arguments.defaults
        first_default = len(positional) - len(defaults)
        module_frame = Frame(frame.module)
        for index, param in enumerate(positional):
            if index < len(args):
                frame.bind(param.arg, args[index])
            elif param.arg in keywords:
                frame.bind(param.arg, keywords[param.arg])
            elif index >= first_default:
                default = self._eval(defaults[index - first_default], module_frame)
                frame.bind(
                    param.arg, self._entry_value(param.arg, default, node) if entry or opaque else default
                )
            else:
                frame.bind(param.arg, Unknown(text=param.arg, key=f"param:{id(node)}:{param.arg}"))
        for param, default_node in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if param.arg in keywords:
                frame.bind(param.arg, keywords[param.arg])
            elif default_node is not None:
                default = self._eval(default_node, module_frame)
                frame.bind(
                    param.arg, self._entry_value(param.arg, default, node) if entry or opaque else default
                )
            else:
                frame.bind(param.arg, Unknown(text=param.arg))
        if arguments.vararg:
            frame.bind(arguments.vararg.arg, Unknown())
        if arguments.kwarg:
            frame.bind(arguments.kwarg.arg, Unknown())

    def _entry_value(self, name: str, default: Value, function: ast.AST) -> Value:
        """A parameter of an entry point: its default, or whatever the caller passes."""
        if not isinstance(default, Const):
            return default
        shown = repr(default.value)
        key = f"param:{id(function)}:{name}"
        if isinstance(default.value, bool):
            # A flag: the other value that matters is its opposite.
            return Choice(
                key,
                (default, Const(not default.value)),
                (f"`{name}` left at its default {shown}", f"`{name}` is {not default.value!r}"),
            )
        return Choice(
            key,
            (default, Unknown(text=name, key=f"{key}:other")),
            (f"`{name}` left at its default {shown}", f"`{name}` given another value"),
        )

    def _instantiate(self, cls: ClassRef, node: ast.Call, frame: Frame) -> Value:
        lightning_base = _lightning_base(cls)
        if lightning_base in FABRIC_CLASSES:
            return self._make_fabric(node, frame, user_class=cls.name, qualname=lightning_base)
        if lightning_base is not None and lightning_base.rsplit(".", 1)[-1] in STRATEGY_CLASSES:
            args, keywords, _ = self._eval_args(node, frame)
            return self._strategy_object(lightning_base, keywords, node, frame, user_class=cls.name)
        args, keywords, opaque = self._eval_args(node, frame)
        instance = self._generic_result(node, frame, args, keywords)
        if not isinstance(instance, Obj):
            instance = Obj(node, frame.module.path)
        instance.cls = cls
        init = _class_method(cls, "__init__")
        if init is None:
            _bind_fields(cls, instance, args, keywords)
        if init is not None:
            if self._function_relevance(init):
                self._call_function(init, [instance, *args], keywords, opaque=opaque)
            else:
                # Nothing Fabric-related happens in it: one path is enough.
                self._call_on_one_path(init, [instance, *args], keywords, opaque)
        return instance

    def _call_on_one_path(
        self, function: FunctionRef, args: list[Value], keywords: dict[str, Value], opaque: bool
    ) -> Value:
        """Call without forking: every decision inside takes its first option."""
        saved = self.decisions
        self.decisions = _NoForks()
        try:
            return self._call_function(function, args, keywords, opaque=opaque)
        finally:
            self.decisions = saved

    # ----- known externals ---------------------------------------------------------

    def _external_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value:
        if qualname in FABRIC_CLASSES:
            return self._make_fabric(node, frame, qualname=qualname)
        tail = qualname.rsplit(".", 1)[-1]
        if tail in STRATEGY_CLASSES and qualname.startswith(("lightning", "lightning_fabric")):
            args, keywords, _ = self._eval_args(node, frame)
            return self._strategy_object(qualname, keywords, node, frame)
        if qualname in ("argparse.ArgumentParser",):
            self._eval_args(node, frame)
            return ArgParser()
        if qualname in ("torch.no_grad", "torch.inference_mode", "torch.enable_grad"):
            self._eval_args(node, frame)
            return ContextValue("no_grad" if qualname != "torch.enable_grad" else "other")
        if qualname in ("torch.device",):
            args, _, _ = self._eval_args(node, frame)
            first = self._concrete(args[0]) if args else UNKNOWN
            if isinstance(first, Const) and first.value == "meta":
                return ContextValue("meta_device")
            return Obj(node, frame.module.path)
        if qualname in ("sys.exit", "exit", "quit", "os._exit"):
            self.exited = True
            raise StopRun()
        if qualname in ("isinstance",):
            return self._isinstance(node, frame)
        args, keywords, _ = self._eval_args(node, frame)
        if qualname in PARAMS_PASSTHROUGH:
            passed = [p for value in args for p in _collect_params(value)]
            if passed:
                return Seq(list(passed))
        if tail in ("DataLoader",) or qualname.endswith("utils.data.DataLoader"):
            obj = Obj(node, frame.module.path, is_dataloader=True)
            return obj
        result = self._generic_result(node, frame, args, keywords)
        if isinstance(result, Obj) and (qualname.startswith("torch.optim.") and tail[:1].isupper()):
            result.is_optimizer_class = True
        return result

    def _isinstance(self, node: ast.Call, frame: Frame) -> Value:
        args, _, _ = self._eval_args(node, frame)
        if len(args) != 2:
            return UNKNOWN
        subject, classes = args
        if isinstance(subject, Choice):
            # ``fabric.strategy`` of one of several Fabric objects: the answer for each.
            return self._lift(subject, lambda option: self._isinstance_of(option, classes, node, frame))
        return self._isinstance_of(subject, classes, node, frame)

    def _isinstance_of(self, subject: Value, classes: Value, node: ast.Call, frame: Frame) -> Value:
        if not isinstance(subject, (StrategyAttr, StrategyObj)):
            return Unknown(text=frame.module.parsed.segment(node))
        if isinstance(subject, StrategyAttr):
            strategy = subject.fabric.site.strategy
            class_name = strategy.class_name
        else:
            class_name = subject.class_name
        if class_name is None:
            return Unknown(text=frame.module.parsed.segment(node))
        names: list[str] = []
        for item in _items(classes) if isinstance(classes, Seq) else [classes]:
            if isinstance(item, External):
                names.append(item.qualname.rsplit(".", 1)[-1])
            elif isinstance(item, ClassRef):
                base = _lightning_base(item)
                if base is None:
                    return Unknown(text=frame.module.parsed.segment(node))
                # A user subclass: only the object's own user class matches.
                user = (
                    subject.fabric.site.strategy.user_class
                    if isinstance(subject, StrategyAttr)
                    else (subject.user_class)
                )
                if user == item.name:
                    return Const(True)
                continue
            else:
                return Unknown(text=frame.module.parsed.segment(node))
        return Const(any(is_subclass(class_name, name) for name in names))

    def _argparse_call(self, parser: ArgParser, attr: str, node: ast.Call, frame: Frame) -> Value:
        args, keywords, _ = self._eval_args(node, frame)
        if attr == "add_argument":
            flags = [a.value for a in args if isinstance(a, Const) and isinstance(a.value, str)]
            long_flags = [f for f in flags if f.startswith("--")] or flags
            if not long_flags:
                return Const(None)
            flag = long_flags[0]
            dest_value = keywords.get("dest")
            dest = dest_value.value if isinstance(dest_value, Const) else flag.lstrip("-").replace("-", "_")
            default = keywords.get("default", Const(None))
            action = keywords.get("action")
            if isinstance(action, Const) and action.value == "store_true" and "default" not in keywords:
                default = Const(False)
            if isinstance(action, Const) and action.value == "store_false" and "default" not in keywords:
                default = Const(True)
            choices_value = keywords.get("choices")
            choices: Optional[tuple[Value, ...]] = None
            if isinstance(choices_value, Seq) and all(isinstance(c, Const) for c in choices_value.items):
                choices = tuple(choices_value.items)
            self.trail.set_item(parser.options, dest, ArgOption(dest, flag, default, choices, node), parser)
            return Const(None)
        if attr in ("parse_args", "parse_known_args"):
            namespace = Namespace(parser)
            return Seq([namespace, UNKNOWN], is_tuple=True) if attr == "parse_known_args" else namespace
        if attr in ("add_argument_group", "add_mutually_exclusive_group"):
            return parser
        return UNKNOWN

    # ----- Fabric ------------------------------------------------------------------

    def _make_fabric(
        self,
        node: ast.Call,
        frame: Frame,
        user_class: Optional[str] = None,
        qualname: str = "lightning.fabric.Fabric",
    ) -> Value:
        args, keywords, opaque = self._eval_args(node, frame)
        names = ("accelerator", "strategy", "devices", "num_nodes", "precision")
        given = dict(zip(names, args))
        given.update({k: v for k, v in keywords.items() if k in names})
        config, provenance = self._fabric_config(given, opaque, frame)
        # connector.py:191 accepts only strategy objects of the Fabric's own package.
        package = "lightning_fabric" if qualname.startswith("lightning_fabric") else "lightning.fabric"
        config = FabricConfig(**{**config.__dict__, "fabric_package": package})
        strategy = resolve(config)
        if self.assumed_strategy and (
            self.force_strategy
            or not config.strategy_known
            or (config.strategy_class is None and config.strategy_name in (None, "auto"))
        ):
            assumed = resolve(
                FabricConfig(
                    strategy_name=self.assumed_strategy,
                    strategy_given=True,
                    accelerator=config.accelerator,
                    devices=config.devices,
                    devices_known=config.devices_known,
                    num_nodes=config.num_nodes,
                    precision=config.precision,
                    precision_known=config.precision_known,
                    script_dir=config.script_dir,
                )
            )
            strategy = ResolvedStrategy(
                **{**assumed.__dict__, "assumed": True, "cli": not self.force_strategy}
            )
        state = FabricState(
            frame.module.path,
            node,
            strategy,
            provenance,
            place=self.places[-1] if self.places else None,
            parsed=frame.module.parsed,
            existence_guard=self.guard,
        )
        strategy_value = self._concrete(given["strategy"]) if "strategy" in given else None
        if isinstance(strategy_value, StrategyObj):
            state.strategy_call = strategy_value.node
            state.strategy_path = strategy_value.path
        if self.reporting:
            self.trail.extend(self.fabric_records, [(state, self.guard)])
        fabric = FabricObj(state)
        self._emit(fabric, "Fabric", node, frame, args, keywords)
        return fabric

    def _fabric_config(
        self, given: dict[str, Value], opaque: bool, frame: Frame
    ) -> tuple[FabricConfig, tuple]:
        provenance: list[Evidence] = []
        fields: dict[str, Any] = {"script_dir": os.path.dirname(frame.module.path)}
        strategy = self._concrete(given.get("strategy", Const("auto")))
        if "strategy" not in given and opaque:
            strategy = Unknown(reason="Fabric(**kwargs)")
        if isinstance(strategy, Const) and (strategy.value is None or isinstance(strategy.value, str)):
            fields["strategy_name"] = strategy.value.lower() if isinstance(strategy.value, str) else None
            fields["strategy_given"] = "strategy" in given
            provenance.extend(strategy.origins)
        elif isinstance(strategy, StrategyObj):
            fields["strategy_class"] = strategy.class_name
            fields["strategy_user_class"] = strategy.user_class
            fields["strategy_package"] = strategy.package
            fields["strategy_given"] = True
            options: list[tuple[str, Any]] = []
            for key, value in strategy.options.items():
                literal = _literal(self._concrete(value))
                if literal is not _NOT_LITERAL:
                    options.append((key, literal))
                elif key == "config":
                    options.append((key, _UNREADABLE))
            fields["strategy_options"] = tuple(options)
            provenance.extend(strategy.origins)
        else:
            fields["strategy_known"] = False
        for name, default in (
            ("accelerator", "auto"),
            ("devices", "auto"),
            ("num_nodes", 1),
            ("precision", None),
        ):
            value = self._concrete(given.get(name, Const(default)))
            if name not in given and opaque:
                value = UNKNOWN
            literal = _literal(value)
            if literal is _NOT_LITERAL:
                if name == "accelerator":
                    fields["accelerator"] = None
                elif name == "devices":
                    fields["devices_known"] = False
                elif name == "precision":
                    fields["precision_known"] = False
                else:
                    fields[name] = None
            else:
                fields[name] = literal
        return FabricConfig(**fields), tuple(provenance)

    def _strategy_object(
        self,
        qualname: str,
        keywords: dict[str, Value],
        node: ast.Call,
        frame: Frame,
        user_class: Optional[str] = None,
    ) -> Value:
        class_name = qualname.rsplit(".", 1)[-1]
        package = (
            "lightning_fabric"
            if qualname.startswith("lightning_fabric")
            else (
                "lightning.pytorch"
                if qualname.startswith(("lightning.pytorch", "pytorch_lightning"))
                else "lightning.fabric"
            )
        )
        origin = Evidence(frame.module.parsed, node, f"{user_class or class_name}(...)")
        return StrategyObj(
            class_name, user_class, dict(keywords), package, (origin,), node, frame.module.path
        )

    def _fabric_text(self, fabric: FabricObj, node: ast.AST, frame: Frame, direct: bool) -> str:
        """Source text that names ``fabric`` here: the receiver of the call, or a name in scope."""
        if direct and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return frame.module.parsed.segment(node.func.value) or "fabric"
        for name, value in (frame.locals or {}).items():
            if value is fabric:
                return name
        for name, value in frame.module.globals.items():
            if value is fabric:
                return name
        self_value = (frame.locals or {}).get("self")
        if isinstance(self_value, Obj):
            for attr, value in self_value.attrs.items():
                if value is fabric:
                    return f"self.{attr}"
        return ""

    def _emit(
        self,
        fabric: FabricObj,
        method: str,
        node: ast.Call,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
        receiver: Optional[Value] = None,
    ) -> CallEvent:
        place = self.places[-1] if self.places else None
        event = CallEvent(
            method,
            node,
            frame.module.parsed,
            fabric.site,
            args,
            keywords,
            place,
            fabric_text=self._fabric_text(fabric, node, frame, direct=method in FABRIC_METHODS),
            extra={"receiver": receiver},
            via=self.script_call if frame.module is not self.main_env else None,
        )
        if self.reporting:
            observed = Observed(event, self.guard, self.check(event))
            self.trail.extend(self.observed, [observed])
        return event

    def _fabric_variants(self, receiver: Choice) -> Optional[list[tuple[int, FabricObj]]]:
        """The Fabric objects a merged value may be on this path, when it is nothing else."""
        leaves = self._leaves(receiver, TRUE, 0)
        if len(leaves) < 2 or not all(isinstance(value, FabricObj) for _, value in leaves):
            return None
        return [(guard, value) for guard, value in leaves]  # type: ignore[misc]

    def _dispatch_fabric_call(
        self,
        receiver: Choice,
        variants: list[tuple[int, FabricObj]],
        method: str,
        node: ast.Call,
        frame: Frame,
    ) -> Value:
        """A call on one of several Fabric objects: each under its guard, joined; arguments once."""
        evaluated = self._eval_args(node, frame)[:2] if method in FABRIC_METHODS else None
        alternatives = [
            (
                self.guards.and_(self.guard, guard),
                lambda fabric=fabric: self._fabric_call(  # type: ignore[misc]
                    fabric, method, node, frame, evaluated, run_target=False
                ),
            )
            for guard, fabric in variants
        ]
        try:
            result = run_alternatives(self, frame, alternatives)
        except _CannotMerge:
            # The Fabric objects' states cannot be joined: one Fabric per path instead.
            return self._fabric_call(self._concrete(receiver), method, node, frame, evaluated)  # type: ignore[arg-type]
        if method == "launch" and evaluated is not None:
            # The launched function runs once, with the Fabric it may be on this path.
            args, keywords = evaluated
            function = args[0] if args else keywords.get("function")
            if isinstance(function, BoundMethod):
                return self._call_function(function.function, [function.receiver, receiver, *args[1:]], {})
            if isinstance(function, FunctionRef):
                return self._call_function(function, [receiver, *args[1:]], {})
        return result

    def _fabric_call(
        self,
        fabric: FabricObj,
        method: str,
        node: ast.Call,
        frame: Frame,
        evaluated: Optional[tuple[list[Value], dict[str, Value]]] = None,
        run_target: bool = True,
    ) -> Value:
        if method not in FABRIC_METHODS:
            if evaluated is None:
                self._eval_args(node, frame)
            if method in ("init_tensor", "sharded_model", "rank_zero_first"):
                return ContextValue("other", fabric)
            return Unknown(text=frame.module.parsed.segment(node))
        args, keywords = evaluated if evaluated is not None else self._eval_args(node, frame)[:2]
        args = [self._concrete(a) if isinstance(a, Choice) else a for a in args]
        if method == "init_module":
            keywords = dict(keywords)
            empty_init = keywords.get("empty_init", args[0] if args else Const(None))
            empty_init = self._concrete(empty_init)
            if not isinstance(empty_init, Const):
                source = next((k.value for k in node.keywords if k.arg == "empty_init"), None) or (
                    node.args[0] if node.args else node
                )
                truth = self._truth(empty_init, source, frame)
                empty_init = Const(truth)
            keywords["empty_init"] = empty_init
        self._emit(fabric, method, node, frame, args, keywords)
        return self._effect(fabric, method, node, frame, args, keywords, run_target)

    def _effect(
        self,
        fabric: FabricObj,
        method: str,
        node: ast.Call,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
        run_target: bool = True,
    ) -> Value:
        """What a Fabric call returns and changes, assuming it succeeded."""
        state = fabric.site
        if method in ("setup", "setup_module"):
            module = args[0] if args else keywords.get("module", UNKNOWN)
            inner = module.inner if isinstance(module, SetupModule) else module
            if not isinstance(inner, Obj):
                inner = Obj(node, frame.module.path)
            self.trail.set_item(inner.attrs, "__setup__", Const(True), inner)
            if inner.setup_place is None:
                self.trail.set_attr(inner, "setup_place", self.places[-1] if self.places else None)
            self.trail.set_attr(state, "models_setup", state.models_setup + 1)
            wrapped: Value = SetupModule(inner, fabric, node)
            optimizers = args[1:] if method == "setup" else []
            if not optimizers:
                return wrapped
            return Seq(
                [wrapped, *(self._wrap_optimizer(o, fabric, node, frame) for o in optimizers)], is_tuple=True
            )
        if method == "setup_optimizers":
            wrapped_all = [self._wrap_optimizer(o, fabric, node, frame) for o in args]
            return wrapped_all[0] if len(wrapped_all) == 1 else Seq(wrapped_all, is_tuple=True)
        if method == "setup_dataloaders":
            loaders: list[Value] = [SetupDataLoader(a, fabric) for a in args]
            return loaders[0] if len(loaders) == 1 else Seq(loaders, is_tuple=True)
        if method == "init_module":
            empty_init = keywords.get("empty_init")
            flag = empty_init.value if isinstance(empty_init, Const) else None
            return ContextValue("init_module", fabric, empty_init=flag)
        if method == "no_backward_sync":
            return ContextValue("no_backward_sync", fabric)
        if method == "launch":
            function = args[0] if args else keywords.get("function")
            if state.strategy.cli:
                # fabric.py:990: under `fabric run` launch() raises, and its function never runs.
                if isinstance(function, (FunctionRef, BoundMethod)):
                    target = function.function if isinstance(function, BoundMethod) else function
                    self.executed_functions.add(id(target.node))
                self.exited = True  # as at the script's own `raise`: this path ends here
                raise StopRun()
            self.trail.set_attr(state, "launched", True)
            self.trail.set_attr(state, "launch_count", state.launch_count + 1)
            if run_target and isinstance(function, (FunctionRef, BoundMethod)):
                rest = args[1:]
                if isinstance(function, BoundMethod):
                    return self._call_function(function.function, [function.receiver, fabric, *rest], {})
                return self._call_function(function, [fabric, *rest], {})
            return UNKNOWN
        if method in ("backward", "clip_gradients"):
            return Const(None)
        return Unknown(text=frame.module.parsed.segment(node))  # broadcast, load, ...: values from outside

    def _wrap_optimizer(self, optimizer: Value, fabric: FabricObj, node: ast.Call, frame: Frame) -> Value:
        if isinstance(optimizer, SetupOptimizer):
            return SetupOptimizer(optimizer.inner, fabric)
        inner = optimizer if isinstance(optimizer, Obj) else Obj(node, frame.module.path)
        return SetupOptimizer(inner, fabric)


# ----- helpers -------------------------------------------------------------------------

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


class _Marker:
    def __repr__(self) -> str:
        return "<unreadable>"


_NOT_LITERAL = _Marker()
_UNREADABLE = _Marker()


def _literal(value: Value) -> Any:
    """A plain Python value for a constant abstract value, else ``_NOT_LITERAL``."""
    if isinstance(value, Const):
        return value.value
    if isinstance(value, Seq):
        items = [_literal(item) for item in value.items]
        if any(item is _NOT_LITERAL for item in items):
            return _NOT_LITERAL
        return tuple(items) if value.is_tuple else items
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items.items():
            literal = _literal(item)
            if literal is _NOT_LITERAL:
                return _NOT_LITERAL
            result[key] = literal
        return result
    return _NOT_LITERAL


def _literal_seq(items: list[Value], is_tuple: bool) -> Value:
    return Seq(items, is_tuple=is_tuple)


def _items(value: Value) -> list[Value]:
    if isinstance(value, Seq):
        return list(value.items)
    return [value]


def _unpack(value: Value, count: int) -> list[Value]:
    if isinstance(value, Seq) and len(value.items) == count:
        return list(value.items)
    if isinstance(value, Const) and isinstance(value.value, (tuple, list)) and len(value.value) == count:
        return [Const(item, value.origins) for item in value.value]
    return [UNKNOWN] * count


def _first_item(value: Value) -> Value:
    if isinstance(value, Seq) and value.items:
        return value.items[0]
    if isinstance(value, SetupDataLoader):
        return UNKNOWN
    return UNKNOWN


def _binop(op: ast.operator, left: Value, right: Value) -> Value:
    if isinstance(left, ModelOutput):
        return left
    if isinstance(right, ModelOutput):
        return right
    if isinstance(left, Const) and isinstance(right, Const):
        try:
            return Const(_BINOPS[type(op)](left.value, right.value), left.origins + right.origins)
        except Exception:
            return UNKNOWN
    if isinstance(left, Seq) and isinstance(right, Seq) and isinstance(op, ast.Add):
        return Seq(left.items + right.items)
    return Unknown()


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b if not isinstance(a, str) else _no(),
    ast.Div: lambda a, b: a / b,
}


def _no() -> Any:
    raise ValueError


def _params_of(receiver: Value, node: ast.AST) -> Params:
    if isinstance(receiver, SetupModule):
        return Params(receiver.inner, meta=False, set_up=True, at=node)
    assert isinstance(receiver, Obj)
    # Setting a module up materialises and shards its parameters in place.
    set_up = "__setup__" in receiver.attrs
    return Params(receiver, meta=receiver.meta and not set_up, set_up=set_up, at=node)


def _collect_params(value: Value, depth: int = 0) -> list[Params]:
    if depth > 4:
        return []
    if isinstance(value, Params):
        return [value]
    if isinstance(value, Seq):
        found: list[Params] = []
        for item in value.items:
            found.extend(_collect_params(item, depth + 1))
        return found
    if isinstance(value, Mapping):
        found = []
        for item in value.items.values():
            found.extend(_collect_params(item, depth + 1))
        return found
    return []


def _option_value(option: ArgOption) -> Value:
    """``args.<dest>``: the default unless the user passes the flag; choices when listed."""
    default = option.default
    key = f"argparse:{id(option.node)}"
    if option.choices:
        ordered = list(option.choices)
        if isinstance(default, Const):
            ordered.sort(key=lambda c: 0 if isinstance(c, Const) and c.value == default.value else 1)
        descriptions = []
        texts = []
        for choice in ordered:
            shown = repr(choice.value) if isinstance(choice, Const) else "?"
            is_default = (
                isinstance(default, Const) and isinstance(choice, Const) and choice.value == default.value
            )
            suffix = " (the default)" if is_default else ""
            descriptions.append(f"`{option.flag}` is {shown}{suffix}")
            texts.append(f"{shown}{suffix}")
        return Choice(key, tuple(ordered), tuple(descriptions), f"`{option.flag}`", tuple(texts))
    if isinstance(default, Const):
        # A boolean flag given on the command line is its opposite (``store_true``).
        given: Value = (
            Const(not default.value)
            if isinstance(default.value, bool)
            else Unknown(text=option.flag, key=f"{key}:given")
        )
        return Choice(
            key,
            (default, given),
            (f"`{option.flag}` left at its default {default.value!r}", f"`{option.flag}` given"),
        )
    return Unknown(text=option.flag)


def _class_method(cls: Optional[ClassRef], name: str, depth: int = 0) -> Optional[FunctionRef]:
    if cls is None or depth > 8:
        return None
    for statement in cls.node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
            return FunctionRef(statement, cls.module, owner=cls)
    for base in cls.bases:
        if isinstance(base, ClassRef):
            found = _class_method(base, name, depth + 1)
            if found is not None:
                return found
    return None


def _class_attribute(cls: ClassRef, name: str, run: Run, frame: Frame) -> Optional[Value]:
    for statement in cls.node.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return run._eval(statement.value, Frame(cls.module))
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.target.id == name and statement.value is not None:
                return run._eval(statement.value, Frame(cls.module))
    return None


def _bind_fields(cls: ClassRef, instance: Obj, args: list[Value], keywords: dict[str, Value]) -> None:
    """A dataclass (or NamedTuple) built without an ``__init__`` of its own: arguments become fields."""
    fields: list[str] = []
    chain: list[ClassRef] = []
    current: Optional[ClassRef] = cls
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = next((b for b in current.bases if isinstance(b, ClassRef)), None)
    for klass in reversed(chain):
        for statement in klass.node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                if statement.target.id not in fields:
                    fields.append(statement.target.id)
    for name, value in zip(fields, args):
        instance.attrs[name] = value
    for name, value in keywords.items():
        if name in fields:
            instance.attrs[name] = value


def _lightning_base(cls: ClassRef, depth: int = 0) -> Optional[str]:
    """The Lightning class a user class derives from (Fabric or a strategy), if any."""
    if depth > 8:
        return None
    for base in cls.bases:
        if isinstance(base, External):
            if base.qualname in FABRIC_CLASSES:
                return base.qualname
            if base.qualname.rsplit(".", 1)[-1] in STRATEGY_CLASSES and base.qualname.startswith("lightning"):
                return base.qualname
        if isinstance(base, ClassRef):
            found = _lightning_base(base, depth + 1)
            if found:
                return found
    return None


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same_constant(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _tracked(value: Value) -> bool:
    return isinstance(
        value,
        (FabricObj, Obj, SetupModule, SetupOptimizer, SetupDataLoader, Params, StrategyObj, ModelOutput, Seq),
    )


def _interesting_names(parsed: ParsedSource) -> frozenset[str]:
    """Names read by Fabric API calls and constructors anywhere in the module."""
    cached = parsed.interesting_names
    if cached is not None:
        return cached
    names: set[str] = set()
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Call):
            func = node.func
            is_api = isinstance(func, ast.Attribute) and func.attr in FABRIC_METHODS
            is_ctor = (
                isinstance(func, ast.Name) and (func.id.endswith("Fabric") or func.id.endswith("Strategy"))
            ) or (
                isinstance(func, ast.Attribute)
                and (func.attr.endswith("Fabric") or func.attr.endswith("Strategy"))
            )
            if is_api or is_ctor:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    for sub in ast.walk(arg):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
    result = frozenset(names)
    # Kept on the parsed file itself: an id()-keyed cache would hand a new tree an old answer.
    parsed.interesting_names = result
    return result


def _is_exit_call(func: ast.AST) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("exit", "quit")
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("exit", "_exit")
        and isinstance(func.value, ast.Name)
        and func.value.id in ("sys", "os")
    )


def _looks_like_fabric_param(param: ast.arg) -> bool:
    annotation = param.annotation
    text = ""
    if isinstance(annotation, ast.Name):
        text = annotation.id
    elif isinstance(annotation, ast.Attribute):
        text = annotation.attr
    elif isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value.rsplit(".", 1)[-1]
    return text == "Fabric" or param.arg == "fabric"


def entry_functions(parsed: ParsedSource) -> Iterable[ast.AST]:
    """Top-level functions and methods that use Fabric, directly or through the module's other
    functions and classes, in source order (candidate entry points)."""
    definitions = [
        s for s in parsed.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    facts = {id(d): _definition_facts(d) for d in definitions}
    using = {d.name for d in definitions if facts[id(d)][0]}
    changed = True
    while changed:
        changed = False
        for definition in definitions:
            if definition.name not in using and facts[id(definition)][1] & using:
                using.add(definition.name)
                changed = True
    for statement in definitions:
        if isinstance(statement, ast.ClassDef):
            for inner in statement.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    mentions, loaded = _definition_facts(inner)
                    if mentions or loaded & using:
                        yield inner
        elif statement.name in using:
            yield statement


def _definition_facts(definition: ast.AST) -> tuple[bool, set[str]]:
    """One walk: does it use Fabric's API , and which names does it read?"""
    mentions = False
    loaded: set[str] = set()
    for node in ast.walk(definition):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.add(node.id)
            if node.id.endswith("Fabric") or node.id.endswith("Strategy"):
                mentions = True
        elif isinstance(node, ast.Attribute) and (
            node.attr in FABRIC_METHODS or node.attr.endswith("Fabric")
        ):
            mentions = True
    return mentions, loaded
