"""Diagnostics: pushed with the document version (VS Code) or pulled (Neovim), never both."""

from __future__ import annotations

import os
import pathlib

import pytest
from conftest import EXAMPLES, Session, copy_scripts, uri_of
from lsprotocol import types

from fabric_ls import engine
from fabric_ls.lsp import convert as lsp_convert
from fabric_ls.settings import Settings

# What each example script must get, by file name. Scripts not listed are still checked
# against the engine (below), so a new example is covered as soon as it exists.
EXPECTED_CODES = {
    "cli_strategy.py": ["FAB001"],  # only for some --strategy choices: a warning
    "correct_fsdp.py": [],
    "deepspeed_separate_setup.py": ["FAB001"],
    "fsdp_meta_optimizer.py": ["FAB002"],
    "loss_backward.py": ["FAB016"],
    "set_up_twice.py": ["FAB007"],
    "spawn_without_function.py": ["FAB006"],
    "zero3_empty_init.py": ["FAB003"],
    # multi_module/: the strategy and the ZeRO stage come from config.py.
    "config.py": [],
    "trainer.py": ["FAB001", "FAB003"],
}


async def test_deepspeed_separate_setup_gets_fab001_on_the_setup_optimizers_call(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")

    [diagnostic] = await session.diagnostics(uri)

    assert diagnostic.code == "FAB001"
    assert diagnostic.source == "fabric-ls"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    # optimizer = fabric.setup_optimizers(optimizer)   (line 11 in the file, 0-based 10)
    assert diagnostic.range == types.Range(
        start=types.Position(line=10, character=12), end=types.Position(line=10, character=46)
    )
    assert "DeepSpeedStrategy" in diagnostic.message
    assert diagnostic.code_description is not None
    assert diagnostic.code_description.href.endswith("FAB001.md")
    # Where the strategy came from: the Fabric(...) call and the "deepspeed" literal.
    related = diagnostic.related_information or []
    assert related and all(info.location.uri == uri for info in related)
    assert any(info.location.range.start.line == 5 for info in related)
    # The fix travels with the diagnostic.
    assert diagnostic.data["fix"]["safe"] is True
    assert diagnostic.data["version"] == 1


async def test_push_carries_the_version_and_pull_is_never_mixed_with_push(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    await session.diagnostics(uri)
    version = session.replace(uri, session.texts[uri] + "\n# edited\n")
    await session.diagnostics(uri)

    if session.pulls:
        assert session.published_for(uri) == []
    else:
        assert [params.version for params in session.published_for(uri)] == [1, version]


async def test_server_announces_pull_diagnostics_only_to_clients_that_pull(session: Session) -> None:
    assert session.initialize_result is not None
    provider = session.initialize_result.capabilities.diagnostic_provider
    if session.pulls:
        assert provider is not None and provider.inter_file_dependencies
    else:
        assert provider is None
    status = await session.status()
    assert status["diagnosticMode"] == ("pull" if session.pulls else "push")


async def test_edit_that_fixes_the_mistake_clears_the_diagnostic(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    assert await session.diagnostics(uri)

    fixed = session.texts[uri].replace(
        "model = fabric.setup_module(model)\noptimizer = fabric.setup_optimizers(optimizer)",
        "model, optimizer = fabric.setup(model, optimizer)",
    )
    session.replace(uri, fixed)

    assert await session.diagnostics(uri) == []


async def test_close_clears_pushed_diagnostics(session: Session, tmp_path: pathlib.Path) -> None:
    copy_scripts(tmp_path, "deepspeed_separate_setup.py")
    uri = session.open(tmp_path / "deepspeed_separate_setup.py")
    assert await session.diagnostics(uri)

    session.close(uri)
    if session.pulls:
        report = await session.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert not report.items
    else:
        last = await _wait_last_publish(session, uri, lambda params: not params.diagnostics)
        assert not last.diagnostics


async def _wait_last_publish(session: Session, uri: str, predicate):  # type: ignore[no-untyped-def]
    from conftest import eventually

    async def last():  # type: ignore[no-untyped-def]
        published = session.published_for(uri)
        return published[-1] if published else None

    return await eventually(last, lambda params: params is not None and predicate(params))


async def test_columns_follow_the_negotiated_position_encoding(
    session: Session, tmp_path: pathlib.Path
) -> None:
    copy_scripts(tmp_path, "unicode_before_call.py")
    uri = session.open(tmp_path / "unicode_before_call.py")

    [diagnostic] = await session.diagnostics(uri)

    # größe, 𝛉 = 1, fabric.setup_optimizers(optimizer)
    line = session.texts[uri].splitlines()[10]
    prefix = line[: line.index("fabric.")]
    expected = {
        "utf-8": len(prefix.encode("utf-8")),
        "utf-16": len(prefix.encode("utf-16-le")) // 2,
        "utf-32": len(prefix),
    }[session.encoding]
    assert diagnostic.range.start == types.Position(line=10, character=expected)
    status = await session.status()
    assert status["positionEncoding"] == session.encoding


async def test_syntax_error_does_not_break_the_server(session: Session, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("from lightning.fabric import Fabric\nfabric = Fabric(\n", encoding="utf-8")
    uri = session.open(path)

    assert await session.diagnostics(uri) == []
    assert (await session.status())["worker"]["failures"] == 0


def _examples() -> list[pathlib.Path]:
    return sorted(EXAMPLES.rglob("*.py")) if EXAMPLES.is_dir() else []


@pytest.mark.parametrize("example", _examples(), ids=lambda path: str(path.relative_to(EXAMPLES)))
async def test_example_scripts_get_exactly_the_engines_findings(
    session: Session, example: pathlib.Path
) -> None:
    uri = session.open(example)

    diagnostics = await session.diagnostics(uri)

    source = example.read_text(encoding="utf-8")
    analysis = engine.analyze_source(source, str(example), Settings(), engine.Project([str(example.parent)]))
    lines = lsp_convert.split_lines(source)
    expected = sorted(
        (finding.code, lsp_convert.span_to_range(finding.span, lines, session.encoding).start.line)
        for finding in analysis.findings
        if os.path.abspath(finding.path) == os.path.abspath(example)
    )
    # (A finding in a helper module the script calls is among them, at that call: the engine puts it there.)
    assert sorted((d.code, d.range.start.line) for d in diagnostics) == expected
    if example.name in EXPECTED_CODES:
        assert sorted({str(d.code) for d in diagnostics}) == EXPECTED_CODES[example.name]
    if example.name == "cli_strategy.py":
        assert {d.severity for d in diagnostics} == {types.DiagnosticSeverity.Warning}


async def test_example_scripts_exist() -> None:
    # The examples/ folder documents one common mistake per script; the table above names some.
    present = {path.name for path in _examples()}
    missing = sorted(set(EXPECTED_CODES) - present)
    assert not missing, f"examples missing: {missing}"


def test_uri_round_trip(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "with space.py"
    assert lsp_convert.uri_to_path(uri_of(path)) == str(path)
