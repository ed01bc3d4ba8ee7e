"""A declared strategy (``fabric-ls check --strategy X`` or ``strategy = "X"`` in ``[tool.fabric-ls]``)
stands for ``fabric run --strategy X``: where the script's ``Fabric()`` leaves the strategy open, the
CLI picks it and has already created the processes (``LT_CLI_USED=1``).

So ``fabric.launch()`` raises (fabric.py:990: "This script was launched through the CLI, and
processes have already been created. Calling `.launch()` again is not allowed."), whatever the
strategy, and nothing after it runs: the launched function included. Each case is also run under
the real Lightning with the variables ``fabric run`` sets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_ls.engine import analyze_source, portability
from fabric_ls.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DECLARED = Settings(strategy="deepspeed")
# What `fabric run --strategy deepspeed --accelerator cuda --devices 2` sets (lightning/fabric/cli.py:177).
FABRIC_RUN = {
    "LT_CLI_USED": "1",
    "LT_STRATEGY": "deepspeed",
    "LT_ACCELERATOR": "cuda",
    "LT_DEVICES": "2",
    "LT_NUM_NODES": "1",
}
CLI_SENTENCE = "This script was launched through the CLI"

LAUNCH_THEN_SEPARATE_SETUP = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric()
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
LAUNCH_A_FUNCTION = """\
import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup_module(torch.nn.Linear(4, 2))
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))


if __name__ == "__main__":
    fabric = Fabric()
    fabric.launch(train)
"""
WRITTEN_FOR_FABRIC_RUN = LAUNCH_THEN_SEPARATE_SETUP.replace("fabric.launch()\n", "")


def findings(source: str, tmp_path: Path, settings: Settings = DECLARED) -> list[tuple[str, int, str]]:
    script = tmp_path / "train.py"
    script.write_text(source)
    return [
        (f.code, f.span.start_line + 1, f.severity)
        for f in analyze_source(source, str(script), settings).findings
    ]


def test_launch_under_the_declared_strategy_is_fab017_and_nothing_after_it(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LAUNCH_THEN_SEPARATE_SETUP)
    (finding,) = analyze_source(LAUNCH_THEN_SEPARATE_SETUP, str(script), DECLARED).findings
    assert (finding.code, finding.span.start_line + 1) == ("FAB017", 5)
    assert CLI_SENTENCE in finding.message
    # Declared, not written in the script: a warning, and the message says the strategy is assumed.
    assert finding.severity == "warning"
    assert "assumed" in finding.message


def test_the_launched_function_is_never_reached(tmp_path):
    assert findings(LAUNCH_A_FUNCTION, tmp_path) == [("FAB017", 12, "warning")]


def test_without_launch_the_declared_strategy_reaches_the_setup_calls(tmp_path):
    assert findings(WRITTEN_FOR_FABRIC_RUN, tmp_path) == [("FAB001", 6, "warning")]


def test_a_launch_on_one_path_only(tmp_path):
    source = LAUNCH_THEN_SEPARATE_SETUP.replace(
        "fabric.launch()\n", 'if os.environ.get("SPAWN"):\n    fabric.launch()\n'
    ).replace("import torch\n", "import os\n\nimport torch\n")
    script = tmp_path / "train.py"
    script.write_text(source)
    launch, setup = analyze_source(source, str(script), DECLARED).findings
    assert (launch.code, launch.span.start_line + 1) == ("FAB017", 8)
    assert "SPAWN" in (launch.condition or "")
    # The path that raises at launch() ends there, like one ending at the script's own `raise`:
    # every path that reaches setup_optimizers() gets FAB001.
    assert (setup.code, setup.span.start_line + 1, setup.condition) == ("FAB001", 10, None)


def test_without_a_declared_strategy_nothing_changes(tmp_path):
    assert findings(LAUNCH_THEN_SEPARATE_SETUP, tmp_path, Settings()) == []


def test_a_strategy_the_script_fixes_itself_is_not_the_declared_one(tmp_path):
    source = LAUNCH_THEN_SEPARATE_SETUP.replace(
        "Fabric()", 'Fabric(accelerator="cuda", devices=2, strategy="ddp")'
    )
    assert findings(source, tmp_path) == []


def test_the_portability_matrix_is_a_choice_in_the_script_not_fabric_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LAUNCH_THEN_SEPARATE_SETUP)
    matrix = portability(LAUNCH_THEN_SEPARATE_SETUP, str(script), strategies=["deepspeed"])
    assert [(f.code, f.span.start_line + 1) for f in matrix["deepspeed"]] == [("FAB001", 7)]


def _check(*args: str) -> list[tuple[str, int, str]]:
    result = subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", "--format", "json", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return [(f["code"], f["line"], f["severity"]) for f in json.loads(result.stdout)]


def test_cli_strategy_option(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LAUNCH_THEN_SEPARATE_SETUP)
    assert _check(str(script)) == []
    assert _check(str(script), "--strategy", "deepspeed") == [("FAB017", 5, "warning")]


def test_strategy_setting_in_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fabric-ls]\nstrategy = "deepspeed"\n')
    (tmp_path / "train.py").write_text(LAUNCH_A_FUNCTION)
    (tmp_path / "run_me.py").write_text(WRITTEN_FOR_FABRIC_RUN)
    assert _check(str(tmp_path / "train.py")) == [("FAB017", 12, "warning")]
    assert _check(str(tmp_path / "run_me.py")) == [("FAB001", 6, "warning")]


@pytest.fixture(scope="module")
def under_fabric_run():
    pytest.importorskip("lightning")
    from lightning_harness import Script, run_many

    sources = [LAUNCH_THEN_SEPARATE_SETUP, LAUNCH_A_FUNCTION, WRITTEN_FOR_FABRIC_RUN]
    return run_many([Script(source, env=FABRIC_RUN) for source in sources], profile="gpu8", timeout=60)


def test_lightning_raises_at_launch_under_fabric_run(under_fabric_run):
    for outcome, line in zip(under_fabric_run[:2], (5, 12)):
        assert outcome.error_class == "RuntimeError"
        assert outcome.raise_site == "lightning/fabric/fabric.py:990"
        assert outcome.message.startswith(CLI_SENTENCE)
        assert outcome.line == line


def test_lightning_reaches_the_setup_calls_when_the_script_does_not_launch(under_fabric_run):
    outcome = under_fabric_run[2]
    assert (outcome.error_class, outcome.line, outcome.raise_site) == (
        "RuntimeError",
        6,
        "lightning/fabric/fabric.py:1226",
    )


def test_fabric_run_leaves_the_precision_and_the_plugins_to_the_script(tmp_path):
    """``fabric run`` sets LT_PRECISION only when ``--precision`` is given (cli.py:184): the script's own
    precision is still checked by the connector, and refused; its ``devices`` give way to LT_DEVICES."""
    from lightning_harness import Script, run_many

    refused = WRITTEN_FOR_FABRIC_RUN.replace("Fabric()", 'Fabric(precision="8-mixed")')
    assert findings(refused, tmp_path)[:1] == [("FAB038", 4, "warning")]
    replaced = WRITTEN_FOR_FABRIC_RUN.replace("Fabric()", "Fabric(devices=0)")
    assert [code for code, _, _ in findings(replaced, tmp_path)] == ["FAB001"]
    (outcome,) = run_many([Script(refused, env=FABRIC_RUN)], profile="gpu8")
    assert (outcome.error_class, outcome.raised_by_lightning, outcome.line) == ("ValueError", True, 4)


def test_under_fabric_run_the_constructor_sets_the_environment_up(tmp_path):
    """``Fabric.__init__`` calls ``setup_environment()`` under the CLI (fabric.py:164): DeepSpeed's CUDA
    check (FAB019) raises at ``Fabric(...)``, in a script that never calls launch()."""
    from lightning_harness import Script, run_many

    on_cpu = WRITTEN_FOR_FABRIC_RUN.replace("Fabric()", 'Fabric(accelerator="cpu", devices=2)')
    assert findings(on_cpu, tmp_path)[:1] == [("FAB019", 4, "warning")]
    environment = {key: value for key, value in FABRIC_RUN.items() if key != "LT_ACCELERATOR"}
    (outcome,) = run_many([Script(on_cpu, env=environment)], profile="cpu")
    assert (outcome.error_class, outcome.raised_by_lightning, outcome.line) == ("RuntimeError", True, 4)
