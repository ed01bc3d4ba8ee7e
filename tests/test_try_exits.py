"""A ``try`` around code that ends the program on some paths: what its handlers can catch decides
whether those paths go on after it (exits.py). Each script is checked by fabric-ls and run under the
real Lightning."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from fabric_ls.analysis.explore import explore
from fabric_ls.analysis.project import Project
from fabric_ls.analysis.source import parse_source
from fabric_ls.engine import analyze_source

_HEAD = """import os
import torch
from lightning.fabric import Fabric


def check(name):
    if name not in ("a", "b"):
        raise ValueError(name)
    return name


fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
"""
_SEPARATE = """model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""

# name → (script, what fabric-ls reports as (rule, line), how Lightning ends: (class, by Lightning, line))
SCRIPTS: dict[str, tuple[str, list[tuple[str, int]], Optional[tuple[str, bool, int]]]] = {
    # A handler for another exception: the ValueError ends its paths; the rest go on, in one run.
    "a raise no handler catches": (
        _HEAD + 'try:\n    check(os.environ.get("NAME", "a"))\nexcept KeyError:\n    pass\n' + _SEPARATE,
        [("FAB001", 21)],
        ("RuntimeError", True, 21),
    ),
    # ``try``/``finally`` catches nothing: after the cleanup the error goes on, and the setup after it
    # is never reached.
    "a raise under try/finally": (
        _HEAD + 'try:\n    raise RuntimeError("stop")\nfinally:\n    print("cleanup")\n' + _SEPARATE,
        [],
        ("RuntimeError", False, 17),
    ),
    # A handler that catches it: the paths that raised go on after the ``try`` too.
    "a raise a handler catches": (
        _HEAD + 'try:\n    check(os.environ.get("NAME", "c"))\nexcept ValueError:\n    pass\n' + _SEPARATE,
        [("FAB001", 21)],
        ("RuntimeError", True, 21),
    ),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_fabric_ls(name: str, tmp_path: Path) -> None:
    script, findings, _ = SCRIPTS[name]
    path = tmp_path / "train.py"
    path.write_text(script)
    found = [(f.code, f.span.start_line + 1) for f in analyze_source(script, str(path)).findings]
    assert found == findings


def test_a_raise_joins_in_one_run(tmp_path: Path) -> None:
    """The branch that raises is joined with the one that returns: no second run of the program. A
    raise the ``try`` may catch goes on after it, joined there with the paths that did not raise."""
    script = SCRIPTS["a raise no handler catches"][0]
    path = tmp_path / "train.py"
    path.write_text(script)
    exploration = explore(Project([str(tmp_path)]), parse_source(script, str(path)), lambda event: None, None)
    assert len(exploration.runs) == 1
    caught = SCRIPTS["a raise a handler catches"][0]
    exploration = explore(Project([str(tmp_path)]), parse_source(caught, str(path)), lambda event: None, None)
    assert len(exploration.runs) == 1


def test_under_lightning() -> None:
    from lightning_harness import Script, run_many

    names = sorted(SCRIPTS)
    outcomes = run_many([Script(SCRIPTS[name][0], env={"NAME": "a"}) for name in names], profile="gpu8")
    for name, outcome in zip(names, outcomes):
        expected = SCRIPTS[name][2]
        found = (outcome.error_class, outcome.raised_by_lightning, outcome.line)
        assert found == expected, (name, outcome.message, outcome.stderr_tail)


def test_the_paths_a_handler_catches_keep_what_they_had(tmp_path: Path) -> None:
    """Where the helper raised, the assignment in the ``try`` never happened: ``strategy`` is still
    "ddp" there, so the separate setup is refused only where it returned "deepspeed" (a warning)."""
    from lightning_harness import Script, run_many

    script = """import os
import torch
from lightning.fabric import Fabric


def pick():
    if os.environ.get("PLAIN"):
        raise ValueError("plain DDP asked for")
    return "deepspeed"


strategy = "ddp"
try:
    strategy = pick()
except ValueError:
    pass
fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy)
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path))
    found = [(f.code, f.span.start_line + 1, f.severity) for f in analysis.findings]
    assert found == [("FAB001", 20, "warning")]
    assert "PLAIN" in (analysis.findings[0].condition or "")
    plain, deepspeed = run_many([Script(script, env={"PLAIN": "1"}), Script(script)], profile="gpu8")
    assert plain.error_class is None, plain.message
    found = (deepspeed.error_class, deepspeed.raised_by_lightning, deepspeed.line)
    assert found == ("RuntimeError", True, 20)


def test_a_try_whose_body_returns_keeps_both_paths(tmp_path: Path) -> None:
    """``try: return pick() except ValueError: ...``: the caught path goes on after the ``try`` to
    another ``return``; it is followed (a run of its own), so the finding keeps its condition."""
    script = (
        SCRIPTS["a raise a handler catches"][0].split("\n\nfabric = ")[0]
        + """


def build():
    try:
        return check(os.environ.get("NAME", "c"))
    except ValueError:
        pass
    return "ddp"


fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed" if build() == "a" else "ddp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
    )
    path = tmp_path / "train.py"
    path.write_text(script)
    [finding] = analyze_source(script, str(path)).findings
    assert (finding.code, finding.severity) == ("FAB001", "warning")
    assert finding.condition and "NAME" in finding.condition, finding.condition
