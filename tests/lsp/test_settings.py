"""Settings: initializationOptions, the editor's fabricLs section, [tool.fabric-ls] in pyproject.toml."""

from __future__ import annotations

import os
import pathlib

from conftest import Session, copy_scripts, eventually, start_session, uri_of
from lsprotocol import types
from pytest_lsp import LanguageClient


def _fab001(diagnostics: list[types.Diagnostic]) -> list[types.Diagnostic]:
    return [diagnostic for diagnostic in diagnostics if diagnostic.code == "FAB001"]


async def _start(client: LanguageClient, root: pathlib.Path, options: object = None) -> Session:
    return await start_session(client, client.profile, root, initialization_options=options)  # type: ignore[attr-defined]


async def test_strategy_from_initialization_options_is_assumed_where_the_script_leaves_it_open(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "strategy_left_to_cli.py")
    session = await _start(bare_client, tmp_path, {"fabricLs": {"strategy": "deepspeed"}})

    uri = session.open(tmp_path / "strategy_left_to_cli.py")
    [diagnostic] = await session.diagnostics(uri)

    assert diagnostic.code == "FAB001"
    # Assumed, not written in the script: a warning, and the message says so.
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert "assumed" in diagnostic.message


async def test_configuration_change_republishes(bare_client: LanguageClient, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "strategy_left_to_cli.py")
    bare_client.set_configuration({"strategy": "deepspeed"}, section="fabricLs")
    session = await _start(bare_client, tmp_path)
    uri = session.open(tmp_path / "strategy_left_to_cli.py")
    assert _fab001(await session.diagnostics(uri))

    bare_client.set_configuration({"strategy": "ddp"}, section="fabricLs")
    bare_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    assert await session.diagnostics(uri, until=lambda found: not found) == []


async def test_ignore_select_and_severity_overrides(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    bare_client.set_configuration({"severity": {"FAB001": "hint"}}, section="fabricLs")
    session = await _start(bare_client, tmp_path)
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    [diagnostic] = await session.diagnostics(uri)
    assert diagnostic.severity == types.DiagnosticSeverity.Hint

    bare_client.set_configuration({"severity": {"FAB001": "off"}}, section="fabricLs")
    bare_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert await session.diagnostics(uri, until=lambda found: not found) == []

    bare_client.set_configuration({"ignore": ["FAB0"]}, section="fabricLs")
    bare_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert await session.diagnostics(uri, until=lambda found: not found) == []

    bare_client.set_configuration({"select": ["FAB001"]}, section="fabricLs")
    bare_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert _fab001(await session.diagnostics(uri, until=lambda found: bool(found)))


async def test_a_bad_setting_is_shown_and_the_server_keeps_working(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    bare_client.set_configuration({"strategy": "warp_drive", "ignore": "FAB999x"}, section="fabricLs")
    session = await _start(bare_client, tmp_path)
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")

    assert _fab001(await session.diagnostics(uri))
    shown = [message.message for message in bare_client.messages]
    assert any("strategy" in message and "warp_drive" in message for message in shown)
    logged = [message.message for message in bare_client.log_messages]
    assert any("warp_drive" in message for message in logged)


async def test_pyproject_table_applies_and_is_reread_when_it_changes(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.fabric-ls]\nignore = ["FAB001"]\n', encoding="utf-8")
    session = await _start(bare_client, tmp_path)
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    assert await session.diagnostics(uri) == []

    pyproject.write_text("[tool.fabric-ls]\nignore = []\n", encoding="utf-8")
    bare_client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri_of(pyproject), type=types.FileChangeType.Changed)]
        )
    )

    assert _fab001(await session.diagnostics(uri, until=lambda found: bool(found)))


async def test_nearest_pyproject_wins_and_beats_editor_settings(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.fabric-ls]\nstrategy = "ddp"\n', encoding="utf-8")
    nested = tmp_path / "jobs"
    nested.mkdir()
    copy_scripts(nested, "strategy_left_to_cli.py")
    (nested / "pyproject.toml").write_text('[tool.fabric-ls]\nstrategy = "deepspeed"\n', encoding="utf-8")
    bare_client.set_configuration({"strategy": "fsdp"}, section="fabricLs")
    session = await _start(bare_client, tmp_path)

    uri = session.open(nested / "strategy_left_to_cli.py")

    assert _fab001(await session.diagnostics(uri))
    [document] = (await session.status())["documents"]
    assert document["strategy"] == "deepspeed"


async def test_a_broken_pyproject_is_reported(bare_client: LanguageClient, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    (tmp_path / "pyproject.toml").write_text("[tool.fabric-ls\nignore = [", encoding="utf-8")
    session = await _start(bare_client, tmp_path)
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")

    assert _fab001(await session.diagnostics(uri))
    await eventually(
        lambda: _async_value(bare_client.messages),
        lambda messages: any("pyproject.toml" in m.message for m in messages),
    )


async def test_python_setting_is_resolved_against_the_workspace_and_a_missing_one_is_reported(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    session = await _start(bare_client, tmp_path, {"python": ".venv/bin/python"})
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")

    [document] = (await session.status())["documents"]

    assert document["python"] == os.path.join(str(tmp_path), ".venv", "bin", "python")
    assert document["projectRoot"] == str(tmp_path)
    # There is no such interpreter: the user is told, and the server's own Python is used.
    assert _fab001(await session.diagnostics(uri))
    await eventually(
        lambda: _async_value(bare_client.messages),
        lambda messages: any("cannot use the Python environment" in m.message for m in messages),
    )


async def _async_value(value):  # type: ignore[no-untyped-def]
    return value
