"""FAB017: ``launch`` given a non-function or a function without parameters, or called at all
under ``fabric run`` (a declared strategy stands for it).

A second ``launch()`` is not reported: the first one sets ``LOCAL_RANK``, after which
the subprocess launcher treats the processes as created (checked by running lightning).
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import BoundMethod, Const, FunctionRef
from fabric_ls.fixes import pass_callable_fix
from fabric_ls.rules.common import Case, lightning_sentence

RULE = "FAB017"
METHODS = ("launch",)
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False


def check(event: CallEvent) -> Optional[Violation]:
    if event.strategy.cli:
        # Checked first in launch() (fabric.py:990), whatever the function.
        return Violation(event.node, {"problem": lightning_sentence(RULE, "launched through the CLI")})
    function = event.args[0] if event.args else event.keywords.get("function")
    if function is not None:
        # Only a value known not to be callable: what a script function returned (``main()``
        # ran and gave None) or a literal. A call into a library may well return a callable.
        if isinstance(function, Const):
            text = event.parsed.segment(event.node.args[0]) if event.node.args else "the value"
            problem = lightning_sentence(RULE, "needs to be a callable").replace("{function}", text)
            return Violation(event.node, {"problem": problem}, pass_callable_fix(event))
        if isinstance(function, FunctionRef) and _takes_no_arguments(function.node):
            problem = lightning_sentence(RULE, "needs to take at least one argument").replace(
                "{function}", getattr(function.node, "name", "<lambda>")
            )
            return Violation(event.node, {"problem": problem})
        if isinstance(function, BoundMethod) and _takes_no_arguments(function.function.node, skip=1):
            name = getattr(function.function.node, "name", "method")
            problem = lightning_sentence(RULE, "needs to take at least one argument").replace(
                "{function}", name
            )
            return Violation(event.node, {"problem": problem})
    return None


def _takes_no_arguments(node: ast.AST, skip: int = 0) -> bool:
    arguments = getattr(node, "args", None)
    if not isinstance(arguments, ast.arguments):
        return False
    positional = [*getattr(arguments, "posonlyargs", []), *arguments.args][skip:]
    return not positional and arguments.vararg is None


VALID = [
    """from lightning.fabric import Fabric


def main(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main)
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric


def main():
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main)
""",
        9,
    ),
]
