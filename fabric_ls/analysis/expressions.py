"""Expressions: names, attributes, operators, comparisons, comprehensions."""

from __future__ import annotations

import ast
import operator
import os
from typing import Any, Callable, Optional

from fabric_ls.analysis.command_line import namespace_value
from fabric_ls.analysis.fabric_api import FABRIC_METHODS
from fabric_ls.analysis.join import StopRun
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.scopes import FunctionScope, function_scope
from fabric_ls.analysis.state import (
    _BUILTINS,
    _COMPARE,
    MAX_EXPRESSION_DEPTH,
    Frame,
)
from fabric_ls.analysis.strategies import is_subclass
from fabric_ls.analysis.strings import builds_text
from fabric_ls.analysis.value_ops import (
    MAX_LAZY_TEST_OPTIONS,
    _binop,
    _class_attribute,
    _class_method,
    _literal_seq,
    _same_choice,
    _short,
    larger_than,
    static_truth,
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    BoundMethod,
    Choice,
    ClassRef,
    ConfigMapping,
    Const,
    Evidence,
    External,
    FabricMethod,
    FabricObj,
    FilePath,
    FunctionRef,
    LoaderBatch,
    Mapping,
    Merged,
    ModelOutput,
    ModuleRef,
    Namespace,
    Obj,
    Seq,
    SetupModule,
    StrategyAttr,
    StrategyClass,
    StrategyObj,
    Unknown,
    Value,
)

# Node type → the Run method that evaluates it (None: not modelled); looked up once per type.
_EXPRESSION_HANDLERS: dict[type, Any] = {}
_NOT_LOOKED_UP = object()


class ExpressionsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- expressions -------------------------------------------------------------

    def _eval(self, node: Optional[ast.AST], frame: Frame) -> Value:
        if node is None:
            return Const(None)
        self._tick()
        handler = _EXPRESSION_HANDLERS.get(type(node), _NOT_LOOKED_UP)
        if handler is _NOT_LOOKED_UP:
            handler = getattr(type(self), "_expr_" + type(node).__name__, None)
            _EXPRESSION_HANDLERS[type(node)] = handler
        if handler is None or self.eval_depth > MAX_EXPRESSION_DEPTH:
            # Deeper than any real expression: its value is unknown, the rest goes on.
            return Unknown(text="expression")
        self.eval_depth += 1
        try:
            return handler(self, node, frame)  # type: ignore[no-any-return]
        finally:
            self.eval_depth -= 1

    def _expr_Constant(self, node: ast.Constant, frame: Frame) -> Value:
        if isinstance(node.value, str):
            return Const(node.value, (Evidence(frame.module.parsed, node, repr(node.value)),))
        return Const(node.value)

    def _expr_Name(self, node: ast.Name, frame: Frame) -> Value:
        if frame.locals is not None and node.id not in frame.locals and frame.function is not None:
            if frame.local_names is None:
                frame.local_names = function_scope(frame.function).local_names
            if node.id in frame.local_names:
                return self._unbound_local(node, function_scope(frame.function))
        value = frame.lookup(node.id)
        if value is None:
            if node.id in ("True", "False", "None"):
                return Const({"True": True, "False": False, "None": None}[node.id])
            if node.id in _BUILTINS:
                return External(node.id)
            return Unknown(text=node.id)
        return value

    def _unbound_local(self, node: ast.Name, scope: FunctionScope) -> Value:
        """A read of a function's own name before this path assigned it: Python raises
        UnboundLocalError there (the global of that name is not read), so the path ends, as at the
        script's own ``raise``, where no binding comes before the read in the source. In a loop an
        earlier iteration may have bound it, inside a ``try`` a handler may catch the error, and after
        a binding the evaluator may have skipped it: there it is only an unknown value."""
        if id(node) in scope.reads_in_loops or self.try_depth:
            return Unknown(text=node.id)
        if (node.lineno, node.col_offset) >= scope.first_bound.get(node.id, (0, 0)):
            # A binding before it in the source was skipped here (the evaluator leaves out loops and
            # branches with nothing Fabric-related): the name may well be bound.
            return Unknown(text=node.id)
        self.exited, self.exit_class = True, "UnboundLocalError"
        raise StopRun()

    def _expr_Attribute(self, node: ast.Attribute, frame: Frame) -> Value:
        owner = self._eval(node.value, frame)
        return self._attribute(owner, node.attr, node, frame)

    def _attribute(self, owner: Value, attr: str, node: ast.AST, frame: Frame) -> Value:
        if isinstance(owner, LoaderBatch):
            return owner  # ``batch.image``: still the loader's tensors
        if isinstance(owner, External):
            return External(f"{owner.qualname}.{attr}")
        if isinstance(owner, ModuleRef):
            value = owner.module.globals.get(attr)
            return value if value is not None else Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, Namespace):
            return self._on_this_path(self._parsed_value(owner, attr, frame.module.parsed.segment(node)))
        if isinstance(owner, ConfigMapping):
            found = owner.items.get(attr)  # ``cfg.fabric``: a key of the configuration
            return found if found is not None else Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, (StrategyAttr, StrategyObj)) and attr == "__class__":
            # ``fabric.strategy.__class__.__name__ == "DeepSpeedStrategy"``: the class, per strategy.
            known = owner.strategy if isinstance(owner, StrategyAttr) else owner
            if known.class_name is not None:
                return StrategyClass(known.user_class or known.class_name)
        if isinstance(owner, StrategyClass) and attr in ("__name__", "__qualname__"):
            return Const(owner.name)
        if isinstance(owner, StrategyAttr):
            strategy = owner.strategy
            if (
                attr == "zero_stage_3"
                and strategy.zero_stage is not None
                and strategy.class_name is not None
                and is_subclass(strategy.class_name, "DeepSpeedStrategy")
            ):
                # deepspeed.py zero_stage_3: the config's ZeRO stage is 3.
                return Const(strategy.zero_stage == 3)
            return Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, FabricObj):
            if attr == "strategy":
                if owner.site.options:
                    return self._per_strategy(owner.site, lambda strategy: StrategyAttr(owner, strategy))
                return StrategyAttr(owner)
            if attr == "world_size":
                text = frame.module.parsed.segment(node)
                # devices * num_nodes, known before launch (fabric.py world_size).
                return self._per_strategy(
                    owner.site,
                    lambda strategy: (
                        Const(strategy.world_size) if strategy.world_size is not None else Unknown(text=text)
                    ),
                )
            if attr in FABRIC_METHODS:
                return FabricMethod(owner, attr)
            return Unknown(text=frame.module.parsed.segment(node))
        if isinstance(owner, FilePath) and owner.form == "path" and attr == "parent":
            return FilePath(owner.created_at, owner.created_path, relative=os.path.dirname(owner.relative))
        if isinstance(owner, Obj):
            if attr in owner.attrs:
                return owner.attrs[attr]
            if owner.cls is not None:
                method = _class_method(owner.cls, attr)
                if method is not None and _is_property(method.node):
                    # ``self.sharded`` runs the getter, as Python does.
                    return self._call_function(method, [owner], {})
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
        key = self._eval(node.slice, frame)
        if isinstance(owner, Mapping):
            entry = self._table_lookup(owner, key, Unknown(text=frame.module.parsed.segment(node)))
            if entry is not None:
                return entry
        key = self._concrete(key)
        if isinstance(owner, Choice) and isinstance(key, Const) and _holds_container(owner):
            # ``config["fabric"]`` of a config read on some paths only: the item on each.
            return self._lift(owner, lambda option: self._item_of(option, key, node, frame))
        return self._item_of(owner, key, node, frame)

    def _item_of(self, owner: Value, key: Value, node: ast.Subscript, frame: Frame) -> Value:
        if isinstance(owner, (ModelOutput, LoaderBatch)):
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
        if isinstance(owner, Obj) and owner.library_class in _MODULE_CONTAINERS:
            # ``model.layers[-1]`` of a ``ModuleList`` built under ``init_module(empty_init=True)``:
            # a submodule, on the meta device as its container is (and set up where it is).
            attrs: dict[str, Value] = (
                {"__setup__": owner.attrs["__setup__"]} if "__setup__" in owner.attrs else {}
            )
            return Obj(node, frame.module.path, meta=owner.meta, attrs=attrs, library_class="torch.nn.Module")
        return Unknown(text=frame.module.parsed.segment(node))

    def _expr_Tuple(self, node: ast.Tuple, frame: Frame) -> Value:
        starred = sum(isinstance(e, ast.Starred) for e in node.elts)
        return _literal_seq([self._eval(e, frame) for e in node.elts], is_tuple=True, starred=starred)

    def _expr_List(self, node: ast.List, frame: Frame) -> Value:
        starred = sum(isinstance(e, ast.Starred) for e in node.elts)
        return _literal_seq([self._eval(e, frame) for e in node.elts], is_tuple=False, starred=starred)

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
            and not larger_than(test, MAX_LAZY_TEST_OPTIONS)
            and self._pure(node.body, frame)
            and self._pure(node.orelse, frame)
        ):
            # Both sides are plain values: keep the choice lazy; the run forks only if it is needed.
            body, orelse = self._eval(node.body, frame), self._eval(node.orelse, frame)
            written = _short(frame.module.parsed.segment(node.test))

            def fork(unknown: Unknown) -> Choice:
                # An unknown value with an identity is one decision wherever it is tested (the same
                # ``isinstance(devices, int)`` in a function and in the helper it calls).
                if unknown.key:
                    text = _short(unknown.text or written, 60)
                    return Choice(f"truth:{unknown.key}", (body, orelse), (f"`{text}`", f"not `{text}`"))
                return Choice(f"ifexp:{id(node)}", (body, orelse), (f"`{written}`", f"not `{written}`"))

            def pick(option: Value) -> Value:
                if isinstance(option, Const):
                    return body if option.value else orelse
                return fork(option) if isinstance(option, Unknown) else body

            return fork(test) if isinstance(test, Unknown) else self._lift(test, pick)
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
        return _same_choice(choice, options)

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
                    if not option.key:
                        return Unknown(text=text)
                    # Decided by the value's own truth, one decision wherever it is tested: where it
                    # holds, ``a and b`` is ``b`` (``a or b`` is ``a``), where not the other way round.
                    shown = _short(option.text or text, 60)
                    sides = (option, rest) if is_or else (rest, option)
                    return Choice(f"truth:{option.key}", sides, (f"`{shown}`", f"not `{shown}`"))
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
                    else (Unknown(text=text, boolean=True) if isinstance(o, Unknown) else Const(False))
                ),
            )
        operand = self._concrete(operand)
        truth = (
            static_truth(operand) if isinstance(node.op, ast.Not) and not isinstance(operand, Const) else None
        )
        if truth is not None:
            return Const(not truth)  # ``not ["a"]``: as ``if`` reads it (value_ops.static_truth)
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
        return Unknown(text=frame.module.parsed.segment(node), boolean=isinstance(node.op, ast.Not))

    def _expr_BinOp(self, node: ast.BinOp, frame: Frame) -> Value:
        left = self._eval(node.left, frame)
        right = self._eval(node.right, frame)
        text_op = isinstance(node.op, ast.Mod) and isinstance(left, Const) and isinstance(left.value, str)
        if text_op or (isinstance(node.op, ast.Add) and builds_text(left, right)):
            # ``"deepspeed_stage_%d" % stage``, ``"deepspeed_stage_" + str(args.stage)``: strings.py.
            apply = operator.mod if text_op else operator.add
            return self._combined(
                [left, right], lambda values: apply(*values), frame.module.parsed.segment(node)
            )
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
                return Unknown(text=frame.module.parsed.segment(node), boolean=True)
            if not result:
                return Const(False)
            left = right
        return Const(True)

    def _compared(self, op: ast.cmpop, left: Value, right: Value, text: str) -> Value:
        result = self._compare(op, left, right)
        if result is None:
            return self._compared_unknown(op, left, right) or _ordered_unknown(op, left, right, text)
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
        holds = self.guards.any_of([self._equals(left, constant) for constant in constants])
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            holds = self.guards.not_(holds)
        return Merged(
            f"compare:{left.key}",
            (Const(True), Const(False)),
            ("", ""),
            guards=(holds, self.guards.not_(holds)),
        )

    def _equals(self, unknown: Unknown, constant: object) -> int:
        """The guard "``unknown`` equals ``constant``", one literal per constant for every test of it."""
        text = _short(unknown.text or "value", 50)
        # "the parameter is 'tensor_parallel'" implies "the parameter was given a value".
        implied = (unknown.key.rsplit(":", 1)[0], 1) if unknown.key.endswith((":other", ":given")) else None
        return self.guards.equality(
            unknown.key, constant, (f"`{text}` is {constant!r}", f"`{text}` is not {constant!r}"), implied
        )

    def _parsed_value(self, namespace: Namespace, attr: str, text: str) -> Value:
        """``args.<attr>``: what the parse gave it, or what the script wrote to it since. The parse's
        value stands for every path (a choice, options per path), so it is kept outside the trail:
        a write on one side of a branch is joined with it, not with nothing."""
        value = namespace.read.get(attr)
        if value is None:
            value = namespace.read[attr] = namespace_value(namespace.parser, attr, text)
        return value

    def _on_this_path(self, value: Value) -> Value:
        """A choice of which only one option holds on this path (``args.strategy`` inside the
        sub-command that defines it) as that option: what is built from it stays small."""
        if (
            not isinstance(value, Choice)
            or isinstance(value, Merged)
            or not self.guards.has_decision(value.key)
        ):
            return value  # a decision no test made yet: every option holds on every path
        option_guards = self._option_guards(value)
        feasible = [i for i, guard in enumerate(option_guards) if self.guards.feasible(self.guard, guard)]
        return value.options[feasible[0]] if len(feasible) == 1 else value

    def _table_lookup(self, table: Mapping, key: Value, missing: Value) -> Optional[Value]:
        """``COMMANDS[args.command]``, ``SIZES[args.size]``: a dict indexed by one of several values (a
        sub-command, an argparse choice) is one entry per value of the key, under the key's own
        decision: what follows (a call of the entry, a ``Fabric(...)`` reading it) runs joined rather
        than forking the run. ``missing``: where no entry matches. None where the key is not a
        choice (the caller reads it as before)."""
        entries = table.items
        if not isinstance(key, Choice) or not entries:
            return None

        def entry(option: Value) -> Value:
            found = None
            if isinstance(option, Const):
                try:
                    found = entries.get(option.value)
                except TypeError:
                    pass
            return found if found is not None else missing

        return self._lift(key, entry)

    def _compare(self, op: ast.cmpop, left: Value, right: Value) -> Optional[bool]:
        left = self._concrete(left)
        right = self._concrete(right)
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, Const) and right.value is None:
            if isinstance(left, Const):
                return (left.value is None) == isinstance(op, ast.Is)
            if isinstance(left, Unknown):
                return None
            return not isinstance(op, ast.Is)
        if isinstance(right, StrategyClass):
            left, right = right, left
        if isinstance(left, StrategyClass) and isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
            # ``type(fabric.strategy) is DeepSpeedStrategy``: the exact class, not a subclass.
            other = right.qualname.rsplit(".", 1)[-1] if isinstance(right, External) else None
            if isinstance(right, ClassRef):
                other = right.name
            if other is not None:
                return (left.name == other) == isinstance(op, (ast.Is, ast.Eq))
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
        return FunctionRef(node, frame.module, closure=frame if frame.locals is not None else None)

    def _expr_Await(self, node: ast.Await, frame: Frame) -> Value:
        return self._eval(node.value, frame)


def _is_property(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr == "cached_property")
        for d in decorators
    )


# ``torch.nn`` containers whose items are submodules (``model.layers[-1]``).
_MODULE_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict"})


def _holds_container(choice: Choice) -> bool:
    """Some option of ``choice`` is a mapping or a sequence (an item of it may be known)."""
    return any(
        isinstance(option, (Mapping, Seq)) or (isinstance(option, Choice) and _holds_container(option))
        for option in choice.options
    )


def _ordered_unknown(op: ast.cmpop, left: Value, right: Value, text: str) -> Unknown:
    """``ngpu > 1`` on an unknown with an identity: one decision wherever that same test is made
    (thresholds are not related to each other: ``ngpu > 1`` and ``ngpu > 2`` are two decisions)."""
    ordered = isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE))
    if ordered and isinstance(left, Unknown) and left.key and isinstance(right, Const):
        if isinstance(right.value, (int, float)) and not isinstance(right.value, bool):
            key = f"order:{left.key}:{type(op).__name__}:{right.value!r}"
            return Unknown(text=text, key=key, boolean=True)
    return Unknown(text=text, boolean=True)
