"""The shipped pre-commit hook, run by the real `pre-commit` on a throwaway git repository.

pre-commit installs the hook the way a user's machine does: it clones the hook repository (a
snapshot of this checkout, committed in a temporary folder) and pip-installs it into its own
virtualenv, which needs only the package registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit", reason="pre-commit is in the `test` extra")

from samples import DEEPSPEED, DEEPSPEED_FIXED

ROOT = Path(__file__).resolve().parent.parent
# What `pip install` of the hook repository needs, and the hook definition itself.
HOOK_REPO_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "fabric_ls")
# pip's words when the package registry cannot be reached: then the test cannot say anything.
NO_REGISTRY = ("No matching distribution found", "Could not find a version", "NewConnectionError")

BAD, FIXED = DEEPSPEED, DEEPSPEED_FIXED


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-cache"),
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.com",
        # Neither the machine's nor the user's git settings (signing, a hooks path) apply here.
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        NO_COLOR="1",
    )
    return env


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _hook_repository(folder: Path, env: dict[str, str]) -> str:
    """A git repository holding this checkout's hook and package; returns its commit."""
    folder.mkdir()
    for name in HOOK_REPO_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, folder / name)
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"]):
        subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
    return _run(["git", "rev-parse", "HEAD"], folder, env).stdout.strip()


def test_the_hook_blocks_a_bad_script_and_lets_the_fixed_one_through(tmp_path):
    env = _environment(tmp_path)
    hook_repo = tmp_path / "fabric-ls"
    revision = _hook_repository(hook_repo, env)
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, env=env, check=True)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {revision}\n    hooks:\n      - id: fabric-ls\n"
    )
    installed = _run([sys.executable, "-m", "pre_commit", "install"], project, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (project / "train.py").write_text(BAD)
    (project / "notes.txt").write_text("not python: the hook does not see it\n")
    _run(["git", "add", "-A"], project, env)

    blocked = _run(["git", "commit", "-m", "train"], project, env)
    output = blocked.stdout + blocked.stderr
    log = tmp_path / "pre-commit-cache" / "pre-commit.log"
    if blocked.returncode != 0 and log.exists() and any(text in log.read_text() for text in NO_REGISTRY):
        pytest.skip("pre-commit could not pip-install the hook: the package registry is out of reach")
    assert blocked.returncode == 1, output
    assert "fabric-ls" in output and "Failed" in output
    assert "train.py:8:13: error FAB001 [*]" in output
    assert _run(["git", "rev-parse", "--verify", "HEAD"], project, env).returncode != 0  # nothing committed

    (project / "train.py").write_text(FIXED)
    _run(["git", "add", "train.py"], project, env)
    passed = _run(["git", "commit", "-m", "train"], project, env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout + passed.stderr
    assert _run(["git", "rev-parse", "--verify", "HEAD"], project, env).returncode == 0
