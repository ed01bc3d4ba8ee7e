"""The analysis worker: the one thread that talks to the engine (and through it to jedi).

Jobs run by priority (foreground analyses before background portability slices) and read the
latest document state when they start, so a burst of edits costs one analysis. Results are
cached per (uri, version, settings, project) and dropped when a file they read changes.
"""

from __future__ import annotations

import gc
import itertools
import logging
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from lsprotocol import types
from lsprotocol.converters import get_converter

from fabric_ls import engine
from fabric_ls.analysis.strategies import MATRIX_NAMES
from fabric_ls.lsp import convert
from fabric_ls.lsp.documents import DocumentState, Outcome, normal_path
from fabric_ls.lsp.present import Context, present
from fabric_ls.model import Analysis, Finding
from fabric_ls.notebook import NOTEBOOK_SUFFIX

logger = logging.getLogger("fabric_ls.worker")

# Test hook: seconds to sleep in every real analysis, to make cancellation and coalescing observable.
DELAY_VARIABLE = "FABRIC_LS_TEST_ANALYSIS_DELAY"
# Job priorities: lower runs first.
STOP, FOREGROUND, BACKGROUND = -1, 0, 1
# After start-up, how long the worker waits for a first document before warming jedi anyway.
WARM_UP_AFTER_SECONDS = 0.5


@dataclass
class _ProjectState:
    project: engine.Project
    overlay_versions: dict[str, int] = field(default_factory=dict)
    disk_changes_seen: int = 0


class RecordBook:
    """Rule records by code, loaded on first use; a missing record module or code gives None."""

    def __init__(self) -> None:
        self._records: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, code: str) -> Optional[Any]:
        with self._lock:
            if code in self._records:
                return self._records[code]
        try:
            from fabric_ls.records import get_record

            record = get_record(code)
        except Exception:  # records are presentation: never let them break analysis
            logger.debug("no record for %s", code, exc_info=True)
            record = None
        with self._lock:
            self._records[code] = record
        return record

    def load(self) -> None:
        try:
            from fabric_ls.records import load_records

            load_records()
        except Exception:
            logger.debug("records not loaded", exc_info=True)


class GarbagePolicy:
    """Keep the cyclic garbage collector off jedi's caches, and collect fully only when idle.

    An analysis allocates many containers next to jedi's large, long-lived caches; with the
    default thresholds the collector runs often during it and its full passes walk those
    caches. Measured on a 3,000-line script (40 edits, idle every 8): 354 ms median and
    793 ms p95 per analysis by default; 123 ms and 154 ms with what is long-lived frozen
    (``gc.freeze``), a larger first threshold, and a full collection plus re-freeze at idle
    moments (so caches built by the first analyses get frozen too, and nothing leaks).
    """

    THRESHOLDS = (50_000, 20, 100)
    IDLE_SECONDS = 0.3
    MIN_INTERVAL_SECONDS = 10.0

    def __init__(self) -> None:
        self.dirty = False
        self.last_full: Optional[float] = None
        self.full_collections = 0

    def start(self) -> None:
        # Cheap: the first full collection and freeze wait for the first idle moment.
        gc.set_threshold(*self.THRESHOLDS)

    def idle_timeout(self) -> Optional[float]:
        """How long the worker may wait for a job before collecting (None: wait for ever)."""
        if not self.dirty:
            return None
        if self.last_full is None:
            return self.IDLE_SECONDS
        since = time.monotonic() - self.last_full
        return max(self.IDLE_SECONDS, self.MIN_INTERVAL_SECONDS - since)

    def after_job(self) -> None:
        self.dirty = True

    def idle(self) -> None:
        """The worker waited ``idle_timeout()`` for a job in vain: collect now."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.dirty = False
        self.last_full = time.monotonic()
        self.full_collections += 1


class AnalysisWorker:
    """The one thread that talks to the engine (and through it to jedi).

    The event loop publishes document states; jobs read the latest state when they run,
    so queued jobs for superseded versions cost a dictionary lookup.
    """

    def __init__(self, record_for: RecordBook) -> None:
        self.record_for = record_for
        self.encoding: str = types.PositionEncodingKind.Utf16
        self.delay = float(os.environ.get(DELAY_VARIABLE) or 0)
        # (priority, sequence, job); a None job stops the thread.
        self._jobs: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self._sequence = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._documents: dict[str, DocumentState] = {}
        self._disk_changes: list[str] = []
        # Owned by the worker thread.
        self._outcomes: dict[str, Outcome] = {}
        self._portability_done: dict[str, tuple[tuple[Any, ...], dict[str, list[Finding]]]] = {}
        self._portability_requested: dict[str, tuple[Any, ...]] = {}
        self._portability_partial: dict[str, tuple[tuple[Any, ...], dict[str, list[Finding]]]] = {}
        self._projects: dict[tuple[str, str], _ProjectState] = {}
        self._file_lines: dict[str, tuple[tuple[int, int], list[str]]] = {}
        self._converter = get_converter()
        self.garbage = GarbagePolicy()
        self._warm_up_pending = False
        self.stats: dict[str, Any] = {
            "analyses": 0,
            # Analyses answered with the last result, moved (fabric_ls.analysis.edit_reuse).
            "reused": 0,
            "cache_hits": 0,
            "portability_runs": 0,
            "failures": 0,
            "analysed_versions": {},
            # Recent durations: the engine's analysis, and turning it into diagnostics.
            "engine_ms": deque(maxlen=200),
            "present_ms": deque(maxlen=200),
        }

    # -- loop side -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self.garbage.start()
            self._thread = threading.Thread(target=self._run, name="fabric-ls-analysis", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._jobs.put((STOP, next(self._sequence), None))

    def submit(self, function: Callable[..., Any], *args: Any, priority: int = FOREGROUND) -> Future:
        """Run ``function(*args)`` on the worker; background jobs wait for every foreground one."""
        future: Future = Future()
        self.start()
        self._jobs.put((priority, next(self._sequence), (future, function, args)))
        return future

    def set_document(self, state: DocumentState) -> None:
        with self._lock:
            self._documents[state.uri] = state

    def remove_document(self, uri: str) -> None:
        with self._lock:
            self._documents.pop(uri, None)
            self._portability_done.pop(uri, None)
            self._portability_requested.pop(uri, None)

    def document(self, uri: str) -> Optional[DocumentState]:
        with self._lock:
            return self._documents.get(uri)

    def documents(self) -> list[DocumentState]:
        with self._lock:
            return list(self._documents.values())

    def note_disk_change(self, path: str) -> None:
        with self._lock:
            self._disk_changes.append(path)

    def forget_outcomes(self) -> None:
        """(Worker side: ``submit`` it.) Drop every cached analysis: a module appeared or vanished, and
        an analysis that found no module records no dependency that would invalidate it."""
        self._outcomes.clear()
        for state in self._projects.values():
            state.project.forget_baselines()

    def outcome(self, uri: str) -> Future:
        return self.submit(self._analyse, uri)

    def portability_now(self, uri: str) -> Optional[tuple[bool, dict[str, list[Finding]]]]:
        """The last portability map computed for ``uri`` and whether it is for the current version.

        Computing it costs one analysis per strategy, so it runs in the background: call
        ``request_portability`` and ask again.
        """
        document = self.document(uri)
        with self._lock:
            known = self._portability_done.get(uri)
        if document is None or known is None:
            return None
        return known[0] == document.key, known[1]

    def request_portability(self, uri: str) -> None:
        document = self.document(uri)
        if document is None:
            return
        with self._lock:
            if self._portability_requested.get(uri) == document.key:
                return
            self._portability_requested[uri] = document.key
        # One strategy per job, so an edit waits for one analysis at most.
        for name in MATRIX_NAMES:
            self.submit(self._portability_slice, uri, document.key, name, priority=BACKGROUND)

    # -- worker side -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            timeout = WARM_UP_AFTER_SECONDS if self._warm_up_pending else self.garbage.idle_timeout()
            try:
                _, _, job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                if self._warm_up_pending:
                    self._warm_up()
                else:
                    self.garbage.idle()
                continue
            if job is None:
                return
            future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:  # the waiter decides what to do with it
                future.set_exception(error)
            self.garbage.after_job()
            if self._warm_up_pending and self._jobs.empty():
                self._warm_up()  # the analyses queued at start-up are done

    def _project(self, key: tuple[str, str]) -> _ProjectState:
        state = self._projects.get(key)
        if state is None:
            root, python = key
            state = _ProjectState(engine.Project(roots=[root], python=python, reuse_analyses=True))
            with self._lock:
                state.disk_changes_seen = len(self._disk_changes)
            self._projects[key] = state
        return state

    def _sync(self, key: tuple[str, str]) -> _ProjectState:
        """Give the project the open buffers and the files changed on disk; drop results that read them."""
        state = self._project(key)
        project = state.project
        with self._lock:
            open_documents = {document.path: document for document in self._documents.values()}
            disk_changes = self._disk_changes[state.disk_changes_seen :]
            state.disk_changes_seen = len(self._disk_changes)
        changed: set[str] = set()
        for path, document in open_documents.items():
            if state.overlay_versions.get(path) != document.version:
                project.set_overlay(path, document.source)
                state.overlay_versions[path] = document.version
                changed.add(normal_path(path))
        for path in list(state.overlay_versions):
            if path not in open_documents:
                project.set_overlay(path, None)
                del state.overlay_versions[path]
                changed.add(normal_path(path))
        for path in disk_changes:
            project.invalidate(path)
            changed.add(normal_path(path))
        if changed:
            for uri, outcome in list(self._outcomes.items()):
                if outcome.dependencies & changed:
                    del self._outcomes[uri]
                    with self._lock:
                        self._portability_requested.pop(uri, None)
                        self._portability_done.pop(uri, None)
            for path in changed:
                self._file_lines.pop(path, None)
        return state

    def _analyse(self, uri: str) -> Optional[Outcome]:
        document = self.document(uri)
        if document is None:
            return None
        state = self._sync(document.project_key)
        cached = self._outcomes.get(uri)
        if cached is not None and cached.document.key == document.key:
            self.stats["cache_hits"] += 1
            return cached
        started = time.perf_counter()
        if self.delay:
            time.sleep(self.delay)
        try:
            # A notebook's program (fabric_ls.lsp.notebooks) runs in an interactive session.
            interactive = document.path.endswith(NOTEBOOK_SUFFIX)
            analysis = engine.analyze_source(
                document.source, document.path, document.settings, state.project, interactive=interactive
            )
        except Exception:
            self.stats["failures"] += 1
            logger.exception("analysis of %s failed", document.path)
            analysis = Analysis(path=document.path)
        analysed = time.perf_counter()
        outcome = present(document, analysis, self._context(document), state.project.environment_problem)
        self.stats["analyses"] += 1
        self.stats["reused"] += analysis.reused
        self.stats["engine_ms"].append(round((analysed - started) * 1000, 2))
        self.stats["present_ms"].append(round((time.perf_counter() - analysed) * 1000, 2))
        versions = self.stats["analysed_versions"].setdefault(uri, deque(maxlen=50))
        versions.append(document.version)
        self._outcomes[uri] = outcome
        return outcome

    def _portability_slice(self, uri: str, key: tuple[Any, ...], name: str) -> None:
        document = self.document(uri)
        if document is None or document.key != key:
            return  # superseded: a newer request (if any) computes the current version
        state = self._sync(document.project_key)
        partial = self._portability_partial.get(uri)
        if partial is None or partial[0] != key:
            partial = (key, {})
            self._portability_partial[uri] = partial
        try:
            result = engine.portability(
                document.source, document.path, document.settings, state.project, strategies=[name]
            )
        except Exception:
            logger.exception("portability of %s failed", document.path)
            result = {}
        partial[1].update(result)
        if all(strategy in partial[1] for strategy in MATRIX_NAMES):
            self.stats["portability_runs"] += 1
            with self._lock:
                self._portability_done[uri] = (key, dict(partial[1]))

    def _lines_of(self, path: str) -> Optional[list[str]]:
        """Another file's lines, for related information: the open buffer, else the file on disk."""
        normal = normal_path(path)
        for document in self.documents():
            if normal_path(document.path) == normal:
                return list(document.lines)
        try:
            status = os.stat(path)
            stamp = (status.st_mtime_ns, status.st_size)
            cached = self._file_lines.get(normal)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = convert.split_lines(handle.read())
        except OSError:
            return None
        self._file_lines[normal] = (stamp, lines)
        return lines

    def _context(self, document: DocumentState) -> Context:
        project = self._projects.get(document.project_key)

        def version_read(open_document: DocumentState) -> Optional[int]:
            # The buffer version the analysis of `document` read, in its project.
            return project.overlay_versions.get(open_document.path) if project is not None else None

        return Context(self.encoding, self.documents(), self._lines_of, version_read, self._converter)

    def warm_up_in_background(self) -> None:
        """Load the records and jedi once the worker is idle (or has done the analyses queued at
        start-up), on a thread of their own: no analysis waits for the warm-up, except one that
        needs jedi while it warms (it waits for the lock jedi_bridge holds meanwhile)."""
        self._warm_up_pending = True
        self.start()

    def _warm_up(self) -> None:
        self._warm_up_pending = False

        def warm() -> None:
            started = time.perf_counter()
            try:
                engine.warm_up()
            except Exception:
                logger.exception("engine warm-up failed")
            logger.info("engine warm-up took %.0f ms", (time.perf_counter() - started) * 1000)

        threading.Thread(target=warm, name="fabric-ls-warm-up", daemon=True).start()

    def status(self) -> dict[str, Any]:
        stats = dict(self.stats)
        stats["analysed_versions"] = {uri: list(v) for uri, v in self.stats["analysed_versions"].items()}
        stats["engine_ms"] = list(self.stats["engine_ms"])
        stats["present_ms"] = list(self.stats["present_ms"])
        stats["full_collections"] = self.garbage.full_collections
        stats["projects"] = [{"root": root, "python": python} for root, python in self._projects]
        return stats
