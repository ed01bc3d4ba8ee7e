"""Repositories written the way an attacker would: each one names a program in its pyproject.toml
(``[tool.fabric-ls] python = ...``) or ships a virtualenv, and every program in it writes a marker file
when it runs. Used by tests/test_trust.py (``check`` in a subprocess) and tests/lsp/test_workspace_trust.py
(the server over stdio): after fabric-ls has looked at an untrusted repository, no marker may exist.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# A Fabric script that imports a package not in the folder (jedi is asked where it lives).
TRAIN = """\
import torch
import package_that_is_not_here
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
model = torch.nn.Linear(32, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""

CASES = ("script", "shell", "missing", "fake-venv", "committed-venv", "venv-without-setting")


@dataclass(frozen=True)
class HostileRepo:
    root: Path
    marker: Path
    # What [tool.fabric-ls] python says (None: nothing), and the program it would run.
    python: Optional[str]
    train: Path

    def ran(self) -> bool:
        return self.marker.exists()


def _pyproject(root: Path, python: Optional[str]) -> None:
    table = f"python = {python!r}\n".replace("'", '"') if python is not None else 'strategy = "deepspeed"\n'
    (root / "pyproject.toml").write_text(f'[project]\nname = "cloned"\n\n[tool.fabric-ls]\n{table}', "utf-8")


def _marking_script(path: Path, marker: Path) -> None:
    """A shell script that leaves the marker, then behaves like Python so nothing else looks wrong."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec python3 "$@"\n', "utf-8")
    path.chmod(0o755)


def make_venv(folder: Path) -> Path:
    """A real virtualenv (``python -m venv --without-pip``); returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    return Path(site)


def hostile_repo(folder: Path, case: str) -> HostileRepo:
    """Write the repository of ``case`` into ``folder`` (one of ``CASES``)."""
    root = folder / "cloned"
    root.mkdir(parents=True)
    marker = folder / "PWNED"
    train = root / "train.py"
    train.write_text(TRAIN, "utf-8")
    python: Optional[str]
    if case == "script":
        _marking_script(root / "evil.sh", marker)
        python = "./evil.sh"
    elif case == "shell":
        python = "/bin/sh"
    elif case == "missing":
        python = "./missing/bin/python"
    elif case == "fake-venv":
        # Looks like a virtualenv to a quick glance: pyvenv.cfg, bin/activate, bin/python.
        (root / "env").mkdir()
        (root / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n", "utf-8")
        _marking_script(root / "env" / "bin" / "python", marker)
        (root / "env" / "bin" / "activate").write_text("", "utf-8")
        python = "env"
    elif case in ("committed-venv", "venv-without-setting"):
        # A real virtualenv committed to the repository: its .pth file runs code whenever its Python starts.
        site = make_venv(root / ".venv")
        (site / "zz_evil.pth").write_text(f"import os; open({str(marker)!r}, 'w').close()\n", "utf-8")
        python = ".venv" if case == "committed-venv" else None
    else:
        raise ValueError(case)
    _pyproject(root, python)
    return HostileRepo(root, marker, python, train)


def prove_live(repo: HostileRepo) -> bool:
    """Run the repository's program directly: it must leave the marker (then the marker is removed)."""
    if repo.python is None:
        program = str(repo.root / ".venv" / "bin" / "python")
    elif repo.python in ("/bin/sh", "./missing/bin/python"):
        return True
    else:
        program = os.path.join(str(repo.root), repo.python)
        if os.path.isdir(program):
            program = os.path.join(program, "bin", "python")
    subprocess.run([program, "-c", "pass"], check=True, timeout=60, cwd=repo.root.parent)
    live = repo.marker.exists()
    repo.marker.unlink(missing_ok=True)
    return live
