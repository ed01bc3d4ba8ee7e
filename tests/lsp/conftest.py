"""End-to-end fixtures: the real server in a subprocess, driven over stdio by pytest-lsp.

Every feature is tested with two client profiles:

* ``visual-studio-code`` (1.65): push diagnostics, no inlay hints (gets code lenses), UTF-16 positions;
* ``neovim`` (0.11): pull diagnostics, inlay hints, UTF-8 positions.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, TypeVar, Union

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPTS = pathlib.Path(__file__).resolve().parent / "scripts"
EXAMPLES = REPO / "examples"
SERVER_COMMAND = [sys.executable, "-m", "fabric_ls"]
PROFILES = ("visual-studio-code", "neovim")
TIMEOUT = 30.0

T = TypeVar("T")


def _record_publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)  # type: ignore[attr-defined]


def _apply_edit(
    client: LanguageClient, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)  # type: ignore[attr-defined]
    return types.ApplyWorkspaceEditResult(applied=True)


def _register_capability(client: LanguageClient, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)  # type: ignore[attr-defined]


def _count_refresh(client: LanguageClient, params: None) -> None:
    client.refreshes += 1  # type: ignore[attr-defined]


def _converter() -> Any:
    """pygls' converter, reading a code action that runs a command as a CodeAction, as editors do.

    Its own hook tries ``Command`` first, which any ``{"title", "command": {...}}`` object fits;
    the protocol says an item is a ``Command`` when its ``command`` is a string.
    """
    converter = default_converter()

    def command_or_code_action(item: Any, _: Any) -> Any:
        kind = types.Command if isinstance(item.get("command"), str) else types.CodeAction
        return converter.structure(item, kind)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], command_or_code_action)
    return converter


def make_client() -> LanguageClient:
    """pytest-lsp's client, also keeping every published diagnostics message (with its version)."""
    client = LanguageClient(converter_factory=_converter)
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record_publish
    features[types.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[types.CLIENT_REGISTER_CAPABILITY] = _register_capability
    features[types.WORKSPACE_INLAY_HINT_REFRESH] = _count_refresh
    features[types.WORKSPACE_CODE_LENS_REFRESH] = _count_refresh
    register_lsp_features(client, features)
    client.published = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    client.refreshes = 0  # type: ignore[attr-defined]
    return client


def server_config(**environment: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=SERVER_COMMAND,
        server_env={**os.environ, **environment},
        client_factory=make_client,
    )


def uri_of(path: os.PathLike[str] | str) -> str:
    return from_fs_path(str(path)) or str(path)


@dataclass
class Session:
    """A started client plus what the test needs to drive it: one instance per test."""

    client: LanguageClient
    profile: str
    root: pathlib.Path
    initialize_result: Optional[types.InitializeResult] = None
    versions: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def pulls(self) -> bool:
        return self.profile.startswith("neovim")

    @property
    def encoding(self) -> str:
        capabilities = self.client.capabilities
        encodings = capabilities.general.position_encodings if capabilities and capabilities.general else None
        return str(encodings[0]) if encodings else "utf-16"

    def open(self, path: pathlib.Path, text: Optional[str] = None) -> str:
        uri = uri_of(path)
        text = path.read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    def replace(self, uri: str, text: str) -> int:
        """Send the whole new text as one full-document change; returns the new version."""
        self.versions[uri] += 1
        self.texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    def apply(self, uri: str, edits: list[types.TextEdit]) -> int:
        """Apply text edits locally (as an editor would) and send the result."""
        return self.replace(uri, apply_text_edits(self.texts[uri], edits, self.encoding))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def published_for(self, uri: str) -> list[types.PublishDiagnosticsParams]:
        return [params for params in self.client.published if params.uri == uri]  # type: ignore[attr-defined]

    async def diagnostics(
        self, uri: str, until: Optional[Callable[[list[types.Diagnostic]], bool]] = None
    ) -> list[types.Diagnostic]:
        """The diagnostics for the document's current version: pushed (waited for) or pulled.

        ``until`` waits for diagnostics that satisfy it (settings and other files change them
        without a new version; a pulling client asks again, as editors do on their next event).
        """
        version = self.versions.get(uri)

        async def fetch() -> Optional[list[types.Diagnostic]]:
            if self.pulls:
                report = await self.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                )
                assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
                return list(report.items)
            for params in reversed(self.published_for(uri)):
                if version is None or params.version == version:
                    return list(params.diagnostics)
                break
            return None

        return await eventually(fetch, lambda found: found is not None and (until is None or until(found)))

    async def hover(self, uri: str, line: int, character: int) -> Optional[types.Hover]:
        return await self.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
            )
        )

    async def code_actions(
        self, uri: str, diagnostics: list[types.Diagnostic], only: Optional[list[str]] = None
    ) -> list[types.CodeAction]:
        range_ = (
            diagnostics[0].range
            if diagnostics
            else types.Range(start=types.Position(0, 0), end=types.Position(0, 0))
        )
        result = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=range_,
                context=types.CodeActionContext(diagnostics=diagnostics, only=only),
            )
        )
        return [action for action in result or [] if isinstance(action, types.CodeAction)]

    async def execute(self, command: str, *arguments: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(arguments))
        )

    async def status(self) -> dict[str, Any]:
        return await self.execute("fabric-ls.serverStatus")


async def eventually(
    fetch: Callable[[], Awaitable[T]], predicate: Callable[[T], bool], timeout: float = TIMEOUT
) -> T:
    """Fetch until the predicate holds (the server works in the background); fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await fetch()
        if predicate(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting; last value: {value!r}")
        await asyncio.sleep(0.05)


def _offset(lines: list[str], position: types.Position, encoding: str) -> int:
    offset = sum(len(line) for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return offset + index
        if encoding == "utf-8":
            units += len(char.encode("utf-8"))
        elif encoding == "utf-16":
            units += 2 if ord(char) > 0xFFFF else 1
        else:
            units += 1
    return offset + len(line)


def apply_text_edits(text: str, edits: list[types.TextEdit], encoding: str = "utf-16") -> str:
    """What an editor does with a list of non-overlapping edits (positions in ``encoding`` units)."""
    lines = text.splitlines(keepends=True)
    spans = sorted(
        (
            (
                _offset(lines, edit.range.start, encoding),
                _offset(lines, edit.range.end, encoding),
                edit.new_text,
            )
            for edit in edits
        ),
        reverse=True,
    )
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


def edits_of(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    """The text edits a code action makes to ``uri`` (``changes`` or ``documentChanges``)."""
    edit = action.edit
    assert edit is not None
    if edit.document_changes:
        found: list[types.TextEdit] = []
        for change in edit.document_changes:
            assert isinstance(change, types.TextDocumentEdit)
            if change.text_document.uri == uri:
                found.extend(e for e in change.edits if isinstance(e, types.TextEdit))
        return found
    return list((edit.changes or {}).get(uri, []))


def copy_scripts(target: pathlib.Path, *names: str) -> pathlib.Path:
    """Copy sample scripts (or folders) into ``target`` so tests can change them freely."""
    for name in names:
        source = SCRIPTS / name
        if source.is_dir():
            shutil.copytree(source, target / name)
        else:
            shutil.copy(source, target / name)
    return target


def initialize_params(
    profile: str,
    root: Optional[pathlib.Path],
    initialization_options: Any = None,
    folders: Optional[list[pathlib.Path]] = None,
) -> types.InitializeParams:
    workspace_folders = None
    if folders is not None:
        workspace_folders = [
            types.WorkspaceFolder(uri=uri_of(folder), name=folder.name) for folder in folders
        ]
    elif root is not None:
        workspace_folders = [types.WorkspaceFolder(uri=uri_of(root), name=root.name)]
    return types.InitializeParams(
        capabilities=client_capabilities(profile),
        root_uri=uri_of(root) if root is not None else None,
        workspace_folders=workspace_folders,
        initialization_options=initialization_options,
    )


async def start_session(
    client: LanguageClient,
    profile: str,
    root: Optional[pathlib.Path],
    initialization_options: Any = None,
    folders: Optional[list[pathlib.Path]] = None,
) -> Session:
    result = await client.initialize_session(
        initialize_params(profile, root, initialization_options, folders)
    )
    return Session(client=client, profile=profile, root=root or pathlib.Path("/"), initialize_result=result)


async def end_session(client: LanguageClient) -> None:
    server = getattr(client, "_server", None)
    if server is not None and server.returncode is None:
        await client.shutdown_session()


@pytest_lsp.fixture(config=server_config(), params=PROFILES)
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: pathlib.Path):
    """A client of either profile, initialized on the empty workspace folder ``tmp_path``."""
    lsp_client.session = await start_session(lsp_client, request.param, tmp_path)  # type: ignore[attr-defined]
    yield
    await end_session(lsp_client)


@pytest.fixture
def session(client: LanguageClient) -> Session:
    return client.session  # type: ignore[attr-defined]


@pytest_lsp.fixture(config=server_config(), params=PROFILES)
async def bare_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):
    """A client of either profile, not yet initialized: the test chooses options and folders."""
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    yield
    if lsp_client.capabilities is not None:
        await end_session(lsp_client)


SLOW_ANALYSIS_SECONDS = 0.6


@pytest_lsp.fixture(
    config=server_config(FABRIC_LS_TEST_ANALYSIS_DELAY=str(SLOW_ANALYSIS_SECONDS)), params=PROFILES
)
async def slow_client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: pathlib.Path):
    """Like ``client``, but every real analysis takes at least ``SLOW_ANALYSIS_SECONDS`` (a test hook)."""
    lsp_client.session = await start_session(lsp_client, request.param, tmp_path)  # type: ignore[attr-defined]
    yield
    await end_session(lsp_client)


@pytest.fixture
def slow_session(slow_client: LanguageClient) -> Session:
    return slow_client.session  # type: ignore[attr-defined]
