"""FAB009: a multi-process strategy used before ``fabric.launch()`` (setup, collectives, save/load).

Severity is a warning by default: ``fabric run`` launches the processes for the
script, and nothing in the source says whether it will be used.
"""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.strategies import is_single_process, uses_spawn_launcher
from fabric_ls.fixes import alone_on_lines, indent_of, insert_at_end, make_fix, newline_of, single_target
from fabric_ls.model import Fix
from fabric_ls.rules.common import Case

RULE = "FAB009"
METHODS = (
    "setup",
    "setup_module",
    "setup_optimizers",
    "setup_dataloaders",
    "init_module",
    "barrier",
    "broadcast",
    "all_gather",
    "all_reduce",
    "save",
    "load",
)
# Decided by the launcher and the hardware: the strategy matrix leaves it out.
MACHINE_DEPENDENT = True
DEFAULT_SEVERITY = "warning"


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if event.fabric.launched or strategy.class_name is None or is_single_process(strategy.class_name):
        return None
    # Launched somewhere we cannot see, or assumed to run under `fabric run` (which launches).
    if event.fabric.escaped or strategy.assumed:
        return None
    fix = (
        None if uses_spawn_launcher(strategy.class_name, strategy.start_method) else insert_launch_fix(event)
    )
    return Violation(event.node, {"method": event.method}, fix)


def insert_launch_fix(event: CallEvent) -> Optional[Fix]:
    """FAB009: call ``fabric.launch()`` right after the Fabric is created."""
    place = event.fabric.place
    if place is None or event.fabric.path != event.parsed.path:
        return None
    name = single_target(place.statement)
    if name is None or not alone_on_lines(event.parsed, place.statement):
        return None
    text = newline_of(event.parsed) + indent_of(event.parsed, place.statement) + f"{name}.launch()"
    return make_fix(RULE, [insert_at_end(event.parsed, place.statement, text)])


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
""",
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1)
model = fabric.setup(torch.nn.Linear(4, 2))
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
model = fabric.setup(torch.nn.Linear(4, 2))
""",
        5,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))
""",
    ),
]
