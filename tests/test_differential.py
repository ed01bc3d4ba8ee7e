"""Every rule sample, run with the real Lightning (only the machine is faked): the analyser
reports exactly the error Lightning raises, at the same line, and nothing where Lightning
runs clean; every fixed script runs clean under Lightning. A rule whose outcome is no raise of
Lightning's (a hang, a silent mistake: ``records.OUTCOMES``) proves that in its own test."""

from __future__ import annotations

from collections import defaultdict

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.records import get_record
from fabric_ls.rules import ALL_RULES, BY_ID
from fabric_ls.rules.common import Case

pytest.importorskip("lightning")
from lightning_harness import Script, run_many  # noqa: E402

SAMPLES: list[tuple[str, str, str, str]] = []  # (id, rule, kind, source); kind: valid | invalid | fixed
CASES: dict[str, Case] = {}
for module in ALL_RULES:
    if getattr(module, "DIFFERENTIAL_LIMIT", None):
        continue  # proven by its own test (tests/test_launch_rules_under_lightning.py)
    for index, source in enumerate(module.VALID):
        SAMPLES.append((f"{module.RULE}-valid{index}", module.RULE, "valid", source))
    for index, case in enumerate(module.INVALID):
        key = f"{module.RULE}-invalid{index}"
        CASES[key] = case
        SAMPLES.append((key, module.RULE, "invalid", case.source))
        if case.fixed is not None:
            SAMPLES.append((f"{module.RULE}-fixed{index}", module.RULE, "fixed", case.fixed))


def _interactive(rule: str) -> bool:
    """The rule's samples are notebook code: they run in an interactive session."""
    return bool(getattr(BY_ID[rule], "SAMPLES_INTERACTIVE", False))


def _profile(sample_id: str, source: str) -> str:
    key = sample_id.replace("-fixed", "-invalid")
    if key in CASES:
        return CASES[key].profile
    return "tpu8" if 'accelerator="tpu"' in source else "gpu8"


@pytest.fixture(scope="module")
def outcomes():
    by_profile: dict[str, list[tuple[str, Script]]] = defaultdict(list)
    for sample_id, rule, _kind, source in SAMPLES:
        script = Script(source, interactive=_interactive(rule))
        by_profile[_profile(sample_id, source)].append((sample_id, script))
    results = {}
    for profile, items in by_profile.items():
        for (sample_id, _), outcome in zip(
            items, run_many([s for _, s in items], profile=profile, timeout=60)
        ):
            results[sample_id] = outcome
    return results


def _analyser(tmp_path, source, rule):
    script = tmp_path / "train.py"
    analysis = analyze_source(source, str(script), interactive=_interactive(rule))
    return [(f.code, f.span.start_line + 1) for f in analysis.findings]


@pytest.mark.parametrize("sample_id,rule,kind,source", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_analyser_agrees_with_lightning(tmp_path, outcomes, sample_id, rule, kind, source):
    outcome = outcomes[sample_id]
    found = _analyser(tmp_path, source, rule)
    if kind in ("valid", "fixed"):
        assert outcome.error_class is None, f"Lightning raised {outcome.error_class}: {outcome.message}"
        assert found == []
        return
    record = get_record(rule)
    if not record.lightning_raises:
        # A hang, a silent mistake or a raise outside Lightning (records.OUTCOMES): the harness
        # shows no raise at the main site (the rule's own proof test runs the real outcome); if
        # Lightning raises, it is at one of the record's other sites.
        assert found == [(rule, CASES[sample_id].line)], found
        if outcome.error_class is not None:
            site = record.main_site
            if outcome.lightning_site == f"{site.file_path[len('src/') :]}:{site.line_number}":
                # Python itself raises at the site, inside Lightning (FAB039: a string read as a dict;
                # FAB040: torch's ``__getattr__`` called there).
                assert (outcome.error_class, outcome.line) == (record.error_class, CASES[sample_id].line)
            else:
                assert outcome.raised_by_lightning, outcome.stderr_tail
                assert outcome.error_class in {s.error_class for s in record.other_sites}, outcome.message
        return
    assert outcome.raised_by_lightning, outcome.stderr_tail
    assert outcome.error_class in {record.error_class, *(s.error_class for s in record.other_sites)}
    assert found == [(rule, outcome.line)], (
        f"Lightning: {outcome.error_class} at line {outcome.line}: {outcome.message}"
    )
