"""Hydra's configuration, composed as Hydra composes it, every command line's choices kept.

``@hydra.main(config_path="conf", config_name="config")`` calls ``main(cfg)`` with the
composition of ``conf/config.yaml`` and its *defaults list*: each ``group: option`` entry merges
``conf/<group>/<option>.yaml`` at the group's package, each config's own content at its
``_self_`` (the end where it is not listed), later entries over earlier ones. The command line
may pick another option of a group (``fabric=deepspeed``) or set any value
(``fabric.strategy=ddp``), so each group with several files is one decision, and each of its
options' files is a *layer* that holds only under that option (options of nested groups hold
under both). fabric_ls.analysis.hydra_values reads values from the layers.

What this does not follow (a defaults list it cannot read, a group of unknown choice, YAML it
cannot read) makes the composition, or the values it touches, unknown, never guessed.
Checked against Hydra's own ``compose`` in ``tests/test_hydra_config.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from fabric_ls.analysis.yaml_subset import UNSUPPORTED, load_yaml, package_directive

# Bounds on what one composition reads: files, nesting of defaults lists, combinations per value.
MAX_CONFIG_FILES = 400
MAX_DEFAULTS_DEPTH = 12
MAX_COMBINATIONS = 64
_MISSING = "???"

# (decision key, option) pairs that all hold where a layer applies.
Condition = tuple[tuple[str, Optional[str]], ...]


@dataclass
class Layer:
    condition: Condition
    # The file's content placed at its package: a mapping from the composition's root.
    tree: dict
    path: str


@dataclass
class Group:
    """One group of the defaults lists, as the command line names it (``db/engine``)."""

    key: str
    # The options the command line can pick (None: no config), the default first where there is one.
    options: tuple[Optional[str], ...]
    # The option each listing of it picks, under the choices it is listed under (two options of
    # ``algo`` may each list ``optim`` with their own default); ``???`` where it must be given.
    defaults: list[tuple[Condition, Optional[str]]] = field(default_factory=list)

    @property
    def has_default(self) -> bool:
        """One default, whatever else is chosen: the text may call it "the default"."""
        return len({option for _, option in self.defaults}) == 1 and self.defaults[0][1] != _MISSING


@dataclass
class Composition:
    config_dir: str
    name: str
    layers: list[Layer] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)
    # Groups whose choice this does not follow: what their files set is unknown.
    unknown_groups: set[str] = field(default_factory=set)
    files: list[str] = field(default_factory=list)
    # What it was composed from: each file asked for (its stamp, None if absent) and each group's
    # folder listing. Unchanged, the composition is the same (Project keeps it across analyses).
    read_stamps: list[tuple[str, Optional[tuple[int, int]]]] = field(default_factory=list)
    listings: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    # Fixed by the caller (``compose(overrides=[...])``): group → option, value path → value.
    fixed_groups: dict[str, Optional[str]] = field(default_factory=dict)
    fixed_values: dict[str, Any] = field(default_factory=dict)
    # Whether the command line may still change things (``@hydra.main``) or not (``compose``).
    from_command_line: bool = True


class _CannotCompose(Exception):
    pass


ReadText = Callable[[str], Optional[str]]
ListDir = Callable[[str], list[str]]


def compose(
    config_dir: str,
    name: str,
    read_text: ReadText,
    list_dir: ListDir,
    overrides: Optional[list[str]] = None,
    stored: Optional[dict[str, Any]] = None,
) -> Optional[Composition]:
    """The composition of ``<config_dir>/<name>.yaml``, or None where its primary file cannot be read.

    ``overrides``: ``compose(overrides=[...])``'s fixed choices (the command line is then not read);
    None for ``@hydra.main``, where the command line may pick any option. ``stored``: the configs the
    script put in Hydra's ``ConfigStore``, by ``group/name`` (read where no file has that name)."""
    composition = Composition(config_dir, _strip_extension(name), from_command_line=overrides is None)
    fixed: dict[str, Any] = {}
    for override in overrides or []:
        parsed = _fixed_override(override)
        if parsed is None:
            return None
        fixed[parsed[0]] = parsed[1]
    builder = _Composer(composition, read_text, list_dir, stored or {})
    try:
        builder.collect_overrides(composition.name, (), 0)
        builder.include(composition.name, "", (), 0, primary=True)
    except _CannotCompose:
        return None
    for key, value in fixed.items():
        if key in composition.groups:
            composition.fixed_groups[key] = None if value is None else str(value)
        else:
            composition.fixed_values[key] = value
    for condition, key, option in builder.conditional_overrides:
        group = composition.groups.get(key)
        if group is not None:
            # Before the listings' own defaults: where its condition holds, the override wins.
            group.defaults.insert(0, (condition, option))
    if not composition.from_command_line:
        _fix_choices(composition)
    return composition


def _fix_choices(composition: Composition) -> None:
    """``compose(...)``: every group is what the overrides say, or the default that holds under
    the other groups' choices (those it is listed under are decided first)."""
    groups = composition.groups
    fixed = composition.fixed_groups

    def choice(key: str, depth: int = 0) -> Optional[str]:
        if key in fixed or depth > MAX_DEFAULTS_DEPTH:
            return fixed.get(key)
        found: Optional[str] = _MISSING
        for condition, option in groups[key].defaults:
            if all(k in groups and choice(k, depth + 1) == o for k, o in condition):
                found = option
                break
        if found == _MISSING:
            composition.unknown_groups.add(key)  # ``???`` left unset: Hydra stops
        fixed[key] = found
        return found

    for key in list(groups):
        choice(key)


def file_stamp(path: str) -> Optional[tuple[int, int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def unchanged(composition: Composition, list_dir: ListDir) -> bool:
    """The files and folders it was composed from are as they were."""
    return all(file_stamp(path) == stamp for path, stamp in composition.read_stamps) and all(
        tuple(sorted(list_dir(directory))) == listing for directory, listing in composition.listings
    )


def _strip_extension(name: str) -> str:
    return name[: -len(".yaml")] if name.endswith(".yaml") else name


def _fixed_override(override: str) -> Optional[tuple[str, Any]]:
    """``db=pg`` (a group's option) or ``db.port=5432`` (a value): (key, value). Anything else
    (``+x=``, ``~x``, a sweep) is not followed: None."""
    if "=" not in override or override[:1] in "+~":
        return None
    key, _, text = override.partition("=")
    text = text.strip()
    loaded = load_yaml(text) if text else None
    if (
        loaded is UNSUPPORTED
        or ("," in text and text[:1] not in "[{'\"")
        or (isinstance(loaded, dict) and text[:1] != "{")
    ):
        return None
    return key.strip(), loaded


class _Composer:
    def __init__(
        self, composition: Composition, read_text: ReadText, list_dir: ListDir, stored: dict[str, Any]
    ) -> None:
        self.composition = composition
        self.stored = stored
        self.read_text = read_text
        self.list_dir = list_dir
        # Group key → the option an ``override`` entry picks instead of the defaults list's.
        self.overrides: dict[str, Optional[str]] = {}
        self.conditional_overrides: list[tuple[Condition, str, Optional[str]]] = []
        self.loaded: dict[str, Optional[tuple[Any, Optional[str]]]] = {}

    def load(self, config: str) -> Optional[tuple[Any, Optional[str]]]:
        """(content, package header) of ``<config>.yaml``, once per composition."""
        if config in self.loaded:
            return self.loaded[config]
        if len(self.loaded) >= MAX_CONFIG_FILES:
            raise _CannotCompose()
        text = None
        if self.composition.config_dir:
            path = os.path.join(self.composition.config_dir, config + ".yaml")
            text = self.read_text(path)
            self.composition.read_stamps.append((path, file_stamp(path)))
        found: Optional[tuple[Any, Optional[str]]] = None
        if text is None and config in self.stored:
            data = self.stored[config]
            if not isinstance(data, dict) or "defaults" in data:
                raise _CannotCompose()  # a stored config with its own defaults list: not followed
            found = (data, None)
        elif text is not None:
            self.composition.files.append(path)
            data = load_yaml(text)
            if data is None or data is UNSUPPORTED:
                raise _CannotCompose()  # a file Hydra would read, and we cannot
            found = (data, package_directive(text))
        self.loaded[config] = found
        return found

    def collect_overrides(self, config: str, condition: Condition, depth: int, package: str = "") -> None:
        """``override /algo: ppo`` entries, wherever they are: they change the group's default
        before the defaults list is expanded (as Hydra does)."""
        if depth > MAX_DEFAULTS_DEPTH:
            raise _CannotCompose()
        loaded = self.load(config)
        if loaded is None:
            return
        if loaded[1] is not None:
            package = _header_package(loaded[1])
        for entry in _entries(loaded[0]):
            if entry.kind != "group":
                if entry.kind == "config":
                    self.collect_overrides(
                        self.config_path(config, entry.name), condition, depth + 1, package
                    )
                continue
            target = self.group_package(package, entry)
            key = self.group_key(config, entry, None if entry.override else target)
            if entry.override:
                if condition:
                    # Its default depends on another group's choice: known once that one is fixed.
                    self.conditional_overrides.append((condition, key, entry.option))
                else:
                    self.overrides[key] = entry.option
                continue
            for option in self.options(key, entry)[0] if entry.group_path else ():
                if option is not None:
                    nested = condition + ((key, option),)
                    self.collect_overrides(
                        f"{self.group_dir(config, entry)}/{option}", nested, depth + 1, target
                    )

    def include(
        self,
        config: str,
        package: str,
        condition: Condition,
        depth: int,
        primary: bool = False,
        explicit: bool = False,
    ) -> None:
        """Add ``config``'s layers (its defaults list's and its own, in order). ``explicit``: the
        listing named a package (``engine@storage``), which wins over the file's ``@package`` header."""
        if depth > MAX_DEFAULTS_DEPTH:
            raise _CannotCompose()
        loaded = self.load(config)
        if loaded is None:
            if primary:
                raise _CannotCompose()
            return
        data, header = loaded
        if header is not None and not explicit:
            package = _header_package(header)
        entries = _entries(data)
        if not any(entry.kind == "self" for entry in entries):
            entries.append(_Entry("self"))
        # A group's option may be a list (``loggers: [...]``), placed at the group's package.
        content = {k: v for k, v in data.items() if k != "defaults"} if isinstance(data, dict) else data
        if not isinstance(content, dict) and not package:
            raise _CannotCompose()  # the configuration's root is a mapping
        for entry in entries:
            if entry.kind == "self":
                self.composition.layers.append(Layer(condition, _place(content, package), config))
            elif entry.kind == "config":
                self.include(self.config_path(config, entry.name), package, condition, depth + 1)
            elif not entry.override:
                self.include_group(config, package, entry, condition, depth)

    def include_group(
        self, config: str, package: str, entry: "_Entry", condition: Condition, depth: int
    ) -> None:
        target = self.group_package(package, entry)
        key = self.group_key(config, entry, target)
        options, default = self.options(key, entry)
        group = self.composition.groups.setdefault(key, Group(key, options))
        group.options += tuple(o for o in options if o not in group.options)
        group.defaults.append((condition, default))
        for option in options:
            if option is not None:
                config_path = f"{self.group_dir(config, entry)}/{option}"
                self.include(
                    config_path,
                    target,
                    condition + ((key, option),),
                    depth + 1,
                    explicit=entry.package is not None,
                )

    def options(self, key: str, entry: "_Entry") -> tuple[tuple[Optional[str], ...], Optional[str]]:
        """The group's options (its files; the default first) and the default (``???``: none)."""
        group = self.group_dir_of_key(key)
        names = []
        if self.composition.config_dir:
            directory = os.path.join(self.composition.config_dir, group)
            listing = tuple(sorted(self.list_dir(directory)))
            self.composition.listings.append((directory, listing))
            names = [name[: -len(".yaml")] for name in listing if name.endswith(".yaml")]
        # Configs stored in the group (``cs.store(group="fabric", name="ddp", ...)``) are options too.
        in_store = [stored.rpartition("/")[2] for stored in self.stored if stored.rpartition("/")[0] == group]
        names = sorted({*names, *in_store})
        default = self.overrides.get(key, entry.option)
        if default == _MISSING:
            return (tuple(names) if names else (None,)), default
        if default is not None and default not in names:
            if not entry.optional:
                self.composition.unknown_groups.add(key)  # Hydra would stop: no such option
            default = None
        return (default, *(name for name in names if name != default)), default

    def group_dir(self, config: str, entry: "_Entry") -> str:
        if entry.group_path.startswith("/"):
            return entry.group_path.lstrip("/")
        parent = os.path.dirname(config)
        return f"{parent}/{entry.group_path}" if parent else entry.group_path

    def group_package(self, package: str, entry: "_Entry") -> str:
        """Where the group's option is merged: its ``@package`` or the group's name, under the
        package of the config that lists it."""
        if entry.package is not None:
            return "" if entry.package == "_global_" else join_package(package, entry.package)
        return join_package(package, entry.group_path.lstrip("/").replace("/", "."))

    def group_key(self, config: str, entry: "_Entry", target: Optional[str] = None) -> str:
        """The group as the command line names it: ``db/engine``, or ``db@db2`` at another package."""
        key = self.group_dir(config, entry)
        if target is None:
            return key if entry.package is None else f"{key}@{entry.package}"
        return key if target == key.replace("/", ".") else f"{key}@{target}"

    def group_dir_of_key(self, key: str) -> str:
        return key.split("@", 1)[0]

    def config_path(self, config: str, name: str) -> str:
        name = _strip_extension(name)
        if name.startswith("/"):
            return name.lstrip("/")
        parent = os.path.dirname(config)
        return f"{parent}/{name}" if parent else name


@dataclass
class _Entry:
    kind: str  # "self" | "config" | "group"
    name: str = ""
    group_path: str = ""
    option: Optional[str] = None
    package: Optional[str] = None
    optional: bool = False
    override: bool = False


def _entries(data: Any) -> list[_Entry]:
    defaults = data.get("defaults") if isinstance(data, dict) else None
    if defaults is None:
        return []
    if not isinstance(defaults, list):
        raise _CannotCompose()
    entries = []
    for item in defaults:
        if item == "_self_":
            entries.append(_Entry("self"))
        elif isinstance(item, str):
            entries.append(_Entry("config", name=item))
        elif isinstance(item, dict) and len(item) == 1:
            ((key, option),) = item.items()
            if not isinstance(key, str) or not (option is None or isinstance(option, str)):
                raise _CannotCompose()  # several options of one group, or a value we cannot read
            words = key.split()
            flags = set(words[:-1])
            if flags - {"optional", "override"} or not words:
                raise _CannotCompose()
            group, _, package = words[-1].partition("@")
            entries.append(
                _Entry(
                    "group",
                    group_path=group,
                    option=None if option is None else _strip_extension(option),
                    package=package or None,
                    optional="optional" in flags,
                    override="override" in flags,
                )
            )
        else:
            raise _CannotCompose()
    return entries


def _header_package(header: str) -> str:
    if header == "_global_":
        return ""
    return header[len("_global_.") :] if header.startswith("_global_.") else header


def join_package(package: str, child: str) -> str:
    return f"{package}.{child}" if package and child else package or child


def _place(content: Any, package: str) -> dict:
    for part in reversed([p for p in package.split(".") if p]):
        content = {part: content}
    return content
