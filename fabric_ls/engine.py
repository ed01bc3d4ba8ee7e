"""The engine's public face: analyse sources and files. (Skeleton; filled in next.)"""

from __future__ import annotations

from typing import Iterable, Optional

from fabric_ls.model import Analysis, Finding
from fabric_ls.settings import Settings


class Project:
    """A workspace: roots for import resolution, the Python environment jedi uses, caches."""

    def __init__(self, roots: Iterable[str] = (), python: Optional[str] = None) -> None:
        self.roots = [str(r) for r in roots]
        self.python = python

    def invalidate(self, path: str) -> None:
        """Forget what was read from ``path`` (changed in the editor or on disk)."""

    def set_overlay(self, path: str, source: Optional[str]) -> None:
        """Use ``source`` (an unsaved editor buffer) for ``path``; None drops the overlay."""


def analyze_source(
    source: str, path: str, settings: Settings = Settings(), project: Optional[Project] = None
) -> Analysis:
    """Analyse one script's text; ``path`` locates it for imports and messages."""
    return Analysis(path=path)


def portability(
    source: str, path: str, settings: Settings = Settings(), project: Optional[Project] = None
) -> dict[str, list[Finding]]:
    """For each registry strategy, the findings the script would get if it were chosen."""
    return {}
