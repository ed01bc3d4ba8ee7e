"""Hydra and OmegaConf: the configuration a script is given, and what ``instantiate`` builds from it.

``@hydra.main(config_path=..., config_name=...)`` gives ``main(cfg)`` the composition of the
config files (fabric_ls.analysis.hydra_config), every group option and every value the command
line can change kept as a choice. ``with initialize(config_path=...): compose(..., overrides=[...])``
and ``OmegaConf.load(path)`` give a fixed one. ``hydra.utils.instantiate(cfg.fabric)`` builds what
``_target_`` names with the node's values (nested ``_target_`` nodes first, as Hydra does):
``lightning.fabric.Fabric`` is a Fabric like ``Fabric(...)`` written out, a strategy class a
strategy object.
"""

from __future__ import annotations

import ast
import os
from typing import Any, Optional

from fabric_ls.analysis.command_line import dataclass_fields
from fabric_ls.analysis.hydra_config import Composition, Layer, compose, unchanged
from fabric_ls.analysis.hydra_values import ConfigValues, merged
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import FABRIC_CLASSES, STRATEGY_ARGUMENTS, Frame
from fabric_ls.analysis.strategies import STRATEGY_CLASSES
from fabric_ls.analysis.values import (
    UNKNOWN,
    Choice,
    ClassRef,
    CommandLineConfig,
    ConfigMapping,
    Const,
    ContextValue,
    External,
    Mapping,
    Obj,
    Partial,
    Seq,
    Unknown,
    Value,
)
from fabric_ls.analysis.yaml_subset import UNSUPPORTED, load_yaml

HYDRA_MAIN = "hydra.main"
INSTANTIATE = frozenset({"hydra.utils.instantiate", "hydra.utils.call"})
INITIALIZE = frozenset({"hydra.initialize", "hydra.initialize_config_dir"})
COMPOSE = frozenset({"hydra.compose"})
OMEGACONF_LOAD = "omegaconf.OmegaConf.load"
OMEGACONF_CREATE = "omegaconf.OmegaConf.create"
OMEGACONF_MERGE = "omegaconf.OmegaConf.merge"
OMEGACONF_FROM_CLI = "omegaconf.OmegaConf.from_cli"
OMEGACONF_STRUCTURED = "omegaconf.OmegaConf.structured"
CONFIG_STORE = "hydra.core.config_store.ConfigStore.instance"
# What gives back the configuration it is passed (a container of the same values).
OMEGACONF_SAME = frozenset({"omegaconf.OmegaConf.to_container", "omegaconf.OmegaConf.to_object"})
# Calls that build or read a configuration: the statements they are in matter (relevance).
HYDRA_CALLS = (
    INSTANTIATE
    | INITIALIZE
    | COMPOSE
    | {
        OMEGACONF_LOAD,
        OMEGACONF_CREATE,
        OMEGACONF_MERGE,
        OMEGACONF_FROM_CLI,
        OMEGACONF_STRUCTURED,
        CONFIG_STORE,
    }
)
# Keys of a node that tell ``instantiate`` how to build, not what to build with.
_INSTANTIATE_KEYS = frozenset({"_target_", "_recursive_", "_convert_", "_partial_", "_args_"})
MAX_INSTANTIATE_DEPTH = 8


class HydraMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- configurations ------------------------------------------------------------

    def _hydra_main_config(self, decorator: ast.Call, module_frame: Frame) -> Value:
        """What ``@hydra.main(config_path="conf", config_name="config")`` passes its function."""
        given = {k.arg: self._eval(k.value, module_frame) for k in decorator.keywords if k.arg}
        names = ("config_path", "config_name", "version_base")
        given.update({n: self._eval(a, module_frame) for n, a in zip(names, decorator.args)})
        config_path, config_name = _text(given.get("config_path")), _text(given.get("config_name"))
        path_given = given.get("config_path")
        no_path = path_given is not None and _is_none(path_given)
        if config_name is None or (config_path is None and not no_path):
            return Unknown(text="the Hydra configuration")
        base = os.path.dirname(module_frame.module.path)
        # ``config_path=None``: the configs the script stored in the ConfigStore, and no folder.
        return self._composed(os.path.join(base, config_path) if config_path else "", config_name, None)

    def _composed(self, config_dir: str, name: str, overrides: Optional[tuple[str, ...]]) -> Value:
        """The configuration's values, composed once per analysis (every run reads the same files)."""
        if config_dir.startswith("pkg:") or "://" in config_dir:
            return Unknown(text="the Hydra configuration")
        stored = self.config_store.entries
        # What the script stored is part of what is composed: kept with it, by its text.
        key = (
            os.path.normpath(config_dir) if config_dir else "",
            name,
            overrides,
            repr(sorted(stored.items())),
        )
        compositions = self.shared.hydra_compositions
        if key not in compositions:
            # Kept by the project while its files are unchanged: an edit of the script recomposes nothing.
            kept = self.project.compositions.get(key)
            if kept is None or not unchanged(kept, _list_dir):
                kept = compose(
                    key[0], name, self.project.read_config_text, _list_dir, _listed(overrides), stored
                )
                if kept is not None:
                    self.project.compositions[key] = kept
            compositions[key] = kept
        composition = compositions[key]
        if composition is None:
            return Unknown(text="the Hydra configuration")
        self.dependencies.update(composition.files)
        return ConfigValues(composition, f"hydra:{key[0] or '<store>'}/{name}").root()

    def _hydra_call(self, qualname: str, node: ast.Call, frame: Frame) -> Optional[Value]:
        """A call into Hydra or OmegaConf this models, or None (the caller's generic handling)."""
        if qualname == CONFIG_STORE:
            self._eval_args(node, frame)
            return self.config_store
        if qualname in INSTANTIATE:
            args, keywords, opaque = self._eval_args(node, frame)
            if not args or opaque:
                return UNKNOWN
            return self._instantiate_config(args[0], keywords, node, frame, 0)
        if qualname in INITIALIZE:
            _, keywords, _ = self._eval_args(node, frame)
            directory = self._initialize_dir(qualname, keywords, node, frame)
            self.hydra_config_dir = directory  # ``initialize(...)`` called outside ``with``
            return ContextValue("hydra_initialize", config_dir=directory or "")
        if qualname in COMPOSE:
            return self._compose_call(node, frame)
        if qualname == OMEGACONF_LOAD:
            args, _, _ = self._eval_args(node, frame)
            return self._loaded_config(args[0] if args else UNKNOWN, frame)
        if qualname == OMEGACONF_CREATE:
            args, _, _ = self._eval_args(node, frame)
            if args and isinstance(args[0], Mapping):
                return ConfigMapping(dict(args[0].items))
            return UNKNOWN
        if qualname == OMEGACONF_FROM_CLI:
            args, _, _ = self._eval_args(node, frame)
            return UNKNOWN if args else CommandLineConfig()  # a list given: not the command line
        if qualname == OMEGACONF_MERGE:
            args, _, opaque = self._eval_args(node, frame)
            if not args or opaque:
                return UNKNOWN
            result = args[0]
            for later in args[1:]:
                result = merged(result, later, f"omegaconf-cli:{frame.module.path}")
            return result
        if qualname == OMEGACONF_STRUCTURED:
            args, _, _ = self._eval_args(node, frame)
            return self._structured(args[0], 0) if args else UNKNOWN
        if qualname in OMEGACONF_SAME:
            args, _, _ = self._eval_args(node, frame)
            if args and isinstance(args[0], Mapping) and qualname.endswith("to_container"):
                # A dict of its own: ``kwargs.pop("_target_")`` leaves the configuration as it is.
                return Mapping(dict(args[0].items.items()))
            return args[0] if args and isinstance(args[0], (Mapping, Choice)) else UNKNOWN
        return None

    def _initialize_dir(
        self, qualname: str, keywords: dict[str, Value], node: ast.Call, frame: Frame
    ) -> Optional[str]:
        if qualname == "hydra.initialize_config_dir":
            return _text(keywords.get("config_dir") or self._first_argument(node, frame))
        config_path = _text(keywords.get("config_path") or self._first_argument(node, frame))
        if config_path is None:
            return None
        # Relative to the file that calls ``initialize`` (hydra/initialize.py).
        return os.path.join(os.path.dirname(frame.module.path), config_path)

    def _first_argument(self, node: ast.Call, frame: Frame) -> Optional[Value]:
        return self._eval(node.args[0], frame) if node.args else None

    def _compose_call(self, node: ast.Call, frame: Frame) -> Value:
        """``compose(config_name="config", overrides=["fabric=deepspeed"])`` inside ``initialize``:
        the configuration with those choices and no others (the command line is not read)."""
        args, keywords, _ = self._eval_args(node, frame)
        name = _text(keywords.get("config_name") or (args[0] if args else None))
        overrides = keywords.get("overrides") or (args[1] if len(args) > 1 else Seq([]))
        directory = next(
            (c.config_dir for c in reversed(self.contexts) if c.kind == "hydra_initialize"),
            self.hydra_config_dir,
        )
        texts = (
            [_text(self._concrete(item)) for item in overrides.items]
            if isinstance(overrides, Seq)
            else [None]
        )
        if not directory or name is None or any(text is None for text in texts):
            return Unknown(text=frame.module.parsed.segment(node))
        return self._composed(directory, name, tuple(text for text in texts if text is not None))

    def _loaded_config(self, path: Value, frame: Frame) -> Value:
        """``OmegaConf.load("config.yaml")``: the file as it is (relative to the script's folder, where
        scripts are run from, else to the workspace's root)."""
        relative = _text(self._concrete(path))
        if relative is None:
            return UNKNOWN
        script_dir = os.path.dirname(frame.module.path)
        for base in (script_dir, self.project.root_for(frame.module.path)):
            candidate = os.path.join(base, relative)
            text = self.project.read_config_text(candidate)
            if text is None:
                continue
            data = load_yaml(text)
            if not isinstance(data, dict):
                return UNKNOWN
            self.dependencies.add(candidate)
            composition = Composition(os.path.dirname(candidate), "", from_command_line=False)
            composition.layers.append(Layer((), data, candidate))
            return ConfigValues(composition, f"omegaconf:{candidate}").root()
        return UNKNOWN

    def _config_store_call(self, attr: str, node: ast.Call, frame: Frame) -> Value:
        """``cs.store(name="config", node=TrainConfig, group=None)``: a config Hydra composes as it
        would a file (where no file has that name)."""
        args, keywords, _ = self._eval_args(node, frame)
        if attr != "store":
            return UNKNOWN
        given = dict(zip(("name", "node", "group", "package", "provider"), args))
        given.update(keywords)
        name, group = _text(given.get("name")), _text(given.get("group"))
        config = given.get("node")
        package = given.get("package")
        if name is None or config is None or not (package is None or _is_none(package)):
            return Const(None)  # stored at another package: not followed
        data = _plain_data(self._structured(config, 0) if not isinstance(config, Mapping) else config)
        key = f"{group}/{name}" if group else name
        stored = key[: -len(".yaml")] if key.endswith(".yaml") else key
        self.trail.set_item(self.config_store.entries, stored, data, self.config_store)
        return Const(None)

    def _structured(self, schema: Value, depth: int) -> Value:
        """``OmegaConf.structured(TrainConfig)``: the dataclass's fields with their defaults (a field
        whose default is another dataclass, ``field(default_factory=FabricConfig)``, is a node)."""
        cls = schema.cls if isinstance(schema, Obj) else schema
        if not isinstance(cls, ClassRef) or depth > MAX_INSTANTIATE_DEPTH:
            return UNKNOWN
        class_frame = Frame(cls.module)
        items: dict[str, Value] = {}
        for declared in dataclass_fields(cls):
            name = declared.target.id  # type: ignore[union-attr]
            if isinstance(schema, Obj) and name in schema.attrs:
                items[name] = schema.attrs[name]
                continue
            default = declared.value
            if (
                isinstance(default, ast.Call)
                and getattr(default.func, "id", getattr(default.func, "attr", "")) == "field"
            ):
                given = {k.arg: k.value for k in default.keywords if k.arg}
                if "default_factory" in given:
                    factory = self._eval(given["default_factory"], class_frame)
                    items[name] = (
                        self._structured(factory, depth + 1) if isinstance(factory, ClassRef) else UNKNOWN
                    )
                    continue
                default = given.get("default")
            items[name] = self._eval(default, class_frame) if default is not None else Unknown(text=name)
        return ConfigMapping(items)

    # ----- instantiate ---------------------------------------------------------------

    def _instantiate_config(
        self, config: Value, keywords: dict[str, Value], node: ast.Call, frame: Frame, depth: int
    ) -> Value:
        """``instantiate(cfg.fabric, strategy=...)``: what ``_target_`` names, built with the node's
        values (the keywords win), once per option where the node or its target is a choice."""
        if isinstance(config, Choice):
            return self._lift(config, lambda one: self._instantiate_config(one, keywords, node, frame, depth))
        if not isinstance(config, Mapping) or depth > MAX_INSTANTIATE_DEPTH:
            return UNKNOWN
        # ``instantiate(node, _convert_="all", _recursive_=False)``: the call's own keys win over the node's.
        settings = {**config.items, **{k: v for k, v in keywords.items() if k in _INSTANTIATE_KEYS}}
        keywords = {k: v for k, v in keywords.items() if k not in _INSTANTIATE_KEYS}
        target = settings.get("_target_")
        if target is None:
            return config  # a node without a target is given back as a configuration
        recursive = self._concrete(settings.get("_recursive_", Const(True)))
        partial = self._concrete(settings.get("_partial_", Const(False)))
        if not (isinstance(partial, Const) and partial.value is False):
            # A ``functools.partial`` of it, built later by whoever calls it: Fabric's class with the
            # node's arguments (``instantiate(cfg.fabric)(devices=1)``), anything else not known.
            target_name = _text(self._concrete(target))
            if not (isinstance(partial, Const) and partial.value is True and target_name in FABRIC_CLASSES):
                return UNKNOWN
            given = {
                k: v for k, v in config.items.items() if isinstance(k, str) and k not in _INSTANTIATE_KEYS
            }
            return Partial(External(str(target_name)), [], {**given, **keywords})
        values = {
            key: (
                self._instantiate_nested(value, node, frame, depth + 1)
                if not (isinstance(recursive, Const) and recursive.value is False)
                else value
            )
            for key, value in config.items.items()
            if isinstance(key, str) and key not in _INSTANTIATE_KEYS
        }
        values.update(keywords)
        return self._lift_target(target, values, node, frame)

    def _instantiate_nested(self, value: Value, node: ast.Call, frame: Frame, depth: int) -> Value:
        if isinstance(value, Choice):
            return self._lift(value, lambda one: self._instantiate_nested(one, node, frame, depth))
        if isinstance(value, Mapping) and "_target_" in value.items:
            return self._instantiate_config(value, {}, node, frame, depth)
        if isinstance(value, Seq):
            return Seq([self._instantiate_nested(item, node, frame, depth) for item in value.items])
        return value

    def _lift_target(self, target: Value, values: dict[str, Value], node: ast.Call, frame: Frame) -> Value:
        if isinstance(target, Choice):
            return self._lift(target, lambda one: self._lift_target(one, values, node, frame))
        qualname = _text(target)
        if qualname is None:
            return Unknown(text=frame.module.parsed.segment(node))
        if qualname in FABRIC_CLASSES:
            self._refuse_unknown_arguments([], values)
            given = {name: values[name] for name in STRATEGY_ARGUMENTS if name in values}
            return self._build_fabric(given, [], values, False, node, frame, qualname)
        tail = qualname.rsplit(".", 1)[-1]
        if tail in STRATEGY_CLASSES and qualname.startswith(("lightning", "lightning_fabric")):
            return self._strategy_object(qualname, values, node, frame)
        result = self._generic_result(node, frame, [], values)
        if isinstance(result, Obj):
            result.library_class = qualname
            result.is_optimizer_class = qualname.startswith("torch.optim.") and tail[:1].isupper()
        return result


def _text(value: Optional[Value]) -> Optional[str]:
    """The string a constant holds, or None."""
    return value.value if isinstance(value, Const) and isinstance(value.value, str) else None


def _is_none(value: Value) -> bool:
    return isinstance(value, Const) and value.value is None


def _plain_data(value: Value) -> Any:
    """A stored config as the composer reads files: dicts, lists, constants; anything else unsupported."""
    if isinstance(value, Mapping):
        return {str(key): _plain_data(item) for key, item in value.items.items()}
    if isinstance(value, Seq):
        return [_plain_data(item) for item in value.items]
    if isinstance(value, Const) and isinstance(value.value, (str, int, float, bool, type(None))):
        return value.value
    return UNSUPPORTED


def _listed(overrides: Optional[tuple[str, ...]]) -> Optional[list[str]]:
    return list(overrides) if overrides is not None else None


def _list_dir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []
