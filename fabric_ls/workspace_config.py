"""Where the server's settings come from: editor settings and ``[tool.fabric-ls]`` in pyproject.toml.

Settings are layered, later layers winning key by key:

1. defaults (``Settings()``),
2. the editor's ``initializationOptions``,
3. the editor's ``fabricLs`` configuration section (``workspace/configuration``),
4. ``[tool.fabric-ls]`` in the pyproject.toml nearest to the file that has that table.

The project file wins over the editor so that the CLI and the editor report the same thing.
A bad value keeps the previous layer's value for that key and yields a problem text; nothing raises.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Sequence

from fabric_ls.settings import Settings, parse_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

CONFIG_FILE = "pyproject.toml"
TOOL_TABLE = "fabric-ls"
CLIENT_SECTION = "fabricLs"


@dataclass(frozen=True)
class ProjectConfig:
    """The ``[tool.fabric-ls]`` table that applies to a file, and where it came from."""

    path: Optional[str]
    table: Mapping[str, Any]
    error: Optional[str] = None


@dataclass(frozen=True)
class SettingsLayer:
    """One source of settings: a name for messages, the raw mapping, the folder relative paths start from."""

    source: str
    raw: Any
    base_dir: Optional[str] = None


@dataclass(frozen=True)
class _ParsedFile:
    stamp: tuple[int, int]
    table: Optional[Mapping[str, Any]]
    error: Optional[str]


_cache: dict[str, _ParsedFile] = {}
_cache_lock = threading.Lock()


def _stamp(path: str) -> Optional[tuple[int, int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


def _read(path: str, stamp: tuple[int, int]) -> _ParsedFile:
    with _cache_lock:
        cached = _cache.get(path)
    if cached is not None and cached.stamp == stamp:
        return cached
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        parsed = _ParsedFile(stamp, None, f"cannot read {path}: {error}")
    else:
        tool = document.get("tool")
        table = tool.get(TOOL_TABLE) if isinstance(tool, dict) else None
        if table is not None and not isinstance(table, dict):
            parsed = _ParsedFile(stamp, None, f"[tool.{TOOL_TABLE}] in {path} must be a table")
        else:
            parsed = _ParsedFile(stamp, table, None)
    with _cache_lock:
        _cache[path] = parsed
    return parsed


def invalidate(path: str) -> None:
    """Forget what was read from ``path`` (it changed on disk)."""
    with _cache_lock:
        _cache.pop(os.path.abspath(path), None)


def find_project_config(file_path: str) -> ProjectConfig:
    """The nearest pyproject.toml above ``file_path`` that has a ``[tool.fabric-ls]`` table.

    A pyproject.toml that cannot be parsed stops the search and is reported: silently
    skipping a broken config file would hide the user's settings.
    """
    directory = os.path.dirname(os.path.abspath(file_path))
    while True:
        candidate = os.path.join(directory, CONFIG_FILE)
        stamp = _stamp(candidate)
        if stamp is not None:
            parsed = _read(candidate, stamp)
            if parsed.error is not None:
                return ProjectConfig(candidate, {}, parsed.error)
            if parsed.table is not None:
                return ProjectConfig(candidate, parsed.table)
        parent = os.path.dirname(directory)
        if parent == directory:
            return ProjectConfig(None, {})
        directory = parent


def client_section(raw: Any) -> Any:
    """The ``fabricLs`` part of editor settings, which clients send nested or flat."""
    if isinstance(raw, Mapping):
        for key in (CLIENT_SECTION, "fabric-ls", "fabric_ls"):
            if key in raw:
                # Whatever it holds: a section that is no object gets the same message however it arrived.
                return raw[key]
        if isinstance(raw.get("settings"), Mapping):
            return raw["settings"]
    return raw


def default_python() -> str:
    """The interpreter jedi uses unless configured: the active virtualenv, else the server's own."""
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = os.environ.get(variable)
        if prefix and os.path.isdir(prefix):
            return prefix
    return sys.executable


def _resolve_python(value: str, base_dir: Optional[str]) -> str:
    expanded = os.path.expandvars(os.path.expanduser(value))
    if not os.path.isabs(expanded) and base_dir:
        expanded = os.path.normpath(os.path.join(base_dir, expanded))
    return expanded


def layered_settings(layers: Sequence[SettingsLayer]) -> tuple[Settings, list[str]]:
    """Apply ``layers`` in order over the defaults; return the settings and the problems found."""
    settings = Settings()
    problems: list[str] = []
    for layer in layers:
        raw = layer.raw
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{layer.source}: settings must be an object of key/value pairs; got {raw!r}")
            continue
        before = settings.python
        settings, layer_problems = parse_settings(raw, base=settings)
        problems.extend(f"{layer.source}: {problem}" for problem in layer_problems)
        if settings.python and settings.python != before:
            settings = replace(settings, python=_resolve_python(settings.python, layer.base_dir))
    return settings, problems
