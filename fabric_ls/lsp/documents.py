"""What the server holds per open document: one version's text and settings, and its analysis."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from lsprotocol import types

from fabric_ls.model import Analysis, Finding
from fabric_ls.settings import Settings


def normal_path(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def diagnostic_key(diagnostic: types.Diagnostic) -> tuple[int, int, int, int, str, str]:
    """Where a diagnostic is and what it says: two with the same key show the same problem."""
    start, end = diagnostic.range.start, diagnostic.range.end
    return (start.line, start.character, end.line, end.character, str(diagnostic.code), diagnostic.message)


def analysed_version(diagnostic: types.Diagnostic) -> Optional[int]:
    data = diagnostic.data
    return data.get("version") if isinstance(data, dict) else None


def unique_sorted(diagnostics: Iterable[types.Diagnostic]) -> tuple[types.Diagnostic, ...]:
    """Sorted by position, code and message; of identical ones (several paths reach one call) one."""
    unique = {diagnostic_key(diagnostic): diagnostic for diagnostic in reversed(list(diagnostics))}
    return tuple(unique[key] for key in sorted(unique))


@dataclass(frozen=True)
class DocumentState:
    """One version of an open document with the settings and project that apply to it."""

    uri: str
    path: str
    version: int
    source: str
    lines: tuple[str, ...]
    settings: Settings
    project_key: tuple[str, str]

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.version, self.settings, self.project_key)


@dataclass(frozen=True)
class Outcome:
    """An analysis of one document version and what the client sees of it."""

    document: DocumentState
    analysis: Analysis
    findings: tuple[Finding, ...]
    diagnostics: tuple[types.Diagnostic, ...]
    result_id: str
    dependencies: frozenset[str]
    # What limited the analysis (time budget, jedi failures), and an unusable `python` setting.
    notes: tuple[str, ...] = ()
    environment_problem: Optional[str] = None
    # Diagnostics this analysis found in other files (helper modules it calls), by the file's URI.
    contributed: Mapping[str, tuple[types.Diagnostic, ...]] = field(default_factory=dict)
