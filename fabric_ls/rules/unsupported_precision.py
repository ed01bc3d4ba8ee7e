"""FAB022: a precision the strategy's precision plugin refuses."""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules.common import Case

RULE = "FAB022"
METHODS = ("Fabric",)

# plugins/precision/{deepspeed,fsdp,xla}.py `_PRECISION_INPUT`, connector.py:466.
_ALLOWED = {
    "DeepSpeedStrategy": ("DeepSpeed", ("32-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed")),
    "FSDPStrategy": ("FSDP", ("32-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed")),
    "XLAStrategy": ("XLA", ("32-true", "16-true", "bf16-true")),
    "XLAFSDPStrategy": ("XLA", ("32-true", "16-true", "bf16-true")),
    "SingleDeviceXLAStrategy": ("XLA", ("32-true", "16-true", "bf16-true")),
    "ModelParallelStrategy": ("ModelParallelStrategy", ("32-true", "bf16-mixed", "bf16-true", "16-true")),
}


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    precision = strategy.precision
    if strategy.class_name is None or precision is None:
        return None
    for base, (plugin, allowed) in _ALLOWED.items():
        if strategy.is_a(base):
            if precision in allowed:
                return None
            return Violation(
                event.node, {"precision": precision, "allowed": ", ".join(allowed), "plugin": plugin}
            )
    return None


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed", precision="bf16-mixed")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed", precision="64-true")
""",
        3,
    ),
]
