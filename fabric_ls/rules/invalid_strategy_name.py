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
# Names of Lightning 1.x and of the Trainer that Fabric's registry does not have, and what stands for
# them; True where the replacement means the same (a close spelling may well not: "ddp_sharded" is
# two letters from "ddp_spawn").
_RENAMED = {
    "ddp_find_unused_parameters_false": ("ddp", True),  # Fabric's DDP does not look for them by default
    "ddp_sharded": ("fsdp", False),
    "ddp_sharded_spawn": ("fsdp", False),
    "ddp_fully_sharded": ("fsdp", False),
    "fsdp_native": ("fsdp", False),
    "tpu_spawn": ("xla", False),
    "single_device": ("auto", False),
}
# A spelling this close to a registered name is a typo of it; a farther one is only a guess.
_TYPO_RATIO = 0.9


def check(event: CallEvent) -> Optional[Violation]:
    violation = constructor_problem(event, RULE)
    if violation is not None:
        violation.fix = closest_strategy_name_fix(event)
    return violation


def closest_strategy_name_fix(event: CallEvent) -> Optional[Fix]:
    """FAB021: an old name → Fabric's; a misspelt registry name → the closest one (unsafe unless it
    is a typo). Names the registry cannot build from a string (``single_xla``) are never offered."""
    from difflib import SequenceMatcher, get_close_matches

    from fabric_ls.analysis.strategies import REGISTRY

    names = [name for name, entry in REGISTRY.items() if not entry.broken] + ["auto"]
    for keyword in event.node.keywords:
        value = keyword.value
        if keyword.arg == "strategy" and isinstance(value, ast.Constant) and isinstance(value.value, str):
            written = value.value.lower()
            if written in _RENAMED:
                replacement, safe = _RENAMED[written]
            else:
                matches = get_close_matches(written, names, n=1, cutoff=0.6)
                if not matches:
                    return None
                replacement = matches[0]
                safe = SequenceMatcher(None, written, replacement).ratio() >= _TYPO_RATIO
            edit = TextEdit(event.parsed.span(value), f'"{replacement}"')
            return make_fix(RULE, [edit], safe=safe)
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
    # No name at all: a YAML ``strategy: null`` or an argparse ``default=None`` read as it is.
    Case(
        """import json
from lightning.fabric import Fabric

config = json.loads('{"strategy": null, "devices": 2}')
fabric = Fabric(accelerator="cuda", **config)
""",
        5,
    ),
    # A Lightning 1.x name: Fabric's DDP does not look for unused parameters unless told to.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_find_unused_parameters_false")
fabric.launch()
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch()
""",
    ),
]
