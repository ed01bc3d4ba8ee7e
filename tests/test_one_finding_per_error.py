"""One finding per real error: once Lightning raises on every path, the same rule on the same Fabric
later in the script is never reached; it is listed with the first finding, not reported again."""

from __future__ import annotations

from fabric_ls import engine

NO_LAUNCH = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.AdamW(model.parameters())
optimizer = fabric.setup_optimizers(optimizer)
"""


def test_a_missing_launch_is_reported_once_with_the_later_calls_as_related_information() -> None:
    analysis = engine.analyze_source(NO_LAUNCH, "/w/train.py")

    [finding] = analysis.findings
    assert (finding.code, finding.span.start_line + 1) == ("FAB009", 6)
    [later] = [origin for origin in finding.related if "not reached" in origin.note]
    assert later.span.start_line + 1 == 8


def test_conditional_findings_are_all_kept() -> None:
    # The first call raises only when `distributed`: the second may be reached, so both are reported.
    source = NO_LAUNCH.replace(
        "model = fabric.setup_module(model)", "if distributed:\n    model = fabric.setup_module(model)"
    ).replace("import torch\n", "import torch\nimport sys\n\ndistributed = len(sys.argv) > 1\n")
    analysis = engine.analyze_source(source, "/w/train.py")
    assert [finding.code for finding in analysis.findings].count("FAB009") == 2


def test_a_warning_repeated_under_the_same_condition_is_reported_once() -> None:
    # Without launch() on a machine with several GPUs: every later setup call fires on paths where the
    # first one raised already, so it is listed with the first, not reported again.
    source = NO_LAUNCH.replace("devices=2", 'devices=int(os.environ.get("NGPU", "1"))').replace(
        "import torch\n", "import os\nimport torch\n"
    )
    analysis = engine.analyze_source(source, "/w/train.py")
    [finding] = analysis.findings
    assert (finding.code, finding.severity, finding.span.start_line + 1) == ("FAB009", "warning", 7)
    [later] = [origin for origin in finding.related if "not reached" in origin.note]
    assert later.span.start_line + 1 == 9


def test_a_clause_that_reads_the_same_is_said_once() -> None:
    # Two calls of one helper are two decisions with one description: the condition names it once.
    from fabric_ls.analysis.guards import DecisionInfo, Guards

    guards = Guards()
    texts = ("`parse_devices(devices)` returns another value", "`parse_devices(devices)` returns 1")
    first = guards.option(guards.decision(DecisionInfo("summary:1", texts)), 0)
    second = guards.option(guards.decision(DecisionInfo("summary:2", texts)), 0)
    big = guards.option(
        guards.decision(DecisionInfo("order:devices", ("`devices > 1`", "not `devices > 1`"))), 0
    )
    either = guards.or_(guards.and_(first, big), guards.and_(second, big))
    assert guards.describe(either) == "`parse_devices(devices)` returns another value and `devices > 1`"
