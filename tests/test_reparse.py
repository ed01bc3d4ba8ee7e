"""Re-parsing an edit reuses the untouched statements and gives the tree a whole parse gives."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from fabric_ls.analysis.project import Project
from fabric_ls.analysis.reparse import reparse, reparse_attempt, settled_lines, trailing_starts
from fabric_ls.analysis.source import normalize_text, parse_source
from fabric_ls.engine import analyze_source

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*ROOT.glob("bench/scripts/*.py"), *ROOT.glob("examples/*.py")])


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=True)


def _from(previous):
    return lambda text: reparse_attempt(text, previous)


def _clean(parsed) -> bool:
    return parsed.syntax_error is None and not parsed.repaired_lines and not parsed.closed_lines


def _edits(text: str, rng: random.Random):
    """Edits a person makes: type a line key by key, delete a line, break or join lines, indent.
    An edit that breaks the file is seen, then undone (as a person fixes it)."""
    lines = text.splitlines(keepends=True)
    for _ in range(16):
        before = lines
        at = rng.randrange(len(lines))
        kind = rng.choice(["type", "delete", "enter", "join", "indent", "backslash", "semicolon"])
        if kind == "type":
            indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
            statement = rng.choice(["total = loss.item() * 2", "fabric.barrier()", "x = (1,", "def g():"])
            for typed in range(len(statement) + 1):
                yield "".join([*lines[: at + 1], indent + statement[:typed] + "\n", *lines[at + 1 :]])
            continue
        if kind == "delete":
            lines = [*lines[:at], *lines[at + 1 :]] or ["\n"]
        elif kind == "enter":
            lines = [*lines[: at + 1], "\n", *lines[at + 1 :]]
        elif kind == "join" and at + 1 < len(lines):
            lines = [*lines[:at], lines[at].rstrip("\r\n") + " " + lines[at + 1], *lines[at + 2 :]]
        elif kind == "indent":
            lines = [*lines[:at], "    " + lines[at], *lines[at + 1 :]]
        elif kind == "backslash":
            lines = [*lines[:at], lines[at].rstrip("\r\n") + " \\\n", *lines[at + 1 :]]
        elif kind == "semicolon":
            lines = [*lines[:at], lines[at].rstrip("\r\n") + "; y = 1\n", *lines[at + 1 :]]
        yield "".join(lines)
        if not _clean(parse_source("".join(lines))):
            lines = before


VARIANTS = {
    "as written": lambda text: text,
    "CRLF": lambda text: text.replace("\n", "\r\n"),
    "no final newline, tabs": lambda text: text.rstrip("\n").replace("    ", "\t"),
}
CASES = [(script, "as written") for script in SCRIPTS] + [
    (ROOT / "bench/scripts/realistic_train_300.py", variant) for variant in ("CRLF", "no final newline, tabs")
]


@pytest.mark.parametrize(("script", "variant"), CASES, ids=lambda case: getattr(case, "name", case))
def test_a_reparsed_edit_is_the_tree_a_whole_parse_gives(script, variant):
    text = VARIANTS[variant](script.read_text(encoding="utf-8"))
    rng = random.Random(script.name + variant)  # the same edits on every run
    last_clean = parse_source(text, str(script))
    reused = 0
    for edited in _edits(text, rng):
        whole = parse_source(edited, str(script))
        again = reparse(edited, str(script), last_clean)
        if not _clean(whole):
            assert again is None, "a text that does not parse as it is was re-parsed"
            # Repaired with each repaired version re-parsed from the last clean one: the same result.
            settled = settled_lines(normalize_text(edited), last_clean)
            trailing = trailing_starts(normalize_text(edited), last_clean)
            quick = parse_source(edited, str(script), _from(last_clean), settled, trailing)
            assert _dump(quick.tree) == _dump(whole.tree)
            assert (quick.repaired_lines, quick.closed_lines) == (whole.repaired_lines, whole.closed_lines)
            assert quick.shifted_lines == whole.shifted_lines
            assert (quick.syntax_error, quick.syntax_problem) == (whole.syntax_error, whole.syntax_problem)
            continue
        if again is not None:
            reused += 1
            assert _dump(again.tree) == _dump(whole.tree)
            assert again.lines == whole.lines and again.text == whole.text
        last_clean = whole
    assert reused > 0


def _error_of(error: SyntaxError) -> tuple:
    return (type(error), error.msg, error.lineno, error.offset, error.end_lineno, error.end_offset)


def _whole(text: str):
    """What ``ast.parse`` gives for ``text``: its tree's dump, or its error's message and position."""
    try:
        return _dump(ast.parse(text))
    except SyntaxError as error:
        return _error_of(error)


def test_what_a_part_vouches_for_is_what_a_whole_parse_gives():
    # A text being typed is repaired from the errors of its re-parsed part: each must be the error
    # a whole parse raises, with the same message and position, or the repair would read history.
    errors = 0
    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        rng = random.Random("vouched " + script.name)
        last_clean = parse_source(text, str(script))
        for edited in _edits(text, rng):
            edited = normalize_text(edited)
            vouched = reparse_attempt(edited, last_clean)
            if isinstance(vouched, SyntaxError):
                errors += 1
                assert _whole(edited) == _error_of(vouched), script.name
            elif vouched is not None:
                assert _whole(edited) == _dump(vouched), script.name
            parsed = parse_source(edited, str(script))
            if _clean(parsed):
                last_clean = parsed
    assert errors > 100


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # Lines indented into the function above: they join it (the whole file parses).
        ("def f():\n    pass\n\nx = 1\nz = 2\n", "def f():\n    pass\n    y = (\n    1)\nx = 1\nz = 2\n"),
        # A level the function above has not: "unindent does not match", not "unexpected indent".
        ("def f():\n    pass\n\nx = 1\n", "def f():\n    pass\n  y = 2\n  w = 3\nx = 1\n"),
        # The `if` above's `else:` (the whole file parses).
        ("if a:\n    b = 1\n\nx = 1\n", "if a:\n    b = 1\nelse:\n    c = 2\nx = 1\nz = 3\n"),
        # A backslash line joining the next one, inside the function's indentation levels.
        ("def f():\n    pass\n\nx = 1\n", "def f():\n    pass\n \\\nx = 1\ny = 2\n"),
    ],
    ids=["joins the function above", "no level of the function above", "the if's else", "backslash"],
)
def test_an_error_the_rest_of_the_file_could_change_is_not_vouched_for(before, after):
    # The part's own error would differ from the whole file's here (or the whole file parses).
    vouched = reparse_attempt(after, parse_source(before, "t.py"))
    assert not isinstance(vouched, SyntaxError), _error_of(vouched)
    assert vouched is None or _whole(after) == _dump(vouched)


PASTED = ["x = batch[\n", "y = f(a,\n    b\n", "z = {1: (2,\n", "\n\nw = [\n"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.name)
def test_lines_pasted_with_a_bracket_open_are_repaired_as_from_a_whole_parse(script):
    # The line count changes: the statements after the paste are found where they moved to, and the
    # repair that stops its bracket search at them gives what repairing the whole text gives.
    text = script.read_text(encoding="utf-8")
    previous = parse_source(text, str(script))
    lines = text.splitlines(keepends=True)
    rng = random.Random("pasted " + script.name)
    stopped = 0
    for _ in range(12):
        at = rng.randrange(len(lines))
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        pasted = rng.choice(PASTED).splitlines(keepends=True)
        paste = "".join(indent + line if line.strip() else line for line in pasted)
        edited = "".join([*lines[: at + 1], paste, *lines[at + 1 :]])
        normal = normalize_text(edited)
        starts = trailing_starts(normal, previous)
        moved = normal.count("\n") - text.count("\n")
        new_lines = normal.splitlines(keepends=True)
        assert all(new_lines[start] == lines[start - moved] and start > at + moved for start in starts)
        stopped += bool(starts)
        quick = parse_source(
            edited, str(script), _from(previous), settled_lines(normal, previous), starts
        )
        whole = parse_source(edited, str(script))
        assert _dump(quick.tree) == _dump(whole.tree)
        assert (quick.repaired_lines, quick.closed_lines) == (whole.repaired_lines, whole.closed_lines)
        assert (quick.syntax_error, quick.syntax_problem) == (whole.syntax_error, whole.syntax_problem)
    assert stopped > 0


def test_typing_in_a_function_parses_only_that_function():
    text = (ROOT / "bench/scripts/realistic_train_300.py").read_text(encoding="utf-8")
    anchor = "        running += loss.item()\n"
    edited = text.replace(anchor, anchor + "        last = loss.detach()\n", 1)
    again = reparse(edited, "train.py", parse_source(edited.replace("loss.detach()", "loss"), "x"))
    assert again is not None and _dump(again.tree) == _dump(parse_source(edited, "x").tree)
    # Same line count as the text it started from: every other top-level statement is the same node.
    typed = reparse(edited.replace("loss.detach()", "loss.detach().float()"), "train.py", again)
    assert typed is not None
    kept = [now is before for now, before in zip(typed.tree.body, again.tree.body)]
    assert kept.count(False) == 1 and len(typed.tree.body) == len(again.tree.body)


def test_an_indented_line_after_a_function_joins_it_as_in_a_whole_parse():
    previous = parse_source("def f():\n    pass\n\nx = 1\n", "t.py")
    edited = "def f():\n    pass\n    y = 2\nx = 1\n"
    again = reparse(edited, "t.py", previous)
    assert again is None or _dump(again.tree) == _dump(parse_source(edited, "t.py").tree)
    assert len(parse_source(edited, "t.py").tree.body[0].body) == 2


def test_a_backslash_that_joins_the_next_statement_is_parsed_whole():
    previous = parse_source("x = 1 \\\n\ny = 2\n", "t.py")
    edited = "x = 1 \\\nz = 3\ny = 2\n"
    assert not _clean(parse_source(edited, "t.py"))
    assert reparse(edited, "t.py", previous) is None


def test_a_statement_typed_after_the_last_one_on_an_empty_line_is_parsed():
    previous = parse_source("x = 1\n\n", "t.py")
    again = reparse("x = 1\ny\n", "t.py", previous)
    assert again is not None and _dump(again.tree) == _dump(parse_source("x = 1\ny\n", "t.py").tree)
    assert len(again.tree.body) == 2


@pytest.mark.parametrize("name", ["realistic_train_300.py", "deepspeed_separate_setup.py"])
def test_an_edited_script_gets_the_findings_a_fresh_analysis_gives(tmp_path, monkeypatch, name):
    # What the server keeps between edits (the last clean parse, the syntax facts kept per node)
    # never changes an answer: each version, analysed after the ones before it, is analysed alone too.
    import fabric_ls.analysis.project as project_module

    reparsed: list[bool] = []

    def counting(text, path, previous):
        found = reparse(text, path, previous)
        reparsed.append(found is not None)
        return found

    monkeypatch.setattr(project_module, "reparse", counting)
    source = next(path for path in SCRIPTS if path.name == name).read_text(encoding="utf-8")
    script = tmp_path / "train.py"
    kept = Project([str(tmp_path)])
    versions = list(_edits(source, random.Random(name)))[::3]
    for edited in [source, *versions]:
        after_others = analyze_source(edited, str(script), project=kept)
        alone = analyze_source(edited, str(script), project=Project([str(tmp_path)]))
        assert [_finding(f) for f in after_others.findings] == [_finding(f) for f in alone.findings]
        assert after_others.syntax_error == alone.syntax_error
    assert reparsed.count(True) >= 3  # the kept Project did re-parse versions from earlier ones


def _finding(finding):
    return (finding.code, finding.span, finding.severity, finding.message, finding.condition)
