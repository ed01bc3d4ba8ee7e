"""Every rule's own samples: VALID scripts get nothing, INVALID ones get the rule at its line,
and the fix turns them into the fixed script, which the rule no longer flags."""

from __future__ import annotations

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.fixes import apply_edits
from fabric_ls.rules import ALL_RULES, BY_ID

VALID = [(m.RULE, i, src) for m in ALL_RULES for i, src in enumerate(m.VALID)]
INVALID = [(m.RULE, i, case) for m in ALL_RULES for i, case in enumerate(m.INVALID)]


def _interactive(rule: str) -> bool:
    """The rule's samples are notebook code (``SAMPLES_INTERACTIVE``)."""
    return bool(getattr(BY_ID[rule], "SAMPLES_INTERACTIVE", False))


@pytest.mark.parametrize("rule,index,source", VALID, ids=[f"{r}-valid{i}" for r, i, _ in VALID])
def test_valid_sample_is_quiet(tmp_path, rule, index, source):
    script = tmp_path / "train.py"
    analysis = analyze_source(source, str(script), interactive=_interactive(rule))
    assert [(f.code, f.span.start_line + 1) for f in analysis.findings] == []


@pytest.mark.parametrize("rule,index,case", INVALID, ids=[f"{r}-invalid{i}" for r, i, _ in INVALID])
def test_invalid_sample_is_flagged_and_fixed(tmp_path, rule, index, case):
    script = tmp_path / "train.py"
    analysis = analyze_source(case.source, str(script), interactive=_interactive(rule))
    found = [(f.code, f.span.start_line + 1) for f in analysis.findings]
    assert (rule, case.line) in found
    assert all(code == rule for code, _ in found), found
    finding = next(f for f in analysis.findings if f.code == rule)
    assert finding.severity in ("error", "warning")
    if case.fixed is None:
        return
    assert finding.fix is not None, "this sample expects a fix"
    fixed = apply_edits(case.source, finding.fix.edits)
    assert fixed == case.fixed
    again = analyze_source(fixed, str(script), interactive=_interactive(rule))
    assert rule not in [f.code for f in again.findings]


def test_each_rule_is_checked_on_exactly_the_calls_it_declares():
    from fabric_ls.rules import CHECK_ORDER

    for module in ALL_RULES:
        checked_on = {method for method, order in CHECK_ORDER.items() if module.RULE in order}
        assert checked_on == set(module.METHODS), module.RULE


def test_rules_sharing_a_call_have_a_place_in_lightnings_order():
    # Which of two checks on one call Lightning runs first decides the error the user sees:
    # that must be written down (rules.LIGHTNING_ORDER), never left to the rule ids.
    from fabric_ls.rules import CHECK_ORDER, LIGHTNING_ORDER

    for method, order in CHECK_ORDER.items():
        if len(order) > 1:
            unplaced = [rule for rule in order if rule not in LIGHTNING_ORDER]
            assert not unplaced, f"{method}: add {unplaced} to LIGHTNING_ORDER in fabric_ls/rules/__init__.py"


def test_variant_messages_quote_lightning_from_the_record(tmp_path):
    case = next(m for m in ALL_RULES if m.RULE == "FAB015").INVALID[1]
    (finding,) = analyze_source(case.source, str(tmp_path / "train.py")).findings
    assert "`setup_optimizers` requires at least one optimizer as input." in finding.message
