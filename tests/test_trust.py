"""Workspace trust (issue 13): ``fabric-ls check`` runs no program a checked repository names, and ``--fix``
writes nothing outside the checked folders, whatever symbolic links the repository holds.

The server side is in tests/lsp/test_workspace_trust.py; the hostile repositories in tests/hostile_repos.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_repos import CASES, hostile_repo, make_venv, prove_live

from fabric_ls import trust
from fabric_ls.analysis.jedi_bridge import JediLocator, safe_environment_problem

ROOT = Path(__file__).resolve().parent.parent
# The console script, as CI runs it: `python -m fabric_ls` would put the checked folder first on sys.path.
FABRIC_LS = Path(sys.executable).parent / "fabric-ls"


def check(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    command = [str(FABRIC_LS)] if FABRIC_LS.exists() else [sys.executable, "-P", "-m", "fabric_ls"]
    result = subprocess.run(
        [*command, "check", *arguments],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode in (0, 1), result.stderr
    return result


# ----- the decision itself --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "trusted"),
    [
        ((None,), False),
        (({},), False),
        (({"workspaceTrusted": True},), True),
        (({"fabricLs": {"workspaceTrusted": True}},), True),
        (({"workspaceTrusted": "true"},), False),
        (({"workspaceTrusted": 1},), False),
        (({"workspaceTrusted": False}, {"workspaceTrusted": True}), True),
        ((["workspaceTrusted"],), False),
    ],
)
def test_only_the_clients_explicit_true_trusts_a_workspace(sources: tuple, trusted: bool) -> None:
    assert trust.client_trusts(*sources) is trusted


def test_an_untrusted_table_loses_its_interpreter_and_says_why() -> None:
    table = {"python": "./evil.sh", "strategy": "ddp"}

    untrusted = trust.filter_workspace_table(table, "repo/pyproject.toml", trusted=False)
    trusted = trust.filter_workspace_table(table, "repo/pyproject.toml", trusted=True)

    assert untrusted.table == {"strategy": "ddp"} and untrusted.ignored_python == "./evil.sh"
    assert "not trusted" in (untrusted.message or "") and "Manage Workspace Trust" in (
        untrusted.message or ""
    )
    assert trusted.table == table and trusted.message is None
    # Every spelling of the key is an interpreter.
    for key in ("interpreter", "python-path", "environment"):
        assert trust.filter_workspace_table({key: "x"}, "p", trusted=False).table == {}


def test_the_trust_flag_is_not_a_setting() -> None:
    assert trust.without_trust_key({"workspaceTrusted": True, "strategy": "ddp"}) == {"strategy": "ddp"}


@pytest.mark.parametrize("case", ["script", "shell", "missing", "fake-venv"])
def test_only_a_python_interpreter_passes_even_when_trusted(tmp_path: Path, case: str) -> None:
    repo = hostile_repo(tmp_path, case)
    assert repo.python is not None
    python = repo.python if os.path.isabs(repo.python) else str(repo.root / repo.python)

    assert trust.workspace_python_problem(python) is not None
    assert safe_environment_problem(python) is not None
    assert not repo.ran()


def test_symlink_loops_and_dangling_links_are_refused_without_running(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to(tmp_path / "nowhere")

    assert "not a file" in (trust.workspace_python_problem(str(tmp_path / "loop")) or "")
    assert "not a file" in (trust.workspace_python_problem(str(tmp_path / "env")) or "")


def test_a_real_virtualenv_passes_and_jedi_resolves_a_package_only_it_has(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    (site / "fabric_trust_probe").mkdir()
    (site / "fabric_trust_probe" / "__init__.py").write_text("VALUE = 1\n", "utf-8")
    script = tmp_path / "project" / "train.py"
    script.parent.mkdir()
    script.write_text("import fabric_trust_probe\n", "utf-8")

    assert trust.workspace_python_problem(str(tmp_path / "venv")) is None
    assert safe_environment_problem(str(tmp_path / "venv")) is None
    found = JediLocator(str(script.parent), str(tmp_path / "venv")).find_module(
        "fabric_trust_probe", str(script)
    )
    assert found == str(site / "fabric_trust_probe" / "__init__.py")
    # The server's own environment has no such package.
    assert JediLocator(str(script.parent)).find_module("fabric_trust_probe", str(script)) is None


# ----- check in a hostile repository ---------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_check_runs_nothing_the_repository_names(tmp_path: Path, case: str) -> None:
    repo = hostile_repo(tmp_path, case)
    assert prove_live(repo)

    result = check(repo.root, ".")

    assert not repo.ran()
    if repo.python is not None:
        assert "not trusted" in result.stderr and "--trust-config" in result.stderr, result.stderr


@pytest.mark.parametrize("case", ["script", "shell", "missing", "fake-venv", "venv-without-setting"])
def test_check_trust_config_still_runs_only_a_python(tmp_path: Path, case: str) -> None:
    repo = hostile_repo(tmp_path, case)

    result = check(repo.root, "--trust-config", ".")

    assert not repo.ran()
    if repo.python is not None:
        assert "not used" in result.stderr, result.stderr


def test_check_trust_config_and_python_are_the_users_choice(tmp_path: Path) -> None:
    """The control cases: asked to, check does start the repository's virtualenv (and its .pth runs)."""
    repo = hostile_repo(tmp_path, "committed-venv")

    check(repo.root, "--trust-config", ".")
    assert repo.ran()
    repo.marker.unlink()

    check(repo.root, "--python", ".venv", ".")
    assert repo.ran()


# ----- symbolic links when check walks a folder --------------------------------------------------


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


STEPS = """\
def train_step(fabric, model, optimizer, x):
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

USES_PKG = """\
import torch
from lightning.fabric import Fabric

from pkg.steps import train_step

fabric = Fabric(accelerator="cuda", devices=1, precision="16-mixed")
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = fabric.setup(model, optimizer)

for step in range(100):
    train_step(fabric, model, optimizer, torch.randn(4, 16, device=fabric.device))
"""


def _linked_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A checked folder whose links loop, dangle, and lead to fixable scripts outside it."""
    fixable = (ROOT / "examples" / "loss_backward.py").read_text("utf-8")
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "victim.py").write_text(fixable, "utf-8")
    (outside / "pkg" / "__init__.py").write_text("", "utf-8")
    (outside / "pkg" / "steps.py").write_text(STEPS, "utf-8")
    checked = tmp_path / "checked"
    (checked / "sub").mkdir(parents=True)
    (checked / "train.py").write_text(fixable, "utf-8")
    # Its finding, with a safe fix, is in pkg/steps.py, reached through the link `pkg`.
    (checked / "uses_pkg.py").write_text(USES_PKG, "utf-8")
    (checked / "linked.py").symlink_to(outside / "victim.py")
    (checked / "outside_dir").symlink_to(outside, target_is_directory=True)
    (checked / "pkg").symlink_to(outside / "pkg", target_is_directory=True)
    (checked / "loop").symlink_to(checked, target_is_directory=True)
    (checked / "sub" / "up").symlink_to(checked / "sub", target_is_directory=True)
    (checked / "self.py").symlink_to(checked / "self.py")
    (checked / "dangling.py").symlink_to(checked / "nowhere.py")
    return checked, outside


@pytest.mark.parametrize("arguments", [["--fix"], ["--fix", "--unsafe-fixes"], ["--fix", "--format", "json"]])
def test_check_fix_ends_and_writes_nothing_outside_the_checked_folder(
    tmp_path: Path, arguments: list[str]
) -> None:
    checked, outside = _linked_tree(tmp_path)
    before = _snapshot(outside)
    train_before = (checked / "train.py").read_text("utf-8")

    result = check(checked, *arguments, ".")

    assert _snapshot(outside) == before, result.stderr
    assert "left pkg/steps.py alone" in result.stderr, result.stderr
    assert (checked / "train.py").read_text("utf-8") != train_before, result.stdout + result.stderr
    for link in ("linked.py", "outside_dir", "pkg", "loop", "self.py", "dangling.py"):
        assert (checked / link).is_symlink(), link
    assert sorted(p.name for p in outside.rglob("*")) == ["__init__.py", "pkg", "steps.py", "victim.py"]


def test_a_named_link_leading_outside_is_checked_but_not_fixed(tmp_path: Path) -> None:
    checked, outside = _linked_tree(tmp_path)
    before = _snapshot(outside)

    result = check(checked, "--fix", "linked.py")

    assert "outside the checked folders" in result.stderr, result.stderr
    assert _snapshot(outside) == before
    assert (checked / "linked.py").is_symlink()


def test_a_named_link_inside_the_folder_is_fixed_through_and_stays_a_link(tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "loss_backward.py", tmp_path / "real.py")
    (tmp_path / "alias.py").symlink_to(tmp_path / "real.py")
    before = (tmp_path / "real.py").read_text("utf-8")

    check(tmp_path, "--fix", "alias.py")

    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "real.py").read_text("utf-8") != before
