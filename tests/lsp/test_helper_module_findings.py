"""A mistake in a helper module the script calls: shown at the script's call and in the helper module.

train.py (DeepSpeed) calls ``setup_training(fabric, model)`` from helpers.py, which sets up the model
and the optimizer separately (FAB001). Only train.py knows the strategy, so only its analysis finds it.
"""

from __future__ import annotations

import pathlib

import pytest_lsp
from conftest import Session, copy_scripts, edits_of, eventually, initialize_params, server_config, uri_of
from lsprotocol import types
from pytest_lsp import LanguageClient

# model, optimizer = setup_training(fabric, model)       (train.py, 0-based line 9)
CALL = types.Range(start=types.Position(line=9, character=19), end=types.Position(line=9, character=48))
# optimizer = fabric.setup_optimizers(optimizer)         (helpers.py, 0-based line 8)
MISTAKE = types.Range(start=types.Position(line=8, character=16), end=types.Position(line=8, character=50))


def _codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return [str(diagnostic.code) for diagnostic in diagnostics]


def _project(tmp_path: pathlib.Path) -> pathlib.Path:
    copy_scripts(tmp_path, "helper_call_project")
    return tmp_path / "helper_call_project"


async def test_the_call_in_the_script_and_the_helper_module_both_show_the_finding(
    session: Session, tmp_path: pathlib.Path
) -> None:
    project = _project(tmp_path)
    train = session.open(project / "train.py")
    helpers = uri_of(project / "helpers.py")

    [at_call] = await session.diagnostics(train)

    assert at_call.code == "FAB001" and at_call.severity == types.DiagnosticSeverity.Error
    assert at_call.range == CALL
    assert at_call.message.endswith("(in helpers.py:9, reached through this call)")
    assert "DeepSpeedStrategy" in at_call.message
    first, *strategy_origins = at_call.related_information or []
    assert first.location == types.Location(uri=helpers, range=MISTAKE)
    assert first.message == "the call in helpers.py:9"
    assert any(
        info.location.uri == train and info.location.range.start.line == 6 for info in strategy_origins
    )
    # The fix edits helpers.py, not the line it would be shown on.
    assert at_call.data == {"version": 1}

    # helpers.py is not open: its diagnostics are published (or served) all the same.
    [in_helper] = await session.diagnostics(helpers, until=bool)

    assert in_helper.code == "FAB001" and in_helper.range == MISTAKE
    assert in_helper.message + " (in helpers.py:9, reached through this call)" == at_call.message
    back = (in_helper.related_information or [])[0]
    assert back.location == types.Location(uri=train, range=CALL)
    assert back.message == "reached from train.py:10"
    if session.pulls:
        assert session.published_for(helpers) == []
    else:
        [published] = session.published_for(helpers)
        assert published.version is None


async def test_an_edit_that_removes_the_mistake_clears_the_helper_module(
    session: Session, tmp_path: pathlib.Path
) -> None:
    project = _project(tmp_path)
    train = session.open(project / "train.py")
    helpers = uri_of(project / "helpers.py")
    assert _codes(await session.diagnostics(helpers, until=bool)) == ["FAB001"]

    # Under DDP, separate setup calls are fine.
    session.replace(train, session.texts[train].replace('strategy="deepspeed"', 'strategy="ddp"'))

    assert await session.diagnostics(train) == []
    assert await session.diagnostics(helpers, until=lambda found: not found) == []


async def test_closing_the_script_clears_what_it_found_in_the_helper_module(
    session: Session, tmp_path: pathlib.Path
) -> None:
    project = _project(tmp_path)
    train = session.open(project / "train.py")
    helpers = uri_of(project / "helpers.py")
    assert _codes(await session.diagnostics(helpers, until=bool)) == ["FAB001"]

    session.close(train)

    assert await session.diagnostics(helpers, until=lambda found: not found) == []


async def test_an_open_helper_module_gets_the_finding_with_its_version_and_a_working_fix(
    session: Session, tmp_path: pathlib.Path
) -> None:
    project = _project(tmp_path)
    train = session.open(project / "train.py")
    helpers = session.open(project / "helpers.py")

    # Its own analysis finds nothing (no Fabric in it); train.py's does, for this version.
    [in_helper] = await session.diagnostics(
        helpers, until=lambda found: bool(found) and found[0].data.get("version") == 1
    )
    assert in_helper.range == MISTAKE
    [fix] = [
        action
        for action in await session.code_actions(helpers, [in_helper])
        if action.title.startswith("Set up model and optimizer together")
    ]
    assert fix.is_preferred
    session.apply(helpers, edits_of(fix, helpers))
    assert "model, optimizer = fabric.setup(model, optimizer)" in session.texts[helpers]

    # The fixed buffer is what train.py now calls: both files are clean.
    assert await session.diagnostics(helpers, until=lambda found: not found) == []
    assert await session.diagnostics(train, until=lambda found: not found) == []


async def test_the_helper_module_keeps_the_finding_after_it_is_closed_while_the_script_is_open(
    session: Session, tmp_path: pathlib.Path
) -> None:
    project = _project(tmp_path)
    session.open(project / "train.py")
    helpers = session.open(project / "helpers.py")
    assert _codes(await session.diagnostics(helpers, until=bool)) == ["FAB001"]

    session.close(helpers)
    del session.versions[helpers]

    assert _codes(await session.diagnostics(helpers, until=bool)) == ["FAB001"]


@pytest_lsp.fixture(config=server_config())
async def refreshing_client(lsp_client: LanguageClient, tmp_path: pathlib.Path):
    """A pulling client (Neovim's profile) that also accepts ``workspace/diagnostic/refresh``."""
    params = initialize_params("neovim", tmp_path)
    assert params.capabilities.workspace is not None
    params.capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(
        refresh_support=True
    )
    await lsp_client.initialize_session(params)
    lsp_client.session = Session(client=lsp_client, profile="neovim", root=tmp_path)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_a_pulling_client_is_asked_to_refresh_when_the_helper_modules_findings_change(
    refreshing_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    session: Session = refreshing_client.session  # type: ignore[attr-defined]
    project = _project(tmp_path)
    train = session.open(project / "train.py")
    helpers = session.open(project / "helpers.py")
    assert _codes(await session.diagnostics(helpers, until=bool)) == ["FAB001"]
    refreshes = refreshing_client.diagnostic_refresh_count

    # The helper module's text does not change; what train.py finds in it does.
    session.replace(train, session.texts[train].replace('strategy="deepspeed"', 'strategy="ddp"'))

    await eventually(lambda: _refresh_count(refreshing_client), lambda count: count > refreshes, timeout=30.0)
    assert await session.diagnostics(helpers) == []


async def _refresh_count(client: LanguageClient) -> int:
    return client.diagnostic_refresh_count
