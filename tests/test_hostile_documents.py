"""Documents an editor really sends: half-typed lines, huge files, absurd nesting, bytes that are
not UTF-8, lone surrogates, NUL bytes, CRLF, tabs and characters outside the BMP.

The engine must not raise, must answer quickly, must keep the findings on what still parses, must
invent nothing, and its spans must cover exactly the code they name (columns in code points).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import fuzz_support as fs
import pytest

from fabric_ls.engine import MAX_FILE_BYTES, analyze_file, analyze_source
from fabric_ls.fixes import apply_edits
from fabric_ls.model import Analysis, Span

ROOT = Path(__file__).resolve().parent.parent
DEEPSPEED = (ROOT / "examples" / "deepspeed_separate_setup.py").read_text()
# Line 13 (0-based 12) of the example, and the call FAB001 sits on.
SETUP_OPTIMIZERS_LINE = 12
SETUP_OPTIMIZERS_CALL = "fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=1e-3))"
LOSS_BACKWARD = (ROOT / "examples" / "loss_backward.py").read_text()

# A short module-level script with one FAB001 on its last line and a fix.
SCRIPT = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
SCRIPT_CALL = "fabric.setup_optimizers(torch.optim.Adam(model.parameters()))"


def text_at(source: str, span: Span) -> str:
    """The text a span covers, read through the document's lines as an editor splits them."""
    lines = [line for line in fs.split_lines(source)]
    if span.start_line == span.end_line:
        return lines[span.start_line].rstrip("\r\n")[span.start_col : span.end_col]
    parts = [lines[span.start_line][span.start_col :]]
    parts += lines[span.start_line + 1 : span.end_line]
    parts.append(lines[span.end_line][: span.end_col])
    return "".join(parts)


def analyse(source: str, path: str = "/nonexistent/fabric_ls_hostile/train.py") -> Analysis:
    analysis = analyze_source(source, path)
    # The work is bounded by the step budget (counted, so the test holds on a busy machine).
    assert analysis.steps <= fs.MAX_WORK, f"the analysis took {analysis.steps} steps"
    return analysis


def found(analysis: Analysis) -> list[tuple[str, int]]:
    return [(f.code, f.span.start_line) for f in analysis.findings]


def replace_line(source: str, line0: int, text: str) -> str:
    lines = fs.split_lines(source)
    ending = lines[line0][len(lines[line0].rstrip("\r\n")) :]
    lines[line0] = text + ending
    return "".join(lines)


def assert_fix_sound(source: str, analysis: Analysis) -> None:
    report = fs.examine(source, analysis.path)
    assert not report.problems, fs.describe(report.problems)


# ----- syntax errors mid-typing ----------------------------------------------------------


@pytest.mark.parametrize(
    "typed",
    [
        "    optimizer = fabric.setup_optimi",
        "    optimizer = fabric.setup_optimizers(",
        "    optimizer = fabric.setup_optimizers(torch.optim.AdamW(",
        "    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters(), lr=1e-3)",
        "    optimizer = fabric.",
        "    optimizer = ",
        "    optimizer",
    ],
)
def test_half_typed_call_gets_no_finding_on_another_line(typed):
    analysis = analyse(replace_line(DEEPSPEED, SETUP_OPTIMIZERS_LINE, typed))
    # The call being typed is either not reported yet, or reported on the line being typed.
    assert set(found(analysis)) <= {("FAB001", SETUP_OPTIMIZERS_LINE)}, found(analysis)


def test_every_prefix_of_every_fabric_line_invents_nothing():
    """While a line is being typed, findings come from the file without that line or with it whole.

    For each example line that mentions Fabric, every prefix of it is analysed; a finding that
    neither the blank line nor the complete line produces is invented by the syntax-error repair.
    """
    invented = []
    for seed in fs.example_seeds() + fs.corpus_seeds()[:3]:
        lines = fs.split_lines(seed.source)
        whole = set(found(analyse(seed.source, seed.path)))
        for index, line in enumerate(lines):
            body = line.rstrip("\r\n")
            if "fabric" not in body.lower():
                continue
            blank = set(found(analyse(replace_line(seed.source, index, ""), seed.path)))
            indent = len(body) - len(body.lstrip())
            for end in range(indent + 1, len(body), 2):
                typed = replace_line(seed.source, index, body[:end])
                extra = set(found(analyse(typed, seed.path))) - whole - blank
                if extra:
                    invented.append((seed.name, index + 1, body[:end], sorted(extra)))
    assert not invented, invented[:10]


def test_a_broken_line_keeps_the_findings_of_what_still_parses():
    source = DEEPSPEED.replace("    for _ in range(10):", "    for _ in range(10)  # colon not typed yet")
    analysis = analyse(source)
    assert analysis.syntax_error is not None
    assert found(analysis) == [("FAB001", SETUP_OPTIMIZERS_LINE)]
    assert text_at(source, analysis.findings[0].span) == SETUP_OPTIMIZERS_CALL


def test_a_broken_line_above_keeps_the_finding_below_at_its_line():
    source = SCRIPT.replace("import torch\n", "import torch as\n")
    analysis = analyse(source)
    assert analysis.syntax_error is not None
    assert found(analysis) == [("FAB001", 7)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


def test_an_unclosed_bracket_after_the_finding_keeps_it():
    source = SCRIPT + "losses = [\n"
    analysis = analyse(source)
    assert analysis.syntax_error is not None
    assert found(analysis) == [("FAB001", 7)]


def test_fixes_on_a_broken_file_touch_only_the_lines_that_parse():
    source = SCRIPT + "for step in range(:\n"
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert finding.fix is not None
    fixed = apply_edits(source, finding.fix.edits)
    assert fixed.endswith("for step in range(:\n")
    assert "model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))\n" in fixed


# ----- size --------------------------------------------------------------------------------


def test_a_5_mb_file_is_skipped_quickly_and_says_why():
    filler = "# " + "x" * 97 + "\n"
    source = SCRIPT + filler * (5_100_000 // len(filler))
    assert len(source.encode()) > 5_000_000
    analysis = analyze_source(source, "/nonexistent/fabric_ls_hostile/big.py")
    assert analysis.steps <= fs.MAX_WORK
    assert analysis.findings == []
    assert any("larger than" in note and "not analysed" in note for note in analysis.notes), analysis.notes


def test_a_5_mb_file_on_disk_through_analyze_file(tmp_path):
    path = tmp_path / "big.py"
    path.write_text(SCRIPT + "y = 1\n" * 1_000_000)
    analysis = analyze_file(str(path))
    assert analysis.steps <= fs.MAX_WORK
    assert any("not analysed" in note for note in analysis.notes), analysis.notes


def test_a_large_file_of_comments_under_the_limit_is_analysed():
    filler = "# " + "x" * 97 + "\n"
    source = SCRIPT + filler * ((MAX_FILE_BYTES - len(SCRIPT) - 1000) // len(filler))
    analysis = analyze_source(source, "/nonexistent/fabric_ls_hostile/big.py")
    assert analysis.steps <= fs.MAX_WORK
    assert found(analysis) == [("FAB001", 7)]


_BOUNDED_ANALYSIS = """
import sys
from fabric_ls.engine import analyze_source
source = sys.stdin.read()
analysis = analyze_source(source, "/nonexistent/fabric_ls_hostile/big.py")
print(analysis.steps, len(analysis.findings), analysis.notes)
"""


def test_a_large_file_of_code_under_the_limit_is_analysed_within_the_budget():
    # In a subprocess: an engine that hung would cost this test its generous time-out, not the suite.
    source = SCRIPT + "print(1)\n" * ((MAX_FILE_BYTES - len(SCRIPT) - 1000) // 9)
    try:
        result = subprocess.run(
            [sys.executable, "-c", _BOUNDED_ANALYSIS],
            input=source,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("analysing a file of code just under the size limit did not end in 300 s")
    assert result.returncode == 0, result.stderr
    steps = int(result.stdout.split()[0])
    assert steps <= fs.MAX_WORK, result.stdout


# ----- nesting -----------------------------------------------------------------------------

DEPTH = 10_000
DEEP_EXPRESSIONS = {
    "parentheses": "(" * DEPTH + "1" + ")" * DEPTH,
    "additions": "+".join(["a"] * DEPTH),
    "lists": "[" * DEPTH + "]" * DEPTH,
    "calls": "f(" * DEPTH + ")" * DEPTH,
    "attributes": "a" + ".b" * DEPTH,
    "unary minus": "-" * DEPTH + "1",
    "conditional expressions": "1 if a else " * DEPTH + "2",
}


@pytest.mark.parametrize("kind", DEEP_EXPRESSIONS)
def test_deep_nesting_neither_crashes_nor_hangs_and_says_why(kind):
    source = SCRIPT + "x = " + DEEP_EXPRESSIONS[kind] + "\n"
    analysis = analyse(source)
    if found(analysis) != [("FAB001", 7)]:
        # Findings may be lost only with a reason.
        assert analysis.syntax_error or analysis.notes, found(analysis)


@pytest.mark.parametrize(
    "kind",
    [
        "parentheses",
        "lists",
        "calls",
        "additions",
        "attributes",
        "unary minus",
        "conditional expressions",
    ],
)
def test_deep_nesting_on_one_line_keeps_the_findings_elsewhere(kind):
    source = SCRIPT + "x = " + DEEP_EXPRESSIONS[kind] + "\n"
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", 7)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


def test_a_deep_expression_inside_main_keeps_later_findings_or_says_so():
    deep = "    x = " + "+".join(["a"] * 500) + "\n"
    source = DEEPSPEED.replace("    fabric.launch()\n", "    fabric.launch()\n" + deep)
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", SETUP_OPTIMIZERS_LINE + 1)] or analysis.notes, (
        found(analysis),
        analysis.notes,
    )


def test_deeply_nested_blocks():
    body = "".join(" " * i + "if x:\n" for i in range(99)) + " " * 99 + "pass\n"
    analysis = analyse(SCRIPT + body)
    assert found(analysis) == [("FAB001", 7)]


# ----- encodings and odd characters --------------------------------------------------------


def test_bytes_that_are_not_utf8_decoded_with_replace(tmp_path):
    raw = SCRIPT.encode().replace(b"import torch\n", b"import torch  # caf\xe9 \xff\xfe\x80\n")
    raw = raw.replace(b"fabric.launch()", b'fabric.launch(); note = "\xc3\x28\xa0"')
    path = tmp_path / "train.py"
    path.write_bytes(raw)
    source = raw.decode("utf-8", errors="replace")
    for analysis in (analyze_file(str(path)), analyse(source, str(path))):
        assert found(analysis) == [("FAB001", 7)], found(analysis)
        assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL
    assert_fix_sound(source, analyse(source, str(path)))


def test_a_latin1_file_with_a_coding_cookie(tmp_path):
    text = "# -*- coding: latin-1 -*-\n# Größe: ½\n" + SCRIPT.replace(
        "model = torch", "modèle = 1; model = torch"
    )
    path = tmp_path / "train.py"
    path.write_bytes(text.encode("latin-1"))
    analysis = analyze_file(str(path))
    source = path.read_bytes().decode("utf-8", errors="replace")
    assert found(analysis) == [("FAB001", 9)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


@pytest.mark.parametrize("where", ["comment", "string", "call line"])
def test_lone_surrogates_do_not_crash(where):
    source = {
        "comment": SCRIPT.replace("import torch\n", "import torch  # \ud800\n"),
        "string": SCRIPT.replace("fabric.launch()", "fabric.launch(); s = '\udcff'"),
        "call line": SCRIPT.replace("optimizer = ", "s = '\udfff'; optimizer = "),
    }[where]
    analysis = analyse(source)
    assert all(f.code == "FAB001" for f in analysis.findings)


@pytest.mark.parametrize(
    "where",
    [
        "comment",
        "string",
        "call line",
    ],
)
def test_lone_surrogates_keep_the_findings(where):
    source = {
        "comment": SCRIPT.replace("import torch\n", "import torch  # \ud800\n"),
        "string": SCRIPT.replace("fabric.launch()", "fabric.launch(); s = '\udcff'"),
        "call line": SCRIPT.replace("optimizer = ", "s = '\udfff'; optimizer = "),
    }[where]
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", 7)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


@pytest.mark.parametrize(
    "source",
    [
        SCRIPT.replace("import torch\n", "import torch  # \x00\n"),
        SCRIPT.replace("fabric.launch()", "fabric.launch(); s = '\x00\x00'"),
        SCRIPT.replace("optimizer = ", "\x00optimizer = "),
        SCRIPT.replace("optimizer = ", "optimizer =\x00"),
        "\x00" * 10 + "\n" + SCRIPT,
    ],
    ids=["comment", "string", "line start", "after =", "own line"],
)
def test_nul_bytes(source):
    analysis = analyse(source)
    for finding in analysis.findings:
        assert finding.code == "FAB001"
        assert text_at(source, finding.span) == SCRIPT_CALL
    if "# \x00" in source or "'\x00" in source:
        assert len(analysis.findings) == 1
    assert_fix_sound(source, analysis)


def test_crlf_spans_are_exact_and_the_fix_keeps_crlf():
    source = DEEPSPEED.replace("\n", "\r\n")
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert finding.span.start_line == SETUP_OPTIMIZERS_LINE
    assert text_at(source, finding.span) == SETUP_OPTIMIZERS_CALL
    fixed = apply_edits(source, finding.fix.edits)
    assert fixed.count("\n") == fixed.count("\r\n")
    assert "    model, optimizer = fabric.setup(model, torch.optim.AdamW(" in fixed
    assert_fix_sound(source, analysis)


@pytest.mark.parametrize("ending", ["\r\n", "\r", "\n"])
def test_line_endings_with_a_syntax_error_before_the_finding(ending):
    lines = SCRIPT.splitlines()
    lines.insert(5, "x = = 1")
    source = ending.join(lines) + ending
    analysis = analyse(source)
    assert analysis.syntax_error is not None
    assert found(analysis) == [("FAB001", 8)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


@pytest.mark.parametrize("broken", ["x = )\r = 1", "x = )\r    y = 1"], ids=["operator", "indented"])
def test_a_bare_cr_inside_a_broken_line_keeps_the_lines_below_in_place(broken):
    # Found by bench/fuzz.py: random bytes "F\xd2\r" inserted into a rule sample.
    source = SCRIPT.replace("model = torch.nn.Linear(4, 2)", broken)
    analysis = analyse(source)
    assert analysis.syntax_error is not None
    assert found(analysis) == [("FAB001", 8)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


def test_mixed_line_endings():
    lines = SCRIPT.splitlines(keepends=True)
    source = "".join(line.replace("\n", ending) for line, ending in zip(lines, ["\r\n", "\n", "\r"] * 9))
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", 7)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL
    assert_fix_sound(source, analysis)


def test_tab_indentation_spans_are_exact():
    source = DEEPSPEED.replace("    ", "\t")
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert finding.span.start_line == SETUP_OPTIMIZERS_LINE
    assert finding.span.start_col == len("\toptimizer = ")
    assert text_at(source, finding.span) == SETUP_OPTIMIZERS_CALL
    fixed = apply_edits(source, finding.fix.edits)
    assert "\tmodel, optimizer = fabric.setup(model," in fixed
    assert_fix_sound(source, analysis)


def test_tabs_inside_a_line_before_the_call():
    source = SCRIPT.replace("optimizer = fabric", "optimizer\t=\t\tfabric")
    analysis = analyse(source)
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL
    assert analysis.findings[0].span.start_col == len("optimizer\t=\t\t")


@pytest.mark.parametrize(
    "prefix",
    [
        "größe = 𝛉 = 1; ",
        'label = "🎉🔥"; ',
        "x = '👩\u200d👩\u200d👧'; ",
        "𝓍 = 'é'; ",
        "s = '\u4e2d\u6587'; ",
    ],
    ids=["latin-and-math", "emoji", "zwj-sequence", "math-identifier", "cjk"],
)
def test_non_bmp_characters_before_the_call_on_the_same_line(prefix):
    source = SCRIPT.replace("optimizer = fabric", prefix + "optimizer = fabric")
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert finding.span.start_col == len(prefix + "optimizer = ")
    assert finding.span.end_col == finding.span.start_col + len(SCRIPT_CALL)
    assert text_at(source, finding.span) == SCRIPT_CALL
    assert_fix_sound(source, analysis)


def test_emoji_before_loss_backward_fix_uses_the_right_text():
    source = LOSS_BACKWARD.replace("    loss.backward()", '    tag = "🚀𝛉"; loss.backward()')
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert finding.code == "FAB016"
    assert text_at(source, finding.span) == "loss.backward()"
    fixed = apply_edits(source, finding.fix.edits)
    assert '    tag = "🚀𝛉"; fabric.backward(loss)\n' in fixed


UNICODE_LINE_BREAKS = {
    "form feed": "\x0c",
    "vertical tab": "\x0b",
    "file separator": "\x1c",
    "next line": "\x85",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
}


@pytest.mark.parametrize("name", UNICODE_LINE_BREAKS)
def test_characters_str_splitlines_breaks_at_do_not_shift_lines(name):
    # Python ends lines only at \r\n, \r and \n; these characters are legal in comments and strings.
    char = UNICODE_LINE_BREAKS[name]
    source = LOSS_BACKWARD.replace("import torch\n", f"import torch  # {char} é\n")
    analysis = analyse(source)
    (finding,) = analysis.findings
    assert text_at(source, finding.span) == "loss.backward()"
    assert finding.fix is not None
    assert finding.fix.edits[0].new_text == "fabric.backward(loss)"


def test_form_feed_between_top_level_blocks():
    # PEP 8 allows a form feed on its own line between sections.
    source = DEEPSPEED.replace("\n\n\ndef main", "\n\n\x0c\ndef main")
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", SETUP_OPTIMIZERS_LINE)]


def test_a_byte_order_mark_at_the_start():
    source = "\ufeff" + SCRIPT
    analysis = analyse(source)
    assert found(analysis) == [("FAB001", 7)]
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


def test_empty_and_whitespace_only_documents():
    for source in ["", "\n", "\r\n", "   ", "\t\n\t", "\x00", "\ufeff", "#", "\\", "'''", "(", ")"]:
        analysis = analyse(source)
        assert analysis.findings == []


def test_very_long_single_line():
    source = SCRIPT.replace("optimizer = fabric", "x = '" + "y" * 200_000 + "'; optimizer = fabric")
    analysis = analyse(source)
    assert analysis.findings[0].span.start_col == len("x = '" + "y" * 200_000 + "'; optimizer = ")
    assert text_at(source, analysis.findings[0].span) == SCRIPT_CALL


def test_text_at_reads_lines_like_an_editor():
    source = textwrap.dedent("a\r\nbc\rdef\n")
    assert text_at(source, Span(2, 1, 2, 3)) == "ef"
    assert text_at(source, Span(0, 0, 1, 2)) == "a\r\nbc"


def test_strings_a_script_asks_to_be_huge_are_not_built(tmp_path):
    """``"x" * 10**9`` and a field of width 999999999 would take gigabytes to build: the analysis
    leaves them unknown and goes on (peak memory stays small)."""
    import tracemalloc

    from fabric_ls.engine import analyze_source

    source = (
        'wide = "{:>999999999}".format(1)\nwider = f"{1:>999999999}"\npercent = "%999999999d" % 1\n'
        'repeated = "a" * 10**9\nimport torch\nfrom lightning.fabric import Fabric\n'
        'fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed" + "_stage_" + str(2))\n'
        "fabric.launch()\nmodel = fabric.setup_module(torch.nn.Linear(2, 2))\n"
        "optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))\n"
    )
    tracemalloc.start()
    try:
        findings = analyze_source(source, str(tmp_path / "train.py")).findings
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(f.code, f.span.start_line + 1) for f in findings] == [("FAB001", 10)]
    assert peak < 200 * 1024 * 1024, peak
