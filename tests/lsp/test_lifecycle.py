"""Protocol basics: shutdown and exit, multi-root workspaces, single files, hostile requests."""

from __future__ import annotations

import asyncio
import os
import pathlib
from concurrent.futures import Future

import pytest
from conftest import Session, copy_scripts, start_session, uri_of
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient


async def test_shutdown_then_exit_ends_the_process_with_status_0(session: Session) -> None:
    await session.client.shutdown_async(None)
    session.client.exit(None)

    server = session.client._server  # type: ignore[attr-defined]
    assert await asyncio.wait_for(server.wait(), 10) == 0


async def test_exit_without_shutdown_ends_the_process_with_status_1(session: Session) -> None:
    session.client.exit(None)

    server = session.client._server  # type: ignore[attr-defined]
    assert await asyncio.wait_for(server.wait(), 10) == 1


async def test_a_request_with_invalid_params_gets_an_error_instead_of_silence(session: Session) -> None:
    protocol = session.client.protocol
    answer: Future = Future()
    protocol._request_futures["bad-hover"] = answer  # type: ignore[attr-defined]
    protocol._send_data(  # type: ignore[attr-defined]
        {"jsonrpc": "2.0", "id": "bad-hover", "method": "textDocument/hover", "params": {"textDocument": 5}}
    )

    with pytest.raises(JsonRpcInvalidParams):
        await asyncio.wait_for(asyncio.wrap_future(answer), 10)
    assert (await session.status())["version"]


async def test_requests_for_documents_never_opened_get_empty_answers(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri = uri_of(tmp_path / "never_opened.py")
    document = types.TextDocumentIdentifier(uri=uri)
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=99, character=0))

    assert await session.hover(uri, 0, 0) is None
    assert not await session.client.text_document_inlay_hint_async(
        types.InlayHintParams(text_document=document, range=whole)
    )
    assert not await session.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=document)
    )
    if session.pulls:
        report = await session.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=document)
        )
        assert not report.items
    session.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="x = 1\n")],
        )
    )
    session.client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=document))
    assert (await session.status())["documents"] == []


async def test_multi_root_workspace_uses_each_folders_settings(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    strict, relaxed = tmp_path / "strict", tmp_path / "relaxed"
    for folder in (strict, relaxed):
        folder.mkdir()
        copy_scripts(folder, "deepspeed_separate_setup.py")
    (relaxed / "pyproject.toml").write_text('[tool.fabric-ls]\nignore = ["FAB001"]\n', encoding="utf-8")
    session = await start_session(
        bare_client,
        bare_client.profile,
        None,
        folders=[strict, relaxed],  # type: ignore[attr-defined]
    )

    strict_uri = session.open(strict / "deepspeed_separate_setup.py")
    relaxed_uri = session.open(relaxed / "deepspeed_separate_setup.py")

    assert [d.code for d in await session.diagnostics(strict_uri)] == ["FAB001"]
    assert await session.diagnostics(relaxed_uri) == []
    roots = {document["projectRoot"] for document in (await session.status())["documents"]}
    assert roots == {str(strict), str(relaxed)}


async def test_a_single_file_without_a_workspace(bare_client: LanguageClient, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    session = await start_session(bare_client, bare_client.profile, None)  # type: ignore[attr-defined]

    uri = session.open(tmp_path / "deepspeed_separate_setup.py")

    assert [d.code for d in await session.diagnostics(uri)] == ["FAB001"]
    [document] = (await session.status())["documents"]
    assert document["projectRoot"] == str(tmp_path)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
            found.extend(int(child) for child in handle.read().split())
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
async def test_no_process_is_left_behind_when_the_client_goes_away(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)  # jedi has started its helper process by now
    server = session.client._server  # type: ignore[attr-defined]
    helpers = _children(server.pid)

    # The editor crashes: no shutdown, no exit, just the end of the pipe.
    server.stdin.close()

    assert await asyncio.wait_for(server.wait(), 20) == 0
    for helper in helpers:
        for _ in range(100):
            if not os.path.exists(f"/proc/{helper}") or open(f"/proc/{helper}/stat").read().split()[2] == "Z":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"helper process {helper} outlived the server")
