"""Run ``fabric-ls check`` on Lightning's own notebooks, and fail on any finding (they work).

    python bench/real_notebooks.py --lightning-repo PATH   # a clone (or bare git dir) of pytorch-lightning

Lightning's repository holds one notebook (``examples/pytorch/bug_report/bug_report_model.ipynb``, a Trainer
notebook with ``%%capture`` and ``!`` cells) and documents Fabric in notebooks on one page
(``docs/source-fabric/fundamentals/notebooks.rst``): each ``code-block:: python`` there is a cell, and the
page's examples are assembled, in order, into a notebook behind a cell with its imports. Nothing is stored
here: both are read with ``git show`` at the pinned commit into ``bench/.cache/notebooks/``. The
``Lightning-AI/tutorials`` repository was searched too (at 1581765): none of its notebooks uses Fabric.

The run fails (exit 1) when any finding is reported, or ``fabric-ls check`` crashes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, ".cache", "notebooks")
COMMIT = "7f0c3436cd3f6ad3753125672024fc415cbcb414"
NOTEBOOKS = ["examples/pytorch/bug_report/bug_report_model.ipynb"]
PAGE = "docs/source-fabric/fundamentals/notebooks.rst"
# The page's examples use these names without importing them (they are cells of a larger notebook).
PAGE_IMPORTS = "import torch\nfrom lightning.fabric import Fabric\n\n\nclass MyDataset(torch.utils.data.Dataset):\n    ...\n"
_BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:    .*\n|\n)+)", re.MULTILINE)


def _git_show(repo: str, path: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={_git_dir(repo)}", "show", f"{COMMIT}:{path}"], capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"git show {COMMIT}:{path} failed in {repo}: {done.stderr.strip()}")
    return done.stdout


def _git_dir(repo: str) -> str:
    dotted = os.path.join(repo, ".git")
    return dotted if os.path.exists(dotted) else repo


def page_cells(page: str) -> list[str]:
    """The page's Python code blocks, dedented: one cell each."""
    cells = []
    for block in _BLOCK.findall(page):
        lines = [line[4:] if line.startswith("    ") else line for line in block.splitlines(keepends=True)]
        cells.append("".join(lines).strip("\n") + "\n")
    return cells


def notebook_json(cells: list[str]) -> str:
    document = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": cell}
            for cell in cells
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1) + "\n"


def write_notebooks(repo: str) -> list[str]:
    os.makedirs(OUT, exist_ok=True)
    written = []
    for path in NOTEBOOKS:
        target = os.path.join(OUT, os.path.basename(path))
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(_git_show(repo, path))
        written.append(target)
    target = os.path.join(OUT, "fabric_in_notebooks_page.ipynb")
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(notebook_json([PAGE_IMPORTS, *page_cells(_git_show(repo, PAGE))]))
    written.append(target)
    return written


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lightning-repo", required=True, help="a clone or git dir of Lightning-AI/pytorch-lightning"
    )
    arguments = parser.parse_args(argv)
    notebooks = write_notebooks(arguments.lightning_repo)
    command = [sys.executable, "-m", "fabric_ls", "check", "--format", "json", "--exit-zero", *notebooks]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or "Traceback" in done.stderr:
        print(done.stderr)
        return 1
    findings = json.loads(done.stdout)
    for finding in findings:
        print(
            f"{finding['path']}:cell {finding['cell']}:{finding['line']}: {finding['code']} {finding['message']}"
        )
    print(f"{len(notebooks)} notebooks, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
