"""Where a rewrite could change what the script does, the fix builders offer nothing: the
finding stays, without a fix (fabric_ls/fixes.py: a missing fix is better than a wrong one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fabric_ls.cli_output import DECLINED_REASON
from fabric_ls.engine import analyze_source
from fabric_ls.records import get_record

SPAWN = 'fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")\n'
HEADER = "import torch\nfrom lightning.fabric import Fabric\n\n"

DECLINED = {
    # FAB006: the code after launch() binds `model`, which a function defined earlier reads.
    "FAB006-binds-a-name-read-elsewhere": (
        "FAB006",
        HEADER + "def report():\n    print(model)\n\n\n" + SPAWN + "fabric.launch()\n"
        "model = fabric.setup(torch.nn.Linear(4, 2))\nreport()\n",
    ),
    # FAB006: a second launch() after the first would run inside the launched function.
    "FAB006-launched-twice": (
        "FAB006",
        HEADER + SPAWN + "fabric.launch()\nfabric.launch()\nmodel = fabric.setup(torch.nn.Linear(4, 2))\n",
    ),
    # FAB006: launch() inside a `with` block: the code after it is not at a top level.
    "FAB006-not-at-top-level": (
        "FAB006",
        HEADER + SPAWN + "with torch.no_grad():\n    fabric.launch()\n"
        "    model = fabric.setup(torch.nn.Linear(4, 2))\n",
    ),
    # FAB006: under spawn a function defined inside a function cannot be pickled for the workers.
    "FAB006-spawn-inside-a-function": (
        "FAB006",
        HEADER + "def main():\n    " + SPAWN + "    fabric.launch()\n"
        "    model = fabric.setup(torch.nn.Linear(4, 2))\n\n\nmain()\n",
    ),
    # FAB006: under spawn the workers never run the main guard, where `width` is bound.
    "FAB006-spawn-reads-a-main-only-name": (
        "FAB006",
        HEADER + 'if __name__ == "__main__":\n    width = 4\n    ' + SPAWN + "    fabric.launch()\n"
        "    model = fabric.setup(torch.nn.Linear(width, 2))\n",
    ),
    # FAB005: the loss flows through both models and no optimizer step says whose it is.
    "FAB005-loss-of-two-models": (
        "FAB005",
        HEADER
        + 'fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")\nfabric.launch()\n'
        "g, g_opt = fabric.setup(torch.nn.Linear(4, 4), torch.optim.Adam([torch.zeros(1)]))\n"
        "c, c_opt = fabric.setup(torch.nn.Linear(4, 1), torch.optim.Adam([torch.ones(1)]))\n"
        "fabric.backward(c(g(torch.randn(2, 4))).sum())\n",
    ),
    # FAB005: one name was given two set-up models: which one the loss belongs to is not in view.
    "FAB005-a-name-set-up-twice": (
        "FAB005",
        HEADER
        + 'fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")\nfabric.launch()\n'
        "m, opt = fabric.setup(torch.nn.Linear(4, 4), torch.optim.Adam([torch.zeros(1)]))\n"
        "m = fabric.setup_module(torch.nn.Linear(4, 1))\n"
        "fabric.backward(m(torch.randn(2, 4)).sum())\n",
    ),
    # FAB001: the same Fabric(...) gets FSDP on the other path, where the model is on the meta
    # device: a joint setup there is FAB002, so the fix would only move the error.
    "FAB001-beside-fsdp": (
        "FAB001",
        "import sys\nimport torch\nfrom lightning.fabric import Fabric\n"
        "from lightning.fabric.strategies import FSDPStrategy\n\n"
        'tpu = "--tpu" in sys.argv\nstrategy = "xla" if tpu else FSDPStrategy()\n'
        'fabric = Fabric(accelerator="tpu" if tpu else "cuda", devices=8, strategy=strategy)\n'
        "fabric.launch(lambda fabric: None)\n"
        "with fabric.init_module(empty_init=True):\n    model = torch.nn.Linear(4, 2)\n"
        "model = fabric.setup(model)\noptimizer = torch.optim.AdamW(model.parameters())\n"
        "optimizer = fabric.setup_optimizers(optimizer)\n",
    ),
    # FAB001: one Fabric with XLA or XLA-FSDP (its options): XLA-FSDP refuses the joint setup (FAB011).
    "FAB001-beside-xla-fsdp": (
        "FAB001",
        "import sys\nimport torch\nfrom lightning.fabric import Fabric\n"
        "from lightning.fabric.strategies import XLAFSDPStrategy, XLAStrategy\n\n"
        'fabric = Fabric(accelerator="tpu", devices=8, '
        "strategy=XLAStrategy() if len(sys.argv) > 1 else XLAFSDPStrategy())\n"
        "fabric.launch(lambda fabric: None)\nmodel = fabric.setup_module(torch.nn.Linear(4, 2))\n"
        "optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))\n",
    ),
    # FAB017: `main` takes no parameter, so `launch(main)` would fail Lightning's other check.
    "FAB017-function-without-parameter": (
        "FAB017",
        "from lightning.fabric import Fabric\n\n\ndef main():\n    pass\n\n\n"
        'fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")\nfabric.launch(main())\n',
    ),
}


@pytest.mark.parametrize("rule,source", DECLINED.values(), ids=list(DECLINED))
def test_the_finding_stays_without_a_fix(tmp_path, rule, source):
    findings = analyze_source(source, str(tmp_path / "train.py")).findings
    assert [f.code for f in findings] == [rule]
    assert findings[0].fix is None


def test_the_cli_says_why_there_is_no_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DECLINED["FAB006-not-at-top-level"][1], encoding="utf-8")
    shown = subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", "--no-color", "--show-fixes", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.splitlines()
    assert shown[0].startswith("train.py:6:5: error FAB006 ")
    assert shown[1] == f"  no fix here: {DECLINED_REASON}; example fix: {get_record('FAB006').docs_url}"


def test_no_ddp_notebook_fix_where_launch_has_nothing_to_run(tmp_path):
    """``ddp_notebook`` forks: a ``fabric.launch()`` without a function would then be FAB006, so the
    FAB030 fix is offered only where the launch names what to run."""
    bare = HEADER + 'fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")\n'
    without = analyze_source(bare + "fabric.launch()\n", str(tmp_path / "nb.py"), interactive=True).findings
    assert [(f.code, f.fix) for f in without] == [("FAB030", None)]
    with_function = bare + "fabric.launch(lambda fabric: None)\n"
    [finding] = analyze_source(with_function, str(tmp_path / "nb.py"), interactive=True).findings
    assert finding.code == "FAB030" and finding.fix is not None
