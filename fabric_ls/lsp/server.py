"""The language server's state: open documents, settings sources, what the client was sent.

Handlers (``handlers.py``) call into it; analyses come from the worker (``worker.py``) already
converted (``present.py``). Nothing here decides anything about Fabric.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from dataclasses import replace
from typing import Any, Iterable, Optional, Sequence

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer

from fabric_ls import __version__, trust, workspace_config
from fabric_ls.analysis import jedi_bridge
from fabric_ls.lsp import convert, protocol
from fabric_ls.lsp.documents import (
    DocumentState,
    Outcome,
    analysed_version,
    diagnostic_key,
    normal_path,
)
from fabric_ls.lsp.notebooks import NOTEBOOK_SYNC, NotebookViews
from fabric_ls.lsp.worker import AnalysisWorker, RecordBook
from fabric_ls.settings import Settings

logger = logging.getLogger("fabric_ls.server")

SERVER_NAME = "fabric-ls"
CONFIG_SECTION = workspace_config.CLIENT_SECTION
PYTHON_SUFFIXES = (".py", ".pyi")
# Files a script may be configured by (Hydra, OmegaConf, ``yaml.safe_load``, ``json.load``): read by
# the analysis, watched on disk.
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
CONFIG_TIMEOUT = 3.0


class FabricLanguageServer(LanguageServer):
    """Holds the open documents, the settings sources and the analysis worker."""

    def __init__(self) -> None:
        super().__init__(
            name=SERVER_NAME,
            version=__version__,
            protocol_cls=protocol.FabricProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        # Open notebooks: each is one tracked document (its program), shown per cell.
        self.notebooks = NotebookViews()
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
        return bool(protocol.capability(self.client_capabilities, dotted, False))

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
        protocol.report_server_error(self, error, source, super().report_server_error)

    def tell(self, message: str, level: types.MessageType = types.MessageType.Warning) -> None:
        """Show a message and log it too (messages disappear; the log stays)."""
        self.window_show_message(types.ShowMessageParams(type=level, message=message))
        self.window_log_message(types.LogMessageParams(type=level, message=message))

    # -- settings --------------------------------------------------------------------------
    def folder_for(self, path: str) -> Optional[str]:
        """The workspace folder holding ``path`` (the deepest one in a multi-root workspace)."""
        normal = normal_path(path)
        best: Optional[str] = None
        for folder in self.workspace.folders.values():
            folder_path = convert.uri_to_path(folder.uri)
            if not folder_path:
                continue
            candidate = normal_path(folder_path)
            if (normal == candidate or normal.startswith(candidate.rstrip(os.sep) + os.sep)) and (
                best is None or len(candidate) > len(best)
            ):
                best = folder_path
        if best is None and self.workspace.root_path:
            root = normal_path(self.workspace.root_path)
            if normal.startswith(root.rstrip(os.sep) + os.sep):
                best = self.workspace.root_path
        return best

    def _folder_uri(self, folder_path: Optional[str]) -> Optional[str]:
        if folder_path is None:
            return None
        for folder in self.workspace.folders.values():
            if convert.uri_to_path(folder.uri) == folder_path:
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
        path = convert.uri_to_path(uri)
        python = language_id == "python" or self.document(uri) is not None
        if not path or not (python or path.endswith(PYTHON_SUFFIXES)):
            return None
        settings, project_key = self.settings_for(path)
        state = DocumentState(
            uri=uri,
            path=path,
            version=version,
            source=source,
            lines=tuple(convert.split_lines(source)),
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
        changed = {normal_path(path) for path in paths}
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
        if self.pull_mode and not self.notebook_cells_pushed(uri):
            if external and self.served.get(uri) not in (None, self.view(uri)[2]):
                self.request_refreshes(diagnostics=True)
        else:
            self.publish(uri, force)
        self.share_contributions(uri, outcome)

    def notebook_cells_pushed(self, uri: str) -> bool:
        """A notebook whose cells the client has never pulled: VS Code pulls scripts but not cells,
        so a notebook's diagnostics are pushed until the client pulls one of its cells."""
        notebook = self.notebooks.notebooks.get(uri)
        return notebook is not None and not any(cell in self.served for cell in notebook.cell_uris.values())

    def view(self, uri: str) -> tuple[Optional[int], list[types.Diagnostic], str]:
        """What the client should show for ``uri`` (version, diagnostics, result id): the diagnostics
        of its own analysis and those that open documents' analyses found in it (a helper module
        they call). Identical ones are shown once, with every script's call as related information."""
        document = self.document(uri)
        own = self.outcomes.get(uri) if document is not None else None
        shown: dict[tuple[Any, ...], types.Diagnostic] = {}
        for diagnostic in own.diagnostics if own is not None else ():
            shown.setdefault(diagnostic_key(diagnostic), diagnostic)
        for contributor in sorted(self.outcomes):
            if contributor == uri:
                continue
            for diagnostic in self.outcomes[contributor].contributed.get(uri, ()):
                if analysed_version(diagnostic) != (document.version if document is not None else None):
                    continue  # found in an older text of the module: the contributor's re-analysis follows
                key = diagnostic_key(diagnostic)
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
        diagnostics = sorted(shown.values(), key=lambda diagnostic: diagnostic_key(diagnostic)[:5])
        version = own.document.version if own is not None else None
        return version, diagnostics, convert.diagnostics_result_id(diagnostics, self._converter)

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
        notebook = self.notebooks.notebooks.get(uri)
        if notebook is not None and document is not None:
            from fabric_ls.lsp.notebook_handlers import publish_cells

            publish_cells(self, notebook, document.path, diagnostics)
            return
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
            edits = convert.fix_edits(finding.fix, outcome.document.lines, self.encoding)
            if any(convert.edits_overlap(edit, other) for edit in edits for other in taken):
                continue
            taken.extend(edit for edit in edits if edit not in taken)
        return taken

    def workspace_edit(self, document: DocumentState, edits: Sequence[types.TextEdit]) -> types.WorkspaceEdit:
        return convert.workspace_edit(
            document.uri,
            document.version,
            edits,
            self.client_can("workspace.workspace_edit.document_changes"),
        )
