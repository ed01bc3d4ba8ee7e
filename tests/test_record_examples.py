"""Every record's ``exampleFix`` is a golden test: for each record with a static check, the
"before" half gets exactly that rule; the rule's fix (all fixes, unsafe ones too, applied as
``check --fix --unsafe-fixes`` does) turns it into the "after" half; the "after" half is clean;
and the real Lightning agrees: it raises the record's error on "before" and runs "after" clean.

"After" is compared line by line with trailing whitespace removed and blank lines dropped: the
fixes keep the user's own spacing, the records are written to read well.
"""

from __future__ import annotations

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.fixes import apply_edits
from fabric_ls.records import load_records
from fabric_ls.rules import BY_ID

RECORDS = load_records()
# Errors that only exist under `fabric run`: the CLI's environment for both halves of the example
# (`fabric run --devices=2 train.py` sets LT_CLI_USED and LT_DEVICES), which no script can say.
STARTED_WITH_FABRIC_RUN = {
    "FAB028": {"LT_CLI_USED": "1", "LT_DEVICES": "2"},
    "FAB029": {"LT_CLI_USED": "1"},
}
CHECKED = [rule for rule in RECORDS if rule in BY_ID]


def _profile(source: str) -> str:
    """The machine a half is written for (TPUs, GPUs, or the CPU this runs on): "after" may name
    another machine than "before" (FAB018: run it where the GPUs are)."""
    if 'accelerator="tpu"' in source:
        return "tpu8"
    return "gpu8" if 'accelerator="cuda"' in source else "cpu"


def _interactive(rule: str) -> bool:
    """The rule's examples are notebook code (``SAMPLES_INTERACTIVE``): analysed and run as such."""
    return bool(getattr(BY_ID.get(rule), "SAMPLES_INTERACTIVE", False))


def _findings(tmp_path, source: str, rule: str):
    return analyze_source(source, str(tmp_path / "train.py"), interactive=_interactive(rule)).findings


def _lines(source: str) -> list[str]:
    return [line.rstrip() for line in source.splitlines() if line.strip()]


def _fixed(tmp_path, source: str, rule: str) -> str:
    """Apply every offered fix, re-analyse, repeat (as ``--fix --unsafe-fixes`` does), at most 5 rounds."""
    for _ in range(5):
        fixes = [f.fix for f in _findings(tmp_path, source, rule) if f.fix is not None]
        if not fixes:
            break
        source = apply_edits(source, fixes[0].edits)
    return source


@pytest.mark.parametrize("rule", CHECKED)
def test_before_gets_exactly_this_rule(tmp_path, rule):
    found = [f.code for f in _findings(tmp_path, RECORDS[rule].example_before, rule)]
    assert found and set(found) == {rule}, found


@pytest.mark.parametrize("rule", CHECKED)
def test_after_is_clean(tmp_path, rule):
    assert [f.code for f in _findings(tmp_path, RECORDS[rule].example_after, rule)] == []


@pytest.mark.parametrize("rule", [r for r in CHECKED if RECORDS[r].fix is not None])
def test_the_fix_turns_before_into_after(tmp_path, rule):
    record = RECORDS[rule]
    (finding,) = [f for f in _findings(tmp_path, record.example_before, rule) if f.code == rule][:1]
    assert finding.fix is not None, f"{rule}: the record declares a fix; none is offered on its example"
    assert finding.fix.title == record.fix.title
    assert _lines(_fixed(tmp_path, record.example_before, rule)) == _lines(record.example_after)


@pytest.mark.parametrize("rule", [r for r in CHECKED if RECORDS[r].fix is None])
def test_a_record_without_a_fix_gets_none(tmp_path, rule):
    assert all(f.fix is None for f in _findings(tmp_path, RECORDS[rule].example_before, rule))


@pytest.fixture(scope="module")
def lightning_outcomes():
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    by_profile: dict[str, list[tuple[str, Script]]] = {}
    for rule, record in RECORDS.items():
        environment = STARTED_WITH_FABRIC_RUN.get(rule, {})
        for half, source in (("before", record.example_before), ("after", record.example_after)):
            script = Script(source, env=environment, interactive=_interactive(rule))
            by_profile.setdefault(_profile(source), []).append((f"{rule}-{half}", script))
    outcomes = {}
    for profile, items in by_profile.items():
        for (key, _), outcome in zip(items, run_many([s for _, s in items], profile=profile, timeout=60)):
            outcomes[key] = outcome
    return outcomes


# Rules whose failure no CPU machine shows (CUDA in a forked child) are proven by their own test.
PROVEN_ELSEWHERE = {rule for rule in CHECKED if getattr(BY_ID[rule], "DIFFERENTIAL_LIMIT", None)}


@pytest.mark.parametrize("rule", [rule for rule in RECORDS if rule not in PROVEN_ELSEWHERE])
def test_lightning_raises_on_before_and_runs_after(tmp_path, lightning_outcomes, rule):
    record = RECORDS[rule]
    before = lightning_outcomes[f"{rule}-before"]
    if record.outcome == "raise":
        assert before.raised_by_lightning, (before.error_class, before.message, before.stderr_tail)
        assert record.matches(before.message) or any(
            site.error_class == before.error_class for site in record.other_sites
        ), before.message
        if rule in BY_ID:
            (finding,) = [f for f in _findings(tmp_path, record.example_before, rule) if f.code == rule][:1]
            assert finding.span.start_line + 1 == before.line
    else:
        # Lightning raises nothing itself (a hang, a silent misuse, a library's error): one faked
        # process cannot show it; the rule's own proof test runs the real thing
        # (tests/test_*_proof.py). Here: Lightning does not raise one of its own errors instead.
        at_site = f"{record.main_site.file_path[len('src/') :]}:{record.main_site.line_number}"
        assert (
            not before.raised_by_lightning
            or any(site.error_class == before.error_class for site in record.other_sites)
            # Python itself raises at the site, inside Lightning (FAB039: a string read as a dict).
            or (before.lightning_site == at_site and before.error_class == record.error_class)
        ), (before.error_class, before.message)
    after = lightning_outcomes[f"{rule}-after"]
    assert after.error_class is None, (after.error_class, after.message)
