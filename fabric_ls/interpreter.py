"""Walk a script the way Python would, with abstract values, and report Fabric calls.

One *run* executes the program once along one path. Where the path depends on
something the source does not fix (an ``if`` on a CLI flag, a strategy choice),
the run asks ``Decisions`` which way to go; ``explore.py`` re-runs with every
combination and merges what the runs saw. Loops run their body once.
"""

from __future__ import annotations

import ast
import builtins
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from fabric_ls.events import CallEvent, FabricState, StatementPlace
from fabric_ls.project import Project, is_external
from fabric_ls.resolve_strategy import FabricConfig, ResolvedStrategy, resolve
from fabric_ls.source import ParsedSource
from fabric_ls.strategies import STRATEGY_CLASSES, is_subclass
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
# Paths of one summarised helper function.
MAX_SUMMARY_PATHS = 4


class StopRun(Exception):
    """The run ends here (a ``raise``, ``sys.exit``, or the step budget)."""


class _Return(Exception):
    def __init__(self, value: Value) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass
class Decision:
    key: str
    index: int
    count: int
    descriptions: tuple[str, ...]


class Decisions:
    """Which way each fork goes in this run: replayed from ``prefix``, then the first option."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.taken: list[Decision] = []

    def choose(self, key: str, descriptions: tuple[str, ...]) -> int:
        position = len(self.taken)
        if position >= MAX_DECISIONS:
            # Too many forks: follow the first option without exploring the others.
            self.taken.append(Decision(key, 0, 1, descriptions))
            return 0
        index = self.prefix[position] if position < len(self.prefix) else 0
        index = min(index, len(descriptions) - 1)
        self.taken.append(Decision(key, index, len(descriptions), descriptions))
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
    def __init__(self, module: ModuleEnv, function: Optional[ast.AST] = None) -> None:
        self.module = module
        self.function = function
        self.locals: Optional[dict[str, Value]] = {} if function is not None else None

    def lookup(self, name: str) -> Optional[Value]:
        if self.locals is not None and name in self.locals:
            return self.locals[name]
        return self.module.globals.get(name)

    def bind(self, name: str, value: Value) -> None:
        if self.locals is not None:
            self.locals[name] = value
        else:
            self.module.globals[name] = value


EventSink = Callable[[CallEvent], None]


class Run:
    """One execution of a program along one path."""

    def __init__(
        self,
        project: Project,
        main: ParsedSource,
        decisions: Decisions,
        on_call: EventSink,
        assumed_strategy: Optional[str] = None,
        force_strategy: bool = False,
        shared: Optional[SharedAcrossRuns] = None,
    ) -> None:
        self.project = project
        self.main = main
        self.decisions = decisions
        self.on_call = on_call
        self.assumed_strategy = assumed_strategy
        self.force_strategy = force_strategy
        # The run ended at the script's own ``raise``/``sys.exit``: a path the author rules out.
        self.exited = False
        self.steps = 0
        self.depth = 0
        self.modules: dict[str, ModuleEnv] = {}
        self.shared = shared if shared is not None else SharedAcrossRuns()
        self.helper_modules = self.shared.helper_modules
        self.bound_choices: dict[str, int] = {}
        self.fabrics: list[FabricState] = []
        self.executed_functions: set[int] = set()
        self.dependencies: set[str] = set()
        self.places: list[StatementPlace] = []
        self.summarizing = False
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
        saved_decisions, saved_sink = self.decisions, self.on_call
        self.decisions, self.on_call = _NoForks(), _ignore_call
        try:
            self._exec_module(self.main_env)
        except StopRun:
            pass
        finally:
            self.decisions, self.on_call = saved_decisions, saved_sink
            self.fabrics.clear()
            self.executed_functions.clear()
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
            strategy = ResolvedStrategy(**{**assumed.__dict__, "assumed": True})
        # Whoever passes it in has launched it, or it is single-device: do not guess FAB009.
        return FabricState(self.main.path, None, strategy, launched=True, escaped=True)  # type: ignore[arg-type]

    # ----- modules -----------------------------------------------------------------

    def _exec_module(self, env: ModuleEnv) -> None:
        env.executed = True
        frame = Frame(env)
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
        saved, saved_sink, saved_steps = self.decisions, self.on_call, self.steps
        self.decisions, self.on_call = _NoForks(), _ignore_call
        try:
            self._exec_module(env)
        except StopRun:
            pass
        finally:
            self.decisions, self.on_call, self.steps = saved, saved_sink, saved_steps
        return env

    # ----- statements --------------------------------------------------------------

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise StopRun()

    def _exec_block(self, body: list[ast.stmt], frame: Frame) -> None:
        for index, statement in enumerate(body):
            self._tick()
            self.places.append(StatementPlace(statement, body, index))
            try:
                self._exec(statement, frame)
            finally:
                self.places.pop()

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
        truth = self._truth(test, node.test, frame, fork=self._relevant(node, frame))
        if truth is None:
            return
        self._exec_block(node.body if truth else node.orelse, frame)

    def _loop_body(self, node: ast.stmt, body: list[ast.stmt], frame: Frame) -> None:
        if not self._relevant(node, frame):
            return
        try:
            self._exec_block(body, frame)
        except (_Break, _Continue):
            pass

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
        try:
            self._exec_block(node.body, frame)
        except StopRun:
            if self.steps > MAX_STEPS:
                raise
            # A raise inside ``try`` lands in a handler; we assume it is handled.
            self.exited = False
        else:
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
                owner.attrs[target.attr] = value
            elif isinstance(owner, Namespace):
                pass
        elif isinstance(target, ast.Subscript):
            owner = self._eval(target.value, frame)
            key = self._eval(target.slice, frame)
            if isinstance(owner, Mapping) and isinstance(key, Const):
                try:
                    owner.items[key.value] = value
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
            elif isinstance(child, (ast.Global, ast.Nonlocal)):
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
        """Resolve a Choice to one option in this run (forking the first time)."""
        while isinstance(value, Choice):
            index = self.bound_choices.get(value.key)
            if index is None:
                index = self.decisions.choose(value.key, value.descriptions)
                self.bound_choices[value.key] = index
            value = value.options[index]
        return value

    def _truth(self, value: Value, node: ast.AST, frame: Frame, fork: bool = True) -> Optional[bool]:
        """The truth of a test in this run; None means: skip the statement."""
        value = self._concrete(value)
        if isinstance(value, Const):
            try:
                return bool(value.value)
            except Exception:
                return True
        if isinstance(value, (FabricObj, FunctionRef, ClassRef, SetupModule, SetupOptimizer, StrategyObj)):
            return True
        if isinstance(value, Obj) and value.cls is not None:
            return True
        if not fork:
            return None
        text = frame.module.parsed.segment(node) or "condition"
        text = " ".join(text.split())
        if len(text) > 60:
            text = text[:57] + "..."
        key = f"if:{frame.module.path}:{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0)}"
        index = self.decisions.choose(key, (f"`{text}`", f"not `{text}`"))
        return index == 0

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
            return Unknown(text=frame.module.parsed.segment(node))
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
            return Unknown(text=frame.module.parsed.segment(node))
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
            fork = Choice(f"ifexp:{id(node)}", (body, orelse), (f"`{text}`", f"not `{text}`"))

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
        return not self._compute_relevance(node, frame, set())

    def _lift(self, choice: Choice, function: Callable[[Value], Value]) -> Choice:
        """The same choice (same key, same conditions) with ``function`` applied to each option."""
        options = tuple(
            self._lift(option, function) if isinstance(option, Choice) else function(option)
            for option in choice.options
        )
        return Choice(choice.key, options, choice.descriptions)

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
        return Unknown(text=text) if result is None else Const(result)

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
        func = node.func
        # ``x.method(...)``: evaluate the receiver once, then dispatch.
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, frame)
            receiver = self._concrete(receiver) if isinstance(receiver, Choice) else receiver
            if isinstance(receiver, FabricObj):
                return self._fabric_call(receiver, func.attr, node, frame)
            callee = self._attribute(receiver, func.attr, func, frame)
            return self._call_on(receiver, func.attr, callee, node, frame)
        callee = self._eval(func, frame)
        return self._call_value(callee, node, frame)

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
                receiver.meta = False  # real tensors replace the meta ones
            return UNKNOWN
        if isinstance(receiver, SetupModule):
            self._eval_args(node, frame)
            if attr in ("forward", "__call__"):
                return ModelOutput(receiver.fabric)
            return ModelOutput(receiver.fabric) if attr in _TENSOR_RETURNING else Unknown()
        if isinstance(receiver, Seq) and attr in ("append", "extend", "insert"):
            args, _, _ = self._eval_args(node, frame)
            receiver.items.extend(args[-1:] if attr != "extend" else _items(args[0]) if args else [])
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
            if self._summarizable(callee.function, args, keywords):
                return self._summarize(callee.function, args, keywords, opaque, node, frame)
            return self._call_function(callee.function, args, keywords, opaque=opaque)
        if isinstance(callee, FunctionRef):
            args, keywords, opaque = self._eval_args(node, frame)
            if self._summarizable(callee, args, keywords):
                return self._summarize(callee, args, keywords, opaque, node, frame)
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
                value.site.escaped = True
        outputs = [v for v in [*args, *keywords.values()] if isinstance(v, ModelOutput)]
        if outputs and not found:
            return outputs[0]
        meta = any(
            ctx.kind == "meta_device" or (ctx.kind == "init_module" and ctx.empty_init)
            for ctx in self.contexts
        )
        meta = meta and self._meta_context(frame)
        place = self.places[-1] if self.places else None
        return Obj(node, frame.module.path, meta=meta, params=tuple(found), name=name, created_place=place)

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
        frame = Frame(function.module, node)
        self._bind_params(node, frame, args, keywords, opaque, entry)
        self.depth += 1
        try:
            if isinstance(node, ast.Lambda):
                return self._eval(node.body, frame)
            self._exec_block(node.body, frame)  # type: ignore[attr-defined]
        except _Return as returned:
            return returned.value
        except (_Break, _Continue):
            pass
        finally:
            self.depth -= 1
        return Const(None)

    # ----- helpers summarised by their return values ----------------------------------

    def _summarizable(self, function: FunctionRef, args: list[Value], keywords: dict[str, Value]) -> bool:
        """A helper that touches nothing Fabric-related: only what it returns can matter."""
        if isinstance(function.node, ast.Lambda) or self.depth >= MAX_DEPTH - 1:
            return False
        return not self._function_relevance(function)

    def _function_relevance(self, function: FunctionRef) -> bool:
        key = id(function.node)
        cached = self._function_relevant.get(key)
        if cached is None:
            self._function_relevant[key] = True  # recursion guard
            frame = Frame(function.module, function.node)
            cached = self._compute_relevance(function.node, frame, {key}, returns_count=False)
            self._function_relevant[key] = cached
        return cached

    def _summarize(
        self,
        function: FunctionRef,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool,
        node: ast.Call,
        frame: Frame,
    ) -> Value:
        """Run a helper along each of its paths (bounded) and return what it can return.

        Its forks stay inside: several constant results become one lazy Choice, so the
        caller's run forks only where the value is needed (a precision, a strategy name).
        """
        key = _summary_key(function, node, args, keywords)
        if key is not None and key in self.shared.summaries:
            return self.shared.summaries[key]
        if self.summarizing:
            # Inside another summary: one path is enough (nested summaries multiply).
            return self._call_on_one_path(function, args, keywords, opaque)
        saved_decisions, saved_choices = self.decisions, self.bound_choices
        pending: deque[list[int]] = deque([[]])
        results: list[Value] = []
        runs = 0
        self.summarizing = True
        try:
            while pending and runs < MAX_SUMMARY_PATHS:
                runs += 1
                self.decisions = Decisions(pending.popleft())
                self.bound_choices = dict(saved_choices)
                try:
                    results.append(self._call_function(function, list(args), dict(keywords), opaque=opaque))
                except StopRun:
                    if self.steps > MAX_STEPS:
                        raise
                    self.exited = False  # that path raises; the others are what callers see
                taken = self.decisions.taken
                for position in range(len(self.decisions.prefix), len(taken)):
                    for alternative in range(1, taken[position].count):
                        pending.append([d.index for d in taken[:position]] + [alternative])
        finally:
            self.decisions, self.bound_choices = saved_decisions, saved_choices
            self.summarizing = False
        merged = self._merge_results(results, node, frame)
        if key is not None and _plain_result(merged):
            self.shared.summaries[key] = merged
        return merged

    def _merge_results(self, results: list[Value], node: ast.Call, frame: Frame) -> Value:
        distinct: list[Value] = []
        for value in results:
            if isinstance(value, Const):
                if any(isinstance(d, Const) and _same_constant(d.value, value.value) for d in distinct):
                    continue
            elif any(d is value for d in distinct):
                continue
            distinct.append(value)
        if not distinct:
            raise StopRun()  # every path raises
        if len(distinct) == 1:
            return distinct[0]
        text = " ".join(frame.module.parsed.segment(node).split())
        if len(text) > 50:
            text = text[:47] + "..."
        if all(isinstance(d, Const) for d in distinct):
            descriptions = tuple(f"`{text}` returns {d.value!r}" for d in distinct)  # type: ignore[attr-defined]
            return Choice(f"summary:{id(node)}", tuple(distinct), descriptions)
        return Unknown(text=text)

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
                frame.bind(param.arg, Unknown(text=param.arg))
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
        return Choice(
            key,
            (default, Unknown(text=name)),
            (f"`{name}` left at its default {shown}", f"`{name}` given another value"),
        )

    def _instantiate(self, cls: ClassRef, node: ast.Call, frame: Frame) -> Value:
        lightning_base = _lightning_base(cls)
        if lightning_base in FABRIC_CLASSES:
            return self._make_fabric(node, frame, user_class=cls.name)
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
            return self._make_fabric(node, frame)
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
            parser.options[dest] = ArgOption(dest, flag, default, choices, node)
            return Const(None)
        if attr in ("parse_args", "parse_known_args"):
            namespace = Namespace(parser)
            return Seq([namespace, UNKNOWN], is_tuple=True) if attr == "parse_known_args" else namespace
        if attr in ("add_argument_group", "add_mutually_exclusive_group"):
            return parser
        return UNKNOWN

    # ----- Fabric ------------------------------------------------------------------

    def _make_fabric(self, node: ast.Call, frame: Frame, user_class: Optional[str] = None) -> Value:
        args, keywords, opaque = self._eval_args(node, frame)
        names = ("accelerator", "strategy", "devices", "num_nodes", "precision")
        given = dict(zip(names, args))
        given.update({k: v for k, v in keywords.items() if k in names})
        config, provenance = self._fabric_config(given, opaque, frame)
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
            strategy = ResolvedStrategy(**{**assumed.__dict__, "assumed": True})
        state = FabricState(
            frame.module.path,
            node,
            strategy,
            provenance,
            place=self.places[-1] if self.places else None,
            parsed=frame.module.parsed,
        )
        strategy_value = self._concrete(given["strategy"]) if "strategy" in given else None
        if isinstance(strategy_value, StrategyObj):
            state.strategy_call = strategy_value.node
            state.strategy_path = strategy_value.path
        self.fabrics.append(state)
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
        )
        self.on_call(event)
        return event

    def _fabric_call(self, fabric: FabricObj, method: str, node: ast.Call, frame: Frame) -> Value:
        if method not in FABRIC_METHODS:
            self._eval_args(node, frame)
            if method in ("init_tensor", "sharded_model", "rank_zero_first"):
                return ContextValue("other", fabric)
            return Unknown(text=frame.module.parsed.segment(node))
        args, keywords, _ = self._eval_args(node, frame)
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
        return self._effect(fabric, method, node, frame, args, keywords)

    def _effect(
        self,
        fabric: FabricObj,
        method: str,
        node: ast.Call,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
    ) -> Value:
        """What a Fabric call returns and changes, assuming it succeeded."""
        state = fabric.site
        if method in ("setup", "setup_module"):
            module = args[0] if args else keywords.get("module", UNKNOWN)
            inner = module.inner if isinstance(module, SetupModule) else module
            if not isinstance(inner, Obj):
                inner = Obj(node, frame.module.path)
            inner.attrs["__setup__"] = Const(True)
            if inner.setup_place is None:
                inner.setup_place = self.places[-1] if self.places else None
            state.models_setup += 1
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
            state.launched = True
            state.launch_count += 1
            if isinstance(function, (FunctionRef, BoundMethod)):
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


def _ignore_call(event: CallEvent) -> None:
    return None


class _NoForks(Decisions):
    def __init__(self) -> None:
        super().__init__([])

    def choose(self, key: str, descriptions: tuple[str, ...]) -> int:
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
        for choice in ordered:
            shown = repr(choice.value) if isinstance(choice, Const) else "?"
            is_default = (
                isinstance(default, Const) and isinstance(choice, Const) and choice.value == default.value
            )
            suffix = " (the default)" if is_default else ""
            descriptions.append(f"`{option.flag}` is {shown}{suffix}")
        return Choice(key, tuple(ordered), tuple(descriptions))
    if isinstance(default, Const):
        return Choice(
            key,
            (default, Unknown(text=option.flag)),
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


def _summary_key(
    function: FunctionRef, node: ast.AST, args: list[Value], keywords: dict[str, Value]
) -> Optional[tuple]:
    parts: list[Any] = [id(function.node), id(node)]
    for value in [*args, *(keywords[k] for k in sorted(keywords))]:
        if isinstance(value, Const) and isinstance(value.value, (str, int, float, bool, type(None))):
            parts.append((type(value.value).__name__, value.value))
        elif isinstance(value, Unknown):
            parts.append("?")
        else:
            return None
    return (*parts, tuple(sorted(keywords)))


def _plain_result(value: Value) -> bool:
    if isinstance(value, Choice):
        return all(_plain_result(option) for option in value.options)
    return isinstance(value, (Const, Unknown))


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
    using = {d.name for d in definitions if _mentions_fabric(d)}
    changed = True
    while changed:
        changed = False
        for definition in definitions:
            if definition.name not in using and _names_loaded(definition) & using:
                using.add(definition.name)
                changed = True
    for statement in definitions:
        if isinstance(statement, ast.ClassDef):
            for inner in statement.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    _mentions_fabric(inner) or _names_loaded(inner) & using
                ):
                    yield inner
        elif statement.name in using:
            yield statement


def _names_loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _mentions_fabric(function: ast.AST) -> bool:
    """A cheap syntactic test: does the body call Fabric's API or build a Fabric or strategy?"""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and (node.attr in FABRIC_METHODS or node.attr.endswith("Fabric")):
            return True
        if isinstance(node, ast.Name) and (node.id.endswith("Fabric") or node.id.endswith("Strategy")):
            return True
    return False
