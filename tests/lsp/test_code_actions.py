"""Code actions: the rule's quick fix, "Ignore FABnnn on this line", and source.fixAll.fabric-ls."""

from __future__ import annotations

import pathlib
import shutil
from urllib.parse import urlparse
from urllib.request import url2pathname

from conftest import EXAMPLES, Session, copy_scripts, edits_of
from lsprotocol import types

from fabric_ls.records import get_record

JOINT_SETUP = "model, optimizer = fabric.setup(model, optimizer)"


async def _open_fab001(session: Session, tmp_path: pathlib.Path) -> tuple[str, types.Diagnostic]:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    [diagnostic] = await session.diagnostics(uri)
    assert diagnostic.code == "FAB001"
    return uri, diagnostic


async def test_quick_fix_joins_the_setup_calls_and_the_diagnostic_goes_away(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)

    actions = await session.code_actions(uri, [diagnostic])
    [fix] = [action for action in actions if action.title.startswith("Set up model and optimizer")]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred is True  # the fix is safe
    assert list(fix.diagnostics or []) == [diagnostic]
    edits = edits_of(fix, uri)
    # Minimal edits: never the whole file.
    assert all(edit.range.end.line - edit.range.start.line <= 1 for edit in edits)

    session.apply(uri, edits)

    assert JOINT_SETUP in session.texts[uri]
    assert "setup_module" not in session.texts[uri]
    assert await session.diagnostics(uri) == []


async def test_quick_fix_edit_is_versioned_for_clients_with_document_changes(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)

    [fix, *_] = await session.code_actions(uri, [diagnostic])

    assert fix.edit is not None
    if session.profile == "visual-studio-code":  # declares workspaceEdit.documentChanges
        [change] = fix.edit.document_changes or []
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.version == 1
    else:
        assert fix.edit.changes and uri in fix.edit.changes


async def test_quick_fix_still_works_after_an_unrelated_edit(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)
    session.replace(uri, session.texts[uri] + "\nprint('done')\n")
    [current] = await session.diagnostics(uri)

    actions = await session.code_actions(uri, [current])
    [fix] = [action for action in actions if action.is_preferred]
    session.apply(uri, edits_of(fix, uri))

    assert JOINT_SETUP in session.texts[uri]
    assert await session.diagnostics(uri) == []


async def test_ignore_on_this_line_appends_noqa_and_silences_the_rule(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)

    actions = await session.code_actions(uri, [diagnostic])
    [ignore] = [action for action in actions if action.title == "Ignore FAB001 on this line"]
    assert not ignore.is_preferred
    [edit] = edits_of(ignore, uri)
    assert edit.new_text == "  # noqa: FAB001"
    session.apply(uri, [edit])

    assert "optimizer = fabric.setup_optimizers(optimizer)  # noqa: FAB001\n" in session.texts[uri]
    assert await session.diagnostics(uri) == []


async def test_ignore_adds_the_code_to_an_existing_noqa_list(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, _ = await _open_fab001(session, tmp_path)
    text = session.texts[uri].replace(
        "optimizer = fabric.setup_optimizers(optimizer)\n",
        "optimizer = fabric.setup_optimizers(optimizer)  # noqa: E501\n",
    )
    session.replace(uri, text)
    [diagnostic] = await session.diagnostics(uri)

    actions = await session.code_actions(uri, [diagnostic])
    [ignore] = [action for action in actions if action.title == "Ignore FAB001 on this line"]
    session.apply(uri, edits_of(ignore, uri))

    assert "# noqa: E501, FAB001\n" in session.texts[uri]
    assert await session.diagnostics(uri) == []


async def test_fix_all_applies_every_safe_fix(session: Session, tmp_path: pathlib.Path) -> None:
    uri, _ = await _open_fab001(session, tmp_path)

    actions = await session.code_actions(uri, [], only=["source.fixAll"])
    [fix_all] = actions
    assert fix_all.kind == "source.fixAll.fabric-ls"
    session.apply(uri, edits_of(fix_all, uri))

    assert JOINT_SETUP in session.texts[uri]
    assert await session.diagnostics(uri) == []


async def test_only_quickfix_excludes_fix_all_and_only_fix_all_excludes_quickfixes(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)

    quick = await session.code_actions(uri, [diagnostic], only=[types.CodeActionKind.QuickFix])
    fix_all = await session.code_actions(uri, [diagnostic], only=["source.fixAll.fabric-ls"])

    assert {action.kind for action in quick} == {types.CodeActionKind.QuickFix}
    assert {action.kind for action in fix_all} == {"source.fixAll.fabric-ls"}


async def test_fix_all_command_applies_through_the_client(session: Session, tmp_path: pathlib.Path) -> None:
    uri, _ = await _open_fab001(session, tmp_path)

    applied = await session.execute("fabric-ls.fixAll", uri)

    assert applied is True
    [request] = session.client.applied_edits  # type: ignore[attr-defined]
    edits: list[types.TextEdit] = []
    for change in request.edit.document_changes or []:
        edits.extend(change.edits)
    edits.extend((request.edit.changes or {}).get(uri, []))
    session.apply(uri, edits)
    assert JOINT_SETUP in session.texts[uri]


async def test_diagnostics_of_other_tools_get_no_actions(session: Session, tmp_path: pathlib.Path) -> None:
    uri, _ = await _open_fab001(session, tmp_path)
    foreign = types.Diagnostic(
        range=types.Range(start=types.Position(line=2, character=0), end=types.Position(line=2, character=5)),
        message="unused import",
        source="ruff",
        code="F401",
    )

    assert await session.code_actions(uri, [foreign], only=[types.CodeActionKind.QuickFix]) == []


async def _open_fab007(session: Session, tmp_path: pathlib.Path) -> tuple[str, types.Diagnostic]:
    shutil.copy(EXAMPLES / "set_up_twice.py", tmp_path / "set_up_twice.py")
    uri = session.open(tmp_path / "set_up_twice.py")
    [diagnostic] = await session.diagnostics(uri)
    assert diagnostic.code == "FAB007"
    return uri, diagnostic


async def test_the_quick_fix_title_is_the_records(session: Session, tmp_path: pathlib.Path) -> None:
    uri, diagnostic = await _open_fab001(session, tmp_path)

    actions = await session.code_actions(uri, [diagnostic])

    assert actions[0].title == get_record("FAB001").fix.title  # type: ignore[union-attr]
    assert not any(action.title.startswith("Show example fix") for action in actions)


async def test_a_finding_without_a_fix_offers_the_example_fix_page(
    session: Session, tmp_path: pathlib.Path
) -> None:
    uri, diagnostic = await _open_fab007(session, tmp_path)

    actions = await session.code_actions(uri, [diagnostic])

    titles = [action.title for action in actions]
    assert titles == ["Show example fix for FAB007", "Ignore FAB007 on this line"]
    show = actions[0]
    assert show.edit is None and show.command is not None
    assert diagnostic.code_description is not None
    shown = await session.execute(show.command.command, *(show.command.arguments or []))
    # The page the diagnostic links to, which holds the record's example fix.
    assert shown == diagnostic.code_description.href
    [document] = session.client.shown_documents
    assert document.uri == shown and document.take_focus is True
    page = pathlib.Path(url2pathname(urlparse(shown).path)).read_text(encoding="utf-8")
    assert get_record("FAB007").example_after.strip().splitlines()[-1] in page


async def test_without_a_page_the_example_fix_is_shown_as_a_message(
    session: Session, tmp_path: pathlib.Path
) -> None:
    await _open_fab007(session, tmp_path)

    shown = await session.execute("fabric-ls.showExampleFix", "FAB007", "")

    assert shown.endswith(get_record("FAB007").example_fix)
    assert any(message.message == shown for message in session.client.messages)


async def test_a_declined_fix_says_so_in_the_example_fix_title(
    session: Session, tmp_path: pathlib.Path
) -> None:
    # launch() inside a `with` block: moving what follows into a function is not a faithful rewrite.
    script = tmp_path / "spawn.py"
    script.write_text(
        "import torch\nfrom lightning.fabric import Fabric\n\n"
        'fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")\n'
        "with torch.no_grad():\n    fabric.launch()\n    model = fabric.setup(torch.nn.Linear(4, 2))\n",
        encoding="utf-8",
    )
    uri = session.open(script)
    [diagnostic] = await session.diagnostics(uri)

    titles = [action.title for action in await session.code_actions(uri, [diagnostic])]

    assert titles == [
        "Show example fix for FAB006 (no fix here: it could change what this code does)",
        "Ignore FAB006 on this line",
    ]


async def test_the_quick_fix_on_a_line_with_non_ascii_names(session: Session, tmp_path: pathlib.Path) -> None:
    # `größe, 𝛉 = 1, fabric.setup_optimizers(optimizer)`: columns differ in UTF-8, UTF-16 and code points.
    copy_scripts(tmp_path, "unicode_before_call.py")
    uri = session.open(tmp_path / "unicode_before_call.py")
    [diagnostic] = await session.diagnostics(uri)

    title = get_record("FAB001").fix.title  # type: ignore[union-attr]
    [fix] = [action for action in await session.code_actions(uri, [diagnostic]) if action.title == title]
    session.apply(uri, edits_of(fix, uri))

    assert session.texts[uri].endswith("größe = 1\nmodel, 𝛉 = fabric.setup(model, optimizer)\n")
    assert await session.diagnostics(uri) == []
