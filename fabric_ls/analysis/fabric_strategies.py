"""``Fabric(...)``: the strategies it may resolve to, each under its guard, and reads of them.

A ``Fabric(...)`` whose arguments take several values is one object with a strategy per
combination (FabricState.options). The interpreter reads its strategy per option: a value per
strategy (``fabric.strategy``, ``fabric.world_size``), or, where the run needs one answer (are
parameters created on the meta device? does ``launch()`` raise?), a split of the path by the answer.
"""

from __future__ import annotations

import ast
import os
from dataclasses import replace
from typing import Any, Callable, Optional

from fabric_ls.analysis.events import (
    SEVERAL_STRATEGIES,
    FabricState,
    StrategyOption,
)
from fabric_ls.analysis.join import (
    StopRun,
    merge_values,
)
from fabric_ls.analysis.resolve_strategy import FabricConfig, ResolvedStrategy, resolve
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    FABRIC_PARAMETERS,
    STRATEGY_ARGUMENTS,
    Frame,
)
from fabric_ls.analysis.value_ops import (
    _NOT_LITERAL,
    _UNREADABLE,
    _literal,
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    Choice,
    Const,
    Evidence,
    FabricObj,
    Obj,
    Seq,
    StrategyObj,
    Unknown,
    Value,
)

# Strategies one Fabric object holds at most (one per combination of its arguments' values).
MAX_FABRIC_OPTIONS = 128


# The arguments whose value, where a test pinned it, decides between a single-device and a
# multi-device strategy ("auto" on one TPU core is SingleDeviceXLAStrategy). Other arguments a test
# pins (a precision in a list) would multiply the strategies and change no class.
_COUNTS = frozenset({"devices", "num_nodes"})


def _option_key(option: StrategyOption) -> Any:
    """Equal options have equal keys (the option itself, or its text where a value is unhashable)."""
    try:
        hash(option)
        return option
    except TypeError:
        return repr(option)


class FabricStrategiesMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    def _make_fabric(
        self,
        node: ast.Call,
        frame: Frame,
        user_class: Optional[str] = None,
        qualname: str = "lightning.fabric.Fabric",
    ) -> Value:
        args, keywords, opaque = self._eval_args(node, frame)
        return self._fabric_from_arguments(args, keywords, opaque, node, frame, user_class, qualname)

    def _fabric_from_arguments(
        self,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool,
        node: ast.Call,
        frame: Frame,
        user_class: Optional[str] = None,
        qualname: str = "lightning.fabric.Fabric",
    ) -> Value:
        given = dict(zip(STRATEGY_ARGUMENTS, args))  # a subclass's own ``__init__`` may take them so
        given.update({k: v for k, v in keywords.items() if k in STRATEGY_ARGUMENTS})
        if user_class is None:
            self._refuse_unknown_arguments(args, keywords)
            if "plugins" in keywords:
                given["plugins"] = keywords["plugins"]  # checked beside the precision (connector.py:227)
        return self._build_fabric(given, args, keywords, opaque, node, frame, qualname)

    def _refuse_unknown_arguments(self, args: list[Value], keywords: dict[str, Value]) -> None:
        """``Fabric(...)`` takes its arguments by keyword, these only (fabric.py ``__init__``): any
        other raises a TypeError there, and the path ends (``Fabric(**cfg.fabric)`` of a Hydra node
        that still holds its ``_target_``)."""
        if args or any(name not in FABRIC_PARAMETERS for name in keywords):
            self.exited, self.exit_class = True, "TypeError"
            raise StopRun()

    def _build_fabric(
        self,
        given: dict[str, Value],
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool,
        node: ast.Call,
        frame: Frame,
        qualname: str,
    ) -> Value:
        """One Fabric, with a strategy per combination of the arguments' options, each under its guard.

        The arguments were evaluated once: the statement around ``Fabric(...)`` (often a helper call
        that computes them) does not run again per strategy or precision, and what is built from
        the Fabric afterwards is built once (FabricState.options).
        """
        options = self._fabric_options(given, opaque, frame, qualname)
        first = options[0][1]
        state = FabricState(
            frame.module.path,
            node,
            first.strategy,
            first.provenance,
            place=self.places[-1] if self.places else None,
            parsed=frame.module.parsed,
            strategy_call=first.strategy_call,
            strategy_path=first.strategy_path,
            existence_guard=self.guard,
        )
        if len(options) > 1:
            state.options = tuple(options)
            state.strategy = state.provenance = SEVERAL_STRATEGIES
            state.strategy_call, state.strategy_path = None, ""
        if self.reporting:
            self.trail.extend(self.fabric_records, [(state, self.guard)])
        fabric = FabricObj(state)
        self._emit(fabric, "Fabric", node, frame, args, keywords)
        return fabric

    def _fabric_options(
        self, given: dict[str, Value], opaque: bool, frame: Frame, qualname: str
    ) -> list[tuple[int, StrategyOption]]:
        # Past the limit the rest stay choices: the statement splits on them (counted in steps),
        # and each part builds its own, smaller, Fabric.
        combinations = self._combinations(
            given,
            lambda name, value, guard: self._argument_options(value, guard, name in _COUNTS),
            MAX_FABRIC_OPTIONS,
        )
        options: list[tuple[int, StrategyOption]] = []
        where: dict[Any, int] = {}
        saved_guard = self.guard
        try:
            for guard, chosen in combinations:
                self._tick()
                self.guard = guard
                option = self._strategy_option(chosen, opaque, frame, qualname)
                key = _option_key(option)
                if key in where:
                    index = where[key]
                    options[index] = (self.guards.or_(options[index][0], guard), options[index][1])
                else:
                    where[key] = len(options)
                    options.append((guard, option))
        finally:
            self.guard = saved_guard
        return options

    def _argument_options(self, value: Value, guard: int, pin: bool = False) -> list[tuple[int, Value]]:
        """The plain values a ``Fabric(...)`` argument takes where ``guard`` holds, each under its guard;
        a strategy object once per value of its own options (``DeepSpeedStrategy(stage=s)``)."""
        found: list[tuple[int, Value]] = []
        for option_guard, option in self._options_under(value, guard):
            if pin and isinstance(option, Unknown) and option.key:
                found.extend(self._pinned(option, option_guard))
                continue
            if not isinstance(option, StrategyObj):
                found.append((option_guard, option))
                continue
            objects = [(option_guard, option)]
            for key, item in option.options.items():
                if isinstance(item, Choice):
                    objects = [
                        (both, replace(strategy, options={**strategy.options, key: leaf}))
                        for guard_so_far, strategy in objects
                        for both, leaf in self._argument_options(item, guard_so_far)
                    ]
            found.extend(objects)
        return found

    def _pinned(self, value: Unknown, guard: int) -> list[tuple[int, Value]]:
        """A device count the script tested (``if args.devices == 1:``): the constant it equals on
        the paths where a test of it held, itself elsewhere."""
        found: list[tuple[int, Value]] = []
        none = guard
        for constant, literal in self.guards.compared(value.key):
            both = self.guards.and_(guard, literal)
            if self.guards.feasible(both):
                found.append((both, Const(constant)))
                none = self.guards.and_(none, self.guards.not_(literal))
        if not found:
            return [(guard, value)]
        if self.guards.feasible(none):
            found.append((none, value))
        return found

    def _strategy_option(
        self, given: dict[str, Value], opaque: bool, frame: Frame, qualname: str
    ) -> StrategyOption:
        """What ``Fabric(...)`` resolves to for one value of each argument."""
        config, provenance = self._fabric_config(given, opaque, frame)
        # connector.py:191 accepts only strategy objects of the Fabric's own package.
        package = "lightning_fabric" if qualname.startswith("lightning_fabric") else "lightning.fabric"
        config = FabricConfig(**{**config.__dict__, "fabric_package": package})
        strategy = self._resolved(config)
        if self.assumed_strategy and (
            self.force_strategy
            or not config.strategy_known
            # Open: left out or "auto" (``strategy=None`` is no name: it conflicts with `fabric run`'s).
            or (config.strategy_class is None and config.strategy_name == "auto")
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
                    plugins=config.plugins,
                    precision_plugin=config.precision_plugin,
                )
            )
            strategy = ResolvedStrategy(
                **{**assumed.__dict__, "assumed": True, "cli": not self.force_strategy}
            )
        strategy_value = self._concrete(given["strategy"]) if "strategy" in given else None
        if isinstance(strategy_value, StrategyObj):
            return StrategyOption(strategy, provenance, strategy_value.node, strategy_value.path)
        return StrategyOption(strategy, provenance)

    def _resolved(self, config: FabricConfig) -> ResolvedStrategy:
        """``resolve(config)``, once per analysis: every entry function builds the same Fabrics."""
        known = self.shared.resolved
        try:
            found = known.get(config)
        except TypeError:  # an option that is a list: resolved every time
            return resolve(config)
        if found is None:
            found = known[config] = resolve(config)
        return found

    def _fabric_config(
        self, given: dict[str, Value], opaque: bool, frame: Frame
    ) -> tuple[FabricConfig, tuple]:
        provenance: list[Evidence] = []
        fields: dict[str, Any] = {
            "script_dir": os.path.dirname(frame.module.path),
            "interactive": bool(self.main_env.parsed.interactive),
        }
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
            if strategy.user_class is None:
                fields.update(self._strategy_sets(strategy))
            provenance.extend(strategy.origins)
        else:
            fields["strategy_known"] = False
        if "plugins" in given:
            plugins = self._concrete(given["plugins"])
            fields["plugins"] = _plugin_kinds(plugins)
            fields["precision_plugin"] = _precision_plugin(plugins)
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
                    fields["accelerator_object"] = _accelerator_name(value) is not None
                elif name == "devices":
                    fields["devices_known"] = False
                elif name == "precision":
                    fields["precision_known"] = False
                else:
                    fields[name] = None
            else:
                fields[name] = literal
                if name == "num_nodes" and literal is None and "num_nodes" in given:
                    fields["num_nodes_none"] = True
                if name == "devices" and literal is None and "devices" in given:
                    fields["devices_none"] = True  # ``devices=None`` (``devices: null``): no count
                if name == "accelerator" and literal is None and "accelerator" in given:
                    fields["accelerator_none"] = True  # ``accelerator=None``: no name the registry has
        return FabricConfig(**fields), tuple(provenance)

    def _strategy_sets(self, strategy: StrategyObj) -> dict[str, Any]:
        """What a Lightning strategy object was built with that the connector also takes from
        ``Fabric``'s arguments: a known value it tests as true (``if strategy._accelerator:``)."""
        sets: list[str] = []
        found: dict[str, Any] = {}
        for name in ("accelerator", "precision", "checkpoint_io", "cluster_environment"):
            if name not in strategy.options:
                continue
            value = self._concrete(strategy.options[name])
            if isinstance(value, (Obj, StrategyObj)) or (isinstance(value, Const) and value.value):
                sets.append(name)
            if name == "accelerator":
                found["strategy_accelerator"] = _accelerator_name(value)
        found["strategy_sets"] = tuple(sets)
        return found

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

    def _strategies_here(self, state: FabricState) -> list[tuple[int, ResolvedStrategy]]:
        """The strategies a Fabric may have on this path, each under its guard."""
        options = [(guard, option.strategy) for guard, option in state.strategy_options()]
        if len(options) == 1:
            return options
        here = [options[index] for index in state.feasible_options(self.guards, self.guard)]
        return here or options

    def _one_strategy(
        self, state: FabricState, answer: Callable[[ResolvedStrategy], Any]
    ) -> ResolvedStrategy:
        """A strategy of the Fabric for a question the run needs one answer to (does ``launch()``
        raise here?): where its strategies answer differently, the path splits by the answer."""
        groups: dict[Any, list[Any]] = {}
        for guard, strategy in self._strategies_here(state):
            group = groups.get(answer(strategy))
            if group is None:
                groups[answer(strategy)] = [guard, strategy]
            else:
                group[0] = self.guards.or_(group[0], guard)
        if len(groups) == 1:
            return next(iter(groups.values()))[1]  # type: ignore[no-any-return]
        chosen = self._fork(f"strategy:{state.uid}", [group[0] for group in groups.values()])
        return list(groups.values())[chosen][1]  # type: ignore[no-any-return]

    def _per_strategy(self, state: FabricState, read: Callable[[ResolvedStrategy], Value]) -> Value:
        """A value read from the Fabric's strategy: one per strategy it may have, each under its guard."""
        # Joined as two sides of a branch are: equal values once, under the union of their guards.
        alternatives = [(guard, read(strategy)) for guard, strategy in self._strategies_here(state)]
        return merge_values(self, alternatives, "strategy")  # type: ignore[arg-type]


_LIGHTNING_FABRIC = ("lightning.fabric.", "lightning_fabric.")
# Lightning's accelerator classes, by the name ``Fabric(accelerator=...)`` gives them.
_ACCELERATOR_CLASSES = {
    "CUDAAccelerator": "cuda",
    "CPUAccelerator": "cpu",
    "XLAAccelerator": "tpu",
    "MPSAccelerator": "mps",
}


def _accelerator_name(value: Value) -> Optional[str]:
    """``"cuda"`` for a ``CUDAAccelerator()`` of Lightning; None for anything else."""
    if not isinstance(value, Obj) or not value.library_class.startswith(_LIGHTNING_FABRIC):
        return None
    return _ACCELERATOR_CLASSES.get(value.library_class.rsplit(".", 1)[-1])


def _precision_plugin(value: Value) -> Optional[str]:
    """The class of a Lightning precision plugin among ``plugins=`` ("MixedPrecision")."""
    for item in value.items if isinstance(value, Seq) else [value]:
        if isinstance(item, Obj) and item.library_class.startswith(_LIGHTNING_FABRIC):
            name = item.library_class.rsplit(".", 1)[-1]
            if name.endswith("Precision"):
                return name
    return None


def _plugin_kinds(value: Value) -> Optional[tuple[tuple[str, str], ...]]:
    """What each of ``Fabric(plugins=...)`` is for the connector (connector.py:229), with its package:
    a Precision, a CheckpointIO, a ClusterEnvironment, or "invalid" (a strategy, an accelerator); None
    where one of them is not known."""
    if isinstance(value, Const) and value.value is None:
        return ()
    if isinstance(value, Const) and isinstance(value.value, str):
        # ``plugins="deepspeed_stage_2"``: a string is iterable, and each letter is no plugin.
        return (("invalid", ""),) if value.value else ()
    items = value.items if isinstance(value, Seq) else [value]
    kinds: list[tuple[str, str]] = []
    for item in items:
        if isinstance(item, StrategyObj):
            kinds.append(("invalid", item.package))
            continue
        if not isinstance(item, Obj) or not item.library_class.startswith(_LIGHTNING_FABRIC):
            return None
        package = (
            "lightning_fabric" if item.library_class.startswith("lightning_fabric.") else "lightning.fabric"
        )
        name = item.library_class.rsplit(".", 1)[-1]
        if name.endswith("Precision"):
            kinds.append(("Precision", package))
        elif name.endswith("CheckpointIO"):
            kinds.append(("CheckpointIO", package))
        elif name.endswith("Environment"):
            kinds.append(("ClusterEnvironment", package))
        elif ".plugins" not in item.library_class:
            kinds.append(("invalid", package))
        else:
            return None
    return tuple(kinds)
