"""Calls: functions and methods of the script, classes, arguments, helpers summed up."""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from fabric_ls.analysis.command_line import parser_base
from fabric_ls.analysis.fabric_api import PARAMETER_METHODS
from fabric_ls.analysis.guards import TRUE
from fabric_ls.analysis.join import Break as _Break
from fabric_ls.analysis.join import CannotMerge as _CannotMerge
from fabric_ls.analysis.join import Continue as _Continue
from fabric_ls.analysis.join import Return as _Return
from fabric_ls.analysis.join import (
    StopRun,
    join_returns,
    resume_pending_return,
    run_alternatives,
    same,
)
from fabric_ls.analysis.library import new_parser
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.state import (
    _TENSOR_RETURNING,
    FABRIC_CLASSES,
    MAX_DEPTH,
    MAX_RECURSION_DEPTH,
    Frame,
    _NoForks,
)
from fabric_ls.analysis.strategies import STRATEGY_CLASSES, creates_meta_at_empty_init
from fabric_ls.analysis.trail import ITEM, MISSING, write
from fabric_ls.analysis.value_ops import (
    MAPPING_MUTATORS,
    SEQ_MUTATORS,
    _bind_fields,
    _class_method,
    _collect_params,
    _items,
    _lightning_base,
    _params_of,
    _short,
    mapping_keys,
)
from fabric_ls.analysis.values import (
    STATE_DICT,
    UNKNOWN,
    ArgParser,
    BoundMethod,
    Choice,
    ClassRef,
    ConfigStore,
    Const,
    External,
    FabricMethod,
    FabricObj,
    FilePath,
    FunctionRef,
    LoaderBatch,
    Mapping,
    ModelOutput,
    Obj,
    Params,
    Partial,
    Seq,
    SetupModule,
    SetupOptimizer,
    Subcommands,
    Unknown,
    Value,
)

# A Fabric-free helper that may return more plain objects than this is summed up as "another value".
MAX_SUMMARY_OBJECTS = 3
# Tensor methods that move a tensor to another device (a loader's batch is then no longer on the CPU).
_MOVES = frozenset({"to", "cuda", "xpu", "mps", "to_device"})


def _meta_at_empty_init(strategy: Any) -> bool:
    return creates_meta_at_empty_init(strategy.class_name)


def _holds_wrapper(choice: Choice, depth: int) -> bool:
    """Some option of ``choice`` (of its nested choices too) is a wrapper Fabric made: without one,
    no path can see one, and the guards need not be asked."""
    for option in choice.options:
        if isinstance(option, (SetupModule, ModelOutput)):
            return True
        if isinstance(option, Choice) and depth < 6 and _holds_wrapper(option, depth + 1):
            return True
    return False


class CallsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

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
        self.call_stack.append((frame.module.parsed, node))
        try:
            return self._call_dispatch(node, frame)
        finally:
            self.call_stack.pop()
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
        return self._call_value(self._eval(func, frame), node, frame)

    def _call_choice(self, callee: Choice, node: ast.Call, frame: Frame) -> Value:
        """A call of one of several values: of several wrappers Fabric made, or of several functions
        or classes (a dispatch table's entry, ``args.func`` of a sub-command), each is called under
        its guard and the results are joined (the run forks where they cannot be)."""
        if self._wrappers(callee) or self._callables(callee):
            try:
                return self._dispatch(callee, lambda leaf: self._call_value(leaf, node, frame))
            except _CannotMerge:
                pass
        return self._call_value(self._concrete(callee), node, frame)

    def _callables(self, value: Choice) -> bool:
        """Several functions or classes on this path (a missing table entry may stand beside them)."""
        leaves = [leaf for _, leaf in self._leaves(value, TRUE, 0)]
        callable_leaves = [leaf for leaf in leaves if isinstance(leaf, (FunctionRef, ClassRef, BoundMethod))]
        return len(callable_leaves) > 1 and all(
            isinstance(leaf, (FunctionRef, ClassRef, BoundMethod, Unknown)) for leaf in leaves
        )

    def _model_inputs(self, model: SetupModule, node: ast.Call, frame: Frame) -> None:
        """Evaluate a set-up model's call arguments; batches of a loader never set up reach it as a
        ``forward`` event, for the rules that ask for one (FAB037)."""
        args, keywords, _ = self._eval_args(node, frame)
        if "forward" not in getattr(self.check, "methods", ()):
            return
        if any(isinstance(value, LoaderBatch) for value in [*args, *keywords.values()]):
            self._emit(model.fabric, "forward", node, frame, args, keywords)

    def _wrappers(self, value: Value) -> bool:
        """One of several wrappers Fabric made (set-up models, their outputs): each is used the same way."""
        if not isinstance(value, Choice) or not _holds_wrapper(value, 0):
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
                if isinstance(value, Choice) and any(isinstance(option, Mapping) for option in value.options):
                    # ``Fabric(**config)`` of a config read on some paths only (a file the command
                    # line may name): the call's keywords per path.
                    value = self._concrete(value)
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
        if isinstance(receiver, FilePath):
            read = self._file_method(receiver, attr, node, frame)
            if read is not None:
                return read
        if isinstance(receiver, ArgParser):
            return self._argparse_call(receiver, attr, node, frame)
        if isinstance(receiver, Subcommands):
            return self._subcommand_call(receiver, attr, node, frame)
        if isinstance(receiver, ConfigStore):
            return self._config_store_call(attr, node, frame)
        if isinstance(receiver, ModelOutput):
            if attr in ("detach", "item", "tolist", "numpy", "detach_"):
                self._eval_args(node, frame)
                return Unknown(text="detached tensor")
            if attr == "backward":
                self._eval_args(node, frame)
                self._emit(receiver.fabric, "tensor.backward", node, frame, [], {})
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
        if isinstance(receiver, LoaderBatch):
            self._eval_args(node, frame)
            # ``.to(device)``/``.cuda()`` move it; ``.float()``, ``.view(...)`` keep the device.
            return UNKNOWN if attr in _MOVES else receiver
        if isinstance(receiver, (Obj, SetupModule, SetupOptimizer)) and attr == "state_dict":
            # Tensors by name: what a checkpoint holds, never a module (FAB026 tells them apart).
            self._eval_args(node, frame)
            return Obj(node, frame.module.path, library_class=STATE_DICT)
        if isinstance(receiver, SetupModule):
            if attr in ("forward", "__call__"):
                self._model_inputs(receiver, node, frame)
                return ModelOutput(receiver.fabric)
            self._eval_args(node, frame)
            return ModelOutput(receiver.fabric) if attr in _TENSOR_RETURNING else Unknown()
        if isinstance(receiver, Seq) and attr in SEQ_MUTATORS:
            args, _, _ = self._eval_args(node, frame)
            added = args[-1:] if attr != "extend" else _items(args[0]) if args else []
            self.trail.extend(receiver.items, list(added), receiver)
            return Const(None)
        if isinstance(receiver, Mapping) and attr in MAPPING_MUTATORS:
            return self._mapping_update(receiver, attr, node, frame)
        if isinstance(receiver, Mapping) and attr == "pop" and type(receiver.items) is dict:
            # ``kwargs.pop("_target_")`` before ``Fabric(**kwargs)``: the key is gone.
            args, _, _ = self._eval_args(node, frame)
            key = self._concrete(args[0]) if args else None
            if not isinstance(key, Const) or not isinstance(key.value, (str, int)):
                return UNKNOWN
            found = receiver.items.get(key.value)
            if found is not None:
                write(self.trail, ITEM, receiver.items, key.value, MISSING, receiver)
            return found if found is not None else (args[1] if len(args) > 1 else UNKNOWN)
        if isinstance(receiver, Mapping) and attr == "keys" and not node.args and not node.keywords:
            keys = mapping_keys(receiver)
            if keys is not None:
                return keys
        if isinstance(receiver, Mapping) and attr == "get":
            args, _, _ = self._eval_args(node, frame)
            missing = args[1] if len(args) > 1 else Const(None)
            table = self._table_lookup(receiver, args[0], missing) if args else None
            if table is not None:
                return table
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
        if isinstance(receiver, Const) and isinstance(receiver.value, str) and attr in ("format", "join"):
            args, keywords, opaque = self._eval_args(node, frame)
            built = (
                None
                if opaque
                else self._string_method(receiver, attr, args, keywords, frame.module.parsed.segment(node))
            )
            if built is not None:
                return built
        return self._call_value(callee, node, frame)

    def _mapping_update(self, receiver: Mapping, attr: str, node: ast.Call, frame: Frame) -> Value:
        """``config.update(strategy="deepspeed")``, ``config.setdefault("devices", 2)``: the keys
        known from the call change; an argument we cannot read changes nothing we know of."""
        args, keywords, _ = self._eval_args(node, frame)
        if attr == "setdefault":
            if not args or not isinstance(args[0], Const):
                return UNKNOWN
            try:
                found = receiver.items.get(args[0].value)
                if found is None:
                    found = args[1] if len(args) > 1 else Const(None)
                    self.trail.set_item(receiver.items, args[0].value, found, receiver)
            except TypeError:
                return UNKNOWN
            return found
        added: dict[Any, Value] = dict(args[0].items) if args and isinstance(args[0], Mapping) else {}
        added.update(keywords)
        for key, value in added.items():
            self.trail.set_item(receiver.items, key, value, receiver)
        return Const(None)

    def _call_value(self, callee: Value, node: ast.Call, frame: Frame) -> Value:
        if isinstance(callee, Choice):
            return self._call_choice(callee, node, frame)
        if isinstance(callee, BoundMethod):
            args, keywords, opaque = self._eval_args(node, frame)
            args = [callee.receiver, *args]
            return self._call_function(callee.function, args, keywords, opaque=opaque)
        if isinstance(callee, FunctionRef):
            args, keywords, opaque = self._eval_args(node, frame)
            return self._call_function(callee, args, keywords, opaque=opaque)
        if isinstance(callee, ClassRef):
            return self._instantiate(callee, node, frame)
        if isinstance(callee, Partial):
            args, keywords, opaque = self._eval_args(node, frame)
            return self._call_partial(callee, args, keywords, opaque, node, frame)
        if isinstance(callee, FabricMethod) and isinstance(callee.fabric, FabricObj):
            return self._fabric_call(callee.fabric, callee.name, node, frame)
        if isinstance(callee, SetupModule):
            self._model_inputs(callee, node, frame)
            if any(ctx.kind == "no_grad" for ctx in self.contexts):
                return Unknown(text="output computed without gradients")  # no backward hook
            return ModelOutput(callee.fabric)
        if isinstance(callee, External):
            return self._external_call(callee.qualname, node, frame)
        args, keywords, _ = self._eval_args(node, frame)
        return self._generic_result(node, frame, args, keywords)

    def _call_partial(
        self,
        callee: Partial,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool = False,
        node: Optional[ast.Call] = None,
        frame: Optional[Frame] = None,
    ) -> Value:
        """``partial(f, a)(b, k=1)`` is ``f(a, b, k=1)`` (the call's keywords win)."""
        given = [*callee.args, *args]
        function = callee.function
        if isinstance(function, External):
            # ``make = partial(Fabric, strategy="deepspeed")``; ``make()`` builds the Fabric here.
            if node is None or frame is None:
                return UNKNOWN
            merged = {**callee.keywords, **keywords}
            return self._fabric_from_arguments(given, merged, opaque, node, frame, qualname=function.qualname)
        if isinstance(function, BoundMethod):
            given.insert(0, function.receiver)
            function = function.function
        assert isinstance(function, FunctionRef)
        return self._call_function(function, given, {**callee.keywords, **keywords}, opaque=opaque)

    def _generic_result(
        self,
        node: ast.Call,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
        name: str = "",
        escapes: bool = True,
    ) -> Value:
        """The result of a call we do not interpret: a new object born here."""
        found: list[Params] = []
        for value in [*args, *keywords.values()]:
            found.extend(_collect_params(value))
            if escapes and isinstance(value, FabricObj):
                self.trail.set_attr(value.site, "escaped", True)
        given = [*args, *keywords.values()]
        # ``sum([...])``, ``torch.stack(losses)``: the outputs in a list count as well.
        given += [item for value in given if isinstance(value, Seq) for item in value.items]
        outputs = [v for v in given if isinstance(v, ModelOutput) or self._wrappers(v)]
        if outputs and not found:
            return outputs[0]  # a loss computed from a model output (of one of several Fabric objects)
        empty = any(ctx.kind == "init_module" and ctx.empty_init for ctx in self.contexts)
        meta = (empty or any(ctx.kind == "meta_device" for ctx in self.contexts)) and self._meta_context(
            frame
        )
        place = self.places[-1] if self.places else None
        return Obj(
            node,
            frame.module.path,
            meta=meta,
            under_empty_init=empty,
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
                # Of a Fabric with several strategies, the statement runs once per answer.
                strategy = self._one_strategy(ctx.fabric.site, _meta_at_empty_init)
                return _meta_at_empty_init(strategy)
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
        active = self.active_calls.get(id(node), 0)
        if active and self.depth >= MAX_RECURSION_DEPTH:
            return UNKNOWN
        if self.depth >= MAX_DEPTH:
            self.calls_too_deep = True
            return UNKNOWN
        frame = Frame(function.module, node, self.trail)
        frame.enclosing = function.closure
        self._bind_params(node, frame, args, keywords, opaque, entry)
        # A helper that touches nothing Fabric-related: its own conditions only decide what it
        # returns, so they are summed up as "`f(...)` returns X" (see _summarize).
        fabric_free = (
            not entry and not isinstance(node, ast.Lambda) and not self._function_relevance(function)
        )
        decisions_before = len(self.guards.decisions)
        call_node = self.call_node
        # The file the call is written in (the callee's may be another module).
        call_parsed = (
            self.call_stack[-1][0]
            if self.call_stack and self.call_stack[-1][1] is call_node
            else function.module.parsed
        )
        self.fabric_free_depth += fabric_free
        self.depth += 1
        self.active_calls[id(node)] = active + 1
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
            self.active_calls[id(node)] = active
            self.fabric_free_depth -= fabric_free
        if frame.pending_returns:
            result = join_returns(self, frame, result)
        if fabric_free and isinstance(result, Choice) and len(self.guards.decisions) > decisions_before:
            result = self._summarize(result, decisions_before, call_node, call_parsed)
        return result

    def _summarize(
        self, result: Choice, first_own: int, call_node: Optional[ast.Call], call_parsed: ParsedSource
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
        text = _short(call_parsed.segment(call_node) if call_node is not None else "", 50) or "a helper"
        objects = [value for value in distinct if not isinstance(value, Const)]
        if len(objects) > MAX_SUMMARY_OBJECTS and all(type(value) in (Obj, Unknown) for value in objects):
            # A lookup table of plain objects (one prompt style per model name): which one it is
            # matters to no rule, and one decision option each would only grow the guards.
            distinct = [value for value in distinct if isinstance(value, Const)]
            distinct.append(Unknown(text=f"what `{text}` returns"))
        if len(distinct) == 1:
            return distinct[0]
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

    def _instantiate(self, cls: ClassRef, node: ast.Call, frame: Frame) -> Value:
        lightning_base = _lightning_base(cls)
        if lightning_base in FABRIC_CLASSES:
            return self._make_fabric(node, frame, user_class=cls.name, qualname=lightning_base)
        if lightning_base is not None and lightning_base.rsplit(".", 1)[-1] in STRATEGY_CLASSES:
            args, keywords, _ = self._eval_args(node, frame)
            return self._strategy_object(lightning_base, keywords, node, frame, user_class=cls.name)
        args, keywords, opaque = self._eval_args(node, frame)
        if parser_base(cls):
            return new_parser(keywords)
        init = _class_method(cls, "__init__")
        # A Fabric passed to an ``__init__`` of the workspace goes where that code takes it (it is
        # followed); to a library's, it escapes (it may be launched there).
        instance = self._generic_result(node, frame, args, keywords, escapes=init is None)
        if not isinstance(instance, Obj):
            instance = Obj(node, frame.module.path)
        instance.cls = cls
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
