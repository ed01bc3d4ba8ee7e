"""What the command-line tests share: the setup Lightning refuses under DeepSpeed, and both checks.

The setup is FAB001's record sample, its strategy taken from the command line. Each test module
holds shapes ``name → CommandLineShape``: a script, a command line that picks DeepSpeed (Lightning
then raises FAB001's error at the separate ``setup_optimizers``), one that does not, and the
condition fabric-ls prints.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import NamedTuple

from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record
from fabric_ls.rules import joint_setup_required

SETUP_OPTIMIZERS = "optimizer = fabric.setup_optimizers(optimizer)"


# FAB001's record sample that Lightning refuses under DeepSpeed: the model and the optimizer set up apart.
_SAMPLE = next(
    case
    for case in joint_setup_required.INVALID
    if 'strategy="deepspeed"' in case.source
    and "setup_module" in case.source
    and case.source.rstrip().endswith(SETUP_OPTIMIZERS)
)


def separate_setup(strategy: str, indent: str = "") -> str:
    """The record sample's code after its imports, its strategy replaced by ``strategy`` (an
    expression of the script): a Fabric on two GPUs, then the model and the optimizer set up apart."""
    code = [
        line
        for line in _SAMPLE.source.splitlines(keepends=True)
        if line.strip() and not line.startswith(("import ", "from "))
    ]
    return textwrap.indent("".join(code).replace('strategy="deepspeed"', f"strategy={strategy}"), indent)


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
