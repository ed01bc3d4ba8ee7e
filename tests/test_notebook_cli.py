"""Notebooks on the command line: cells checked as one program, positions in cells, fixes written
into the cell source and nowhere else."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from fabric_ls.engine import analyze_notebook_text
from fabric_ls.model import Span, TextEdit
from fabric_ls.notebook import (
    NotebookError,
    mask_ipython,
    program_from_cells,
    read_notebook,
    write_cell_sources,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "notebooks" / "mixed_precision_backward.ipynb"

SCRIPT = """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(optimizer)
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_folder_with_a_script_and_a_notebook_reports_both(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "train.ipynb")
    (tmp_path / "train_ds.py").write_text(SCRIPT)
    result = run(".", "--no-color", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("train.ipynb:cell 6:4:5: error FAB016 [*] ")
    assert "(Fabric at cell 3, line 1)" in lines[0]
    assert lines[1].startswith("train_ds.py:9:13: error FAB001")
    assert lines[-1].startswith("Found 2 problems (2 errors, 0 warnings) in 2 files.")


def test_json_has_the_cell_as_ruff_does(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "train.ipynb")
    (tmp_path / "train_ds.py").write_text(SCRIPT)
    rows = json.loads(run(".", "--format", "json", cwd=tmp_path).stdout)
    where = [(row["path"], row["cell"], row["line"], row["column"], row["code"]) for row in rows]
    assert where == [("train.ipynb", 6, 4, 5, "FAB016"), ("train_ds.py", None, 9, 13, "FAB001")]
    (edit,) = rows[0]["fix"]["edits"]
    assert (edit["line"], edit["column"], edit["new_text"]) == (4, 5, "fabric.backward(loss)")


def test_fix_changes_only_the_fixed_cells_source(tmp_path):
    notebook = tmp_path / "train.ipynb"
    shutil.copy(FIXTURE, notebook)
    result = run("train.ipynb", "--fix", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Fixed train.ipynb:cell 6:4: FAB016" in result.stderr
    before, after = FIXTURE.read_text(), notebook.read_text()
    # The bytes differ in exactly one line: the fixed line of cell 6's source list.
    changed = [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True)) if a != b]
    assert changed == [('    "    loss.backward()\\n",\n', '    "    fabric.backward(loss)\\n",\n')]
    assert len(before.splitlines()) == len(after.splitlines())
    old, new = json.loads(before), json.loads(after)
    assert new["cells"][5]["source"][3] == "    fabric.backward(loss)\n"
    new["cells"][5]["source"] = old["cells"][5]["source"]
    assert new == old
    assert run("train.ipynb", cwd=tmp_path).returncode == 0


def test_diff_shows_the_notebook_change_without_writing(tmp_path):
    notebook = tmp_path / "train.ipynb"
    shutil.copy(FIXTURE, notebook)
    result = run("train.ipynb", "--diff", cwd=tmp_path)
    assert '-    "    loss.backward()\\n",' in result.stdout
    assert '+    "    fabric.backward(loss)\\n",' in result.stdout
    assert notebook.read_bytes() == FIXTURE.read_bytes()


def test_a_notebook_that_is_not_json_is_a_FAB000_finding(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n')
    (tmp_path / "old.ipynb").write_text('{"worksheets": []}')
    result = run(".", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("broken.ipynb:3:1: error FAB000 not a valid notebook: ")
    assert "the file is not JSON" in lines[0]
    assert (
        lines[1]
        == "old.ipynb:1:1: error FAB000 not a valid notebook: no `cells` list (fabric-ls reads nbformat 4)"
    )


def test_a_syntax_error_in_a_cell_points_at_the_cell(tmp_path):
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["x = (1,\n", "def f(:\n"]},
    ]
    analysis = analyze_notebook_text(json.dumps({"cells": cells}), str(tmp_path / "n.ipynb"))
    assert analysis.syntax_problem is not None
    assert analysis.syntax_problem.cell == 2


def test_magics_and_shell_lines_are_masked_line_for_line():
    cell = "%matplotlib inline\nfiles = !ls\nfor f in files:\n    !echo $f\n    x = 1  # 100% sure\nhelp?\n"
    assert mask_ipython(cell) == "pass\npass\nfor f in files:\n    pass\n    x = 1  # 100% sure\nhelp?\n"
    assert mask_ipython("%%bash\necho {\n") == "\n\n"


def test_cells_map_to_program_lines_and_back():
    program = program_from_cells([(2, "import torch\nx = 1"), (4, "%%time\ny = 2\n"), (5, "")])
    assert program.text == "import torch\nx = 1\n\n\n\n"
    assert [(c.number, c.first_line, c.line_count) for c in program.cells] == [
        (2, 0, 2),
        (4, 2, 2),
        (5, 4, 1),
    ]
    assert program.to_cell_span(Span(3, 0, 3, 5)) == (4, Span(1, 0, 1, 5))
    assert program.to_cell_span(Span(1, 0, 2, 1)) is None  # crosses two cells
    assert program.to_program_span(4, Span(1, 0, 1, 5)) == Span(3, 0, 3, 5)


def test_writing_a_source_keeps_the_layout_and_the_other_lines_as_written():
    text = (
        '{\n  "cells": [\n    {\n      "cell_type": "code",\n      "source": [\n'
        '        "x = \\"caf\\u00e9\\"\\n",\n        "y = 1"\n      ],\n      "outputs": []\n    },\n'
        '    {"cell_type": "code", "source": "a = 1\\n", "outputs": []},\n'
        '    {"cell_type": "code", "source": [], "outputs": []}\n  ]\n}'
    )
    new = write_cell_sources(text, {1: 'x = "café"\ny = 2\n', 2: "a = 2\n", 3: "b = 3"})
    assert '        "x = \\"caf\\u00e9\\"\\n",\n        "y = 2\\n"\n      ],' in new
    assert '"source": "a = 2\\n"' in new
    assert '"source": [\n     "b = 3"\n    ]' in new
    assert new.replace('"y = 2\\n"', '"y = 1"').replace("a = 2", "a = 1").startswith(text[:150])
    sources = [cell["source"] for cell in json.loads(new)["cells"]]
    assert sources == [['x = "café"\n', "y = 2\n"], "a = 2\n", ["b = 3"]]


def test_edits_are_written_into_their_cell():
    text = json.dumps({"cells": [{"cell_type": "code", "source": ["a = 1\n", "b = 2\n"]}]}, indent=1)
    from fabric_ls.notebook import apply_cell_edits

    new = apply_cell_edits(text, read_notebook(text), {1: [TextEdit(Span(1, 4, 1, 5), "3")]})
    assert json.loads(new)["cells"][0]["source"] == ["a = 1\n", "b = 3\n"]


def test_notebooks_of_other_languages_are_not_read_as_python():
    text = json.dumps({"cells": [], "metadata": {"kernelspec": {"language": "R", "name": "ir"}}})
    try:
        read_notebook(text)
    except NotebookError as error:
        assert "not a Python notebook" in str(error)
    else:
        raise AssertionError("an R notebook was read as Python")


def test_working_notebooks_stay_quiet():
    # Notebooks as the Lightning docs ("Fabric in Notebooks") recommend writing them: ddp_notebook with the
    # training code in the launched function, and a single-GPU notebook. bench/real_notebooks.py checks
    # Lightning's own notebook and the page's examples.
    result = run("quiet", "--no-color", cwd=FIXTURE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "All checks passed (2 files)."


def test_cuda_in_an_earlier_cell_before_a_notebook_launch(tmp_path):
    # Lightning's "Fabric in Notebooks" page: several GPUs with strategy "auto" fork in a notebook, so a
    # CUDA call in an earlier cell breaks the launch (FAB031); the message names that cell.
    cells = [
        "import torch\nfrom lightning.fabric import Fabric\n",
        "def train(fabric):\n    pass\n",
        "x = torch.tensor(1).cuda()\n",
        'fabric = Fabric(accelerator="cuda", devices=2)\nfabric.launch(train)\n',
    ]
    document = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": c} for c in cells]}
    (finding,) = analyze_notebook_text(json.dumps(document), str(tmp_path / "train.ipynb")).findings
    assert (finding.code, finding.cell, finding.span.start_line) == ("FAB031", 4, 1)
    assert "`torch.tensor(1).cuda()` (the call at cell 3, line 1)" in finding.message
