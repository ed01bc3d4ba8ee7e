"""A rule is one module plus one record: these tests fail when the two (or the docs) disagree,
and show that adding a rule takes exactly those two files and ``python -m fabric_ls.docgen``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fabric_ls.records import PAGES_DIR, load_records
from fabric_ls.rules import ALL_RULES, BY_ID

PACKAGE = Path(__file__).resolve().parent.parent / "fabric_ls"


def test_every_rule_module_has_a_record_and_a_page() -> None:
    records = load_records()
    for rule in BY_ID:
        assert rule in records, f"{rule}: no fabric_ls/records/{rule}.json"
        assert (PAGES_DIR / f"{rule}.md").is_file(), f"{rule}: run `python -m fabric_ls.docgen`"


def test_a_record_without_a_module_says_it_is_not_checked() -> None:
    for rule, record in load_records().items():
        if rule not in BY_ID:
            assert record.static == "none", f"{rule}: static {record.static!r} but no check"
            assert record.fix is None, f"{rule}: declares a fix, but no check offers it"
            page = (PAGES_DIR / f"{rule}.md").read_text(encoding="utf-8")
            assert "Not checked yet" in page, f"{rule}: run `python -m fabric_ls.docgen`"


@pytest.mark.parametrize("module", ALL_RULES, ids=lambda module: module.RULE)
def test_module_samples_and_record_fix_agree(module) -> None:
    record = load_records()[module.RULE]
    assert module.METHODS, f"{module.RULE}: METHODS names no call"
    assert module.INVALID, f"{module.RULE}: no INVALID sample proves it"
    fixed_samples = [case for case in module.INVALID if case.fixed is not None]
    if record.fix is not None:
        assert fixed_samples, (
            f"{module.RULE}: the record declares a fix; give an INVALID sample its fixed code"
        )
    else:
        assert not fixed_samples, f"{module.RULE}: samples show a fix the record does not declare"


FRESH_MODULE = '''\
"""FAB099: a throwaway rule (tests only): ``fabric.to_device()`` with nothing to move."""

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB099"
METHODS = ("to_device",)


def check(event: CallEvent) -> Optional[Violation]:
    return None if event.node.args else Violation(event.node, {})


VALID = ["import torch\\nfrom lightning.fabric import Fabric\\n\\nFabric().to_device(torch.ones(1))\\n"]
INVALID = [Case("from lightning.fabric import Fabric\\n\\nFabric().to_device()\\n", 3)]
'''


def test_adding_a_rule_is_two_files_and_one_command(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(PACKAGE, tree / "fabric_ls", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "fabric_ls" / "rules" / "to_device_empty.py").write_text(FRESH_MODULE, encoding="utf-8")
    record = (PACKAGE / "records" / "FAB015.json").read_text(encoding="utf-8")
    record = record.replace('"rule": "FAB015"', '"rule": "FAB099"').replace(
        '"name": "setup-dataloaders-misuse"', '"name": "to-device-empty"'
    )
    (tree / "fabric_ls" / "records" / "FAB099.json").write_text(record, encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(tree)}

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *arguments],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )

    generated = run("-m", "fabric_ls.docgen", "--output", str(tree / "fabric_ls" / "docs" / "rules"))
    assert generated.returncode == 0, generated.stderr
    assert (tree / "fabric_ls" / "docs" / "rules" / "FAB099.md").is_file()
    script = tmp_path / "script.py"
    script.write_text("from lightning.fabric import Fabric\n\nFabric().to_device()\n", encoding="utf-8")
    checked = run("-m", "fabric_ls", "check", "--no-color", str(script))
    assert "FAB099" in checked.stdout and ":3:" in checked.stdout, checked.stdout + checked.stderr
    # The new rule is in the contract tests too (they read the discovered rules).
    listed = run("-c", "from fabric_ls.rules import BY_ID; print(sorted(BY_ID))")
    assert "FAB099" in listed.stdout
    assert textwrap.dedent(FRESH_MODULE).startswith('"""FAB099')
