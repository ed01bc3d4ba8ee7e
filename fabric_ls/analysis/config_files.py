"""Configuration files a script reads itself: ``yaml.safe_load(open("config.yaml"))``, ``json.load(f)``.

Research scripts often keep their settings in a YAML or JSON file and build the Fabric from it
(``Fabric(**config["fabric"])``). The file is read, never run: YAML with our own reader
(fabric_ls.analysis.yaml_subset, scalars resolved as PyYAML's ``safe_load`` does), JSON with
Python's ``json``. Its values are constants that say where they were read (the load call), so a
finding reached through them points at the file. A relative path is looked up as for
``OmegaConf.load``: beside the script (where scripts are run from), then at the workspace root.
A path the source does not fix, a missing or unreadable file, or YAML the reader does not follow,
gives an unknown value, as before.
"""

from __future__ import annotations

import ast
import json
import os
from typing import Any, Optional

from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import Frame
from fabric_ls.analysis.values import (
    UNKNOWN,
    Choice,
    Const,
    Evidence,
    External,
    FilePath,
    Mapping,
    Obj,
    Seq,
    Unknown,
    Value,
)
from fabric_ls.analysis.yaml_subset import PLAIN_YAML, UNSUPPORTED, load_yaml

PATH_CLASSES = frozenset({"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.WindowsPath"})
YAML_LOADS = frozenset({"yaml.safe_load", "yaml.load", "yaml.full_load", "yaml.unsafe_load"})
JSON_LOADS = frozenset({"json.load", "json.loads"})
# The calls that turn a file into a configuration: the branches they are in matter (relevance).
CONFIG_FILE_LOADS = YAML_LOADS | JSON_LOADS
# Every call this module models.
CONFIG_FILE_CALLS = CONFIG_FILE_LOADS | PATH_CLASSES | {"open", "os.path.join", "os.path.dirname"}
# ``yaml.load(f, Loader=yaml.BaseLoader)`` reads every scalar as a string: not the resolution we follow.
_OTHER_RESOLUTION = ("BaseLoader", "CBaseLoader")
# Modes of ``open`` that write: such a file is no configuration the script reads.
_WRITING = frozenset("wax+")


class ConfigFilesMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    def _config_file_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value:
        """A call of ``CONFIG_FILE_CALLS``: what it gives, or the generic result of a library call."""
        args, keywords, opaque = self._eval_args(node, frame)
        found: Optional[Value] = None
        if opaque:
            pass
        elif qualname in ("os.path.join", "os.path.dirname"):
            # ``os.path.join(os.path.dirname(__file__), "config.yaml")``: where the source fixes it.
            if args and not keywords and all(_is_text(arg) for arg in args):
                origins = tuple(origin for arg in args for origin in arg.origins)  # type: ignore[attr-defined]
                texts = [arg.value for arg in args]  # type: ignore[attr-defined]
                if qualname == "os.path.join":
                    found = Const(os.path.join(*texts), origins)
                elif len(texts) == 1:
                    found = Const(os.path.dirname(texts[0]), origins)
        elif qualname in PATH_CLASSES:
            relative = _joined(args)
            if relative is not None and not keywords:
                found = FilePath(node, frame.module.path, relative=relative)
        elif qualname == "open":
            mode = keywords.get("mode", args[1] if len(args) > 1 else Const("r"))
            if args and _reading(mode):
                target = args[0]
                # ``open(args.config)``: a file per option, read (and split on) where it is loaded.
                opened = (
                    self._lift(target, lambda option: self._opened(option, node, frame))
                    if isinstance(target, Choice)
                    else self._opened(target, node, frame)
                )
                found = opened if holds_file(opened) else None
        elif qualname in JSON_LOADS:
            found = self._loaded(args[0] if args else UNKNOWN, "json", node, frame)
        else:
            loader = keywords.get("Loader", args[1] if len(args) > 1 else None)
            other_resolution = isinstance(loader, External) and loader.qualname.endswith(_OTHER_RESOLUTION)
            if qualname == "yaml.load" and (loader is None or other_resolution):
                found = UNKNOWN  # PyYAML 6 wants a Loader; BaseLoader keeps every scalar a string
            else:
                found = self._loaded(args[0] if args else UNKNOWN, PLAIN_YAML, node, frame)
        if found is not None:
            return found
        result = self._generic_result(node, frame, args, keywords)
        if isinstance(result, Obj):
            result.library_class = qualname
        return result

    def _opened(self, target: Value, node: ast.AST, frame: Frame) -> Value:
        if isinstance(target, FilePath) and target.form == "path":
            return FilePath(node, frame.module.path, relative=target.relative, form="handle")
        if _is_text(target):
            return FilePath(node, frame.module.path, relative=target.value, form="handle")  # type: ignore[attr-defined]
        return Unknown(text=frame.module.parsed.segment(node))

    def _file_method(self, file: FilePath, attr: str, node: ast.Call, frame: Frame) -> Optional[Value]:
        """``path.read_text()``, ``path.open()``, ``handle.read()``; None for anything else (the
        method is then called as on any object). Decided on the call's text, before evaluating it."""
        if (
            file.form == "path"
            and attr in ("read_text", "read_bytes")
            or (file.form == "handle" and attr == "read" and not node.args and not node.keywords)
        ):
            self._eval_args(node, frame)  # ``encoding="utf-8"``
            return FilePath(node, frame.module.path, relative=file.relative, form="text")
        if file.form == "path" and attr == "open" and _reading_mode_node(node):
            self._eval_args(node, frame)
            return FilePath(node, frame.module.path, relative=file.relative, form="handle")
        return None

    def _loaded(self, source: Value, dialect: str, node: ast.Call, frame: Frame) -> Value:
        """What ``yaml.safe_load``/``json.load`` gives for ``source``: the file's data as values."""
        if isinstance(source, Choice):
            source = self._concrete(source)  # ``open(args.config)``: one file per option
        if isinstance(source, FilePath) and source.form in ("handle", "text"):
            text, found = self._config_text(source.relative, frame)
            if text is None:
                return UNKNOWN
            where = f"read from `{source.relative}`"
            self.dependencies.add(found)
        elif _is_text(source):
            text, where = source.value, "read from this text"  # type: ignore[attr-defined]
        else:
            return UNKNOWN
        data = _parsed(text, dialect)
        if data is _UNREADABLE:
            return Unknown(text=frame.module.parsed.segment(node))
        return _as_value(data, (Evidence(frame.module.parsed, node, where),), 0)

    def _config_text(self, relative: str, frame: Frame) -> tuple[Optional[str], str]:
        script_dir = os.path.dirname(frame.module.path)
        for base in (script_dir, self.project.root_for(frame.module.path)):
            candidate = os.path.normpath(os.path.join(base, os.path.expanduser(relative)))
            text = self.project.read_config_text(candidate)
            if text is not None:
                return text, candidate
        return None, ""


def holds_file(value: Value) -> bool:
    """A file, or a choice one of whose options is one (``open`` of a path the source fixes)."""
    if isinstance(value, Choice):
        return any(holds_file(option) for option in value.options)
    return isinstance(value, FilePath)


def _reading(mode: Value) -> bool:
    return _is_text(mode) and not _WRITING & set(mode.value)  # type: ignore[attr-defined]


def _reading_mode_node(node: ast.Call) -> bool:
    """``path.open()``, ``path.open("r")``, ``path.open(mode="rb", encoding=...)``: a literal reading mode."""
    mode: Optional[ast.AST] = node.args[0] if node.args else None
    for keyword in node.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
        elif keyword.arg is None:
            return False
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and not _WRITING & set(mode.value)


_UNREADABLE: Any = object()
# Deeper than this, a configuration's values are unknown (no real config nests so far).
MAX_DEPTH = 32


def _parsed(text: str, dialect: str) -> Any:
    if dialect == "json":
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return _UNREADABLE
    if not text.strip() or all(line.lstrip().startswith("#") for line in text.splitlines() if line.strip()):
        return None  # ``safe_load`` of an empty document
    data = load_yaml(text, PLAIN_YAML)
    return _UNREADABLE if data is None else data


def _as_value(data: Any, origins: tuple[Evidence, ...], depth: int) -> Value:
    if data is UNSUPPORTED or depth > MAX_DEPTH:
        return Unknown(text="a value fabric-ls does not read")
    if isinstance(data, dict):
        return Mapping({key: _as_value(item, origins, depth + 1) for key, item in data.items()})
    if isinstance(data, list):
        return Seq([_as_value(item, origins, depth + 1) for item in data])
    return Const(data, origins if isinstance(data, str) else ())


def _is_text(value: Value) -> bool:
    return isinstance(value, Const) and isinstance(value.value, str)


def _joined(parts: list[Value]) -> Optional[str]:
    """``Path("configs", "train.yaml")``, ``Path(other_path)``: the path, where the source fixes it."""
    texts: list[str] = []
    for part in parts:
        if isinstance(part, FilePath) and part.form == "path":
            texts.append(part.relative)
        elif _is_text(part):
            texts.append(part.value)  # type: ignore[attr-defined]
        else:
            return None
    return os.path.join(*texts) if texts else None
