"""The tree stays readable: no module past 600 lines, no dead code (vulture), lint clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fabric_ls"
MAX_LINES = 600


def test_no_module_is_longer_than_600_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern: {long}"


def test_no_dead_code() -> None:
    pytest.importorskip("vulture", reason="vulture comes with the dev extras: pip install -e '.[dev]'")
    completed = subprocess.run(
        [sys.executable, "-m", "vulture", str(PACKAGE), "--min-confidence", "80"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_ruff_is_clean() -> None:
    if shutil.which("ruff", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("ruff comes with the dev extras")
    ruff = str(Path(sys.executable).parent / "ruff")
    completed = subprocess.run([ruff, "check", str(PACKAGE)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout


def test_mypy_is_clean() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the dev extras: pip install -e '.[dev]'")
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", str(PACKAGE), "--no-incremental"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_shared_fixes_module_holds_no_builder_of_one_rule() -> None:
    # A builder that names its rule (make_fix("FAB001", ...)) belongs in that rule's module;
    # fixes.py keeps the edit helpers and the builders that take the rule as a parameter.
    import ast

    tree = ast.parse((PACKAGE / "fixes.py").read_text(encoding="utf-8"))
    named = sorted(
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "make_fix"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    )
    assert named == []


def test_a_rule_module_names_its_rule_once() -> None:
    # The id is written in `RULE = "FAB0xx"` alone: a fix built with the id spelt again would keep
    # the old id if the rule were renumbered.
    import ast

    spelt_again = []
    for path in sorted((PACKAGE / "rules").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "make_fix"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                spelt_again.append(f"{path.name}:{node.lineno}")
    assert spelt_again == []
