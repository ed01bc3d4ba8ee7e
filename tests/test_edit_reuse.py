"""An edit the analysis cannot see is answered with the last result, moved: exactly what analysing the
new text gives (fabric_ls.analysis.edit_reuse)."""

from __future__ import annotations

import ast
import dataclasses
import json
import random
from pathlib import Path

import pytest

from fabric_ls.analysis.project import Project
from fabric_ls.engine import analyze_source

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(
    [
        *ROOT.glob("examples/**/*.py"),
        ROOT / "bench/scripts/realistic_train_300.py",
        *ROOT.glob("tests/fuzz_corpus/*.py"),
        *ROOT.glob("tests/lsp/scripts/*.py"),
    ]
)
# Lines nothing reads and nothing can change: typed key by key.
DEAD = ['_probe = len("abc") + 1', 'print("checkpoint", 3)', "_seen = str(7).upper()"]
# Lines the engine runs: never answered from the last result.
LIVE = ["global_probe = fabric_probe()", "raise SystemExit(2)"]


def _result(analysis) -> str:
    data = dataclasses.asdict(analysis)
    data.pop("steps")
    data.pop("reused")
    return json.dumps(data, sort_keys=True, default=repr)


def _body_lines(text: str) -> list[tuple[int, str]]:
    """(line after which to type, indentation) inside function bodies: after a simple statement."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in ast.walk(node):
                if isinstance(statement, (ast.Assign, ast.Expr, ast.AugAssign)) and statement.col_offset:
                    found.append((statement.end_lineno, " " * statement.col_offset))
    return sorted(set(found))


def _edits(text: str, rng: random.Random):
    """(kind, text) of what a person does, one version after another: type a line nothing uses key by
    key (and take it away again), add comments and blank lines, type a line the engine runs."""
    lines = text.splitlines(keepends=True)
    places = _body_lines(text)
    for _ in range(6):
        kind = rng.choice(["dead", "dead", "comment", "blank", "live"])
        if kind in ("dead", "live") and not places:
            kind = "blank"
        if kind in ("dead", "live"):
            after, indent = rng.choice(places)
            statement = rng.choice(DEAD if kind == "dead" else LIVE)
            for typed in range(1, len(statement) + 1):
                # A prefix of a line the engine runs is often one it does not (``global_p``).
                typing = kind if kind == "dead" or typed == len(statement) else "typing"
                yield typing, "".join([*lines[:after], indent + statement[:typed] + "\n", *lines[after:]])
            yield "undo", "".join(lines)
            continue
        at = rng.randrange(len(lines) + 1)
        added = "# a note\n" if kind == "comment" else "\n"
        lines = [*lines[:at], added, *lines[at:]]
        yield kind, "".join(lines)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_reused_result_is_what_analysing_the_text_gives(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    roots = [str(script.parent)]
    kept = Project(roots, reuse_analyses=True)
    first = analyze_source(text, str(script), project=kept)
    rng = random.Random(script.name)  # the same edits on every run
    reused = {"dead": 0, "live": 0}
    for kind, version in _edits(text, rng):
        answer = analyze_source(version, str(script), project=kept)
        fresh = analyze_source(version, str(script), project=Project(roots))
        assert _result(answer) == _result(fresh), (kind, version)
        if kind in reused and answer.reused:
            reused[kind] += 1
    assert reused["live"] == 0
    # A fix may move the code around it as text: in a top-level statement a fix edits, every edit is
    # analysed (edit_reuse._fixes_clear).
    if _body_lines(text) and not any(finding.fix for finding in first.findings):
        assert reused["dead"] > 0


def test_typing_a_line_nothing_uses_is_answered_every_key() -> None:
    script = ROOT / "bench/scripts/realistic_train_300.py"
    text = script.read_text(encoding="utf-8")
    anchor = "        running += loss.item()\n"
    at = text.index(anchor) + len(anchor)
    kept = Project([str(script.parent)], reuse_analyses=True)
    first = analyze_source(text, str(script), project=kept)
    assert not first.reused
    statement = "last_loss = loss.detach().float()"
    for typed in range(1, len(statement) + 1):
        version = text[:at] + "        " + statement[:typed] + "\n" + text[at:]
        answer = analyze_source(version, str(script), project=kept)
        assert answer.reused, statement[:typed]
        assert answer.steps == first.steps
        fresh = analyze_source(version, str(script), project=Project([str(script.parent)]))
        assert _result(answer) == _result(fresh)


def test_a_line_the_engine_runs_is_analysed() -> None:
    source = (
        "from lightning.fabric import Fabric\n"
        "import torch\n\n"
        "def main():\n"
        '    fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")\n'
        "    fabric.launch()\n"
        "    model = torch.nn.Linear(2, 2)\n"
        "    model = fabric.setup_module(model)\n"
        "    total = 0\n"
        "    fabric.all_reduce(total)\n"
        "\n\nmain()\n"
    )
    kept = Project([], reuse_analyses=True)
    assert not analyze_source(source, "/nowhere/train.py", project=kept).findings
    # The optimizer's separate setup is FAB001 under DeepSpeed: a new statement the engine runs.
    edited = source.replace(
        "    total = 0\n",
        "    total = 0\n"
        "    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))\n",
    )
    answer = analyze_source(edited, "/nowhere/train.py", project=kept)
    assert not answer.reused
    assert [f.code for f in answer.findings] == ["FAB001"]
    # ``total`` is read by a collective: changing what it holds is a statement the engine runs.
    changed = edited.replace("    total = 0\n", "    total = 1\n")
    assert not analyze_source(changed, "/nowhere/train.py", project=kept).reused


HELPER_USER = (
    "import torch\n"
    "from lightning.fabric import Fabric\n"
    "from helper import prepare\n\n"
    "def main():\n"
    '    fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")\n'
    "    fabric.launch()\n"
    "    model = torch.nn.Linear(2, 2)\n"
    "    prepare(fabric, model)\n"
    "    total = 0\n\n"
    "main()\n"
)
HELPER_QUIET = "def prepare(fabric, model):\n    return model\n"
# A separate optimizer setup under DeepSpeed: FAB001, in the helper module.
HELPER_FAB001 = (
    "import torch\n\n"
    "def prepare(fabric, model):\n"
    "    model = fabric.setup_module(model)\n"
    "    return fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))\n"
)


@pytest.mark.parametrize("how", ["on disk", "in the editor"])
def test_a_module_the_analysis_read_changed_so_the_script_is_analysed_again(tmp_path: Path, how: str) -> None:
    helper = tmp_path / "helper.py"
    helper.write_text(HELPER_QUIET, encoding="utf-8")
    script = str(tmp_path / "train.py")
    kept = Project([str(tmp_path)], reuse_analyses=True)
    first = analyze_source(HELPER_USER, script, project=kept)
    assert not first.findings and str(helper) in first.dependencies
    # Unchanged modules: a dead line typed in the script is answered from the last result.
    typed = HELPER_USER.replace("    total = 0\n", "    total = 0\n    print(total)\n")
    assert analyze_source(typed, script, project=kept).reused
    # The helper now holds FAB001; nobody told the project (a file saved by another program).
    if how == "on disk":
        helper.write_text(HELPER_FAB001 + "\n", encoding="utf-8")
    else:
        kept.set_overlay(str(helper), HELPER_FAB001)
    again = typed.replace("    print(total)\n", "    print(total, 1)\n")
    answer = analyze_source(again, script, project=kept)
    assert not answer.reused
    assert [f.code for f in answer.other_findings] == ["FAB001"]
    fresh = Project([str(tmp_path)])
    if how == "in the editor":
        fresh.set_overlay(str(helper), HELPER_FAB001)
    assert _result(answer) == _result(analyze_source(again, script, project=fresh))
