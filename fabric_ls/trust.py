"""Whether fabric-ls may start a program the workspace names: one decision for the server and ``check``.

Opening or checking a repository must never run its programs. The only program fabric-ls starts is the
Python interpreter jedi reads packages from (the ``python`` setting). Where that setting comes from decides:

* the user (editor settings sent by the client, ``--python`` on the command line): used as given;
* the workspace (``[tool.fabric-ls] python`` in a pyproject.toml): used only when the workspace is trusted
  (the client said ``workspaceTrusted: true``; ``check --trust-config``), and even then only if it is a
  Python interpreter: no scripts, no shells, nothing missing (see ``workspace_python_problem``).

Nothing here runs a program but ``python_for_check``, through ``jedi_bridge.safe_environment_problem``
(jedi's ``safe=True``), and only for an interpreter ``--trust-config`` allows.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

# The initialization option (or ``fabricLs`` configuration key) by which a client trusts the workspace.
TRUST_KEY = "workspaceTrusted"
# The settings keys that name an interpreter (see settings.parse_settings).
PYTHON_KEYS = ("python", "interpreter", "python_path", "python-path", "environment")

HOW_TO_TRUST = (
    "trust the folder in the editor (VS Code: Manage Workspace Trust; other editors: the initialization "
    f'option "{TRUST_KEY}": true) or set the interpreter in your own editor settings'
)
HOW_TO_TRUST_CHECK = "pass --trust-config to use it, or name an interpreter with --python"

# An interpreter file's name, symlinks resolved: python3, python3.12, python3.13t, pypy3.10, python.exe.
_INTERPRETER_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)?)?[td]?(\.exe)?$", re.IGNORECASE)


def client_trusts(*sources: Any) -> bool:
    """Whether any of ``sources`` (raw initializationOptions or configuration answers) says the workspace is
    trusted. Only the boolean ``true`` counts, at the top level or in the ``fabricLs`` section; silence,
    ``"yes"`` or ``1`` leave the workspace untrusted."""
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        if source.get(TRUST_KEY) is True:
            return True
        for section in ("fabricLs", "fabric-ls", "fabric_ls", "settings"):
            nested = source.get(section)
            if isinstance(nested, Mapping) and nested.get(TRUST_KEY) is True:
                return True
    return False


def without_trust_key(raw: Any) -> Any:
    """``raw`` without the trust flag, which is a statement of the client, not a setting."""
    if isinstance(raw, Mapping) and TRUST_KEY in raw:
        return {key: value for key, value in raw.items() if key != TRUST_KEY}
    return raw


def configured_python(table: Mapping[str, Any]) -> Optional[str]:
    """The interpreter a settings table names, if any (the last key wins, as in parse_settings)."""
    found: Optional[str] = None
    for key, value in table.items():
        if key.replace("-", "_") in PYTHON_KEYS and isinstance(value, str) and value.strip():
            found = value
    return found


@dataclass(frozen=True)
class WorkspaceTable:
    """A workspace settings table as fabric-ls may use it, and what was left out."""

    table: Mapping[str, Any]
    ignored_python: Optional[str] = None
    message: Optional[str] = None


def filter_workspace_table(
    table: Mapping[str, Any],
    source: str,
    trusted: bool,
    how_to_trust: str = HOW_TO_TRUST,
    subject: str = "this workspace",
) -> WorkspaceTable:
    """Drop the interpreter from a workspace settings table unless the workspace is trusted."""
    python = configured_python(table)
    if trusted or python is None:
        return WorkspaceTable(table)
    kept = {key: value for key, value in table.items() if key.replace("-", "_") not in PYTHON_KEYS}
    message = (
        f"ignored `python = {python!r}` from {source}: {subject} is not trusted, and fabric-ls "
        f"runs no program a workspace names until it is; {how_to_trust}"
    )
    return WorkspaceTable(kept, python, message)


def interpreter_in(python: str) -> str:
    """The executable jedi would start for ``python``: itself, or a virtualenv's / conda env's interpreter."""
    if not os.path.isdir(python):
        return python
    if sys.platform == "win32":
        candidates = [os.path.join(python, "Scripts", "python.exe"), os.path.join(python, "python.exe")]
    else:
        candidates = [os.path.join(python, "bin", "python")]
    for candidate in candidates:
        if os.path.lexists(candidate):
            return candidate
    return candidates[0]


def workspace_python_problem(python: str) -> Optional[str]:
    """Why ``python``, named by a trusted workspace, is not a Python interpreter fabric-ls may start; or None.

    Decided from the file system alone, before anything runs: the path must exist; a folder must hold a
    virtualenv's ``bin/python``; the executable, symlinks resolved, must be named like an interpreter
    (``python3.12``, not ``dash``) and be a compiled program, not a ``#!`` script. jedi's own safe check
    (``jedi_bridge.safe_environment_problem``) comes after this one.
    """
    executable = interpreter_in(python)
    if not os.path.lexists(python):
        return f"{python!r} does not exist"
    if os.path.isdir(python) and not os.path.lexists(executable):
        return f"{python!r} is a folder without a virtualenv's interpreter ({executable} is missing)"
    real = os.path.realpath(executable)
    if not os.path.isfile(real):  # also a symlink loop or a dangling link
        return f"{executable!r} is not a file (it resolves to {real!r})"
    if not _INTERPRETER_NAME.match(os.path.basename(real)):
        return f"{executable!r} is {real!r}, which is not a Python interpreter"
    if not os.access(real, os.X_OK):
        return f"{executable!r} is not executable"
    try:
        with open(real, "rb") as handle:
            start = handle.read(2)
    except OSError as error:
        return f"{executable!r} cannot be read ({error.strerror or error})"
    if start == b"#!":
        return f"{executable!r} is a script, not a Python interpreter"
    return None


def python_for_check(paths: Sequence[str], trust_config: bool) -> tuple[Optional[str], list[str]]:
    """The interpreter ``fabric-ls check`` gives jedi when ``--python`` is not given, and notes to print.

    ``check`` runs in CI on pull requests from forks: a repository's ``[tool.fabric-ls] python`` is a
    program its author chose, so it is used only with ``--trust-config``, and then only if it is a Python.
    Without it, the note says what was ignored and how to use it.
    """
    from fabric_ls import workspace_config

    named: list[tuple[str, str, str]] = []  # (pyproject.toml, as written, resolved)
    for path in paths:
        probe = os.path.join(path, "__fabric_ls__.py") if os.path.isdir(path) else path
        config = workspace_config.find_project_config(probe)
        written = configured_python(config.table)
        if config.path is None or written is None:
            continue
        layer = workspace_config.SettingsLayer(config.path, config.table, os.path.dirname(config.path))
        resolved = workspace_config.layered_settings([layer])[0].python
        if resolved and all(config.path != known for known, _, _ in named):
            named.append((config.path, written, resolved))
    if not named:
        return None, []
    config_path, written, python = named[0]
    if not trust_config:
        filtered = filter_workspace_table(
            {"python": written},
            config_path,
            trusted=False,
            how_to_trust=HOW_TO_TRUST_CHECK,
            subject="the checked repository",
        )
        return None, [filtered.message or ""]
    notes = [f"using `python` from {config_path} (--trust-config): {python}"]
    if len(named) > 1:
        others = ", ".join(path for path, _, _ in named[1:])
        notes.append(f"{others} also name a `python`; one interpreter serves a run, the first is used")
    from fabric_ls.analysis.jedi_bridge import safe_environment_problem

    refused = safe_environment_problem(python)
    if refused:
        return None, [
            f"`python` from {config_path}: not used: {refused}; only a Python interpreter is started"
        ]
    return python, notes


def inside_roots(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path``, symbolic links resolved, lies in one of ``roots`` (also resolved).

    ``check --fix`` writes only there: a link in the checked folder must not carry a write outside it.
    """
    real = os.path.realpath(path)
    for root in roots:
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return True
    return False
