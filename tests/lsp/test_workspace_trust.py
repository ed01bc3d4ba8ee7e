"""Workspace trust: opening a repository never runs its programs (issue 13).

A pyproject.toml's ``[tool.fabric-ls] python`` is a program the workspace names. The server uses it only when
the client says the workspace is trusted (``workspaceTrusted: true``), and then only if it is a Python
interpreter. Each hostile repository (tests/hostile_repos.py) leaves a marker file if anything in it runs.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys

import pytest
import pytest_lsp
from conftest import Session, eventually, server_config, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from hostile_repos import HostileRepo, hostile_repo, make_venv, prove_live  # noqa: E402

NOT_TRUSTED = "this workspace is not trusted"
REFUSED = "not used:"


@pytest_lsp.fixture(config=server_config(), params=["visual-studio-code"])
async def vscode_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):
    """One client profile is enough here: trust is decided before any capability matters."""
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    yield
    if lsp_client.capabilities is not None:
        await lsp_client.shutdown_session()


def _messages(client: LanguageClient, text: str) -> list[str]:
    return [message.message for message in client.messages if text in message.message]


async def _open(client: LanguageClient, repo: HostileRepo, options: object = None) -> tuple[Session, str]:
    session = await start_session(client, client.profile, repo.root, initialization_options=options)  # type: ignore[attr-defined]
    uri = session.open(repo.train)
    # Diagnostics come after the analysis, which asked jedi about the missing package.
    await session.diagnostics(uri)
    return session, uri


async def test_the_example_from_the_issue_runs_nothing_and_says_why(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    repo = hostile_repo(tmp_path, "script")
    assert prove_live(repo)

    session, uri = await _open(bare_client, repo)

    [message] = await eventually(lambda: _value(_messages(bare_client, NOT_TRUSTED)), bool)
    assert "./evil.sh" in message and "pyproject.toml" in message
    assert "Manage Workspace Trust" in message and '"workspaceTrusted": true' in message
    status = await session.status()
    assert status["workspaceTrusted"] is False
    assert not status["documents"][0]["python"].startswith(str(repo.root))
    # Edits and a second look do not repeat the message.
    session.replace(uri, session.texts[uri] + "\n")
    await session.diagnostics(uri)
    assert len(_messages(bare_client, NOT_TRUSTED)) == 1
    assert not repo.ran()


@pytest.mark.parametrize("case", ["script", "shell", "missing", "fake-venv", "committed-venv"])
async def test_an_untrusted_workspace_names_no_program(
    vscode_client: LanguageClient, tmp_path: pathlib.Path, case: str
) -> None:
    repo = hostile_repo(tmp_path, case)
    assert prove_live(repo)

    session, _ = await _open(vscode_client, repo, {"workspaceTrusted": False})

    await eventually(lambda: _value(_messages(vscode_client, NOT_TRUSTED)), bool)
    [document] = (await session.status())["documents"]
    assert not document["python"].startswith(str(repo.root)) and document["python"] != "/bin/sh"
    assert not repo.ran()


@pytest.mark.parametrize("options", [None, {"workspaceTrusted": True}])
async def test_a_committed_virtualenv_is_not_picked_up_unasked(
    vscode_client: LanguageClient, tmp_path: pathlib.Path, options: object
) -> None:
    repo = hostile_repo(tmp_path, "venv-without-setting")
    assert prove_live(repo)

    session, _ = await _open(vscode_client, repo, options)

    [document] = (await session.status())["documents"]
    assert not document["python"].startswith(str(repo.root))
    assert not repo.ran()


@pytest.mark.parametrize("case", ["script", "shell", "missing", "fake-venv"])
async def test_a_trusted_workspace_still_gets_only_a_python(
    vscode_client: LanguageClient, tmp_path: pathlib.Path, case: str
) -> None:
    repo = hostile_repo(tmp_path, case)

    session, _ = await _open(vscode_client, repo, {"workspaceTrusted": True})

    [message] = await eventually(lambda: _value(_messages(vscode_client, REFUSED)), bool)
    assert "Only a Python interpreter" in message
    status = await session.status()
    assert status["workspaceTrusted"] is True
    assert not status["documents"][0]["python"].startswith(str(repo.root))
    assert status["documents"][0]["python"] != "/bin/sh"
    assert not _messages(vscode_client, NOT_TRUSTED)
    assert not repo.ran()


async def test_trusting_the_workspace_is_the_users_choice_and_uses_its_virtualenv(
    vscode_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    """The control case: trusted, a real virtualenv's Python is started (and its .pth file runs)."""
    repo = hostile_repo(tmp_path, "committed-venv")

    session, _ = await _open(vscode_client, repo, {"fabricLs": {"workspaceTrusted": True}})

    [document] = (await session.status())["documents"]
    assert document["python"] == str(repo.root / ".venv")
    assert repo.ran()
    assert not _messages(vscode_client, REFUSED)


RESOLVED_SCRIPT = """\
import torch
from lightning.fabric import Fabric

from run_config import STRATEGY

fabric = Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)
fabric.launch()
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""


def _workspace_with_real_venv(root: pathlib.Path) -> pathlib.Path:
    """``run_config`` is importable only through the virtualenv: its site-packages lists ``libs/``, as an
    editable install does; nothing near the script or at the root finds it."""
    (root / "libs").mkdir(parents=True)
    (root / "libs" / "run_config.py").write_text('STRATEGY = "deepspeed"\n', "utf-8")
    site = make_venv(root / ".tenv")
    (site / "workspace_libs.pth").write_text(f"{root / 'libs'}\n", "utf-8")
    (root / "pyproject.toml").write_text('[tool.fabric-ls]\npython = ".tenv"\n', "utf-8")
    (root / "train.py").write_text(RESOLVED_SCRIPT, "utf-8")
    return root / "train.py"


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_trusted_workspace_resolves_imports_in_its_real_virtualenv(
    vscode_client: LanguageClient, tmp_path: pathlib.Path, trusted: bool
) -> None:
    root = tmp_path / "project"
    train = _workspace_with_real_venv(root)
    session = await start_session(
        vscode_client, "visual-studio-code", root, initialization_options={"workspaceTrusted": trusted}
    )
    uri = session.open(train)

    diagnostics = await session.diagnostics(uri)

    [document] = (await session.status())["documents"]
    fab001 = [d for d in diagnostics if d.code == "FAB001"]
    if trusted:
        assert document["python"] == str(root / ".tenv")
        # jedi read the virtualenv's sys.path: run_config.STRATEGY is "deepspeed", so FAB001.
        assert fab001 and "DeepSpeed" in fab001[0].message
    else:
        assert document["python"] != str(root / ".tenv")
        assert not fab001
        await eventually(lambda: _value(_messages(vscode_client, NOT_TRUSTED)), bool)


async def test_trust_given_later_through_the_configuration_applies(
    bare_client: LanguageClient, tmp_path: pathlib.Path
) -> None:
    """A client may grant trust without restarting: ``workspaceTrusted`` in its ``fabricLs`` answer."""
    root = tmp_path / "project"
    train = _workspace_with_real_venv(root)
    session = await start_session(bare_client, bare_client.profile, root)  # type: ignore[attr-defined]
    uri = session.open(train)
    assert not [d for d in await session.diagnostics(uri) if d.code == "FAB001"]

    bare_client.set_configuration({"workspaceTrusted": True}, section="fabricLs")
    bare_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def python_in_use() -> str:
        return (await session.status())["documents"][0]["python"]

    assert await eventually(python_in_use, lambda python: python == str(root / ".tenv"))
    assert [d for d in await session.diagnostics(uri, until=_has_fab001) if d.code == "FAB001"]


def _has_fab001(diagnostics: list[types.Diagnostic]) -> bool:
    return any(d.code == "FAB001" for d in diagnostics)


async def _value(value):  # type: ignore[no-untyped-def]
    await asyncio.sleep(0)
    return value
