"""FAB032: a ``spawn`` launch that the script reaches when it is imported (no ``__main__`` guard).

Each spawned child imports the script again as ``__mp_main__``; if that import gets to
``fabric.launch(fn)``, Lightning's ``_check_missing_main_guard`` raises in the child
(launchers/multiprocessing.py:242-261), and the parent's ``launch()`` re-raises it.
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.records import get_record
from fabric_ls.rules.common import Case
from fabric_ls.rules.launch_path import LaunchPath

RULE = "FAB032"
METHODS = ("launch",)


def spawns(event: CallEvent) -> bool:
    """The launch goes through ``_MultiProcessingLauncher`` with the spawn start method."""
    strategy = event.strategy
    return (
        strategy.is_a("DDPStrategy")
        and not strategy.is_a("DeepSpeedStrategy")
        and strategy.start_method == "spawn"
    )


def check(event: CallEvent) -> Optional[Violation]:
    # In a notebook the spawn strategy is refused earlier (FAB030); a call in another module is not judged.
    if event.parsed.interactive or event.via is not None or not spawns(event):
        return None
    if not (event.args or "function" in event.keywords):
        return None  # FAB006 first: launch() without a function
    path = LaunchPath(event.parsed.tree, as_main=False).path_to(event.node)
    if path is None:
        return None
    return Violation(event.node, {}, main_guard_fix(event.parsed, path[0]))


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def main_guard_fix(parsed: ParsedSource, first: ast.stmt) -> Optional[Fix]:
    """Put ``first`` (a top-level statement) and the statements after it, up to the next definition
    or import, under ``if __name__ == "__main__":``, indented by four spaces."""
    body = parsed.tree.body
    if first not in body or first.col_offset != 0:
        return None
    start = body.index(first)
    wrapped = [first]
    for statement in body[start + 1 :]:
        if isinstance(statement, _DEFINITIONS):
            break
        wrapped.append(statement)
    first_line, last_line = first.lineno - 1, (wrapped[-1].end_lineno or wrapped[-1].lineno) - 1
    if parsed.line_text(first_line)[: first.col_offset].strip() or _multiline_string(wrapped):
        return None  # another statement before it on its line; indenting would change a string
    lines = [parsed.line_text(n) for n in range(first_line, last_line + 1)]
    last = lines[-1].rstrip("\r\n")
    newline = lines[0][len(lines[0].rstrip("\r\n")) :] or "\n"
    indented = "".join("    " + line if line.strip() else line for line in [*lines[:-1], last])
    text = f'if __name__ == "__main__":{newline}{indented}'
    spec = get_record(RULE).fix
    if spec is None:
        return None
    return Fix(
        spec.title, (TextEdit(Span(first_line, 0, last_line, len(last)), text),), spec.safety == "safe"
    )


def _multiline_string(statements: list[ast.stmt]) -> bool:
    return any(
        isinstance(node, (ast.Constant, ast.JoinedStr)) and (node.end_lineno or node.lineno) > node.lineno
        for statement in statements
        for node in ast.walk(statement)
    )


VALID = [
    """from lightning.fabric import Fabric


def train(fabric):
    pass


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)
""",
    """from lightning.fabric import Fabric


def train(fabric):
    pass


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
    fabric.launch(train)


if __name__ == "__main__":
    main()
""",
    """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
fabric.launch(train)
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
fabric.launch(train)
print("done")
""",
        9,
        """from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
if __name__ == "__main__":
    fabric.launch(train)
    print("done")
""",
    ),
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy


def train(fabric):
    pass


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy=DDPStrategy(start_method="spawn"))
    fabric.launch(train)


main()
""",
        11,
        """from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy


def train(fabric):
    pass


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy=DDPStrategy(start_method="spawn"))
    fabric.launch(train)


if __name__ == "__main__":
    main()
""",
    ),
]
