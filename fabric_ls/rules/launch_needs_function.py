"""FAB006: a spawning launcher (``ddp_spawn``, ``xla``, …) and ``launch()`` without a function."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.strategies import uses_spawn_launcher
from fabric_ls.rules.common import Case

RULE = "FAB006"
METHODS = ("launch",)
# Fires on arguments that are absent: not on a call whose closing bracket is not typed yet.
JUDGES_MISSING_ARGUMENTS = True


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if strategy.class_name is None or event.args or "function" in event.keywords:
        return None
    if not uses_spawn_launcher(strategy.class_name, strategy.start_method):
        return None
    return Violation(event.node)


VALID = [
    """from lightning.fabric import Fabric


def train(fabric):
    pass


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch()
""",
        4,
    ),
]
