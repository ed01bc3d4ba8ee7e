"""The fabric-ls language server: documents in, engine analyses out, LSP values back.

Analysis runs on one worker thread (jedi is not thread-safe), never on the event loop.
Each job analyses the *latest* version of its document when it starts, so a burst of
edits costs one analysis; results are cached per (uri, version, settings, project).
The server decides nothing about Fabric: findings come from ``engine``, text from
``records`` and ``explain``, conversions from ``lsp_convert``.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import inspect
import itertools
import logging
import os
import queue
import stat
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method

from fabric_ls import (
    __version__,
    engine,
    explain,
    lsp_convert,
    lsp_protocol,
    trust,
    workspace_config,
)
from fabric_ls.analysis import jedi_bridge
from fabric_ls.analysis.strategies import MATRIX_NAMES
from fabric_ls.model import Analysis, Finding, Origin
from fabric_ls.settings import Settings

logger = logging.getLogger("fabric_ls.server")

SERVER_NAME = "fabric-ls"
CONFIG_SECTION = workspace_config.CLIENT_SECTION
DIAGNOSTIC_IDENTIFIER = "fabric-ls"
COMMAND_SHOW_STRATEGY = "fabric-ls.showStrategy"
COMMAND_FIX_ALL = "fabric-ls.fixAll"
COMMAND_STATUS = "fabric-ls.serverStatus"
PYTHON_SUFFIXES = (".py", ".pyi")
# Test hook: seconds to sleep in every real analysis, to make cancellation and coalescing observable.
DELAY_VARIABLE = "FABRIC_LS_TEST_ANALYSIS_DELAY"
CONFIG_TIMEOUT = 3.0
# Worker job priorities: lower runs first.
STOP, FOREGROUND, BACKGROUND = -1, 0, 1


def _normal(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def _diagnostic_key(diagnostic: types.Diagnostic) -> tuple[int, int, int, int, str, str]:
    """Where a diagnostic is and what it says: two with the same key show the same problem."""
    start, end = diagnostic.range.start, diagnostic.range.end
    return (start.line, start.character, end.line, end.character, str(diagnostic.code), diagnostic.message)


def _analysed_version(diagnostic: types.Diagnostic) -> Optional[int]:
    data = diagnostic.data
    return data.get("version") if isinstance(data, dict) else None


def _unique_sorted(diagnostics: Iterable[types.Diagnostic]) -> tuple[types.Diagnostic, ...]:
    """Sorted by position, code and message; of identical ones (several paths reach one call) one."""
    unique = {_diagnostic_key(diagnostic): diagnostic for diagnostic in reversed(list(diagnostics))}
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
        self.active = False
        self.dirty = False
        self.last_full: Optional[float] = None
        self.full_collections = 0

    def start(self) -> None:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*self.THRESHOLDS)
        self.active = True

    def idle_timeout(self) -> Optional[float]:
        """How long the worker may wait for a job before collecting (None: wait for ever)."""
        if not (self.active and self.dirty):
            return None
        if self.last_full is None:
            return self.IDLE_SECONDS
        since = time.monotonic() - self.last_full
        return max(self.IDLE_SECONDS, self.MIN_INTERVAL_SECONDS - since)

    def after_job(self) -> None:
        self.dirty = True

    def collect(self) -> None:
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
        self._sliced_portability = "strategies" in inspect.signature(engine.portability).parameters
        self._projects: dict[tuple[str, str], _ProjectState] = {}
        self._file_lines: dict[str, tuple[tuple[int, int], list[str]]] = {}
        self._converter = get_converter()
        self.garbage = GarbagePolicy()
        self.stats: dict[str, Any] = {
            "analyses": 0,
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
        if self._sliced_portability:
            # One strategy per job, so an edit waits for one analysis at most.
            for name in MATRIX_NAMES:
                self.submit(self._portability_slice, uri, document.key, name, priority=BACKGROUND)
        else:
            self.submit(self._portability_slice, uri, document.key, None, priority=BACKGROUND)

    # -- worker side -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                _, _, job = self._jobs.get(timeout=self.garbage.idle_timeout())
            except queue.Empty:
                self.garbage.collect()
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

    def _project(self, key: tuple[str, str]) -> _ProjectState:
        state = self._projects.get(key)
        if state is None:
            root, python = key
            state = _ProjectState(engine.Project(roots=[root], python=python))
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
                changed.add(_normal(path))
        for path in list(state.overlay_versions):
            if path not in open_documents:
                project.set_overlay(path, None)
                del state.overlay_versions[path]
                changed.add(_normal(path))
        for path in disk_changes:
            project.invalidate(path)
            changed.add(_normal(path))
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
            analysis = engine.analyze_source(document.source, document.path, document.settings, state.project)
        except Exception:
            self.stats["failures"] += 1
            logger.exception("analysis of %s failed", document.path)
            analysis = Analysis(path=document.path)
        analysed = time.perf_counter()
        outcome = self._present(document, analysis, getattr(state.project, "environment_problem", None))
        self.stats["analyses"] += 1
        self.stats["engine_ms"].append(round((analysed - started) * 1000, 2))
        self.stats["present_ms"].append(round((time.perf_counter() - analysed) * 1000, 2))
        versions = self.stats["analysed_versions"].setdefault(uri, deque(maxlen=50))
        versions.append(document.version)
        self._outcomes[uri] = outcome
        return outcome

    def _portability_slice(self, uri: str, key: tuple[Any, ...], name: Optional[str]) -> None:
        document = self.document(uri)
        if document is None or document.key != key:
            return  # superseded: a newer request (if any) computes the current version
        state = self._sync(document.project_key)
        partial = self._portability_partial.get(uri)
        if partial is None or partial[0] != key:
            partial = (key, {})
            self._portability_partial[uri] = partial
        try:
            if name is None:
                result = engine.portability(document.source, document.path, document.settings, state.project)
            else:
                result = engine.portability(  # type: ignore[call-arg]
                    document.source, document.path, document.settings, state.project, strategies=[name]
                )
        except Exception:
            logger.exception("portability of %s failed", document.path)
            result = {}
        partial[1].update(result)
        if name is None or all(strategy in partial[1] for strategy in MATRIX_NAMES):
            self.stats["portability_runs"] += 1
            with self._lock:
                self._portability_done[uri] = (key, dict(partial[1]))

    def _lines_of(self, path: str) -> Optional[list[str]]:
        """Another file's lines, for related information: the open buffer, else the file on disk."""
        normal = _normal(path)
        for document in self.documents():
            if _normal(document.path) == normal:
                return list(document.lines)
        try:
            status = os.stat(path)
            stamp = (status.st_mtime_ns, status.st_size)
            cached = self._file_lines.get(normal)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = lsp_convert.split_lines(handle.read())
        except OSError:
            return None
        self._file_lines[normal] = (stamp, lines)
        return lines

    def _present(
        self, document: DocumentState, analysis: Analysis, environment_problem: Optional[str] = None
    ) -> Outcome:
        """Keep the findings the user wants (select/ignore, noqa, severity "off") and convert them.

        A finding in a helper module the script calls is shown twice: at the script's call that
        leads there, and (in ``contributed``) at its own place under the module's URI.
        """
        settings = document.settings
        own_path = _normal(document.path)
        findings: list[Finding] = []
        diagnostics: list[types.Diagnostic] = []
        for finding in analysis.findings:
            if _normal(finding.path) != own_path or not settings.wants(finding.code):
                continue
            line = finding.span.start_line
            if 0 <= line < len(document.lines) and lsp_convert.is_suppressed(
                document.lines[line], finding.code
            ):
                continue
            diagnostic = self._diagnostic(finding, document.lines, settings, document.version)
            if diagnostic is None:
                continue
            findings.append(finding)
            diagnostics.append(diagnostic)
        pairs = list(zip(findings, diagnostics))
        contributed: dict[str, list[types.Diagnostic]] = {}
        for finding in analysis.other_findings:
            if not settings.wants(finding.code):
                continue
            at_call = self._at_call(document, finding)
            if at_call is not None and not any(
                _diagnostic_key(at_call[1]) == _diagnostic_key(taken) for _, taken in pairs
            ):
                pairs.append(at_call)
            in_helper = self._in_helper(document, finding)
            if in_helper is not None:
                contributed.setdefault(in_helper[0], []).append(in_helper[1])
        # Stable: the analysis's own findings keep their order where spans and codes tie.
        pairs.sort(key=lambda pair: (pair[0].span, pair[0].code))
        diagnostics = [diagnostic for _, diagnostic in pairs]
        return Outcome(
            document=document,
            analysis=analysis,
            findings=tuple(finding for finding, _ in pairs),
            diagnostics=tuple(diagnostics),
            result_id=lsp_convert.diagnostics_result_id(diagnostics, self._converter),
            dependencies=frozenset(_normal(path) for path in analysis.dependencies),
            notes=tuple(getattr(analysis, "notes", ()) or ()),
            environment_problem=environment_problem,
            contributed={uri: _unique_sorted(found) for uri, found in sorted(contributed.items())},
        )

    def _at_call(
        self, document: DocumentState, finding: Finding
    ) -> Optional[tuple[Finding, types.Diagnostic]]:
        """A finding in a helper module, shown at the call in ``document`` that leads there.

        It carries no fix (the fix edits the helper module); ``# noqa`` on the call's line hides it.
        """
        via = finding.via
        if via is None or _normal(via.path) != _normal(document.path):
            return None
        line = via.span.start_line
        if 0 <= line < len(document.lines) and lsp_convert.is_suppressed(document.lines[line], finding.code):
            return None
        where = f"{os.path.basename(finding.path)}:{finding.span.start_line + 1}"
        at_call = replace(
            finding,
            path=document.path,
            span=via.span,
            message=f"{finding.message} (in {where}, reached through this call)",
            related=(Origin(finding.path, finding.span, f"the call in {where}"), *finding.related),
            fix=None,
            via=None,
        )
        diagnostic = self._diagnostic(at_call, document.lines, document.settings, document.version)
        return None if diagnostic is None else (at_call, diagnostic)

    def _in_helper(self, document: DocumentState, finding: Finding) -> Optional[tuple[str, types.Diagnostic]]:
        """The helper module's URI and the finding as a diagnostic there, pointing back at the call.

        Only for a module in the script's project (or open): a library the script calls is not
        the user's to fix, and the diagnostic at the call already says what goes wrong there.
        """
        path = finding.path
        open_document = next(
            (state for state in self.documents() if _normal(state.path) == _normal(path)), None
        )
        root = _normal(document.project_key[0])
        if open_document is None and not _normal(path).startswith(root.rstrip(os.sep) + os.sep):
            return None
        lines = self._lines_of(path)
        if lines is None:
            return None
        back: tuple[Origin, ...] = ()
        if finding.via is not None:
            where = f"{os.path.basename(finding.via.path)}:{finding.via.span.start_line + 1}"
            back = (Origin(finding.via.path, finding.via.span, f"reached from {where}"),)
        in_helper = replace(finding, related=(*back, *finding.related), via=None)
        # The version of the buffer the analysis read (None: the file on disk); the server shows the
        # diagnostic only while the module is at that version, and the fix applies to it.
        version = None
        if open_document is not None:
            project = self._projects.get(document.project_key)
            version = project.overlay_versions.get(open_document.path) if project is not None else None
        diagnostic = self._diagnostic(in_helper, lines, document.settings, version)
        if diagnostic is None:
            return None
        uri = open_document.uri if open_document is not None else lsp_convert.path_to_uri(path)
        return uri, diagnostic

    def _diagnostic(
        self, finding: Finding, lines: Sequence[str], settings: Settings, version: Optional[int]
    ) -> Optional[types.Diagnostic]:
        record = self.record_for(finding.code)
        return lsp_convert.to_diagnostic(
            finding,
            lines,
            self.encoding,
            settings.severity_for(finding.code, finding.severity),
            version,
            docs_url=getattr(record, "docs_url", None) if record is not None else None,
            related_lines=self._lines_of,
        )

    def warm_up(self) -> None:
        self.record_for.load()
        warm = getattr(engine, "warm_up", None)
        if callable(warm):
            started = time.perf_counter()
            try:
                warm()
            except Exception:
                logger.exception("engine warm-up failed")
            logger.info("engine warm-up took %.0f ms", (time.perf_counter() - started) * 1000)
        self.garbage.start()

    def status(self) -> dict[str, Any]:
        stats = dict(self.stats)
        stats["analysed_versions"] = {uri: list(v) for uri, v in self.stats["analysed_versions"].items()}
        stats["engine_ms"] = list(self.stats["engine_ms"])
        stats["present_ms"] = list(self.stats["present_ms"])
        stats["full_collections"] = self.garbage.full_collections
        stats["projects"] = [{"root": root, "python": python} for root, python in self._projects]
        return stats


class _Rejected:
    """Stands in for a request whose params did not deserialize; it has been answered with an error."""

    jsonrpc = None


class FabricProtocol(lsp_protocol.HardenedProtocol):
    """pygls' protocol with two repairs: invalid params get an error response, and capabilities
    follow what the client can use (pull diagnostics only for clients that pull)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if isinstance(data, dict) and "method" in data and "id" in data and "jsonrpc" in data:
                # The spec wants an answer (-32602); without one the client would wait forever.
                self._send_response(data["id"], error=error.to_response_error())
                return _Rejected()
            raise

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        capabilities = result.capabilities
        if not _client_pulls_diagnostics(params.capabilities):
            capabilities.diagnostic_provider = None
        if _client_has_inlay_hints(params.capabilities):
            capabilities.code_lens_provider = None
        return result


def _capability(capabilities: Optional[types.ClientCapabilities], dotted: str, default: Any = None) -> Any:
    value: Any = capabilities
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return default
    return value


def _client_pulls_diagnostics(capabilities: Optional[types.ClientCapabilities]) -> bool:
    return _capability(capabilities, "text_document.diagnostic") is not None


def _client_has_inlay_hints(capabilities: Optional[types.ClientCapabilities]) -> bool:
    return _capability(capabilities, "text_document.inlay_hint") is not None


class FabricLanguageServer(LanguageServer):
    """Holds the open documents, the settings sources and the analysis worker."""

    def __init__(self) -> None:
        super().__init__(
            name=SERVER_NAME,
            version=__version__,
            protocol_cls=FabricProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.record_for = RecordBook()
        self.worker = AnalysisWorker(self.record_for)
        self.initialization_options: Any = None
        self.client_settings: dict[Optional[str], Any] = {}
        self.pull_mode = False
        self.shutdown_requested = False
        self.outcomes: dict[str, Outcome] = {}
        # Documents whose last outcome may be out of date for a reason the version does not show.
        self.stale: set[str] = set()
        self.published: dict[str, tuple[Optional[int], str]] = {}
        self.served: dict[str, str] = {}
        # For each open document: the other files its last published analysis put diagnostics on.
        self.contribution_targets: dict[str, frozenset[str]] = {}
        self._converter = get_converter()
        self.reported_problems: set[str] = set()
        self.reported_notes: set[str] = set()
        self.config_ready: Optional[asyncio.Event] = None
        self._tasks: set[asyncio.Future] = set()
        self._refresh_pending: set[str] = set()
        self._root_cache: dict[str, str] = {}

    # -- capabilities and small helpers ----------------------------------------------------
    @property
    def encoding(self) -> str:
        return self.workspace.position_encoding or types.PositionEncodingKind.Utf16

    def client_can(self, dotted: str) -> bool:
        return bool(_capability(self.client_capabilities, dotted, False))

    def spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background task failed", exc_info=task.exception())

    def document(self, uri: str) -> Optional[DocumentState]:
        return self.worker.document(uri)

    def report_server_error(self, error: Exception, source: Any) -> None:
        # A message the client sent that cannot be read gets its JSON-RPC answer, not a pop-up.
        lsp_protocol.report_server_error(self, error, source, super().report_server_error)

    def tell(self, message: str, level: types.MessageType = types.MessageType.Warning) -> None:
        """Show a message and log it too (messages disappear; the log stays)."""
        self.window_show_message(types.ShowMessageParams(type=level, message=message))
        self.window_log_message(types.LogMessageParams(type=level, message=message))

    # -- settings --------------------------------------------------------------------------
    def folder_for(self, path: str) -> Optional[str]:
        """The workspace folder holding ``path`` (the deepest one in a multi-root workspace)."""
        normal = _normal(path)
        best: Optional[str] = None
        for folder in self.workspace.folders.values():
            folder_path = lsp_convert.uri_to_path(folder.uri)
            if not folder_path:
                continue
            candidate = _normal(folder_path)
            if (normal == candidate or normal.startswith(candidate.rstrip(os.sep) + os.sep)) and (
                best is None or len(candidate) > len(best)
            ):
                best = folder_path
        if best is None and self.workspace.root_path:
            root = _normal(self.workspace.root_path)
            if normal.startswith(root.rstrip(os.sep) + os.sep):
                best = self.workspace.root_path
        return best

    def _folder_uri(self, folder_path: Optional[str]) -> Optional[str]:
        if folder_path is None:
            return None
        for folder in self.workspace.folders.values():
            if lsp_convert.uri_to_path(folder.uri) == folder_path:
                return folder.uri
        return None

    def _loose_root(self, path: str) -> str:
        """For a file outside every workspace folder: the nearest folder that looks like a project."""
        directory = os.path.dirname(os.path.abspath(path))
        cached = self._root_cache.get(directory)
        if cached is not None:
            return cached
        current = directory
        root = directory
        while True:
            if any(
                os.path.exists(os.path.join(current, marker))
                for marker in ("pyproject.toml", "setup.py", ".git")
            ):
                root = current
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        self._root_cache[directory] = root
        return root

    def settings_for(self, path: str) -> tuple[Settings, tuple[str, str]]:
        folder = self.folder_for(path)
        base_dir = folder or os.path.dirname(os.path.abspath(path))
        scoped = self.client_settings.get(self._folder_uri(folder))
        editor = scoped if scoped is not None else self.client_settings.get(None)
        layers = [
            workspace_config.SettingsLayer(
                "initializationOptions",
                trust.without_trust_key(workspace_config.client_section(self.initialization_options)),
                base_dir,
            ),
            workspace_config.SettingsLayer(
                f"editor settings ({CONFIG_SECTION})",
                trust.without_trust_key(workspace_config.client_section(editor)),
                base_dir,
            ),
        ]
        config = workspace_config.find_project_config(path)
        problems: list[str] = []
        python_from_workspace = False
        if config.error:
            problems.append(config.error)
        elif config.path:
            source = f"{config.path} [tool.{workspace_config.TOOL_TABLE}]"
            # The workspace may name an interpreter only once the client says it is trusted.
            allowed = trust.filter_workspace_table(config.table, source, self.workspace_trusted())
            if allowed.message:
                self.tell_once(f"fabric-ls: {allowed.message}.")
            python_from_workspace = trust.configured_python(allowed.table) is not None
            layers.append(workspace_config.SettingsLayer(source, allowed.table, os.path.dirname(config.path)))
        settings, layer_problems = workspace_config.layered_settings(layers)
        self.report_problems(problems + layer_problems)
        if python_from_workspace and settings.python:
            refused = jedi_bridge.safe_environment_problem(settings.python)
            if refused:
                editor_python = workspace_config.layered_settings(layers[:2])[0].python
                self.tell_once(
                    f"fabric-ls: `python` from {config.path}: not used: {refused}. Only a Python interpreter "
                    f"(a virtualenv's, a conda env's or one on PATH) is started; using "
                    f"{editor_python or 'the server environment'} instead."
                )
                settings = replace(settings, python=editor_python)
        python = settings.python or workspace_config.default_python()
        root = folder or self._loose_root(path)
        return settings, (root, python)

    def workspace_trusted(self) -> bool:
        """Whether the client said the workspace is trusted (initializationOptions or its configuration)."""
        return trust.client_trusts(self.initialization_options, self.client_settings.get(None))

    def tell_once(self, message: str) -> None:
        if message not in self.reported_problems:
            self.reported_problems.add(message)
            self.tell(message)

    def report_problems(self, problems: Iterable[str]) -> None:
        for problem in problems:
            if problem in self.reported_problems:
                continue
            self.reported_problems.add(problem)
            self.tell(f"fabric-ls: {problem}. Using the default for that setting.")

    async def pull_client_settings(self) -> None:
        """Ask the client for the ``fabricLs`` section, globally and for each workspace folder."""
        if not self.client_can("workspace.configuration"):
            return
        folders = list(self.workspace.folders.values())
        items = [types.ConfigurationItem(section=CONFIG_SECTION)]
        items += [types.ConfigurationItem(scope_uri=folder.uri, section=CONFIG_SECTION) for folder in folders]
        try:
            values = await asyncio.wait_for(
                self.workspace_configuration_async(types.ConfigurationParams(items=items)), CONFIG_TIMEOUT
            )
        except Exception as error:  # a client that fails here must not stop the server
            logger.warning("workspace/configuration failed: %s", error)
            return
        values = list(values or [])
        settings: dict[Optional[str], Any] = {None: values[0] if values else None}
        for folder, value in zip(folders, values[1:]):
            settings[folder.uri] = value
        self.client_settings = settings

    async def wait_for_config(self) -> None:
        if self.config_ready is None or self.config_ready.is_set():
            return
        try:
            await asyncio.wait_for(self.config_ready.wait(), CONFIG_TIMEOUT)
        except asyncio.TimeoutError:
            self.config_ready.set()

    # -- documents -------------------------------------------------------------------------
    def track(self, uri: str, version: int, source: str, language_id: str = "") -> Optional[DocumentState]:
        """Record a document version; only Python files are tracked (a tracked one stays tracked)."""
        path = lsp_convert.uri_to_path(uri)
        python = language_id == "python" or self.document(uri) is not None
        if not path or not (python or path.endswith(PYTHON_SUFFIXES)):
            return None
        settings, project_key = self.settings_for(path)
        state = DocumentState(
            uri=uri,
            path=path,
            version=version,
            source=source,
            lines=tuple(lsp_convert.split_lines(source)),
            settings=settings,
            project_key=project_key,
        )
        self.worker.set_document(state)
        return state

    def untrack(self, uri: str) -> None:
        self.worker.remove_document(uri)
        self.outcomes.pop(uri, None)
        self.stale.discard(uri)
        self.published.pop(uri, None)
        self.served.pop(uri, None)

    def remember(self, uri: str, outcome: Outcome) -> None:
        """Keep ``outcome`` as the document's current one and say what limited it (once per text)."""
        self.outcomes[uri] = outcome
        self.stale.discard(uri)
        if outcome.environment_problem:
            self.report_problems([f"`python` setting: {outcome.environment_problem}"])
        for note in outcome.notes:
            message = f"fabric-ls: {os.path.basename(outcome.document.path)}: {note}"
            if message not in self.reported_notes:
                self.reported_notes.add(message)
                self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=message))

    def dependents_of(self, paths: Iterable[str], exclude: str = "") -> list[str]:
        """Open documents whose last analysis read any of ``paths``."""
        changed = {_normal(path) for path in paths}
        return [
            uri for uri, outcome in self.outcomes.items() if uri != exclude and outcome.dependencies & changed
        ]

    def restate_all(self) -> None:
        """Recompute every open document's settings (a settings source changed)."""
        for document in self.worker.documents():
            self.track(document.uri, document.version, document.source)

    # -- analysis --------------------------------------------------------------------------
    async def outcome_for(self, uri: str) -> Optional[Outcome]:
        """The analysis of the document's current version (computed on the worker if needed)."""
        for _ in range(5):
            document = self.document(uri)
            if document is None:
                return None
            cached = self.outcomes.get(uri)
            if cached is not None and cached.document.key == document.key and uri not in self.stale:
                return cached
            outcome = await asyncio.wrap_future(self.worker.outcome(uri))
            current = self.document(uri)
            if outcome is None or current is None:
                return None
            if outcome.document.key == current.key:
                self.remember(uri, outcome)
                return outcome
        return None

    def schedule(self, uri: str, force: bool = False, external: bool = False) -> None:
        """Re-analyse ``uri`` in the background and publish (push) or announce (pull) the result.

        ``external`` marks a change the client does not know about (settings, another file).
        """
        if external:
            self.stale.add(uri)
        self.spawn(self._refresh(uri, force, external))

    async def _refresh(self, uri: str, force: bool, external: bool) -> None:
        await self.wait_for_config()
        outcome = await asyncio.wrap_future(self.worker.outcome(uri))
        current = self.document(uri)
        if outcome is None or current is None or outcome.document.key != current.key:
            return  # superseded: the refresh scheduled by the newer change publishes
        previous = self.outcomes.get(uri)
        self.remember(uri, outcome)
        if external and (previous is None or previous.analysis.fabric_sites != outcome.analysis.fabric_sites):
            self.request_refreshes(views=True)
        if self.pull_mode:
            if external and self.served.get(uri) not in (None, self.view(uri)[2]):
                self.request_refreshes(diagnostics=True)
        else:
            self.publish(uri, force)
        self.share_contributions(uri, outcome)

    def view(self, uri: str) -> tuple[Optional[int], list[types.Diagnostic], str]:
        """What the client should show for ``uri`` (version, diagnostics, result id): the diagnostics
        of its own analysis and those that open documents' analyses found in it (a helper module
        they call). Identical ones are shown once, with every script's call as related information."""
        document = self.document(uri)
        own = self.outcomes.get(uri) if document is not None else None
        shown: dict[tuple[Any, ...], types.Diagnostic] = {}
        for diagnostic in own.diagnostics if own is not None else ():
            shown.setdefault(_diagnostic_key(diagnostic), diagnostic)
        for contributor in sorted(self.outcomes):
            if contributor == uri:
                continue
            for diagnostic in self.outcomes[contributor].contributed.get(uri, ()):
                if _analysed_version(diagnostic) != (document.version if document is not None else None):
                    continue  # found in an older text of the module: the contributor's re-analysis follows
                key = _diagnostic_key(diagnostic)
                first = shown.get(key)
                if first is None:
                    shown[key] = diagnostic
                elif own is None or first not in own.diagnostics:
                    merged = copy.copy(first)
                    related = list(first.related_information or [])
                    merged.related_information = related + [
                        info for info in diagnostic.related_information or [] if info not in related
                    ]
                    shown[key] = merged
        # Stable: a document's own diagnostics keep the engine's order where positions and codes tie.
        diagnostics = sorted(shown.values(), key=lambda diagnostic: _diagnostic_key(diagnostic)[:5])
        version = own.document.version if own is not None else None
        return version, diagnostics, lsp_convert.diagnostics_result_id(diagnostics, self._converter)

    def publish(self, uri: str, force: bool = False) -> None:
        """(Push mode.) Send ``view(uri)`` unless the client already has exactly that."""
        document = self.document(uri)
        own = self.outcomes.get(uri)
        if document is not None and (own is None or own.document.key != document.key):
            return  # the refresh scheduled with the document's change publishes, contributions included
        version, diagnostics, result_id = self.view(uri)
        stamp = (version, result_id)
        if not force and self.published.get(uri) == stamp:
            return
        self.published[uri] = stamp
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics)
        )

    def share_contributions(self, uri: str, outcome: Optional[Outcome]) -> None:
        """Bring up to date the files ``uri``'s analysis found problems in, now or before (None: closed)."""
        targets = frozenset(outcome.contributed) if outcome is not None else frozenset()
        previous = self.contribution_targets.get(uri, frozenset())
        if outcome is None:
            self.contribution_targets.pop(uri, None)
        else:
            self.contribution_targets[uri] = targets
        for target in sorted(targets | previous):
            if target == uri:
                continue
            if not self.pull_mode:
                self.publish(target)
            elif self.served.get(target) not in (None, self.view(target)[2]):
                self.request_refreshes(diagnostics=True)

    def request_refreshes(self, diagnostics: bool = False, views: bool = False) -> None:
        """Ask the client to re-pull what changed behind its back (coalesced to one request each)."""
        wanted = ({"diagnostics"} if diagnostics else set()) | ({"views"} if views else set())
        if not wanted - self._refresh_pending:
            return
        first = not self._refresh_pending
        self._refresh_pending |= wanted
        if first:
            asyncio.get_running_loop().call_later(0.05, self._send_refreshes)

    def _send_refreshes(self) -> None:
        pending, self._refresh_pending = self._refresh_pending, set()
        if (
            "diagnostics" in pending
            and self.pull_mode
            and self.client_can("workspace.diagnostics.refresh_support")
        ):
            self.workspace_diagnostic_refresh(None)
        if "views" in pending and self.client_can("workspace.inlay_hint.refresh_support"):
            self.workspace_inlay_hint_refresh(None)
        if "views" in pending and self.client_can("workspace.code_lens.refresh_support"):
            self.workspace_code_lens_refresh(None)

    def reanalyse_all(self) -> None:
        self.restate_all()
        for document in self.worker.documents():
            self.schedule(document.uri, force=True, external=True)
        self.request_refreshes(diagnostics=True, views=True)

    # -- fixes -----------------------------------------------------------------------------
    def safe_fix_edits(self, outcome: Outcome) -> list[types.TextEdit]:
        """Every safe fix's edits, skipping a fix that overlaps one already taken."""
        taken: list[types.TextEdit] = []
        for finding in sorted(outcome.findings, key=lambda finding: finding.span):
            if finding.fix is None or not finding.fix.safe:
                continue
            edits = lsp_convert.fix_edits(finding.fix, outcome.document.lines, self.encoding)
            if any(lsp_convert.edits_overlap(edit, other) for edit in edits for other in taken):
                continue
            taken.extend(edit for edit in edits if edit not in taken)
        return taken

    def workspace_edit(self, document: DocumentState, edits: Sequence[types.TextEdit]) -> types.WorkspaceEdit:
        return lsp_convert.workspace_edit(
            document.uri,
            document.version,
            edits,
            self.client_can("workspace.workspace_edit.document_changes"),
        )


# ---- handlers ----------------------------------------------------------------------------


def on_initialize(ls: FabricLanguageServer, params: types.InitializeParams) -> None:
    ls.initialization_options = params.initialization_options
    ls.pull_mode = _client_pulls_diagnostics(params.capabilities)
    ls.worker.encoding = ls.encoding
    ls.config_ready = asyncio.Event()
    if not _capability(params.capabilities, "workspace.configuration", False):
        ls.config_ready.set()
    ls.worker.start()
    ls.worker.submit(ls.worker.warm_up)


async def on_initialized(ls: FabricLanguageServer, params: types.InitializedParams) -> None:
    registrations = []
    if ls.client_can("workspace.did_change_configuration.dynamic_registration"):
        registrations.append(
            types.Registration(
                id="fabric-ls-configuration",
                method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                register_options=types.DidChangeConfigurationRegistrationOptions(section=CONFIG_SECTION),
            )
        )
    if ls.client_can("workspace.did_change_watched_files.dynamic_registration"):
        registrations.append(
            types.Registration(
                id="fabric-ls-watched-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[
                        types.FileSystemWatcher(glob_pattern="**/*.py"),
                        types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                    ]
                ),
            )
        )
    if registrations:
        ls.spawn(_register(ls, registrations))
    await ls.pull_client_settings()
    # Documents opened meanwhile wait for the settings; give them the ones just received.
    ls.restate_all()
    if ls.config_ready is not None:
        ls.config_ready.set()


async def _register(ls: FabricLanguageServer, registrations: list[types.Registration]) -> None:
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=registrations))
    except Exception as error:  # the client may refuse; static capabilities still work
        logger.info("client/registerCapability refused: %s", error)


def on_did_open(ls: FabricLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    document = params.text_document
    state = ls.track(document.uri, document.version, document.text, document.language_id)
    if state is not None:
        ls.schedule(document.uri)
        # Scripts that call into it now read the buffer: what they find there gets its version.
        for dependent in ls.dependents_of([state.path], exclude=document.uri):
            ls.schedule(dependent, external=True)


def on_did_change(ls: FabricLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if ls.document(uri) is None:
        return
    text = ls.workspace.get_text_document(uri).source
    state = ls.track(uri, params.text_document.version, text)
    if state is None:
        return
    ls.schedule(uri)
    for dependent in ls.dependents_of([state.path], exclude=uri):
        ls.schedule(dependent, external=True)


def on_did_save(ls: FabricLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    path = lsp_convert.uri_to_path(uri) or ""
    if os.path.basename(path) == workspace_config.CONFIG_FILE:
        workspace_config.invalidate(path)
        ls.reported_problems.clear()
        ls.reanalyse_all()
        return
    if ls.document(uri) is not None:
        ls.schedule(uri, force=True)


def on_did_close(ls: FabricLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.document(uri)
    if state is None:
        return
    dependents = ls.dependents_of([state.path], exclude=uri)
    ls.untrack(uri)
    if not ls.pull_mode:
        # What open scripts found in it stays (as for any file they call); its own findings go.
        ls.publish(uri, force=True)
    ls.share_contributions(uri, None)
    # The buffer is gone: whoever imports it now reads the file on disk.
    for dependent in dependents:
        ls.schedule(dependent, external=True)


def on_did_change_watched_files(ls: FabricLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
    config_changed = False
    structural = False
    changed: list[str] = []
    for change in params.changes:
        path = lsp_convert.uri_to_path(change.uri)
        if not path:
            continue
        if os.path.basename(path) == workspace_config.CONFIG_FILE:
            workspace_config.invalidate(path)
            config_changed = True
        elif path.endswith(PYTHON_SUFFIXES):
            ls.worker.note_disk_change(path)
            changed.append(path)
            if change.type != types.FileChangeType.Changed:
                structural = True
    if config_changed:
        ls.reported_problems.clear()
        ls.reanalyse_all()
        return
    if structural:
        # A created or deleted module can change what any import resolves to.
        ls.worker.submit(ls.worker.forget_outcomes)
        targets = [document.uri for document in ls.worker.documents()]
    else:
        targets = ls.dependents_of(changed)
    for uri in targets:
        ls.schedule(uri, external=True)


async def on_did_change_configuration(
    ls: FabricLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    if ls.client_can("workspace.configuration"):
        await ls.pull_client_settings()
    else:
        ls.client_settings = {None: workspace_config.client_section(params.settings)}
    ls.reported_problems.clear()
    ls.reanalyse_all()


async def on_did_change_workspace_folders(
    ls: FabricLanguageServer, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    await ls.pull_client_settings()
    ls.reanalyse_all()


async def on_document_diagnostic(
    ls: FabricLanguageServer, params: types.DocumentDiagnosticParams
) -> types.DocumentDiagnosticReport:
    uri = params.text_document.uri
    await ls.wait_for_config()
    if ls.document(uri) is not None and await ls.outcome_for(uri) is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    # A file that is not open may still hold problems that open scripts reach through their calls.
    _, diagnostics, result_id = ls.view(uri)
    ls.served[uri] = result_id
    if params.previous_result_id == result_id:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
    return types.RelatedFullDocumentDiagnosticReport(items=diagnostics, result_id=result_id)


async def on_hover(ls: FabricLanguageServer, params: types.HoverParams) -> Optional[types.Hover]:
    uri = params.text_document.uri
    outcome = await ls.outcome_for(uri)
    if outcome is None:
        return None
    lines = outcome.document.lines
    line, column = lsp_convert.position_from_client(lines, params.position, ls.encoding)
    portability = None
    note = None
    if explain.fabric_site_at(outcome.analysis, line, column) is not None:
        known = ls.worker.portability_now(uri)
        if known is None or not known[0]:
            ls.worker.request_portability(uri)
        if known is None:
            note = explain.PORTABILITY_PENDING
        else:
            portability = known[1]
            note = None if known[0] else explain.PORTABILITY_STALE
    found = explain.hover_markdown(
        outcome.analysis, line, column, ls.record_for, portability, outcome.findings, note
    )
    if found is None:
        return None
    markdown, span = found
    formats = _capability(ls.client_capabilities, "text_document.hover.content_format", None)
    kind = types.MarkupKind.Markdown
    if formats and types.MarkupKind.Markdown not in formats:
        kind = types.MarkupKind.PlainText
    return types.Hover(
        contents=types.MarkupContent(kind=kind, value=markdown),
        range=lsp_convert.span_to_range(span, lines, ls.encoding),
    )


def _kind_wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    if only is None:
        return True
    return any(kind == wanted or kind.startswith(f"{wanted}.") for wanted in only)


def _finding_for(outcome: Outcome, diagnostic: types.Diagnostic) -> Optional[Finding]:
    for finding, converted in zip(outcome.findings, outcome.diagnostics):
        if finding.code == diagnostic.code and converted.range == diagnostic.range:
            return finding
    return None


async def on_code_action(
    ls: FabricLanguageServer, params: types.CodeActionParams
) -> Optional[list[types.CodeAction]]:
    uri = params.text_document.uri
    document = ls.document(uri)
    if document is None:
        return []
    only = params.context.only
    actions: list[types.CodeAction] = []
    if _kind_wanted(types.CodeActionKind.QuickFix, only):
        for diagnostic in params.context.diagnostics:
            if diagnostic.source != lsp_convert.SOURCE or not isinstance(diagnostic.code, str):
                continue
            fix = lsp_convert.fix_from_data(diagnostic.data)
            title: Optional[str] = None
            safe = False
            edits: Sequence[types.TextEdit] = ()
            if fix is not None and fix.version == document.version:
                title, safe, edits = fix.title, fix.safe, fix.edits
            else:
                outcome = await ls.outcome_for(uri)
                finding = _finding_for(outcome, diagnostic) if outcome is not None else None
                if finding is not None and finding.fix is not None and outcome is not None:
                    title, safe = finding.fix.title, finding.fix.safe
                    edits = lsp_convert.fix_edits(finding.fix, outcome.document.lines, ls.encoding)
                document = ls.document(uri) or document
            if title and edits:
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=safe,
                        edit=ls.workspace_edit(document, edits),
                    )
                )
            ignore = lsp_convert.ignore_edit(
                document.lines, diagnostic.range.start.line, diagnostic.code, ls.encoding
            )
            if ignore is not None:
                actions.append(
                    types.CodeAction(
                        title=f"Ignore {diagnostic.code} on this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=ls.workspace_edit(document, [ignore]),
                    )
                )
    if _kind_wanted(lsp_convert.FIX_ALL_KIND, only):
        outcome = await ls.outcome_for(uri)
        if outcome is not None:
            edits = ls.safe_fix_edits(outcome)
            if edits:
                actions.append(
                    types.CodeAction(
                        title="fabric-ls: fix all safely fixable problems",
                        kind=lsp_convert.FIX_ALL_KIND,
                        edit=ls.workspace_edit(outcome.document, edits),
                    )
                )
    return actions


async def on_inlay_hint(
    ls: FabricLanguageServer, params: types.InlayHintParams
) -> Optional[list[types.InlayHint]]:
    outcome = await ls.outcome_for(params.text_document.uri)
    if outcome is None:
        return []
    lines = outcome.document.lines
    first, last = params.range.start.line, params.range.end.line
    own = _normal(outcome.document.path)
    hints = []
    for site in outcome.analysis.fabric_sites:
        if _normal(site.path) != own or not first <= site.span.end_line <= last:
            continue
        hints.append(
            types.InlayHint(
                position=lsp_convert.position_to_client(
                    lines, site.span.end_line, site.span.end_col, ls.encoding
                ),
                label=explain.site_label(site),
                padding_left=True,
                tooltip=types.MarkupContent(kind=types.MarkupKind.Markdown, value=explain.site_tooltip(site)),
            )
        )
    return hints


async def on_code_lens(
    ls: FabricLanguageServer, params: types.CodeLensParams
) -> Optional[list[types.CodeLens]]:
    if _client_has_inlay_hints(ls.client_capabilities):
        return []  # the inlay hint already shows it
    uri = params.text_document.uri
    outcome = await ls.outcome_for(uri)
    if outcome is None:
        return []
    own = _normal(outcome.document.path)
    lenses = []
    for site in outcome.analysis.fabric_sites:
        if _normal(site.path) != own:
            continue
        lenses.append(
            types.CodeLens(
                range=lsp_convert.span_to_range(site.span, outcome.document.lines, ls.encoding),
                command=types.Command(
                    title=explain.code_lens_title(site),
                    command=COMMAND_SHOW_STRATEGY,
                    arguments=[uri, site.span.start_line, site.span.start_col],
                ),
            )
        )
    return lenses


async def show_strategy_command(ls: FabricLanguageServer, *arguments: Any) -> Optional[str]:
    """``fabric-ls.showStrategy(uri, line, column)``: a message naming the strategy and where it came from."""
    if len(arguments) < 3 or not isinstance(arguments[0], str):
        return None
    uri, line, column = arguments[0], arguments[1], arguments[2]
    outcome = await ls.outcome_for(uri)
    if outcome is None or not isinstance(line, int) or not isinstance(column, int):
        return None
    site = explain.fabric_site_at(outcome.analysis, line, column)
    if site is None:
        return None
    summary = explain.site_summary(site)
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=summary))
    return summary


async def fix_all_command(ls: FabricLanguageServer, *arguments: Any) -> bool:
    """``fabric-ls.fixAll(uri)``: apply every safe fix through ``workspace/applyEdit``."""
    if not arguments or not isinstance(arguments[0], str):
        return False
    outcome = await ls.outcome_for(arguments[0])
    if outcome is None:
        return False
    edits = ls.safe_fix_edits(outcome)
    if not edits:
        return False
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(
            edit=ls.workspace_edit(outcome.document, edits), label="fabric-ls: fix all"
        )
    )
    return bool(getattr(result, "applied", False))


def status_command(ls: FabricLanguageServer, *arguments: Any) -> dict[str, Any]:
    """``fabric-ls.serverStatus()``: what the server is doing, and the interpreter each file uses."""
    documents = [
        {
            "uri": document.uri,
            "version": document.version,
            "projectRoot": document.project_key[0],
            "python": document.project_key[1],
            "strategy": document.settings.strategy,
            "select": list(document.settings.select),
            "ignore": list(document.settings.ignore),
        }
        for document in ls.worker.documents()
    ]
    return {
        "version": __version__,
        "diagnosticMode": "pull" if ls.pull_mode else "push",
        "workspaceTrusted": ls.workspace_trusted(),
        "positionEncoding": getattr(ls.encoding, "value", ls.encoding),
        "documents": documents,
        "worker": ls.worker.status(),
    }


def on_shutdown(ls: FabricLanguageServer, params: None) -> None:
    ls.shutdown_requested = True
    ls.worker.stop()


def on_exit(ls: FabricLanguageServer, params: None) -> None:
    """Leave at once: freeing jedi's caches at interpreter exit takes about a second, and the
    client waits for the process. Every message has been written (the writer flushes each one)."""
    sys.stderr.flush()
    os._exit(0 if ls.shutdown_requested else 1)


def create_server() -> FabricLanguageServer:
    """A server with every handler registered."""
    server = FabricLanguageServer()
    server.feature(types.INITIALIZE)(on_initialize)
    server.feature(types.INITIALIZED)(on_initialized)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(on_did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(on_did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(on_did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(on_did_close)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(on_did_change_watched_files)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(on_did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(on_did_change_workspace_folders)
    server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier=DIAGNOSTIC_IDENTIFIER, inter_file_dependencies=True, workspace_diagnostics=False
        ),
    )(on_document_diagnostic)
    server.feature(types.TEXT_DOCUMENT_HOVER)(on_hover)
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, lsp_convert.FIX_ALL_KIND],
            resolve_provider=False,
        ),
    )(on_code_action)
    server.feature(types.TEXT_DOCUMENT_INLAY_HINT)(on_inlay_hint)
    server.feature(types.TEXT_DOCUMENT_CODE_LENS)(on_code_lens)
    server.feature(types.SHUTDOWN)(on_shutdown)
    server.feature(types.EXIT)(on_exit)
    server.command(COMMAND_SHOW_STRATEGY)(show_strategy_command)
    server.command(COMMAND_FIX_ALL)(fix_all_command)
    server.command(COMMAND_STATUS)(status_command)
    return server


def _configure_logging() -> None:
    level = os.environ.get("FABRIC_LS_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level, logging.WARNING),
        format="%(name)s %(levelname)s %(message)s",
    )


async def _serve_pipe(server: FabricLanguageServer, stdin: Any, stdout: Any) -> None:
    """Read the client's messages from a pipe on the event loop itself.

    pygls' ``start_io`` reads stdin through a thread pool, three round trips per message;
    reading the pipe with asyncio saves those thread switches on every keystroke.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    server.protocol.set_writer(StdoutWriter(stdout))
    stop_event = threading.Event()
    server._stop_event = stop_event
    try:
        await run_async(
            stop_event=stop_event,
            reader=reader,
            protocol=server.protocol,
            logger=logger,
            error_handler=server.report_server_error,
        )
    except asyncio.IncompleteReadError:
        pass  # the client closed the pipe mid-message


def _is_pipe(stream: Any) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode) or stat.S_ISSOCK(
            os.fstat(stream.fileno()).st_mode
        )
    except (OSError, ValueError, AttributeError):
        return False


def start(stdio: Any = True, host: Optional[str] = None, port: Optional[int] = None) -> None:
    """Run the server over stdio (default) or TCP.

    Also accepts an argparse namespace with ``tcp``/``host``/``port`` attributes as its first argument.
    """
    if not isinstance(stdio, bool) and stdio is not None:
        namespace = stdio
        host = getattr(namespace, "host", None) or host
        port = getattr(namespace, "port", None) or port
        stdio = not getattr(namespace, "tcp", False)
    _configure_logging()
    server = create_server()
    if not stdio and (host is not None or port is not None):
        server.start_tcp(host or "127.0.0.1", port or 2087)
        return
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Anything printed by analysed code or libraries must not corrupt the protocol stream.
    sys.stdout = sys.stderr
    if not _is_pipe(stdin):
        server.start_io(stdin, stdout)
        return
    try:
        asyncio.run(_serve_pipe(server, stdin, stdout))
    except (BrokenPipeError, KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
