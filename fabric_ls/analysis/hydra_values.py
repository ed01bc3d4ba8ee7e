"""The values of a Hydra composition as the interpreter reads them (``cfg.fabric.strategy``).

A value read from the composition (fabric_ls.analysis.hydra_config) is one value per combination
of the groups whose layers set it, each the last such layer's, and "left at its config value" or
"set on the command line". Values are built when first read: a composition holds every option of
every group, and a script reads a few of them.
"""

from __future__ import annotations

import itertools
import re
from functools import partial
from typing import Any, Callable, Optional, Sequence

from fabric_ls.analysis.hydra_config import MAX_COMBINATIONS, Composition, Condition, join_package
from fabric_ls.analysis.values import (
    Choice,
    CommandLineConfig,
    ConfigMapping,
    Const,
    LazyItems,
    Mapping,
    Seq,
    Unknown,
    Value,
)
from fabric_ls.analysis.yaml_subset import UNSUPPORTED

_MISSING = "???"
_INTERPOLATION = re.compile(r"\$\{([^${}]*)\}")

_Contribution = tuple[Condition, Any]


class ConfigValues:
    """The values of one composition as the interpreter reads them (``cfg.fabric.strategy``)."""

    def __init__(self, composition: Composition, key_prefix: str) -> None:
        self.composition = composition
        self.prefix = key_prefix
        self._built: dict[tuple, Value] = {}
        self._building: set[str] = set()
        self._overridden: dict[tuple, Choice] = {}
        self._at_path: dict[str, list[_Contribution]] = {}

    def root(self) -> Value:
        contributions = [(layer.condition, layer.tree) for layer in self.composition.layers]
        value = self._node("", contributions)
        if isinstance(value, ConfigMapping):
            value.items.pop("hydra", None)  # Hydra's own settings are not the job's
        return value

    def _node(self, path: str, contributions: list[_Contribution], chosen: Optional[dict] = None) -> Value:
        """The value at ``path``: ``chosen`` are the group options already decided above it (a
        mapping one option of a group gives is read under that option only)."""
        chosen = chosen or {}
        memo = (path, tuple(sorted(chosen.items(), key=str)))
        if memo in self._built:
            return self._built[memo]
        if path in self.composition.fixed_values:
            contributions = contributions + [((), self.composition.fixed_values[path])]
        contributions = [(c, node) for c, node in contributions if self._possible(c, chosen)]
        mappings = sum(isinstance(node, dict) for _, node in contributions)
        keys = self._groups_of(contributions, chosen)
        value: Value
        if not path or (mappings and mappings == len(contributions)):
            value = self._mapping(path, contributions, chosen)
        elif keys is None or any(key in self.composition.unknown_groups for key in keys):
            # Too many combinations, or set by a group whose choice this does not follow.
            value = Unknown(text=f"`{path}`")
        else:
            values: list[Value] = []
            for assignment in itertools.product(*(self._options(key, chosen) for key in keys)):
                here = {**chosen, **dict(zip(keys, assignment))}
                active = [(c, node) for c, node in contributions if all(here[k] == o for k, o in c)]
                if active and all(isinstance(node, dict) for _, node in active):
                    values.append(self._mapping(path, active, here))  # a mapping under this option
                elif any(isinstance(node, dict) for _, node in active):
                    values.append(Unknown(text=f"`{path}`"))  # a value merged with a mapping
                else:
                    values.append(self._overridable(path, self._leaf(path, [node for _, node in active])))
            value = self._per_group(keys, values, chosen)
        self._built[memo] = value
        return value

    def _possible(self, condition: Condition, chosen: dict) -> bool:
        """Some allowed choice of the groups makes ``condition`` hold (``compose`` fixes them)."""
        return all(option in self._options(key, chosen) for key, option in condition)

    def _mapping(self, path: str, contributions: list[_Contribution], chosen: dict) -> ConfigMapping:
        children: dict[str, list[_Contribution]] = {}
        for condition, node in contributions:
            if isinstance(node, dict):
                for key, child in node.items():
                    children.setdefault(str(key), []).append((condition, child))
        for fixed in self.composition.fixed_values:
            parent, _, last = fixed.rpartition(".")
            if parent == path and last not in children:
                children[last] = []
        builders: dict[str, Callable[[], Value]] = {
            key: partial(self._node, join_package(path, key), child_contributions, chosen)
            for key, child_contributions in children.items()
        }
        return ConfigMapping(LazyItems(builders), path=path)

    def _groups_of(self, contributions: list[_Contribution], chosen: dict) -> Optional[list[str]]:
        keys: list[str] = []
        for condition, _ in contributions:
            for key, _ in condition:
                if key not in keys and key not in chosen:
                    keys.append(key)
        combinations = 1
        for key in keys:
            combinations *= len(self._options(key, chosen))
        return keys if combinations <= MAX_COMBINATIONS else None

    def _options(self, key: str, chosen: dict) -> tuple[Optional[str], ...]:
        if key in chosen:
            return (chosen[key],)
        fixed = self.composition.fixed_groups
        if key in fixed:
            return (fixed[key],)
        return self.composition.groups[key].options

    def _leaf(self, path: str, active: list[Any]) -> Value:
        if not active:
            return Unknown(text=f"`{path}`")  # not set under these choices: reading it raises
        return self._plain(path, active[-1])

    def _plain(self, path: str, node: Any) -> Value:
        """A value from a file: a constant, a list, a mapping inside a list, an interpolation."""
        if node is UNSUPPORTED or node == _MISSING:
            return Unknown(text=f"`{path}`")
        if isinstance(node, str) and "${" in node:
            return self._interpolated(path, node)
        if isinstance(node, list):
            return Seq([self._plain(f"{path}[{i}]", item) for i, item in enumerate(node)])
        if isinstance(node, dict):
            mapping = ConfigMapping({}, path=path)
            for key, child in node.items():
                mapping.items[str(key)] = self._plain(join_package(path, str(key)), child)
            return mapping
        return Const(node)

    def _interpolated(self, path: str, text: str) -> Value:
        """``${fabric.strategy}`` is that value (every choice of it); ``x-${a}`` a string where what it
        names is one constant; a resolver (``${oc.env:X}``, ``${now:...}``) is unknown."""
        whole = _INTERPOLATION.fullmatch(text)
        references = _INTERPOLATION.findall(text)
        if not references or any(":" in ref for ref in references):
            return Unknown(text=f"`{path}`")
        values = [self._reference(path, ref.strip()) for ref in references]
        if whole is not None:
            return values[0]
        constants = [v.value for v in values if isinstance(v, Const)]
        if len(constants) == len(values):
            parts = iter(constants)
            return Const(_INTERPOLATION.sub(lambda _: str(next(parts)), text))
        return Unknown(text=f"`{path}`")

    def _reference(self, path: str, reference: str) -> Value:
        if reference.startswith("."):
            base = path.split(".")[:-1]
            dots = len(reference) - len(reference.lstrip("."))
            base = base[: len(base) - (dots - 1)] if dots > 1 else base
            reference = ".".join([*base, reference.lstrip(".")])
        if reference in self._building:
            return Unknown(text=f"`{path}`")
        self._building.add(reference)
        try:
            return self._lookup(reference)
        finally:
            self._building.discard(reference)

    def _lookup(self, reference: str) -> Value:
        contributions = self._contributions(reference)
        if not contributions:
            return Unknown(text=f"`{reference}`")
        return self._node(reference, contributions)

    def _contributions(self, path: str) -> list[_Contribution]:
        """What every layer puts at ``path`` (for interpolations: read from the root)."""
        found = self._at_path.get(path)
        if found is None:
            if not path:
                found = [(layer.condition, layer.tree) for layer in self.composition.layers]
            else:
                parent, _, part = path.rpartition(".")
                found = [
                    (condition, node[part])
                    for condition, node in self._contributions(parent)
                    if isinstance(node, dict) and part in node
                ]
            self._at_path[path] = found
        return found

    def _per_group(self, keys: list[str], leaves: Sequence[Value], chosen: dict) -> Value:
        """One value per combination of ``keys``' options (in product order): nested choices, one
        per group, the same decision wherever that group is read."""
        if not keys:
            return leaves[0]
        if all(_same_leaf(leaves[0], leaf) for leaf in leaves[1:]):
            return leaves[0]
        first, rest = keys[0], keys[1:]
        options = self._options(first, chosen)
        size = len(leaves) // len(options)
        nested = [
            self._per_group(rest, leaves[i * size : (i + 1) * size], chosen) for i in range(len(options))
        ]
        if len(options) == 1:
            return nested[0]
        return self.group_choice(first, options, nested)

    def group_choice(self, key: str, options: tuple[Optional[str], ...], values: list[Value]) -> Choice:
        group = self.composition.groups[key]
        texts = []
        for index, option in enumerate(options):
            shown = repr(option) if option is not None else "unset"
            texts.append(f"{shown} (the default)" if index == 0 and group.has_default else shown)
        subject = f"config group `{key}`"
        return Choice(
            f"{self.prefix}:group:{key}",
            tuple(values),
            tuple(f"{subject} is {text}" for text in texts),
            subject,
            tuple(texts),
        )

    def _overridable(self, path: str, value: Value) -> Value:
        """Any value can be set on the command line (``fabric.strategy=ddp``): the file's value or
        another, one decision per path (equal values give the same choice, so options of a group
        that agree are one value). Hydra's own keys (``_target_``) say what is built, not what a
        command line changes; ``compose`` reads no command line."""
        last = path.rsplit(".", 1)[-1]
        if (
            isinstance(value, Unknown)  # not set, or a value this does not follow: nothing to keep
            or not self.composition.from_command_line
            or path in self.composition.fixed_values
            or (last.startswith("_") and last.endswith("_"))
        ):
            return value
        identity = (path, type(value.value), value.value) if isinstance(value, Const) else (path, id(value))
        found = self._overridden.get(identity)
        if found is None:
            key = f"{self.prefix}:{path}"
            found = self._overridden[identity] = Choice(
                key,
                (value, Unknown(text=f"`{path}`", key=f"{key}:set")),
                (f"`{path}` left at its config value", f"`{path}` set on the command line"),
            )
        return found


def _same_leaf(a: Value, b: Value) -> bool:
    if isinstance(a, Const) and isinstance(b, Const):
        return type(a.value) is type(b.value) and a.value == b.value
    return a is b


def merged(first: Value, second: Value, prefix: str, path: str = "") -> Value:
    """``OmegaConf.merge(first, second)``: ``second``'s values over ``first``'s, mappings merged key by
    key. ``second`` = ``OmegaConf.from_cli()``: any of ``first``'s values may be set on the command
    line (``prefix`` names those decisions)."""
    if isinstance(second, CommandLineConfig):
        return settable(first, prefix, path)
    if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
        return (
            second if isinstance(second, (Const, Seq, Choice)) else Unknown(text=f"`{path}`" if path else "")
        )
    builders: dict[str, Callable[[], Value]] = {}
    for key in [*first.items, *(k for k in second.items if k not in first.items)]:
        if key in second.items and key in first.items:
            builders[key] = partial(
                merged, first.items[key], second.items[key], prefix, join_package(path, key)
            )
        else:
            builders[key] = partial((second.items if key in second.items else first.items).__getitem__, key)
    return ConfigMapping(LazyItems(builders), path=path)


def settable(value: Value, prefix: str, path: str = "") -> Value:
    """A configuration whose every value is the file's or one the command line sets."""
    if isinstance(value, Mapping):
        builders: dict[str, Callable[[], Value]] = {
            key: partial(settable, value.items[key], prefix, join_package(path, str(key)))
            for key in value.items
        }
        return ConfigMapping(LazyItems(builders), path=path)
    last = path.rsplit(".", 1)[-1]
    if isinstance(value, Unknown) or not path or (last.startswith("_") and last.endswith("_")):
        return value
    key = f"{prefix}:{path}"
    return Choice(
        key,
        (value, Unknown(text=f"`{path}`", key=f"{key}:set")),
        (f"`{path}` left at its config value", f"`{path}` set on the command line"),
    )
