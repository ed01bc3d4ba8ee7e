"""FAB017: ``launch`` given a non-function or a function without parameters, or called at all
under ``fabric run`` (a declared strategy stands for it).

A second ``launch()`` is not reported: the first one sets ``LOCAL_RANK``, after which
the subprocess launcher treats the processes as created (checked by running lightning).
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import BoundMethod, Const, FunctionRef, Partial
from fabric_ls.fixes import make_fix, repaired_between
from fabric_ls.model import Fix, TextEdit
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
        if isinstance(function, Partial) and not function.keywords:
            # ``launch(partial(main, cfg))`` with ``def main(cfg)``: the partial takes nothing more.
            target, skip = function.function, len(function.args)
            if isinstance(target, BoundMethod):
                target, skip = target.function, skip + 1
            if isinstance(target, FunctionRef) and _takes_no_arguments(target.node, skip=skip):
                name = f"functools.partial(<function {getattr(target.node, 'name', '<lambda>')}>, ...)"
                problem = lightning_sentence(RULE, "needs to take at least one argument").replace(
                    "{function}", name
                )
                return Violation(event.node, {"problem": problem})
    return None


def pass_callable_fix(event: CallEvent) -> Optional[Fix]:
    """``fabric.launch(train(fabric))`` → ``fabric.launch(train)``: launch calls it with the Fabric.

    The Fabric passed first is the one ``launch`` passes; further arguments follow the function,
    as ``launch(function, *args, **kwargs)`` forwards them. A call without the Fabric is rewritten
    only when the function is defined in the script and takes a positional parameter (else the
    fixed call would fail the "at least one argument" check instead).
    """
    node = event.node
    if len(node.args) != 1 or node.keywords:
        return None
    if repaired_between(event.parsed, node.lineno - 1, node.end_lineno - 1):  # type: ignore[operator]
        return None
    argument = node.args[0]
    if not isinstance(argument, ast.Call) or not isinstance(argument.func, ast.Name):
        return None
    if any(isinstance(a, ast.Starred) for a in argument.args) or any(
        k.arg is None for k in argument.keywords
    ):
        return None
    parsed = event.parsed
    rest = argument.args
    if rest and isinstance(rest[0], ast.Name) and rest[0].id == event.fabric_text:
        rest = rest[1:]
    elif rest or argument.keywords or not _defined_with_parameter(parsed.tree, argument.func.id):
        return None
    pieces = [argument.func.id, *(parsed.segment(a) for a in rest)]
    pieces.extend(parsed.segment(k) for k in argument.keywords)
    return make_fix(RULE, [TextEdit(parsed.span(argument), ", ".join(pieces))])


def _defined_with_parameter(tree: ast.Module, name: str) -> bool:
    definitions = [
        s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name
    ]
    return len(definitions) == 1 and not _takes_no_arguments(definitions[0])


def _takes_no_arguments(node: ast.AST, skip: int = 0) -> bool:
    """``inspect.signature(function).parameters`` is empty (fabric.py:1000): no parameter left after the
    first ``skip`` positional ones (``self``, or what a ``functools.partial`` binds), not even ``*args``,
    a keyword-only one or ``**kwargs``."""
    arguments = getattr(node, "args", None)
    if not isinstance(arguments, ast.arguments):
        return False
    positional = [*getattr(arguments, "posonlyargs", []), *arguments.args][skip:]
    return not (positional or arguments.vararg or arguments.kwonlyargs or arguments.kwarg)


VALID = [
    """from lightning.fabric import Fabric


def main(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main)
""",
    # A partial that binds the other parameter by keyword leaves ``fabric``: launch passes it.
    """import functools
from lightning.fabric import Fabric


def main(fabric, config):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(functools.partial(main, config={"lr": 0.1}))
""",
]
INVALID = [
    # A partial that binds every parameter takes nothing more.
    Case(
        """import functools
from lightning.fabric import Fabric


def main(config):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(functools.partial(main, {"lr": 0.1}))
""",
        10,
    ),
    Case(
        """from lightning.fabric import Fabric


def main():
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main)
""",
        9,
    ),
    Case(
        """from lightning.fabric import Fabric


def main(fabric, steps):
    fabric.print(f"{steps} steps on {fabric.device}")


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main(fabric, 3))
""",
        9,
        """from lightning.fabric import Fabric


def main(fabric, steps):
    fabric.print(f"{steps} steps on {fabric.device}")


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(main, 3)
""",
    ),
]
