"""Helpers from installed third-party packages are followed through jedi (read, never run)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fabric_ls.engine import Project, analyze_source

HELPER = """\
import torch


def setup_training(fabric, model):
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    return model, optimizer
"""

SCRIPT = """\
import torch
from lightning.fabric import Fabric
from trainkit.loop import setup_training

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model, optimizer = setup_training(fabric, torch.nn.Linear(4, 2))
"""


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> Path:
    """A virtualenv whose site-packages holds ``trainkit``, importable only there."""
    root = tmp_path_factory.mktemp("env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    site = next((root / "venv" / "lib").glob("python3*/site-packages"))
    package = site / "trainkit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "loop.py").write_text(HELPER)
    marker = root / "ran"
    # Importing the package would leave a marker: the analysis must only read it.
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    return root


def test_a_helper_in_an_installed_package_is_followed(environment, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    python = str(environment / "venv" / "bin" / "python")
    analysis = analyze_source(
        script.read_text(), str(script), project=Project([str(tmp_path)], python=python, jedi_timeout=None)
    )
    helper = [f for f in analysis.other_findings if f.path.endswith("trainkit/loop.py")]
    assert [(f.code, f.span.start_line + 1) for f in helper] == [("FAB001", 6)]
    assert helper[0].via is not None and helper[0].via.span.start_line + 1 == 7
    assert not (environment / "ran").exists()


def test_without_the_environment_the_import_stays_opaque(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    analysis = analyze_source(script.read_text(), str(script), project=Project([str(tmp_path)]))
    assert analysis.findings == [] and analysis.other_findings == []
