"""Analysing a script never runs it, nor anything it imports, and ``check`` writes nothing unless
asked to fix.

Every way the scripts below could run code writes a marker file; after the engine, the
portability matrix and ``python -m fabric_ls check`` have looked at them, no marker exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_ls.engine import analyze_file, analyze_source, portability

ROOT = Path(__file__).resolve().parent.parent


def write_project(folder: Path) -> dict[str, Path]:
    """A script, helper modules and look-alike packages; each writes a marker if it is ever run."""
    markers = {
        name: folder / "markers" / name
        for name in (
            "helper-module",
            "helper-function",
            "script-module",
            "script-main",
            "lookalike-lightning",
            "lookalike-torch",
            "dynamic-import",
            "exec",
            "os-system",
            "package-init",
            "class-body",
            "decorator",
            "default-argument",
        )
    }
    (folder / "markers").mkdir()

    def mark(name: str) -> str:
        return f"open({str(markers[name])!r}, 'w').write('ran')"

    (folder / "helpers.py").write_text(
        f"""\
import torch

{mark("helper-module")}


def make_model():
    {mark("helper-function")}
    return torch.nn.Linear(4, 2)


STRATEGY = "deepspeed"
"""
    )
    (folder / "dynamic_helper.py").write_text(f"{mark('dynamic-import')}\n")
    (folder / "tools").mkdir()
    (folder / "tools" / "__init__.py").write_text(f"{mark('package-init')}\nDEVICES = 2\n")
    # Packages named like the real ones, first on the script's path: still only read.
    (folder / "lightning_lookalike").mkdir()
    (folder / "lightning_lookalike" / "lightning").mkdir()
    (folder / "lightning_lookalike" / "lightning" / "__init__.py").write_text(
        f"{mark('lookalike-lightning')}\n"
    )
    (folder / "torch.py").write_text(f"{mark('lookalike-torch')}\nclass nn:\n    Linear = None\n")
    (folder / "train.py").write_text(
        f"""\
import importlib
import os
import sys

sys.path.insert(0, {str(folder / "lightning_lookalike")!r})

import torch
from lightning.fabric import Fabric

from helpers import STRATEGY, make_model
from tools import DEVICES

{mark("script-module")}
importlib.import_module("dynamic_helper")
__import__("dynamic_helper")
exec({mark("exec")!r})
os.system("touch " + {str(markers["os-system"])!r})


def remember(function):
    {mark("decorator")}
    return function


class Config:
    {mark("class-body")}
    devices = DEVICES


@remember
def main(fabric, seed=open({str(markers["default-argument"])!r}, "w")):
    {mark("script-main")}
    model = make_model()
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))


if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=Config.devices, strategy=STRATEGY)
    fabric.launch(main)
"""
    )
    return markers


def ran(markers: dict[str, Path]) -> list[str]:
    return sorted(name for name, path in markers.items() if path.exists())


def test_the_project_really_writes_its_markers_when_run(tmp_path):
    # Proof that the markers work: running the helper module (without torch) writes its marker.
    markers = write_project(tmp_path)
    subprocess.run([sys.executable, "dynamic_helper.py"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-c", "import tools"], cwd=tmp_path, check=True)
    assert ran(markers) == ["dynamic-import", "package-init"]


def test_analyze_source_runs_nothing(tmp_path):
    markers = write_project(tmp_path)
    script = tmp_path / "train.py"
    analysis = analyze_source(script.read_text(), str(script))
    analyze_file(str(script))
    analyze_file(str(tmp_path / "helpers.py"))
    assert ran(markers) == []
    # The analysis did read the script: it is not vacuous.
    assert [f.code for f in analysis.findings] == ["FAB001"], analysis.findings


def test_portability_matrix_runs_nothing(tmp_path):
    markers = write_project(tmp_path)
    script = tmp_path / "train.py"
    matrix = portability(script.read_text(), str(script))
    assert ran(markers) == []
    assert matrix["deepspeed"], matrix


@pytest.mark.parametrize(
    "arguments",
    [[], ["train.py", "--format", "json"], ["--matrix"], ["--format", "sarif"], ["--strategy", "fsdp"]],
    ids=["text", "json", "matrix", "sarif", "strategy"],
)
def test_check_runs_nothing(tmp_path, arguments):
    markers = write_project(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode in (0, 1), result.stderr
    assert "FAB" in result.stdout or "portability" in result.stdout, result.stdout
    assert ran(markers) == []


@pytest.mark.parametrize("command", [["check", "train.py"], ["check", "--format", "json", "."]])
def test_a_project_module_named_like_the_standard_library_is_not_imported(tmp_path, command):
    """``python -m`` puts the working directory first on sys.path; a project's ``logging.py`` (the
    checker and the server import the standard library's) must neither run nor break the check."""
    marker = tmp_path / "markers" / "stdlib-shadow"
    for name in ("logging", "random", "json", "typing_extensions", "concurrent"):
        if name == "concurrent":
            (tmp_path / name).mkdir()
            module = tmp_path / name / "__init__.py"
        else:
            module = tmp_path / f"{name}.py"
        module.write_text(f"open({str(marker)!r}, 'w').write({name!r})\nraise SystemExit(99)\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom lightning.fabric import Fabric\n\n"
        'fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")\nfabric.launch()\n'
        "model = fabric.setup_module(torch.nn.Linear(4, 4))\n"
        "optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "fabric_ls", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 1, result.stderr
    assert "FAB001" in result.stdout, result.stdout
    assert not marker.exists(), marker.read_text()


# ----- nothing written when not asked --------------------------------------------------------


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file and folder under ``folder``: modification time and content hash."""
    state = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path.relative_to(folder))] = (stat.st_mtime_ns, digest)
    state["."] = (folder.stat().st_mtime_ns, "dir")
    return state


def copy_examples(folder: Path) -> Path:
    tree = folder / "project"
    shutil.copytree(ROOT / "examples", tree / "examples")
    shutil.copytree(ROOT / "tests" / "fuzz_corpus", tree / "scripts", ignore=shutil.ignore_patterns("*.md"))
    (tree / "pyproject.toml").write_text('[tool.fabric-ls]\nignore = ["FAB009"]\n')
    (tree / "crlf.py").write_bytes(
        (ROOT / "examples" / "loss_backward.py").read_bytes().replace(b"\n", b"\r\n")
    )
    return tree


def check(tree: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", *arguments],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": ""},
    )


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["--format", "json"],
        ["--format", "github"],
        ["--format", "sarif"],
        ["--matrix"],
        ["--unsafe-fixes"],
    ],
    ids=["text", "json", "github", "sarif", "matrix", "unsafe-fixes-without-fix"],
)
def test_check_without_fix_leaves_the_tree_byte_identical(tmp_path, arguments):
    tree = copy_examples(tmp_path)
    before = snapshot(tree)
    result = check(tree, *arguments)
    assert result.returncode == 1, result.stderr
    assert snapshot(tree) == before


def test_analyze_source_and_file_write_nothing(tmp_path):
    tree = copy_examples(tmp_path)
    before = snapshot(tree)
    for path in sorted(tree.rglob("*.py")):
        analyze_file(str(path))
        analyze_source(path.read_text(), str(path))
        portability(path.read_text(), str(path))
    assert snapshot(tree) == before


def test_check_fix_changes_only_files_with_safe_fixes(tmp_path):
    tree = copy_examples(tmp_path)
    before = snapshot(tree)
    listed = check(tree, "--format", "json")
    fixable = {item["path"] for item in json.loads(listed.stdout) if item["fix"] and item["fix"]["safe"]}
    assert fixable, listed.stdout
    check(tree, "--fix")
    after = snapshot(tree)
    assert set(after) == set(before), set(after) ^ set(before)
    changed = {name for name in before if before[name] != after[name] and (tree / name).is_file()}
    assert changed == {os.path.normpath(p) for p in fixable}
