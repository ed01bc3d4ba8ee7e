"""FAB030: in a notebook, a strategy whose launcher cannot run in an interactive session.

Lightning refuses it in ``Fabric(...)`` (connector.py:522): the subprocess launcher (``ddp``,
DeepSpeed, FSDP) re-runs a script a notebook does not have, and ``spawn`` children cannot import
the notebook's functions. Only a strategy the user names is judged: ``"auto"`` becomes ``ddp_fork``
in an interactive session (connector.py:411).
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.resolve_strategy import ResolvedStrategy
from fabric_ls.analysis.values import Const
from fabric_ls.fixes import keyword_fix, single_target
from fabric_ls.rules.common import Case

RULE = "FAB030"
METHODS = ("Fabric",)
# The samples are notebook code: the engine and the differential harness run them interactively.
SAMPLES_INTERACTIVE = True

# `strategy=` is Fabric's second positional parameter.
_STRATEGY_POSITION = 1
_SUBPROCESS_LAUNCHED = ("DeepSpeedStrategy", "FSDPStrategy", "ModelParallelStrategy")


def launcher_is_interactive(strategy: ResolvedStrategy) -> bool:
    """Whether the strategy's launcher runs in a notebook (each ``is_interactive_compatible``)."""
    if any(strategy.is_a(name) for name in _SUBPROCESS_LAUNCHED):
        return False  # _SubprocessScriptLauncher (launchers/subprocess_script.py:88)
    if strategy.is_a("DDPStrategy"):
        return strategy.start_method == "fork"  # launchers/multiprocessing.py:78-82; popen: subprocess
    return True  # no launcher (single device, DataParallel) or the XLA launcher (xla.py:55)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.parsed.interactive or event.strategy.class_name is None:
        return None
    flag = _strategy_flag(event)
    if flag is None or launcher_is_interactive(event.strategy):
        return None
    written = event.parsed.segment(flag)
    return Violation(event.node, {"flag": written}, _notebook_fix(event, flag))


def _strategy_flag(event: CallEvent) -> Optional[ast.expr]:
    """The ``strategy`` argument as written, unless it is absent or ``"auto"``."""
    node: Optional[ast.expr] = next((k.value for k in event.node.keywords if k.arg == "strategy"), None)
    value = event.keywords.get("strategy")
    if node is None and len(event.node.args) > _STRATEGY_POSITION:
        node = event.node.args[_STRATEGY_POSITION]
        value = event.args[_STRATEGY_POSITION] if len(event.args) > _STRATEGY_POSITION else None
    if node is None or (isinstance(value, Const) and value.value == "auto"):
        return None
    return node


def _notebook_fix(event: CallEvent, flag: ast.expr):  # type: ignore[no-untyped-def]
    """``strategy="ddp_notebook"`` where the script names a DDP variant with a literal string."""
    strategy = event.strategy
    if not (isinstance(flag, ast.Constant) and isinstance(flag.value, str)):
        return None
    if not strategy.is_a("DDPStrategy") or strategy.is_a("DeepSpeedStrategy"):
        return None
    if _launched_without_a_function(event):
        return None  # ddp_notebook forks: `launch()` would then need a function (FAB006)
    return keyword_fix(RULE, event.parsed, event.node, "strategy", '"ddp_notebook"', _STRATEGY_POSITION)


def _launched_without_a_function(event: CallEvent) -> bool:
    """The name the Fabric is bound to is given a ``.launch()`` with nothing to run somewhere."""
    name = single_target(event.place.statement) if event.place is not None else None
    return name is not None and any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "launch"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
        and not node.args
        and not node.keywords
        for node in ast.walk(event.parsed.tree)
    )


VALID = [
    """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook")
fabric.launch(train)
""",
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2)
""",
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, strategy="auto")
""",
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="dp")
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook")
""",
    ),
    Case(
        """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch(train)
""",
        8,
        """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook")
fabric.launch(train)
""",
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, strategy="deepspeed")
""",
        3,
    ),
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy())
""",
        4,
    ),
]
