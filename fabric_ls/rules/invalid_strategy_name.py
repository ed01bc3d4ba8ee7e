"""FAB021: a strategy name Lightning does not know, or a strategy object from the other package."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case, constructor_problem

RULE = "FAB021"
METHODS = ("Fabric",)


def check(event: CallEvent) -> Optional[Violation]:
    violation = constructor_problem(event, RULE)
    if violation is not None:
        violation.fix = closest_strategy_name_fix(event)
    return violation


def closest_strategy_name_fix(event: CallEvent) -> Optional[Fix]:
    """FAB021: a misspelt registry name → the closest registered one."""
    from difflib import get_close_matches

    from fabric_ls.analysis.strategies import REGISTRY

    for keyword in event.node.keywords:
        value = keyword.value
        if keyword.arg == "strategy" and isinstance(value, ast.Constant) and isinstance(value.value, str):
            matches = get_close_matches(value.value.lower(), [*REGISTRY, "auto"], n=1, cutoff=0.6)
            if matches:
                return make_fix(
                    RULE, [TextEdit(event.parsed.span(value), repr(matches[0]).replace("'", '"'))]
                )
    return None


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="DeepSpeed")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stag_3")
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
""",
    ),
]
