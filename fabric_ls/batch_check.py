"""Check many files for ``fabric-ls check``: one analysis per file, in this process or a process pool.

Reports come back in the order the files were given, whatever ``--jobs`` is, so the output of a
parallel run is byte for byte the output of a serial one.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from fabric_ls.engine import Project, analyze_file, portability
from fabric_ls.model import Finding, SyntaxProblem
from fabric_ls.notebook import NOTEBOOK_SUFFIX
from fabric_ls.settings import Settings

# Not a Fabric mistake, so it has no record: the file does not parse (or cannot be read).
SYNTAX_ERROR_CODE = "FAB000"
SYNTAX_ERROR_NAME = "syntax-error"
SYNTAX_ERROR_TITLE = "The file does not parse; the rest of it was still checked"


@dataclass(frozen=True)
class FileTask:
    """One file to check, with the settings that apply to it."""

    path: str
    settings: Settings
    matrix: bool = False


@dataclass
class FileReport:
    """What the CLI prints about one file (the parts of an ``Analysis`` it needs)."""

    path: str
    findings: list[Finding]
    # Findings in helper modules reached from this script.
    other_findings: list[Finding]
    notes: list[str]
    # Strategy name -> the findings the script would get under it (``--matrix`` only).
    matrix: Optional[dict[str, list[Finding]]] = None


def syntax_finding(path: str, problem: SyntaxProblem) -> Finding:
    """FAB000: always an error, whatever ``--select``, ``--ignore`` or ``noqa`` say (as in ruff)."""
    return Finding(
        code=SYNTAX_ERROR_CODE,
        path=path,
        span=problem.span,
        severity="error",
        message=problem.message,
        strategy="",
        cell=problem.cell,
    )


def check_file(task: FileTask, project: Project) -> FileReport:
    """Analyse one file; a syntax error becomes a finding next to those from what still parses."""
    analysis = analyze_file(task.path, task.settings, project)
    findings = list(analysis.findings)
    if analysis.syntax_problem is not None:
        findings.append(syntax_finding(analysis.path, analysis.syntax_problem))
    matrix = None
    if task.matrix and not task.path.endswith(NOTEBOOK_SUFFIX):
        try:
            with open(task.path, "rb") as handle:
                source = handle.read().decode("utf-8", errors="replace")
        except OSError:
            source = None
        if source is not None:
            matrix = portability(source, task.path, task.settings, project)
    return FileReport(analysis.path, findings, list(analysis.other_findings), list(analysis.notes), matrix)


def check_files(
    tasks: Sequence[FileTask],
    project_options: dict[str, Any],
    jobs: int,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> list[FileReport]:
    """Check ``tasks`` with up to ``jobs`` processes; reports in the order of ``tasks``.

    ``project_options`` are the keyword arguments of ``Project``: each worker builds its own.
    """
    total = len(tasks)
    if jobs <= 1 or total <= 1:
        project = Project(**project_options)
        reports = []
        for task in tasks:
            reports.append(check_file(task, project))
            on_progress(len(reports), total)
        return reports
    with ProcessPoolExecutor(
        max_workers=min(jobs, total),
        mp_context=_pool_context(),
        initializer=_start_worker,
        initargs=(project_options,),
    ) as pool:
        futures = [pool.submit(_check_in_worker, task) for task in tasks]
        for done, _ in enumerate(as_completed(futures), start=1):
            on_progress(done, total)
        return [future.result() for future in futures]


_WORKER_PROJECT: Optional[Project] = None


def _start_worker(project_options: dict[str, Any]) -> None:
    # One Project per worker, as one per serial run: its jedi cache serves all the worker's files.
    global _WORKER_PROJECT
    _WORKER_PROJECT = Project(**project_options)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose ``check`` was killed (a CI time-out, Ctrl-C) must not go on alone."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _check_in_worker(task: FileTask) -> FileReport:
    assert _WORKER_PROJECT is not None
    return check_file(task, _WORKER_PROJECT)


def _pool_context() -> Optional[Any]:
    # Forking skips re-importing jedi in every worker; the parent has started no threads by then.
    # Elsewhere (macOS, Windows) fork is unsafe or missing: the platform's default it is.
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return None
