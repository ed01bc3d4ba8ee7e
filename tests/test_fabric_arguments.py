"""``Fabric(...)`` takes keyword arguments, its own only: any other raises Python's TypeError there.

FAB001's record sample (the separate setup under DeepSpeed) with its ``Fabric(...)`` given an
argument ``Fabric.__init__`` does not take: the script stops at that line, so nothing after it is
reported. Its twin, given only arguments Fabric takes, still gets the sample's FAB001. Each runs
under the real Lightning: a TypeError at the Fabric line (Python's, not a check of Lightning's), or
FAB001's error at the setup.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from command_line_support import _SAMPLE, setup_line

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

_CALL = "Fabric(accelerator="


def _given(arguments: str) -> str:
    return _SAMPLE.source.replace(_CALL, f"Fabric({arguments}accelerator=", 1)


REFUSED = {
    "positional": _SAMPLE.source.replace(_CALL, 'Fabric("cuda", accelerator=', 1),
    "unknown keyword": _given("seed=42, "),
    "spread dict with another key": _SAMPLE.source.replace(
        _CALL, 'Fabric(**{"_target_": "lightning.fabric.Fabric"}, accelerator=', 1
    ),
}
ACCEPTED = _given("plugins=None, callbacks=[], loggers=[], num_nodes=1, precision=None, ")


def _findings(tmp_path: Path, source: str) -> list[tuple[str, int]]:
    path = tmp_path / "train.py"
    path.write_text(source)
    analysis = analyze_source(source, str(path), project=Project([str(tmp_path)]))
    return [(f.code, f.span.start_line + 1) for f in analysis.findings]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_nothing_after_a_fabric_python_refuses(name: str, tmp_path: Path) -> None:
    assert _findings(tmp_path, REFUSED[name]) == []


def test_its_own_arguments_only_still_get_the_finding(tmp_path: Path) -> None:
    assert _findings(tmp_path, ACCEPTED) == [("FAB001", setup_line(ACCEPTED))]


def test_under_lightning() -> None:
    from lightning_harness import run_many

    names = sorted(REFUSED)
    outcomes = run_many([REFUSED[name] for name in names] + [ACCEPTED], profile="gpu8")
    for name, outcome in zip(names, outcomes):
        fabric_line = next(n for n, line in enumerate(REFUSED[name].splitlines(), 1) if "Fabric(" in line)
        assert (outcome.error_class, outcome.line, outcome.raised_by_lightning) == (
            "TypeError",
            fabric_line,
            False,
        ), (name, outcome.message)
    accepted, record = outcomes[-1], get_record("FAB001")
    assert accepted.error_class == record.error_class and record.matches(accepted.message or "")
    assert accepted.line == setup_line(ACCEPTED)


def test_the_parameters_are_the_installed_lightnings() -> None:
    """What fabric-ls takes for ``Fabric.__init__``'s parameters is the installed Lightning's signature."""
    import inspect

    from lightning.fabric import Fabric

    from fabric_ls.analysis.state import FABRIC_PARAMETERS, STRATEGY_ARGUMENTS

    parameters = list(inspect.signature(Fabric.__init__).parameters.values())[1:]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    assert {p.name for p in parameters} == FABRIC_PARAMETERS
    assert set(STRATEGY_ARGUMENTS) <= FABRIC_PARAMETERS
