"""One function per LSP feature, registered in ``create_server``: this is where to change hover,
code actions, inlay hints, code lenses, the commands and the document lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any, Optional, Sequence

from lsprotocol import types

from fabric_ls import __version__, explain, workspace_config
from fabric_ls.lsp import convert, notebook_handlers
from fabric_ls.lsp.documents import Outcome, normal_path
from fabric_ls.lsp.protocol import capability, client_has_inlay_hints, client_pulls_diagnostics
from fabric_ls.lsp.server import CONFIG_SECTION, CONFIG_SUFFIXES, PYTHON_SUFFIXES, FabricLanguageServer
from fabric_ls.model import Finding
from fabric_ls.records import get_record, load_records
from fabric_ls.text import plain

logger = logging.getLogger("fabric_ls.handlers")

DIAGNOSTIC_IDENTIFIER = "fabric-ls"
COMMAND_SHOW_STRATEGY = "fabric-ls.showStrategy"
COMMAND_FIX_ALL = "fabric-ls.fixAll"
COMMAND_STATUS = "fabric-ls.serverStatus"
COMMAND_SHOW_EXAMPLE_FIX = "fabric-ls.showExampleFix"


def on_initialize(ls: FabricLanguageServer, params: types.InitializeParams) -> None:
    ls.initialization_options = params.initialization_options
    ls.pull_mode = client_pulls_diagnostics(params.capabilities)
    ls.worker.encoding = ls.encoding
    ls.config_ready = asyncio.Event()
    if not capability(params.capabilities, "workspace.configuration", False):
        ls.config_ready.set()
    # The rule records (read and validated once) are needed by the first analysis's messages and
    # fixes: load them now, so opening the first file does not wait for them.
    ls.record_for.load()
    ls.worker.start()
    ls.worker.warm_up_in_background()


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
                        # Config files: Hydra's, and the YAML or JSON a script loads itself.
                        types.FileSystemWatcher(glob_pattern="**/*.{yaml,yml,json}"),
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
    path = convert.uri_to_path(uri) or ""
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
        path = convert.uri_to_path(change.uri)
        if not path:
            continue
        if os.path.basename(path) == workspace_config.CONFIG_FILE:
            workspace_config.invalidate(path)
            config_changed = True
        elif path.endswith(PYTHON_SUFFIXES + CONFIG_SUFFIXES):
            ls.worker.note_disk_change(path)
            changed.append(path)
            # A created or deleted module can change what any import resolves to; a config file,
            # the options of a Hydra config group.
            if change.type != types.FileChangeType.Changed:
                structural = True
    if config_changed:
        ls.reported_problems.clear()
        ls.reanalyse_all()
        return
    if structural:
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
    notebook = ls.notebooks.place(uri)
    if notebook is not None:
        return await notebook_handlers.cell_diagnostic(ls, params, notebook[0])
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
    if ls.notebooks.place(uri) is not None:
        return await notebook_handlers.cell_hover(ls, params, on_hover)
    outcome = await ls.outcome_for(uri)
    if outcome is None:
        return None
    lines = outcome.document.lines
    line, column = convert.position_from_client(lines, params.position, ls.encoding)
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
    formats = capability(ls.client_capabilities, "text_document.hover.content_format", None)
    content = types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown)
    if formats and types.MarkupKind.Markdown not in formats:
        content = types.MarkupContent(kind=types.MarkupKind.PlainText, value=plain(markdown))
    return types.Hover(
        contents=content,
        range=convert.span_to_range(span, lines, ls.encoding),
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
    if ls.notebooks.place(uri) is not None:
        return await notebook_handlers.cell_code_actions(ls, params, on_code_action)
    document = ls.document(uri)
    if document is None:
        return []
    only = params.context.only
    actions: list[types.CodeAction] = []
    if _kind_wanted(types.CodeActionKind.QuickFix, only):
        for diagnostic in params.context.diagnostics:
            if diagnostic.source != convert.SOURCE or not isinstance(diagnostic.code, str):
                continue
            fix = convert.fix_from_data(diagnostic.data)
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
                    edits = convert.fix_edits(finding.fix, outcome.document.lines, ls.encoding)
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
            elif diagnostic.code in load_records():
                actions.append(_example_fix_action(diagnostic))
            ignore = convert.ignore_edit(
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
    if _kind_wanted(convert.FIX_ALL_KIND, only):
        outcome = await ls.outcome_for(uri)
        if outcome is not None:
            edits = ls.safe_fix_edits(outcome)
            if edits:
                actions.append(
                    types.CodeAction(
                        title="fabric-ls: fix all safely fixable problems",
                        kind=convert.FIX_ALL_KIND,
                        edit=ls.workspace_edit(outcome.document, edits),
                    )
                )
    return actions


def _example_fix_action(diagnostic: types.Diagnostic) -> types.CodeAction:
    """For a finding no edit can repair: open the rule's page at its example fix."""
    code = str(diagnostic.code)
    page = diagnostic.code_description.href if diagnostic.code_description else ""
    title = f"Show example fix for {code}"
    if get_record(code).fix is not None:
        title += " (no fix here: it could change what this code does)"
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        command=types.Command(title=title, command=COMMAND_SHOW_EXAMPLE_FIX, arguments=[code, page]),
    )


async def show_example_fix_command(ls: FabricLanguageServer, *arguments: Any) -> Optional[str]:
    """``fabric-ls.showExampleFix(code, page)``: show the rule's page (``window/showDocument``),
    or, for a client that cannot, the record's example fix as a message. Returns what was shown."""
    if not arguments or arguments[0] not in load_records():
        return None
    record = load_records()[arguments[0]]
    page = arguments[1] if len(arguments) > 1 and isinstance(arguments[1], str) else ""
    if page and ls.client_can("window.show_document.support"):
        result = await ls.window_show_document_async(
            types.ShowDocumentParams(uri=page, external=not page.startswith("file:"), take_focus=True)
        )
        if getattr(result, "success", False):
            return page
    text = f"{record.rule} {record.title}\n\n{record.example_fix}"
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=text))
    return text


async def on_inlay_hint(
    ls: FabricLanguageServer, params: types.InlayHintParams
) -> Optional[list[types.InlayHint]]:
    outcome = await ls.outcome_for(params.text_document.uri)
    if outcome is None:
        return []
    lines = outcome.document.lines
    first, last = params.range.start.line, params.range.end.line
    own = normal_path(outcome.document.path)
    hints = []
    for site in outcome.analysis.fabric_sites:
        if normal_path(site.path) != own or not first <= site.span.end_line <= last:
            continue
        hints.append(
            types.InlayHint(
                position=convert.position_to_client(
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
    if client_has_inlay_hints(ls.client_capabilities):
        return []  # the inlay hint already shows it
    uri = params.text_document.uri
    outcome = await ls.outcome_for(uri)
    if outcome is None:
        return []
    own = normal_path(outcome.document.path)
    lenses = []
    for site in outcome.analysis.fabric_sites:
        if normal_path(site.path) != own:
            continue
        lenses.append(
            types.CodeLens(
                range=convert.span_to_range(site.span, outcome.document.lines, ls.encoding),
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
    server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(notebook_handlers.on_notebook_did_open)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(notebook_handlers.on_notebook_did_change)
    server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(notebook_handlers.on_notebook_did_close)
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
            code_action_kinds=[types.CodeActionKind.QuickFix, convert.FIX_ALL_KIND],
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
    server.command(COMMAND_SHOW_EXAMPLE_FIX)(show_example_fix_command)
    return server
