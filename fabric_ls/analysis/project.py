"""A workspace: where modules live, their parsed text, and who imports whom."""

from __future__ import annotations

import os
from functools import partial
from typing import Any, Iterable, Optional

from fabric_ls.analysis.edit_reuse import Baseline
from fabric_ls.analysis.external import is_external
from fabric_ls.analysis.jedi_bridge import (
    JEDI_TIMEOUT_S,
    JediLocator,
    environment_problem,
    is_own_environment,
)
from fabric_ls.analysis.reparse import reparse, reparse_attempt, settled_lines, trailing_starts
from fabric_ls.analysis.source import ParsedSource, normalize_text, parse_source

# A helper module bigger than this is not parsed for values.
MAX_HELPER_BYTES = 2_000_000
# Scripts whose last clean parse is kept for the next edit.
MAX_REPARSED_SCRIPTS = 8
# Last analyses kept for the next edit (fabric_ls.analysis.edit_reuse), by script and settings.
MAX_BASELINES = 16


class Project:
    """Roots for import resolution, the Python environment jedi uses, and caches.

    ``set_overlay`` makes an unsaved editor buffer win over the file on disk.
    """

    def __init__(
        self,
        roots: Iterable[str] = (),
        python: Optional[str] = None,
        jedi_timeout: Optional[float] = JEDI_TIMEOUT_S,
        reuse_analyses: bool = False,
    ) -> None:
        """``jedi_timeout``: the server bounds each lookup to stay responsive; the CLI passes None,
        so its answer never depends on how busy the machine is.

        ``reuse_analyses``: keep each script's last analysis and answer an edit it cannot see with it
        (fabric_ls.analysis.edit_reuse). The owner says when files change (``invalidate``,
        ``set_overlay``, ``forget_baselines`` for a file created or deleted), as the server does; the
        files an analysis read are also checked unchanged before its result is used again."""
        self.roots = [os.path.abspath(str(r)) for r in roots]
        self.jedi_timeout = jedi_timeout
        # A broken or missing environment is said once, then the server's own is used.
        # The server's own environment needs no check (it is running): that check starts jedi and a
        # subprocess, which would delay a document's first diagnostics by a third of a second.
        own = python is not None and is_own_environment(python)
        self.environment_problem = environment_problem(python) if python and not own else None
        self.python = None if self.environment_problem else python
        self._overlays: dict[str, str] = {}
        self._parsed: dict[str, tuple[object, ParsedSource]] = {}
        # Configuration files (Hydra's YAML) by path: (stamp, text); Hydra compositions by
        # (folder, name, overrides), each checked against its files before use.
        self._texts: dict[str, tuple[object, str]] = {}
        self.compositions: dict[tuple, Any] = {}
        # The last version of each analysed script that parsed as it is, for reparse (a few scripts:
        # the ones being edited).
        self._last_clean: dict[str, ParsedSource] = {}
        # The last analysis of each script (and settings), for an edit it can answer, with the stamps
        # of the files it read.
        self.reuse_analyses = reuse_analyses
        self._baselines: dict[tuple[str, tuple[object, ...]], tuple[Baseline, dict[str, object]]] = {}
        self._locators: dict[str, JediLocator] = {}
        self.messages: list[str] = []

    def root_for(self, path: str) -> str:
        absolute = os.path.abspath(path)
        best = ""
        for root in self.roots:
            if (absolute == root or absolute.startswith(root + os.sep)) and len(root) > len(best):
                best = root
        return best or os.path.dirname(absolute)

    def set_overlay(self, path: str, source: Optional[str]) -> None:
        key = os.path.abspath(path)
        if source is None:
            self._overlays.pop(key, None)
        else:
            self._overlays[key] = source
        self._parsed.pop(key, None)
        self.forget_baselines(key)

    def invalidate(self, path: str) -> None:
        key = os.path.abspath(path)
        self._parsed.pop(key, None)
        self._texts.pop(key, None)
        self.forget_baselines(key)
        for locator in self._locators.values():
            locator.clear()

    def baseline(self, key: tuple[object, ...], path: str) -> Optional[Baseline]:
        """The last analysis of ``path`` with these settings (``keep_baseline``), if the files it read
        are as they were."""
        kept = self._baselines.get((path, key))
        if kept is None:
            return None
        baseline, stamps = kept
        if any(self._stamp(dependency) != stamp for dependency, stamp in stamps.items()):
            del self._baselines[(path, key)]
            return None
        return baseline

    def keep_baseline(self, key: tuple[object, ...], baseline: Baseline, reused: bool = False) -> None:
        """Keep ``baseline`` for the next edit. ``reused``: it is the last one moved (``baseline`` has
        just checked the same files unchanged), so their stamps are not read again."""
        if not self.reuse_analyses:
            return
        entry = (baseline.parsed.path, key)
        kept = self._baselines.get(entry) if reused else None
        if kept is not None:
            stamps = kept[1]
        else:
            stamps = {path: self._stamp(path) for path in baseline.analysis.dependencies}
        self._baselines.pop(entry, None)
        self._baselines[entry] = (baseline, stamps)
        while len(self._baselines) > MAX_BASELINES:
            del self._baselines[next(iter(self._baselines))]

    def forget_baselines(self, changed: Optional[str] = None) -> None:
        """Drop the last analyses that read ``changed`` (every one without it: a module appeared or
        vanished, which no analysis records as read)."""
        for entry, (baseline, _) in list(self._baselines.items()):
            if changed is None or changed in baseline.analysis.dependencies:
                del self._baselines[entry]

    def _stamp(self, path: str) -> object:
        overlay = self._overlays.get(path)
        if overlay is not None:
            return ("overlay", hash(overlay))
        try:
            status = os.stat(path)
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size)

    def read_config_text(self, path: str) -> Optional[str]:
        """A configuration file's text (a Hydra config: never run, only read), or None."""
        key = os.path.abspath(path)
        try:
            status = os.stat(key)
        except OSError:
            return None
        if status.st_size > MAX_HELPER_BYTES or not os.path.isfile(key):
            return None
        stamp = (status.st_mtime_ns, status.st_size)
        cached = self._texts.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            with open(key, "rb") as handle:
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        self._texts[key] = (stamp, text)
        return text

    def read(self, path: str) -> Optional[ParsedSource]:
        """The parsed text of a helper module (overlay first), or None if unreadable."""
        key = os.path.abspath(path)
        overlay = self._overlays.get(key)
        if overlay is not None:
            stamp: object = ("overlay", hash(overlay))
        else:
            try:
                status = os.stat(key)
            except OSError:
                return None
            if status.st_size > MAX_HELPER_BYTES:
                return None
            stamp = (status.st_mtime_ns, status.st_size)
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if overlay is not None:
            text = overlay
        else:
            try:
                with open(key, "rb") as handle:
                    text = handle.read().decode("utf-8", errors="replace")
            except OSError:
                return None
        parsed = parse_source(text, key)
        self._parsed[key] = (stamp, parsed)
        return parsed

    def parse_script(self, text: str, path: str) -> ParsedSource:
        """The script being analysed, parsed: an edit of the last version that parsed re-parses
        only the statements it touched (fabric_ls.analysis.reparse)."""
        previous = self._last_clean.get(path)
        parsed = reparse(text, path, previous) if previous is not None else None
        if parsed is None:
            # A text being typed is repaired by re-parsing it whole: each repaired version that
            # parses is re-parsed from the last clean one first.
            quick = None
            settled = 0
            trailing: frozenset[int] = frozenset()
            if previous is not None:
                quick = partial(reparse_attempt, previous=previous)
                settled = settled_lines(normalize_text(text), previous)
                trailing = trailing_starts(normalize_text(text), previous)
            parsed = parse_source(text, path, quick, settled, trailing)
        if parsed.syntax_error is None and not parsed.repaired_lines and not parsed.closed_lines:
            self._last_clean.pop(path, None)
            self._last_clean[path] = parsed
            while len(self._last_clean) > MAX_REPARSED_SCRIPTS:
                del self._last_clean[next(iter(self._last_clean))]
        return parsed

    def _locator(self, from_path: str) -> JediLocator:
        root = self.root_for(from_path)
        locator = self._locators.get(root)
        if locator is None:
            locator = self._locators[root] = JediLocator(root, self.python, self.jedi_timeout)
        return locator

    def find_module(self, dotted: str, from_path: str, level: int = 0) -> Optional[str]:
        """The file of a workspace module imported from ``from_path``, or None.

        Relative imports and folders near the script are tried first (cheap);
        jedi finds the rest: workspace modules, and helpers of installed third-party
        packages in the chosen environment (read, never run). The packages fabric-ls
        models (torch, lightning, the standard library) are never parsed.
        """
        if level == 0 and is_external(dotted):
            return None
        parts = [p for p in dotted.split(".") if p]
        if level:
            base = os.path.dirname(os.path.abspath(from_path))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return _module_file(base, parts)
        here = os.path.dirname(os.path.abspath(from_path))
        bases = [here]
        root = self.root_for(from_path)
        for candidate in [_package_root(here), root, *self.roots]:
            if candidate not in bases:
                bases.append(candidate)
        for base in bases:
            found = _module_file(base, parts)
            if found:
                return found
        found = self._locator(from_path).find_module(dotted, from_path)
        if found and found.endswith(".py") and self._followable(found, from_path):
            return found
        return None

    def _followable(self, path: str, from_path: str) -> bool:
        absolute = os.path.abspath(path)
        parts = absolute.split(os.sep)
        for folder in ("site-packages", "dist-packages"):
            if folder in parts:
                # An installed package: follow it unless it is one we model by name, and only a
                # module that can hold a Fabric helper (the rest cost time and change nothing).
                package = parts[parts.index(folder) + 1] if parts.index(folder) + 1 < len(parts) else ""
                return not is_external(os.path.splitext(package)[0]) and self._mentions_fabric(absolute)
        root = self.root_for(from_path)
        return absolute.startswith(root + os.sep)

    def _mentions_fabric(self, path: str) -> bool:
        parsed = self.read(path)
        return parsed is not None and "fabric" in parsed.text.lower()

    def jedi_failures(self) -> list[str]:
        failures: list[str] = []
        for locator in self._locators.values():
            failures.extend(locator.failures)
            locator.failures.clear()
        return failures


def _package_root(folder: str) -> str:
    """The folder above the outermost package holding ``folder`` (where its imports start)."""
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def _module_file(base: str, parts: list[str]) -> Optional[str]:
    if not parts:
        init = os.path.join(base, "__init__.py")
        return init if os.path.isfile(init) else None
    stem = os.path.join(base, *parts)
    if os.path.isfile(stem + ".py"):
        return stem + ".py"
    init = os.path.join(stem, "__init__.py")
    if os.path.isfile(init):
        return init
    return None
