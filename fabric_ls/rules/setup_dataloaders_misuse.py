"""FAB015: ``setup_dataloaders`` (and ``setup_optimizers``) called with nothing, or twice on one loader."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import SetupDataLoader
from fabric_ls.rules.common import Case, lightning_sentence

RULE = "FAB015"
METHODS = ("setup_dataloaders", "setup_optimizers")
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False
# Fires on arguments that are absent: not on a call whose closing bracket is not typed yet.
JUDGES_MISSING_ARGUMENTS = True


def check(event: CallEvent) -> Optional[Violation]:
    if any(isinstance(a, ast.Starred) for a in event.node.args):
        return None
    if event.method == "setup_optimizers":
        if event.args or event.keywords:
            return None
        # fabric.py:1232 raises the optimizer twin of this check.
        return Violation(event.node, {"problem": lightning_sentence(RULE, "requires at least one optimizer")})
    if not event.args:
        return Violation(event.node, {"problem": lightning_sentence(RULE, "requires at least one")})
    if any(isinstance(a, SetupDataLoader) for a in event.args):
        return Violation(event.node, {"problem": lightning_sentence(RULE, "passed only once")})
    return None


VALID = [
    """from torch.utils.data import DataLoader
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(DataLoader(list(range(8)), batch_size=2))
""",
]
INVALID = [
    Case(
        """from torch.utils.data import DataLoader
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(DataLoader(list(range(8)), batch_size=2))
loader = fabric.setup_dataloaders(loader)
""",
        6,
        profile="cpu",
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
optimizers = fabric.setup_optimizers()
""",
        4,
        profile="cpu",
    ),
]
