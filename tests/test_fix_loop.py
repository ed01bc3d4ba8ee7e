"""`fabric-ls check --fix` runs to a fixed point, as `ruff --fix` does: apply, check again, repeat
(bounded); a fix uncovered by another is applied in a later round, an edit two findings share is
made once, and the closing summary is a fresh check of the written files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fabric_ls.cli import _plan_fixes
from fabric_ls.engine import analyze_source
from fabric_ls.model import Finding

# No launch(): FAB009 (warning) on setup_module hides the FAB001 that setup_optimizers would raise.
UNLAUNCHED = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
FIXED = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
"""


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", "--no-color", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_fix_uncovers_the_next_and_the_summary_is_a_fresh_check(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(UNLAUNCHED, encoding="utf-8")
    first = check("train.py", cwd=tmp_path)
    assert [line.split()[2] for line in first.stdout.splitlines()[:-1]] == ["FAB009"]
    fixed = check("--fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert script.read_text(encoding="utf-8") == FIXED
    assert fixed.stderr.splitlines() == [
        "Fixed train.py:6: FAB009 Call `fabric.launch()` after creating `Fabric`",
        "Fixed train.py:8: FAB001 Set up model and optimizer together with `fabric.setup(model, optimizer)`",
    ]
    again = check("train.py", cwd=tmp_path)
    assert fixed.stdout == again.stdout == "All checks passed (1 file).\n"
    assert (fixed.returncode, again.returncode) == (0, 0)


def test_the_summary_reports_what_the_fixes_left(tmp_path):
    # Without --unsafe-fixes the launch is not inserted: the summary is the check of the file as written.
    script = tmp_path / "train.py"
    script.write_text(UNLAUNCHED, encoding="utf-8")
    fixed = check("--fix", "train.py", cwd=tmp_path)
    assert script.read_text(encoding="utf-8") == UNLAUNCHED
    assert fixed.stdout == check("train.py", cwd=tmp_path).stdout
    assert fixed.returncode == 1


def test_the_fixed_script_runs_under_lightning(tmp_path):
    pytest.importorskip("lightning")
    from lightning_harness import run_many

    script = tmp_path / "train.py"
    script.write_text(UNLAUNCHED, encoding="utf-8")
    check("--fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    before, after = run_many([UNLAUNCHED, script.read_text(encoding="utf-8")], profile="gpu8")
    assert before.raised_by_lightning and before.line == 6
    assert after.error_class is None, after.message


def test_an_edit_two_findings_share_is_made_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(UNLAUNCHED, encoding="utf-8")
    (finding,) = analyze_source(UNLAUNCHED, str(script)).findings
    assert finding.code == "FAB009" and finding.fix is not None
    # The same insertion, asked for by a second call that needs the launch.
    second = Finding(**{**finding.__dict__, "span": finding.span.__class__(6, 0, 6, 9)})
    (plan,), remaining = _plan_fixes([finding, second], unsafe=True)
    assert plan.chosen == [finding, second] and remaining == []
    assert plan.updated.count("fabric.launch()") == 1


@pytest.mark.parametrize("flags", [(), ("--unsafe-fixes",)], ids=["safe", "unsafe"])
def test_the_stars_and_the_summary_count_the_same_fixes(flags):
    # `[*]` marks what `--fix` (with these flags) applies; the summary counts exactly those.
    output = check(*flags, "examples", cwd=Path(__file__).resolve().parent.parent).stdout.splitlines()
    stars = sum(" [*] " in line for line in output[:-1])
    summary = output[-1]
    assert stars > 0 and f" {stars} fixable with `--fix`" in summary, summary
    # Without the flag, the unsafe fixes are counted apart; with it, they are among the stars.
    assert ("more with `--unsafe-fixes`" in summary) == (not flags), summary
