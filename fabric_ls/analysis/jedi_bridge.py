"""The only module that talks to jedi: where does an imported module live?

jedi knows the project's sys.path, the chosen environment's site-packages,
namespace packages and stubs. Answers are cached per (importing folder, module).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import shutil
import tempfile
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator, Optional

log = logging.getLogger(__name__)

# In the server, a jedi call that takes longer than this is abandoned for the import-path fallback.
JEDI_TIMEOUT_S = 2.0
# jedi is not thread-safe: the server warms it on a thread of its own while analyses run, so every
# use of jedi holds this lock (an analysis that needs no jedi never waits for the warm-up).
_JEDI_LOCK = threading.RLock()


def is_own_environment(python: str) -> bool:
    """Whether ``python`` (an interpreter or an environment folder) is the one running fabric-ls.

    Paths are compared as written, not resolved: a virtualenv's interpreter links to the base one.
    """
    import sys

    candidate = os.path.abspath(python)
    if os.path.isdir(candidate):
        return candidate == os.path.abspath(sys.prefix)
    return candidate == os.path.abspath(sys.executable)


@lru_cache(maxsize=16)
def _project(root: str, python: Optional[str]):  # type: ignore[no-untyped-def]
    import jedi

    # A src/ layout is importable once installed; jedi should see it before then too.
    src = os.path.join(root, "src")
    added = [src] if os.path.isdir(src) else []
    try:
        project = jedi.Project(root, environment_path=python, smart_sys_path=True, added_sys_path=added)
        if python:
            project.get_environment()  # fails now, not mid-request, on a broken venv
        return project
    except Exception as error:  # broken venv, missing interpreter
        log.warning("jedi cannot use the environment %r (%s); using the server's own", python, error)
        return jedi.Project(root, smart_sys_path=True, added_sys_path=added)


class JediLocator:
    """Find a module's file with jedi, with a time limit and a cache."""

    def __init__(
        self, root: str, python: Optional[str] = None, timeout: Optional[float] = JEDI_TIMEOUT_S
    ) -> None:
        self.root = root
        self.python = python
        # None: wait for jedi however long it takes (the CLI: an answer that does not depend on load).
        self.timeout = timeout
        self._cache: dict[tuple[str, str], Optional[str]] = {}
        self.failures: list[str] = []
        # After one hang jedi is not used again: it is not thread-safe.
        self.disabled = False

    def clear(self) -> None:
        self._cache.clear()

    def find_module(self, dotted: str, from_path: str) -> Optional[str]:
        key = (os.path.dirname(from_path), dotted)
        if key in self._cache:
            return self._cache[key]
        if self.disabled:
            return None
        found = self._goto_module(dotted, from_path)
        self._cache[key] = found
        return found

    def _goto_module(self, dotted: str, from_path: str) -> Optional[str]:
        result: list[Optional[str]] = [None]

        def work() -> None:
            try:
                try:
                    result[0] = self._module_file(dotted, from_path)
                except (EOFError, pickle.UnpicklingError):
                    # parso's on-disk cache is written in place: a file another process (a `check`
                    # worker) is writing, or a killed one left, reads short. Read nothing from it.
                    with _private_parso_cache():
                        result[0] = self._module_file(dotted, from_path)
            except Exception as error:  # jedi bugs must never reach the user
                self.failures.append(f"jedi failed on `import {dotted}`: {error}")

        thread = threading.Thread(target=work, daemon=True)
        # Wait for a warm-up in progress first: the time limit is for this lookup alone.
        with _JEDI_LOCK:
            thread.start()
            thread.join(self.timeout)
        if thread.is_alive():
            self.disabled = True
            self.failures.append(f"jedi took over {self.timeout}s on `import {dotted}`; used the import path")
            return None
        return result[0]

    def _module_file(self, dotted: str, from_path: str) -> Optional[str]:
        import jedi

        code = f"import {dotted}\n"
        # Without a chosen interpreter, jedi reads this process's own environment in-process:
        # no helper subprocess (which dies under load with "Ran out of input").
        environment = None if self.python else jedi.InterpreterEnvironment()
        script = jedi.Script(
            code, path=from_path, project=_project(self.root, self.python), environment=environment
        )
        for name in script.goto(1, len(code) - 2, follow_imports=True):
            if name.module_path is not None:
                return str(name.module_path)
        return None


_private_cache_directory: list[str] = []


@contextmanager
def _private_parso_cache() -> Iterator[None]:
    """jedi's parse cache in a folder of this process's own (made once, removed at exit)."""
    import jedi

    if not _private_cache_directory:
        folder = tempfile.mkdtemp(prefix="fabric-ls-parso-")
        atexit.register(shutil.rmtree, folder, True)
        _private_cache_directory.append(folder)
    shared = jedi.settings.cache_directory
    jedi.settings.cache_directory = _private_cache_directory[0]
    try:
        yield
    finally:
        jedi.settings.cache_directory = shared


def environment_problem(python: str) -> Optional[str]:
    """Why jedi cannot use ``python`` (an interpreter or a virtualenv folder), or None."""
    try:
        with _JEDI_LOCK:
            import jedi

            jedi.create_environment(python, safe=False)
    except Exception as error:
        return f"cannot use the Python environment {python!r} ({error}); using fabric-ls's own"
    return None


_safe_checks: dict[tuple[str, Optional[tuple[int, int]]], Optional[str]] = {}


def safe_environment_problem(python: str) -> Optional[str]:
    """Why jedi may not start ``python`` (named by a trusted workspace), or None.

    First the file-system check of ``trust`` (nothing runs), then jedi's own ``safe=True`` check: the
    interpreter must be a system one or match a Python found on PATH (a virtualenv's symlink or copy of
    one). Only then is it started, by jedi, to read its version. Cached per path and modification time.
    """
    from fabric_ls.trust import interpreter_in, workspace_python_problem

    executable = os.path.realpath(interpreter_in(python))
    try:
        status = os.stat(executable)
        stamp: Optional[tuple[int, int]] = (status.st_mtime_ns, status.st_size)
    except OSError:
        stamp = None
    key = (python, stamp)
    if key not in _safe_checks:
        problem = workspace_python_problem(python)
        if problem is None:
            try:
                with _JEDI_LOCK:
                    import jedi

                    jedi.create_environment(python, safe=True)
            except Exception as error:
                problem = f"jedi refuses {python!r} ({error})"
        _safe_checks[key] = problem
    return _safe_checks[key]


def warm_up() -> None:
    """Import jedi and parse a small script so the first real request is fast."""
    try:
        with _JEDI_LOCK:
            import jedi

            # In-process, like the lookups without a chosen interpreter: no helper subprocess.
            jedi.Script("import os\nos.path\n", environment=jedi.InterpreterEnvironment()).goto(2, 3)
    except Exception:  # warming is best effort
        pass
