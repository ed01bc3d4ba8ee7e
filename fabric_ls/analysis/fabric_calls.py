"""The Fabric model: what each call on a Fabric object checks, changes and returns.

``Fabric(...)`` itself and the strategies it may resolve to are in fabric_strategies."""

from __future__ import annotations

import ast
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Optional

from fabric_ls.analysis.events import (
    PER_PATH_FIELDS,
    CallEvent,
    FabricState,
    PerPath,
)
from fabric_ls.analysis.fabric_api import FABRIC_METHODS
from fabric_ls.analysis.guards import FALSE, TRUE
from fabric_ls.analysis.join import CannotMerge as _CannotMerge
from fabric_ls.analysis.join import (
    StopRun,
    run_alternatives,
)
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    Frame,
    Observed,
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    BoundMethod,
    Choice,
    Const,
    ContextValue,
    FabricObj,
    FunctionRef,
    Obj,
    Partial,
    Seq,
    SetupDataLoader,
    SetupModule,
    SetupOptimizer,
    Unknown,
    Value,
)
from fabric_ls.analysis.verdicts import verdicts_per_strategy

# Combinations of its arguments' values a Fabric call is checked on in place (each joined to the
# next, one nesting level each); past that, the statement splits on them one argument at a time.
MAX_CALL_COMBINATIONS = 32


class FabricMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- Fabric ------------------------------------------------------------------

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
            via=self.script_call if frame.module is not self.main_env else None,
            callers=tuple(self.call_stack),
            caught=self.catching_fabric_errors > 0,
        )
        if self.reporting:
            observed = [
                Observed(seen, guard, verdict, self.steps) for guard, seen, verdict in self._checked(event)
            ]
            self.trail.extend(self.observed, observed)
        return event

    def _checked(self, event: CallEvent) -> list[tuple[int, CallEvent, Any]]:
        """The rules' verdicts on ``event``: once per strategy the Fabric may have and per value of
        its per-path fields (a Fabric launched on one side of a branch only), each under its guard."""
        state = event.fabric
        split = [(name, getattr(state, name)) for name in PER_PATH_FIELDS]
        split = [(name, value) for name, value in split if isinstance(value, PerPath)]
        if not split and not state.options:
            return [(self.guard, event, self.check(event))]
        if state.options and not split:
            return verdicts_per_strategy(self.check, self.guards, self.guard, event)
        combinations: list[tuple[int, dict[str, Any]]] = [(self.guard, {})]
        if state.options:
            combinations = [
                (both, {"option": index})
                for index, (option_guard, _) in enumerate(state.options)
                for both in (self.guards.and_(self.guard, option_guard),)
                if both != FALSE
            ]
        for name, value in split:
            combinations = [
                (both, {**chosen, name: option})
                for guard, chosen in combinations
                for option_guard, option in value.options
                for both in (self.guards.and_(guard, option_guard),)
                if self.guards.feasible(both)
            ]
        verdicts = []
        try:
            for guard, chosen in combinations:
                for name, option in chosen.items():
                    if name != "option":
                        setattr(state, name, option)  # for the check only; restored below
                seen = event
                if "option" in chosen:
                    seen = replace(event, fabric=state.with_option(chosen["option"]))
                verdicts.append((guard, seen, self.check(seen)))
        finally:
            for name, value in split:
                setattr(state, name, value)
        return verdicts

    def _change_field(self, state: FabricState, name: str, change: Callable[[Any], Any]) -> None:
        """Update a plain field of a Fabric's state on this path (each of its values if it has several)."""
        value = getattr(state, name)
        if isinstance(value, PerPath):
            options = [(g, change(v)) for g, v in value.options if self.guards.feasible(self.guard, g)]
            options = options or [(g, change(v)) for g, v in value.options]
            values = {v for _, v in options}
            new = options[0][1] if len(values) == 1 else PerPath(tuple(options))
        else:
            new = change(value)
        self.trail.set_attr(state, name, new)

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
                partial(self._fabric_call, fabric, method, node, frame, evaluated, run_target=False),
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
                evaluated = self._eval_args(node, frame)[:2]
            if method in getattr(self.check, "methods", ()):
                # A rule inspects this call; the interpreter models nothing about it.
                self._emit(fabric, method, node, frame, *evaluated)
            if method in ("init_tensor", "sharded_model", "rank_zero_first"):
                return ContextValue("other", fabric)
            return Unknown(text=frame.module.parsed.segment(node))
        args, keywords = evaluated if evaluated is not None else self._eval_args(node, frame)[:2]
        # The rules read plain values; what ``launch`` passes on to its function stays as it is
        # (several options each), so the function runs once, not once per combination of them.
        passed_on = 1 if method == "launch" else len(args)
        combinations = [
            (guard, list(chosen.values()))
            for guard, chosen in self._combinations(dict(enumerate(args[:passed_on])))
        ]
        if 1 < len(combinations) <= MAX_CALL_COMBINATIONS:
            # One of several models (and the optimizer built over it): the call once per
            # combination, under its guard, joined; the arguments are not evaluated again.
            rest = args[passed_on:]
            alternatives = [
                (
                    guard,
                    partial(
                        self._fabric_call, fabric, method, node, frame, (plain + rest, keywords), run_target
                    ),
                )
                for guard, plain in combinations
            ]
            try:
                return run_alternatives(self, frame, alternatives)  # type: ignore[no-any-return]
            except _CannotMerge:
                pass  # the sides cannot be one state: the statement splits instead (below)
        args = [self._concrete(a) if isinstance(a, Choice) else a for a in args[:passed_on]] + args[
            passed_on:
        ]
        if method == "init_module":
            keywords = dict(keywords)
            empty_init = keywords.get("empty_init", args[0] if args else Const(None))
            empty_init = self._concrete(empty_init)
            if not isinstance(empty_init, Const):
                source = next((k.value for k in node.keywords if k.arg == "empty_init"), None) or (
                    node.args[0] if node.args else node
                )
                truth = self._truth(empty_init, source, frame)
                # Where the value is true, parameters go on the meta device as for True. Where it is
                # false it may be None as well as False, and only ``False`` itself is refused
                # (FAB003, deepspeed.py ``empty_init is False``): known as falsy, not as False,
                # unless it is a bool (``empty_init=fabric.world_size > 1``).
                boolean = isinstance(empty_init, Unknown) and empty_init.boolean
                empty_init = Const(True) if truth else Const(False if boolean and truth is False else None)
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
            self._change_field(state, "models_setup", lambda count: count + 1)
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
            if self._one_strategy(state, lambda strategy: strategy.cli).cli:
                # fabric.py:990: under `fabric run` launch() raises, and its function never runs.
                target = function.function if isinstance(function, Partial) else function
                if isinstance(target, (FunctionRef, BoundMethod)):
                    target = target.function if isinstance(target, BoundMethod) else target
                    self.executed_functions.add(id(target.node))
                # As at the script's own `raise`: this path ends here.
                self.exited, self.exit_class = True, "RuntimeError"
                raise StopRun()
            self.trail.set_attr(state, "launched", True)
            self._change_field(state, "launch_count", lambda count: count + 1)
            if run_target and isinstance(function, Partial):
                # ``launch(partial(train, cfg))``: ``train(cfg, fabric)``.
                return self._call_partial(
                    Partial(function.function, [*function.args, fabric], function.keywords), args[1:], {}
                )
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
