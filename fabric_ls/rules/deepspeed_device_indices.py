"""FAB027: DeepSpeed given device indices other than 0..n-1 (raised when ``launch`` sets up the
processes, ``_validate_device_index_selection``)."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB027"
METHODS = ("launch",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if not strategy.is_a("DeepSpeedStrategy") or strategy.accelerator != "cuda" or strategy.cli:
        return None
    indices = _literal_indices(event.fabric.node)
    if indices is None or indices == list(range(len(indices))):
        return None
    return Violation(
        event.node,
        {"indices": repr(indices), "visible": ",".join(map(str, indices)), "count": len(indices)},
    )


def _literal_indices(fabric_call: ast.Call) -> Optional[list[int]]:
    """``devices=[1, 3]`` or ``devices="1,3"`` as Lightning parses them; None for a count or a variable."""
    for keyword in fabric_call.keywords:
        if keyword.arg != "devices":
            continue
        try:
            value = ast.literal_eval(keyword.value)
        except ValueError:
            return None
        if isinstance(value, str) and "," in value:
            parts = [part.strip() for part in value.split(",") if part]
            return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None
        if isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
            return list(value)
        return None
    return None


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=[0, 1], strategy="deepspeed")
fabric.launch()
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=[1, 3], strategy="deepspeed")
fabric.launch()
""",
        4,
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices="2,3", strategy="deepspeed")
fabric.launch()
""",
        4,
    ),
]
