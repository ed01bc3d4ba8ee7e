"""Every FAB001/FAB002/FAB003/FAB011/FAB016 shape in the repository's example scripts gets a fix,
and the real Lightning runs the fixed script cleanly (``--fix --unsafe-fixes`` to its fixed point).

The scripts: ``examples/`` (one-file examples; ``multi_module`` imports its sibling modules, which the
harness's temporary directory does not hold), ``tests/lsp/scripts`` and ``tests/fuzz_corpus``. A shape
the builders decline is listed with the reason; the README's "Fixes" figures count the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.fixes import apply_edits

ROOT = Path(__file__).resolve().parent.parent
RULES = {"FAB001", "FAB002", "FAB003", "FAB011", "FAB016"}
SCRIPTS = sorted(
    [
        *(ROOT / "examples").glob("*.py"),
        *(ROOT / "tests" / "lsp" / "scripts").glob("*.py"),
        *(ROOT / "tests" / "fuzz_corpus").glob("*.py"),
    ]
)
# None today; an entry names a script and the rule whose fix declines there, with the reason.
DECLINED: dict[str, str] = {}


def _findings(path: Path, source: str):
    return [f for f in analyze_source(source, str(path)).findings if f.path == str(path)]


def _with_shapes() -> list[Path]:
    return [p for p in SCRIPTS if any(f.code in RULES for f in _findings(p, p.read_text(encoding="utf-8")))]


WITH_SHAPES = _with_shapes()


def _fixed(path: Path) -> str:
    source = path.read_text(encoding="utf-8")
    for _ in range(10):
        fixes = [f.fix for f in _findings(path, source) if f.fix is not None]
        if not fixes:
            break
        source = apply_edits(source, fixes[0].edits)
    return source


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_scripts_hold_the_shapes():
    names = {_name(p) for p in WITH_SHAPES}
    assert {
        "examples/deepspeed_separate_setup.py",
        "examples/loss_backward.py",
        "tests/lsp/scripts/unicode_before_call.py",
    } <= names


@pytest.mark.parametrize("path", WITH_SHAPES, ids=_name)
def test_each_shape_gets_a_fix_or_a_stated_reason(path):
    source = path.read_text(encoding="utf-8")
    for finding in _findings(path, source):
        if finding.code in RULES and DECLINED.get(_name(path)) != finding.code:
            assert finding.fix is not None, f"{_name(path)}:{finding.span.start_line + 1} {finding.code}"
    left = [f.code for f in _findings(path, _fixed(path))]
    assert not (set(left) & RULES) - {DECLINED.get(_name(path))}, left


@pytest.fixture(scope="module")
def outcomes():
    pytest.importorskip("lightning")
    from lightning_harness import run_many

    fixed = [(p, _fixed(p)) for p in WITH_SHAPES if _name(p) not in DECLINED]
    by_profile: dict[str, list[tuple[Path, str]]] = {}
    for path, source in fixed:
        by_profile.setdefault("tpu8" if 'accelerator="tpu"' in source else "gpu8", []).append((path, source))
    found = {}
    for profile, items in by_profile.items():
        for (path, _), outcome in zip(items, run_many([s for _, s in items], profile=profile, timeout=60)):
            found[_name(path)] = outcome
    return found


@pytest.mark.parametrize("path", [p for p in WITH_SHAPES if _name(p) not in DECLINED], ids=_name)
def test_lightning_runs_the_fixed_script(outcomes, path):
    outcome = outcomes[_name(path)]
    assert outcome.error_class is None, (outcome.error_class, outcome.message)
