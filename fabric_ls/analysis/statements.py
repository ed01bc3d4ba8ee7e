"""Statements: execute a block, split a statement on a value, join branches."""

from __future__ import annotations

import ast
import weakref
from typing import Any, Optional

from fabric_ls.analysis.config_files import holds_file
from fabric_ls.analysis.events import StatementPlace
from fabric_ls.analysis.exits import handled_classes, raised_class
from fabric_ls.analysis.external import is_external
from fabric_ls.analysis.guards import FALSE
from fabric_ls.analysis.join import Break as _Break
from fabric_ls.analysis.join import CannotMerge as _CannotMerge
from fabric_ls.analysis.join import Continue as _Continue
from fabric_ls.analysis.join import Return as _Return
from fabric_ls.analysis.join import SplitHere as _SplitHere
from fabric_ls.analysis.join import (
    StopRun,
    join_loop_exits,
    run_branches,
)
from fabric_ls.analysis.join import condition_key as _condition_key
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    MAX_GUARD_NODES,
    MAX_STEPS,
    Frame,
    ModuleEnv,
)
from fabric_ls.analysis.value_ops import (
    _binop,
    _first_item,
    _unpack,
    known_items,
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    Choice,
    ClassRef,
    ConfigMapping,
    Const,
    ContextValue,
    Evidence,
    External,
    FabricObj,
    FunctionRef,
    LazyItems,
    Mapping,
    ModuleRef,
    Namespace,
    Obj,
    StrategyObj,
    Unknown,
    Value,
)

# Node type → the Run method that executes it (None: not modelled); looked up once per type.
_STATEMENT_HANDLERS: dict[type, Any] = {}
_NOT_LOOKED_UP = object()


class StatementsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- statements --------------------------------------------------------------

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS or self.guards.size > MAX_GUARD_NODES:
            raise StopRun()

    def _exec_block(self, body: list[ast.stmt], frame: Frame) -> None:
        dead = frame.module.dead
        for index, statement in enumerate(body):
            if id(statement) in dead:
                continue  # nothing it does can matter (fabric_ls.analysis.dead_code)
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
        first = guards.and_(start, options[0])  # the options cover every path (Guards.covering)
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
        handler = _STATEMENT_HANDLERS.get(type(node), _NOT_LOOKED_UP)
        if handler is _NOT_LOOKED_UP:
            handler = getattr(type(self), "_stmt_" + type(node).__name__, None)
            _STATEMENT_HANDLERS[type(node)] = handler
        if handler is not None:
            handler(self, node, frame)
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
        # Defined in a function, it reads that function's names (``fabric``) as they are when it runs.
        closure = frame if frame.locals is not None else None
        frame.bind(node.name, FunctionRef(node, frame.module, closure=closure))

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
        if node.exc is not None:
            self._eval(node.exc, frame)  # ``raise SystemExit(main())``: the expression runs first
        self.exited, self.exit_class = True, raised_class(node)
        raise StopRun()

    def _stmt_Assert(self, node: ast.Assert, frame: Frame) -> None:
        """``assert isinstance(fabric.strategy, XLAFSDPStrategy)``: where the test fails, the script's
        own AssertionError ends the path (as a ``raise`` would; ``python -O`` is not assumed)."""
        test = self._eval(node.test, frame)
        split = self._split(test, node.test, frame, relevant=self._relevant(node, frame))
        if split is None or split is True:
            return
        if split is False:
            self.exited, self.exit_class = True, "AssertionError"
            raise StopRun()
        then_guard, else_guard = split
        if not self.decisions.narrows:
            return
        try:
            run_branches(self, frame, then_guard, lambda: None, else_guard, self._assertion_fails)
        except _CannotMerge:
            if self._fork(_condition_key(node.test, frame), [then_guard, else_guard], whole_run=True) == 1:
                self._assertion_fails()

    def _assertion_fails(self) -> None:
        self.exited, self.exit_class = True, "AssertionError"
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
        items = _unrolled_items(node, iterable)
        if items is not None:
            # ``for net in (generator, critic): ... fabric.setup(net, ...)``: each model is set up, so
            # the body runs once per item (it has no jump that would end the loop early).
            for item in items:
                self._assign(node.target, item, frame, node)
                self._exec_block(node.body, frame)
            self._exec_block(node.orelse, frame)
            return
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
        catching = 0
        for item in node.items:
            value = self._eval(item.context_expr, frame)
            if isinstance(value, Choice) and not holds_file(value):
                value = self._concrete(value)
            if isinstance(value, ContextValue):
                self.contexts.append(value)
                pushed += 1
            if isinstance(value, Obj) and value.library_class in _CATCHING_CONTEXTS:
                catching += 1  # ``with pytest.raises(ValueError):`` goes on after the error it expects
            if item.optional_vars is not None:
                # ``with open("config.yaml") as f``: a file's ``__enter__`` gives the file itself.
                opened = value if holds_file(value) else UNKNOWN
                self._assign(item.optional_vars, opened, frame, node)
        self.catching_fabric_errors += catching
        try:
            self._exec_block(node.body, frame)
        finally:
            self.catching_fabric_errors -= catching
            for _ in range(pushed):
                self.contexts.pop()

    _stmt_AsyncWith = _stmt_With

    def _stmt_Try(self, node: ast.Try, frame: Frame) -> None:
        if node.handlers and all(_interrupt_only(handler) for handler in node.handlers):
            # ``except KeyboardInterrupt:`` catches no raise or ``sys.exit`` of the script's own.
            self._exec_block(node.body, frame)
            self._exec_block(node.orelse, frame)
            self._exec_block(node.finalbody, frame)
            return
        self.try_depth += 1
        # What its handlers catch, and whether its body can leave it early: read once per node.
        facts = getattr(node, "_fabric_ls_try", None)
        if facts is None:
            facts = (handled_classes(node), _leaves_early(node.body))
            node._fabric_ls_try = facts  # type: ignore[attr-defined]
        self.try_handlers.append(facts[0])
        # The paths its handlers catch go on after it, unless the body can leave it another way.
        self.try_exits.append(None if facts[1] else [])
        catching = any(_catches_fabric_errors(handler) for handler in node.handlers)
        self.catching_fabric_errors += catching
        completed = False
        try:
            self._exec_block(node.body, frame)
            completed = True
        except StopRun:
            if self.steps > MAX_STEPS or not node.handlers:
                raise  # the budget; or ``try``/``finally``, which catches nothing
            # A raise inside ``try`` lands in a handler; we assume it is handled.
            self.exited = False
        finally:
            self.try_depth -= 1
            self.try_handlers.pop()
            exits = self.try_exits.pop()
            self.catching_fabric_errors -= catching
        if exits:
            # The paths that raised on one side of a branch in the body go on here with the rest.
            join_loop_exits(self, exits)
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

    def _identified(self, value: Value, target: ast.AST, frame: Frame) -> Value:
        """An unknown value bound to a name or an attribute, given an identity there: every test of
        it is then one decision (``use_ds = os.environ.get("USE_DS") == "1"``, then ``if use_ds:``
        twice). The identity is the binding's place and the calls on the way to it, so a helper
        called from two places binds two values, and every run of the program binds the same one."""
        if isinstance(value, Obj) and not value.truth_key:
            value.truth_key = self._binding_key(target, frame)  # ``x = load(); if x: ...; if x: ...``
            return value
        if type(value) is not Unknown or value.key or value is UNKNOWN:
            return value
        text = value.text or frame.module.parsed.segment(target)
        return Unknown(reason=value.reason, text=text, key=self._binding_key(target, frame))

    def _binding_key(self, target: ast.AST, frame: Frame) -> str:
        where = f"{frame.module.path}:{target.lineno}:{target.col_offset}"  # type: ignore[attr-defined]
        calls = ",".join(f"{node.lineno}.{node.col_offset}" for _, node in self.call_stack)
        return f"bound:{where}@{calls}"

    def _assign(self, target: ast.AST, value: Value, frame: Frame, statement: ast.AST) -> None:
        if isinstance(target, (ast.Name, ast.Attribute)):
            value = self._identified(value, target, frame)
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
            elif isinstance(owner, ConfigMapping):
                self.trail.set_item(owner.items, target.attr, value, owner)  # ``cfg.fabric.devices = 2``
            elif isinstance(owner, FabricObj) and target.attr == "_launched" and isinstance(value, Const):
                # What Fabric's launch check reads (``_validate_launched``); Lightning's own tests set it
                # for a Fabric whose processes another one launched.
                self.trail.set_attr(owner.site, "launched", bool(value.value))
            elif isinstance(owner, Namespace):
                # ``args.strategy = "deepspeed"``: what later reads of it see.
                self._parsed_value(owner, target.attr, target.attr)
                self.trail.set_item(owner.read, target.attr, value, owner)
        elif isinstance(target, ast.Subscript):
            owner = self._eval(target.value, frame)
            key = self._eval(target.slice, frame)
            if isinstance(owner, Mapping) and isinstance(key, Const):
                try:
                    self.trail.set_item(owner.items, key.value, value, owner)
                except TypeError:
                    pass
            elif isinstance(owner, Mapping) and not isinstance(owner.items, LazyItems):
                # ``for k in nets: nets[k] = fabric.setup(nets[k])``: any item may now be the new value
                # (the loop ran once, on no key in particular), so none of them is known any more.
                for known in list(owner.items):
                    self.trail.set_item(
                        owner.items, known, Unknown(text=frame.module.parsed.segment(target)), owner
                    )


# Context managers that swallow an error raised in their body (CallEvent.caught).
_CATCHING_CONTEXTS = frozenset({"pytest.raises", "contextlib.suppress"})
# What Lightning's setup checks raise, and their bases: a handler of one of these goes on after them.
_FABRIC_ERRORS = frozenset(
    {"RuntimeError", "ValueError", "TypeError", "NotImplementedError", "Exception", "BaseException"}
)


def _leaves_early(body: list[ast.stmt]) -> bool:
    """A ``return``, ``break``, ``continue`` or ``yield`` in a ``try``'s body (not in a function defined
    there): a path may leave it before its end, so one that raised is not simply joined after it."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _catches_fabric_errors(handler: ast.ExceptHandler) -> bool:
    """``except:``, ``except Exception:``, ``except (ValueError, KeyError):``, ..."""
    caught = handler.type
    if caught is None:
        return True
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(
        (isinstance(name, ast.Name) and name.id in _FABRIC_ERRORS)
        or (isinstance(name, ast.Attribute) and name.attr in _FABRIC_ERRORS)
        for name in names
    )


def _interrupt_only(handler: ast.ExceptHandler) -> bool:
    """``except KeyboardInterrupt:`` (also as ``builtins.KeyboardInterrupt``)."""
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return bool(names) and all(
        (isinstance(name, ast.Name) and name.id == "KeyboardInterrupt")
        or (isinstance(name, ast.Attribute) and name.attr == "KeyboardInterrupt")
        for name in names
    )


# A loop over a known sequence this long or shorter, whose body sets something up, runs per item.
MAX_UNROLLED_ITERATIONS = 8
_JUMPS = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Raise)


def _unrolled_items(node: ast.For, iterable: Value) -> Optional[list[Value]]:
    """The items to run the body for one by one, or None (the body then runs once, as for any loop):
    a known sequence, or ``range(n)`` of a small constant, and a body that calls a Fabric method
    itself and cannot leave the loop early."""
    items = known_items(iterable)
    if items is None or not 0 < len(items) <= MAX_UNROLLED_ITERATIONS or not _loop_sets_up(node):
        return None
    return items


def _loop_sets_up(node: ast.For) -> bool:
    found = _SETS_UP.get(node)
    if found is None:
        calls, jumps = False, False
        pending: list[ast.AST] = list(node.body)
        while pending:
            child = pending.pop()
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, _JUMPS):
                jumps = True
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                calls = calls or child.func.attr in FABRIC_SETUP_METHODS
            pending.extend(ast.iter_child_nodes(child))
        found = _SETS_UP[node] = calls and not jumps
    return found


_SETS_UP: weakref.WeakKeyDictionary[ast.AST, bool] = weakref.WeakKeyDictionary()
# The calls that make a loop worth running per item: each sets up one more model, optimizer or loader.
FABRIC_SETUP_METHODS = frozenset({"setup", "setup_module", "setup_optimizers", "setup_dataloaders"})
