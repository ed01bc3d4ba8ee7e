"""The wheel built from the checkout installs and runs away from the checkout (README "Command line").

`pip wheel . -w dist` builds fabric-ls and collects its dependencies' wheels; `pip install --no-index
--find-links dist fabric-ls` then installs them in a fresh virtualenv with no index, and `fabric-ls check`
runs from a folder outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "deepspeed_separate_setup.py"


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Nothing from this test's environment may point back at the checkout.
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with fabric-ls installed from wheels only; returns its bin folder."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    built = run(sys.executable, "-m", "pip", "wheel", "--quiet", REPO, "--wheel-dir", dist, cwd=root)
    assert built.returncode == 0, built.stderr
    venv = root / "venv"
    created = run(sys.executable, "-m", "venv", venv, cwd=root)
    assert created.returncode == 0, created.stderr
    install = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-index", "--find-links", dist]
    done = run(*install, "fabric-ls", cwd=root)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def test_the_installed_wheel_checks_a_script_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "train.py")

    checked = run(installed / "fabric-ls", "check", "train.py", cwd=tmp_path)

    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "train.py:13:17:" in checked.stdout
    assert "FAB001" in checked.stdout


def test_the_installed_package_is_the_wheels_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = run(installed / "python", "-c", "import fabric_ls; print(fabric_ls.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout + where.stderr


def test_the_wheel_ships_the_rule_records_and_the_strategy_knowledge(installed: Path, tmp_path: Path) -> None:
    listing = run(
        installed / "python",
        "-c",
        "import importlib.metadata as m; print('\\n'.join(str(f) for f in m.files('fabric-ls')))",
        cwd=tmp_path,
    )
    files = listing.stdout.splitlines()
    assert "fabric_ls/records/FAB001.json" in files
    assert "fabric_ls/knowledge/strategies.json" in files


def test_the_wheel_is_pure_python(installed: Path, tmp_path: Path) -> None:
    wheel_dir = installed.parent.parent / "dist"
    (wheel,) = wheel_dir.glob("fabric_ls-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [name for name in archive.namelist() if name.endswith((".so", ".pyd"))]
