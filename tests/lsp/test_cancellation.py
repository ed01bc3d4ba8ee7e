"""Speed under load: $/cancelRequest is honoured, and a burst of edits is analysed once."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from conftest import Session, copy_scripts
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled


async def test_a_cancelled_hover_is_answered_with_request_cancelled(
    slow_session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = slow_session.open(tmp_path / "deepspeed_separate_setup.py")
    params = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=5, character=12)
    )

    # The analysis of the opened file is still running: the hover has to wait for it.
    pending = slow_session.client.protocol.send_request(
        types.TEXT_DOCUMENT_HOVER, params, msg_id="hover-to-cancel"
    )
    await asyncio.sleep(0.1)
    slow_session.client.cancel_request(types.CancelParams(id="hover-to-cancel"))

    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wrap_future(pending)
    # The server still answers, and the cancelled hover cost no analysis of its own.
    assert await slow_session.hover(uri, 5, 12) is not None
    status = await slow_session.status()
    assert status["worker"]["analyses"] == 1


async def test_a_burst_of_edits_is_analysed_once_at_the_latest_version(
    slow_session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = slow_session.open(tmp_path / "deepspeed_separate_setup.py")
    for number in range(5):
        slow_session.replace(uri, slow_session.texts[uri] + f"# edit {number}\n")
    latest = slow_session.versions[uri]

    diagnostics = await slow_session.diagnostics(uri)

    assert [diagnostic.code for diagnostic in diagnostics] == ["FAB001"]
    analysed = (await slow_session.status())["worker"]["analysed_versions"][uri]
    # The open may have been analysed before the edits arrived; every intermediate version was skipped.
    assert analysed in ([latest], [1, latest])
    if not slow_session.pulls:
        assert {params.version for params in slow_session.published_for(uri)} <= {1, latest}
