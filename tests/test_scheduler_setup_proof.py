"""FAB035 proven by what Lightning returns: a scheduler passed to ``setup`` comes back as a
``_FabricOptimizer`` (``FabricStepLR``); after the fix the name still holds the plain scheduler,
which steps the optimizer Fabric wrapped. Runs the rule's own samples under the real Lightning."""

from __future__ import annotations

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.rules import scheduler_passed_to_setup as rule

pytest.importorskip("lightning")
from lightning_harness import run_many  # noqa: E402

DDP_CASE = rule.INVALID[0]
ON_CPU = ('accelerator="cuda", devices=2, strategy="ddp"', 'accelerator="cpu", devices=1')

WRAPPED = """
from lightning.fabric.wrappers import _FabricOptimizer

assert type(optimizer).__name__ == "FabricSGD", type(optimizer)
assert type(scheduler).__name__ == "FabricStepLR", type(scheduler)
assert isinstance(scheduler, _FabricOptimizer) and isinstance(scheduler, torch.optim.lr_scheduler.StepLR)
"""
KEPT = """
from lightning.fabric.wrappers import _FabricOptimizer

assert type(scheduler) is torch.optim.lr_scheduler.StepLR, type(scheduler)
assert not isinstance(scheduler, _FabricOptimizer)
loss = model(torch.randn(2, 4, device=fabric.device)).sum()
fabric.backward(loss)
optimizer.step()
scheduler.step()
assert optimizer.param_groups[0]["lr"] == 0.1 * 0.1, optimizer.param_groups[0]["lr"]  # StepLR's gamma
"""


def test_scheduler_comes_back_wrapped_as_an_optimizer_and_the_fix_keeps_it():
    invalid_cpu = DDP_CASE.source.replace(*ON_CPU)
    fixed_cpu = DDP_CASE.fixed.replace(*ON_CPU)
    assert invalid_cpu != DDP_CASE.source
    on_gpus = run_many([DDP_CASE.source + WRAPPED, DDP_CASE.fixed + KEPT], profile="gpu8", timeout=60)
    on_cpu = run_many([invalid_cpu + WRAPPED, fixed_cpu + KEPT], profile="cpu", timeout=60)
    for outcome in [*on_gpus, *on_cpu]:
        assert outcome.error_class is None, f"{outcome.error_class}: {outcome.message}\n{outcome.stderr_tail}"


def test_the_rule_fires_whatever_the_strategy(tmp_path):
    invalid_cpu = DDP_CASE.source.replace(*ON_CPU)
    findings = analyze_source(invalid_cpu, str(tmp_path / "train.py")).findings
    assert [(f.code, f.span.start_line + 1, f.severity) for f in findings] == [("FAB035", 9, "warning")]
    assert "`scheduler` is a learning-rate scheduler" in findings[0].message
