"""Strategy names the script builds from parts (strings.py): an f-string, ``str.format``, ``%``,
``str.join`` and ``+`` give the name Lightning gets, per option where a part is a command-line choice.
Each script is checked by fabric-ls and run under the real Lightning (the default flags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_ls.engine import analyze_source

_SCRIPT = """import argparse
import torch
import lightning as L

parser = argparse.ArgumentParser()
parser.add_argument("--stage", type=int, default=2, choices=[1, 2, 3])
args = parser.parse_args()
stage = 2
fabric = L.Fabric(accelerator="cuda", devices=2, strategy={strategy})
fabric.launch()
model = torch.nn.Linear(8, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""
# How the name is built, and the severity fabric-ls gives FAB001 at line 14: an error where the name is
# a constant, a warning where it depends on ``--stage`` (every stage is DeepSpeed: "always", an error).
BUILT = {
    "f-string": ('f"deepspeed_stage_{stage}"', "error"),
    "format": ('"deepspeed_stage_{}".format(stage)', "error"),
    "percent": ('"deepspeed_stage_%d" % stage', "error"),
    "join": ('"_".join(["deepspeed", "stage", str(stage)])', "error"),
    "plus": ('"deepspeed_stage_" + str(stage)', "error"),
    "f-string of a flag": ('f"deepspeed_stage_{args.stage}"', "error"),
    "plus of a flag": ('"deepspeed_stage_" + str(args.stage)', "error"),
    "format spec": ('f"deepspeed_stage_{stage:d}"', "error"),
}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_fabric_ls(name: str, tmp_path: Path) -> None:
    expression, severity = BUILT[name]
    script = _SCRIPT.format(strategy=expression)
    path = tmp_path / "train.py"
    path.write_text(script)
    found = [(f.code, f.span.start_line + 1, f.severity) for f in analyze_source(script, str(path)).findings]
    assert found == [("FAB001", 14, severity)]


def test_a_name_built_from_an_unknown_part_is_unknown(tmp_path: Path) -> None:
    script = _SCRIPT.format(strategy='f"deepspeed_stage_{torch.cuda.device_count()}"')
    path = tmp_path / "train.py"
    path.write_text(script)
    assert [f.code for f in analyze_source(script, str(path)).findings] == []


def test_under_lightning() -> None:
    from lightning_harness import Script, run_many

    names = sorted(BUILT)
    scripts = [Script(_SCRIPT.format(strategy=BUILT[name][0])) for name in names]
    for name, outcome in zip(names, run_many(scripts, profile="gpu8")):
        found = (outcome.error_class, outcome.raised_by_lightning, outcome.line)
        assert found == ("RuntimeError", True, 14), (name, outcome.message, outcome.stderr_tail)
