"""Text renders as what it claims to be: hover and tooltip markdown is valid CommonMark with no stray
backticks (no code span nested in another), and plain text (inlay labels, plaintext hovers) has no markup.

Rendered with markdown-it-py over every Fabric site, setup call and finding of the examples, the
realistic bench scripts and every rule sample."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fabric_ls import engine, explain
from fabric_ls.records import get_record
from fabric_ls.rules import ALL_RULES
from fabric_ls.settings import Settings
from fabric_ls.text import code, plain

markdown_it = pytest.importorskip("markdown_it")

REPO = Path(__file__).resolve().parent.parent
CODE_OR_PRE = re.compile(r"<(code|pre)>.*?</\1>", re.DOTALL)
MARKUP = ("`", "**", "](", "```")


def _sources() -> list[tuple[str, str]]:
    paths = sorted((REPO / "examples").rglob("*.py")) + sorted((REPO / "bench" / "scripts").glob("*.py"))
    found = [(str(path), path.read_text(encoding="utf-8")) for path in paths]
    for rule in ALL_RULES:
        for index, case in enumerate(rule.INVALID):
            found.append((f"/samples/{rule.RULE}_{index}.py", case.source))
    return found


def _texts() -> list[tuple[str, str, str]]:
    """(where, markdown, plain label) for every surface the server renders."""
    texts = []
    for path, source in _sources():
        analysis = engine.analyze_source(source, path, Settings())
        for site in analysis.fabric_sites:
            texts.append((f"{path} Fabric", explain.fabric_site_markdown(site), explain.site_label(site)))
            texts.append((f"{path} tooltip", explain.site_tooltip(site), explain.code_lens_title(site)))
        for call in analysis.call_sites:
            if call.method in explain.EXPLAINED_METHODS:
                markdown = explain.call_site_markdown(call, explain.site_for_call(analysis, call))
                texts.append((f"{path} {call.method}", markdown, ""))
        for finding in analysis.findings:
            texts.append(
                (f"{path} {finding.code}", explain.finding_markdown(finding, get_record(finding.code)), "")
            )
    return texts


TEXTS = _texts()


def test_there_is_text_to_check() -> None:
    assert len(TEXTS) > 50
    assert any("when" in markdown for _, markdown, _ in TEXTS)  # conditions are among them


@pytest.mark.parametrize(("where", "markdown", "label"), TEXTS, ids=[where for where, _, _ in TEXTS])
def test_markdown_renders_without_stray_markup_and_labels_are_plain(
    where: str, markdown: str, label: str
) -> None:
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(markdown)
    prose = CODE_OR_PRE.sub("", html)
    assert "`" not in prose, f"{where}: a backtick outside code (nested code span?)\n{markdown}"
    assert "**" not in prose, f"{where}: unbalanced bold\n{markdown}"
    as_plain = plain(markdown)
    for markup in MARKUP:
        assert markup not in as_plain or markup == "`" and "`" in _code_contents(html), (
            where,
            markup,
            as_plain,
        )
        assert markup not in label, (where, markup, label)


def _code_contents(html: str) -> str:
    return "".join(re.findall(r"<code>(.*?)</code>", html, re.DOTALL))


def test_code_spans_survive_backticks() -> None:
    for text in ("plain", "a`b", "`x` y", "``two``"):
        html = markdown_it.MarkdownIt("commonmark").render(code(text))
        assert _code_contents(html).strip() == text.replace("&", "&amp;").strip()


def test_plain_drops_markup_and_keeps_words() -> None:
    text = plain(
        "**FAB001**: use `fabric.setup(model, optimizer)`; see [the docs](file:///FAB001.md)\n"
        "```python\nx = 1\n```"
    )
    assert text == "FAB001: use fabric.setup(model, optimizer); see the docs (file:///FAB001.md)\nx = 1"
