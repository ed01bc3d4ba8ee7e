"""Mutated scripts: the engine never raises, answers within 2 s, and every fix it offers is sound.

Deterministic loops mutate every position of the seed scripts (examples, rule samples, the
realistic scripts in ``tests/fuzz_corpus``); hypothesis then combines mutations with a fixed budget
and a fixed seed (``derandomize=True``), so CI runs the same cases every time. The invariants
themselves are in ``fuzz_support.examine``; ``bench/fuzz.py`` runs the same checks for longer.
"""

from __future__ import annotations

import fuzz_support as fs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_ls.analysis.strategies import MATRIX_NAMES
from fabric_ls.engine import analyze_source, portability
from fabric_ls.model import Finding, Fix, Span, TextEdit
from fabric_ls.settings import Settings

SEEDS = fs.seeds()
EXAMPLES = fs.example_seeds()
# Small scripts with a fix each: the rule samples that expect one, and the examples that offer one.
FIXABLE = [seed for seed in SEEDS if any(f.fix for f in analyze_source(seed.source, seed.path).findings)]

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def assert_sound(source: str, path: str, label: str) -> None:
    report = fs.examine(source, path)
    assert not report.problems, (
        f"{label}\n--- script ---\n{fs.show(source)}\n--- problems ---\n{fs.describe(report.problems)}"
    )


def assert_family_sound(seed: fs.Seed, variants, family: str) -> None:
    problems = []
    for index, source in enumerate(variants):
        report = fs.examine(source, seed.path)
        if report.problems:
            problems.append((index, source, report.problems))
    if problems:
        index, source, found = problems[0]
        pytest.fail(
            f"{len(problems)} {family} variants of {seed.name} break an invariant; "
            f"the first (variant {index}):\n--- script ---\n{fs.show(source)}\n"
            f"--- problems ---\n{fs.describe(found)}"
        )


def ids(seeds: list[fs.Seed]) -> list[str]:
    return [seed.name for seed in seeds]


def test_the_seeds_exercise_fixes():
    # The fix invariants only mean something if mutated scripts still get fixes.
    assert len(FIXABLE) >= 15, [seed.name for seed in FIXABLE]
    assert len(SEEDS) >= 60


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_seed_scripts(seed):
    assert_sound(seed.source, seed.path, seed.name)


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_every_line_deleted(seed):
    assert_family_sound(seed, fs.every_line_deleted(seed.source), "line-deleted")


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_every_line_duplicated(seed):
    assert_family_sound(seed, fs.every_line_duplicated(seed.source), "line-duplicated")


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_every_adjacent_pair_swapped(seed):
    assert_family_sound(seed, fs.every_adjacent_swap(seed.source), "lines-swapped")


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_indentation_changed(seed):
    # One variant per line, in turn: one space more, all indentation removed, spaces made tabs.
    variants = list(fs.every_reindent(seed.source))[:: 3 if seed not in FIXABLE else 1]
    assert_family_sound(seed, variants, "re-indented")


@pytest.mark.parametrize("seed", EXAMPLES + FIXABLE[:8], ids=ids(EXAMPLES + FIXABLE[:8]))
def test_truncated_at_every_point(seed):
    assert_family_sound(seed, fs.every_truncation(seed.source), "truncated")


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_truncated_at_every_line(seed):
    lines = fs.split_lines(seed.source)
    variants = ["".join(lines[:n]) + lines[n][: len(lines[n]) // 2] for n in range(len(lines))]
    assert_family_sound(seed, variants, "truncated mid-line")


@pytest.mark.parametrize("seed", SEEDS, ids=ids(SEEDS))
def test_random_bytes_inserted(seed):
    assert_family_sound(
        seed, fs.random_byte_insertions(seed.source, 20, seed=len(seed.source)), "byte-inserted"
    )


MUTATION = st.builds(
    fs.Mutation,
    kind=st.sampled_from(fs.KINDS),
    where=st.integers(0, 1 << 20),
    other=st.integers(0, 1 << 20),
    data=st.binary(min_size=1, max_size=6),
)


@FUZZ
@given(seed=st.sampled_from(SEEDS), mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_combined_mutations(seed, mutations):
    source = fs.apply_all(seed.source, mutations)
    assert_sound(source, seed.path, f"{seed.name} after {mutations}")


@FUZZ
@given(seed=st.sampled_from(FIXABLE), mutations=st.lists(MUTATION, min_size=1, max_size=2))
def test_mutated_scripts_with_fixes(seed, mutations):
    source = fs.apply_all(seed.source, mutations)
    assert_sound(source, seed.path, f"{seed.name} after {mutations}")


# Any code point, lone surrogates included: an editor can hand the server such a string.
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)


@FUZZ
@given(seed=st.sampled_from(FIXABLE), where=st.integers(0, 1 << 20), text=ANY_TEXT)
def test_arbitrary_text_inserted(seed, where, text):
    source = fs.insert_text(seed.source, where, text)
    assert_sound(source, seed.path, f"{seed.name} with {text!r} at {where}")


PYTHONISH = st.lists(
    st.sampled_from(fs.FRAGMENTS + ("x", "model", "optimizer", "fabric", "torch", "1", " ", "\n")),
    max_size=40,
).map("".join)


@FUZZ
@given(prefix=PYTHONISH, seed=st.sampled_from(FIXABLE))
def test_token_soup_before_a_script(prefix, seed):
    assert_sound(prefix + seed.source, seed.path, f"{seed.name} after {prefix!r}")


ASSUMED = st.sampled_from(MATRIX_NAMES)


@settings(FUZZ, max_examples=60)
@given(seed=st.sampled_from(SEEDS), mutations=st.lists(MUTATION, max_size=3), assumed=ASSUMED)
def test_mutated_scripts_under_an_assumed_strategy(seed, mutations, assumed):
    # The `strategy` setting (the CLI's --strategy) makes more rules reachable in scripts that leave
    # the strategy to `fabric run`.
    source = fs.apply_all(seed.source, mutations)

    def analyzer(text: str, path: str):
        return analyze_source(text, path, Settings(strategy=assumed))

    report = fs.examine(source, seed.path, analyzer=analyzer)
    assert not report.problems, f"{seed.name} after {mutations}\n{fs.describe(report.problems)}"


@settings(FUZZ, max_examples=25)
@given(seed=st.sampled_from(FIXABLE), mutations=st.lists(MUTATION, max_size=3))
def test_portability_matrix_of_mutated_scripts(seed, mutations):
    source = fs.apply_all(seed.source, mutations)
    matrix = portability(source, seed.path)
    assert set(matrix) == set(MATRIX_NAMES)
    starts = fs.line_starts(source)
    for findings in matrix.values():
        for finding in findings:
            assert fs.span_problem(source, starts, finding.span) is None, finding


# ----- the checker of the checker -----------------------------------------------------------


def test_examine_reports_a_fix_that_does_not_parse():
    source = "x = 1\n"
    bad = Fix("break it", (TextEdit(Span(0, 0, 0, 1), "("),), True)

    def analyzer(text: str, path: str):
        analysis = analyze_source(text, path)
        if text == source:
            analysis.findings.append(Finding("FAB016", path, Span(0, 0, 0, 5), "error", "m", "s", fix=bad))
        return analysis

    problems = fs.examine(source, "<fuzz>", analyzer=analyzer).problems
    assert [p.kind for p in problems] == ["fix"], problems
    assert "does not parse" in problems[0].detail


def test_examine_reports_a_fix_that_leaves_the_finding():
    source = "x = 1\n"
    noop = Fix("do nothing", (TextEdit(Span(0, 4, 0, 5), "1"),), True)

    def analyzer(text: str, path: str):
        analysis = analyze_source(text, path)
        analysis.findings.append(Finding("FAB016", path, Span(0, 4, 0, 5), "error", "m", "s", fix=noop))
        return analysis

    problems = fs.examine(source, "<fuzz>", analyzer=analyzer).problems
    assert len(problems) == 2 and all(p.kind == "fix" for p in problems), problems
    assert "fires again" in problems[0].detail and "went from 1 to 1" in problems[1].detail


def test_examine_reports_fixes_that_break_the_script_together():
    source = "x = 1\n"
    parens = Fix("parens", (TextEdit(Span(0, 4, 0, 4), "("), TextEdit(Span(0, 5, 0, 5), ")")), True)
    brackets = Fix("brackets", (TextEdit(Span(0, 4, 0, 4), "["), TextEdit(Span(0, 5, 0, 5), "]")), True)

    def analyzer(text: str, path: str):
        analysis = analyze_source(text, path)
        if text == source:
            for fix in (parens, brackets):
                analysis.findings.append(
                    Finding("FAB016", path, Span(0, 4, 0, 5), "error", "m", "s", fix=fix)
                )
        return analysis

    problems = fs.examine(source, "<fuzz>", analyzer=analyzer).problems
    assert [p.kind for p in problems] == ["fix"], problems
    assert "applied together do not parse" in problems[0].detail


def test_examine_reports_crashes_timeouts_and_bad_spans():
    def crashing(text: str, path: str):
        raise RuntimeError("boom")

    assert [p.kind for p in fs.examine("x = 1\n", "<fuzz>", analyzer=crashing).problems] == ["crash"]

    def outside(text: str, path: str):
        analysis = analyze_source(text, path)
        analysis.findings.append(Finding("FAB016", path, Span(0, 2, 0, 9), "error", "m", "s"))
        return analysis

    problems = fs.examine("x = 1\n", "<fuzz>", analyzer=outside).problems
    assert [p.kind for p in problems] == ["span"] and "past the end of line 0" in problems[0].detail
    assert [p.kind for p in fs.examine("x = 1\n", "<fuzz>", time_limit=-1.0).problems] == ["timeout"]


def test_mutations_keep_their_promises():
    source = "a\nb\r\nc"
    assert fs.delete_line(source, 1) == "a\nc"
    assert fs.duplicate_line(source, 2) == "a\nb\r\nc\nc"
    assert fs.swap_lines(source, 0, 2) == "c\nb\r\na"
    assert fs.truncate(source, 3) == "a\nb"
    assert fs.reindent("  x\n", 0, 2) == "    x\n" and fs.reindent("  x\n", 0, -5) == "x\n"
    assert fs.tabify("         x\n", 0) == "\t\t x\n"
    assert fs.insert_bytes("ab", 1, b"\xff") == "a\ufffdb"
    assert len(list(fs.every_truncation("abc"))) == 4
    assert fs.map_offset(5, [(1, 3, "xyz")], at_end=False) == 6
    assert fs.map_offset(2, [(1, 3, "xyz")], at_end=True) == 4


def test_a_lone_surrogate_inside_a_finding_is_read_as_the_engine_reads_it():
    # bench/fuzz.py once flagged these: the engine parses a lone surrogate as U+FFFD (ast refuses it),
    # so the checker reads the text under the span the same way before calling it "not code".
    source = (
        "from lightning.fabric import Fabric\n\n"
        'fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp\ud800")\n'
    )
    analysis = analyze_source(source, "train.py")
    assert [f.code for f in analysis.findings] == ["FAB021"]
    assert_sound(source, "train.py", "a lone surrogate in a strategy name")
