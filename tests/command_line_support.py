"""What the command-line tests share: the setup Lightning refuses under DeepSpeed, and both checks.

Each test module holds shapes ``name → CommandLineShape``: a script whose strategy comes from the
command line, a command line that picks DeepSpeed (Lightning then raises FAB001's error at the
separate ``setup_optimizers``), one that does not, and the condition fabric-ls prints.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import NamedTuple

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

SETUP_OPTIMIZERS = "optimizer = fabric.setup_optimizers(optimizer)"


def separate_setup(strategy: str, indent: str = "") -> str:
    """A Fabric on two GPUs with ``strategy``, then the model and the optimizer set up apart."""
    lines = f"""\
fabric = Fabric(accelerator="cuda", devices=2, strategy={strategy})
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
{SETUP_OPTIMIZERS}
"""
    return textwrap.indent(lines, indent)


class CommandLineShape(NamedTuple):
    script: str
    deepspeed_argv: tuple[str, ...]
    other_argv: tuple[str, ...]
    condition: str


def setup_line(script: str) -> int:
    """The line Lightning raises on (1-based)."""
    return next(n for n, line in enumerate(script.splitlines(), 1) if line.strip() == SETUP_OPTIMIZERS)


def findings(tmp_path: Path, script: str) -> list[tuple[str, int, str, str | None]]:
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path), project=Project([str(tmp_path)]))
    return [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]


def expected(shape: CommandLineShape) -> list[tuple[str, int, str, str | None]]:
    return [("FAB001", setup_line(shape.script), "warning", shape.condition)]


def check_under_lightning(shapes: dict[str, CommandLineShape]) -> None:
    """Run each script with both command lines: FAB001's error at the setup line, then a clean run."""
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    names = sorted(shapes)
    scripts = [
        Script(shapes[name].script, argv=argv)
        for name in names
        for argv in (shapes[name].deepspeed_argv, shapes[name].other_argv)
    ]
    outcomes = iter(run_many(scripts, profile="gpu8"))
    for name in names:
        deepspeed, other = next(outcomes), next(outcomes)
        assert deepspeed.error_class == record.error_class, (name, deepspeed.message, deepspeed.stderr_tail)
        assert deepspeed.raised_by_lightning and record.matches(deepspeed.message or ""), name
        assert deepspeed.line == setup_line(shapes[name].script), name
        assert other.error_class is None, (name, other.message, other.stderr_tail)
