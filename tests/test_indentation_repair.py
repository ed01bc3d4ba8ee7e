"""A line typed at the wrong indentation, or a block opener still without its body, in the middle of
a script: the parser mends that line, not the lines after it, so the rest of the file keeps its
meaning (and its findings) and the repair takes a few parses, not one per line of the block.

The document is never changed: a finding on a line given another indentation keeps the document's
columns, and no fix is offered in a statement whose blocks were guessed.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import fabric_ls.analysis.source as source_module
from fabric_ls.analysis.project import Project
from fabric_ls.analysis.source import parse_source
from fabric_ls.engine import analyze_source
from fabric_ls.fixes import fix_outside_repairs
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.rules import joint_setup_required

PATH = "/nonexistent/fabric_ls_indent/train.py"
REALISTIC = pathlib.Path(__file__).resolve().parents[1] / "bench" / "scripts" / "realistic_train_300.py"


def _in_a_function(case) -> tuple[str, int]:
    """A record's sample with its code after the imports moved into ``main()`` (called at the end),
    and the 0-based line of its finding there."""
    lines = case.source.splitlines(keepends=True)
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = [f"    {line}" if line.strip() else line for line in lines[len(imports) :]]
    return "".join([*imports, "\n\ndef main():\n", *body, "\n\nmain()\n"]), case.line - 1 + 3


# FAB001's record: DeepSpeed with the model and the optimizer set up separately.
_SEPARATE = next(
    case
    for case in joint_setup_required.INVALID
    if 'strategy="deepspeed"' in case.source
    and "setup_module" in case.source
    and case.source.rstrip().endswith("optimizer = fabric.setup_optimizers(optimizer)")
)
DEEPSPEED, SETUP_LINE = _in_a_function(_SEPARATE)
LAUNCH_LINE = next(n for n, line in enumerate(DEEPSPEED.splitlines()) if "fabric.launch()" in line)
TYPED = ["x = 1", "return", ")", "x = [1,", "if x:", "for a in b:", "try:", "else:", "elif y:", "except E:"]


def _insert(text: str, after: int, line: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join([*lines[: after + 1], line + "\n", *lines[after + 1 :]])


def _top_level_names(tree: ast.Module) -> list[str]:
    return [s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))]


def _block_lines(text: str) -> list[tuple[int, int]]:
    """(line, indentation) of every line inside a function body followed by another such line."""
    lines = text.splitlines()
    found = []
    for number, (line, following) in enumerate(zip(lines, lines[1:])):
        if line.startswith("        ") and following.startswith("        ") and line.strip():
            if not line.rstrip().endswith((",", "(", "[", "{", "\\")):
                found.append((number, len(line) - len(line.lstrip())))
    return found


@pytest.mark.parametrize("typed", TYPED)
def test_a_line_typed_anywhere_at_any_indentation_keeps_the_rest_of_the_file(typed, monkeypatch):
    text = REALISTIC.read_text()
    names = _top_level_names(ast.parse(text))
    parses = []
    real_parse = source_module._try_parse
    monkeypatch.setattr(source_module, "_try_parse", lambda t: parses.append(1) or real_parse(t))
    places = _block_lines(text)[::4]
    assert len(places) > 10
    for number, depth in places:
        for indent in sorted({0, 4, depth - 4, depth, depth + 4}):
            edited = _insert(text, number, " " * indent + typed)
            parses.clear()
            parsed = parse_source(edited, PATH)
            where = f"{typed!r} at indentation {indent} after line {number + 1}"
            assert _top_level_names(parsed.tree) == names, where
            # The line after the typed one is still code of the tree (not blanked, not `pass`).
            after = number + 3
            covered = any(
                node.lineno <= after <= (node.end_lineno or node.lineno)
                for node in ast.walk(parsed.tree)
                if isinstance(node, ast.stmt)
                and not isinstance(node, (ast.Pass, ast.FunctionDef, ast.ClassDef))
            )
            assert covered or not edited.splitlines()[after - 1].strip(), where
            assert len(parses) <= 8, f"{where}: {len(parses)} parses"


@pytest.mark.parametrize("indent", [0, 2, 12])
def test_a_line_typed_at_the_wrong_indentation_keeps_fab001_where_it_was(indent):
    # Typed in `main` above the setup calls: before, the lines after it were blanked, FAB001 too.
    edited = _insert(DEEPSPEED, LAUNCH_LINE, " " * indent + "total = 0")
    analysis = analyze_source(edited, PATH)
    assert analysis.syntax_error is not None
    assert [(f.code, f.span.start_line) for f in analysis.findings] == [("FAB001", SETUP_LINE + 1)]
    assert analyze_source(DEEPSPEED, PATH).findings[0].span.start_line == SETUP_LINE


@pytest.mark.parametrize("typed", ["if ready:", "with fabric.no_backward_sync(model):", "try:"])
def test_an_opener_typed_without_its_body_keeps_the_findings(typed):
    edited = _insert(DEEPSPEED, LAUNCH_LINE, "    " + typed)
    analysis = analyze_source(edited, PATH)
    assert [(f.code, f.span.start_line) for f in analysis.findings] == [("FAB001", SETUP_LINE + 1)]


def test_a_finding_on_a_line_given_another_indentation_keeps_the_documents_columns():
    # `main`'s setup line typed one column too deep: the parser moves it back into the block; the
    # finding's span is still the call's text in the document, and no fix edits a guessed block.
    lines = DEEPSPEED.splitlines(keepends=True)
    lines[SETUP_LINE] = " " + lines[SETUP_LINE]
    edited = "".join(lines)
    parsed = parse_source(edited, PATH)
    assert parsed.shifted_lines == {SETUP_LINE: -1}
    analysis = analyze_source(edited, PATH)
    (finding,) = analysis.findings
    line = edited.splitlines()[finding.span.start_line]
    assert line[finding.span.start_col : finding.span.end_col] == "fabric.setup_optimizers(optimizer)"
    assert finding.fix is None
    assert analyze_source(DEEPSPEED, PATH).findings[0].fix is not None


def test_the_mended_tree_does_not_depend_on_the_version_edited_before():
    # The server re-parses from the last clean version; the CLI parses the file alone: one tree.
    text = REALISTIC.read_text()
    for number, _ in _block_lines(text)[::9]:
        for typed in ("x = [1,", "    if x:", "try:"):
            edited = _insert(text, number, typed)
            project = Project([])
            project.parse_script(text, PATH)
            kept = project.parse_script(edited, PATH)
            alone = parse_source(edited, PATH)
            assert kept.shifted_lines == alone.shifted_lines
            assert ast.dump(kept.tree, include_attributes=True) == ast.dump(
                alone.tree, include_attributes=True
            )


def test_no_fix_edits_a_line_the_parser_made_up():
    # Every rule's fix goes through `fix_outside_repairs`: an edit over a line the parser replaced
    # (the unmatched bracket below became `pass`) would rewrite text the analysis never read.
    broken = "import torch\nx = 1\ny = )\nz = 2\n"
    parsed = parse_source(broken, PATH)
    assert parsed.repaired_lines == {2}
    fix = Fix("a fix", (TextEdit(Span(1, 0, 3, 0), "w = 0\n"),), True)
    assert fix_outside_repairs(fix, parsed) is None
    elsewhere = Fix("a fix", (TextEdit(Span(3, 0, 3, 5), "z = 3"),), True)
    assert fix_outside_repairs(elsewhere, parsed) is elsewhere
