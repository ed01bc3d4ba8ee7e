"""Imports that only jedi can place: modules on the chosen environment's path and src/ layouts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from fabric_ls.engine import Project, analyze_source
from fabric_ls.settings import Settings

SCRIPT = textwrap.dedent("""\
    import torch
    from lightning.fabric import Fabric
    from {module} import STRATEGY
    fabric = Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)
    fabric.launch()
    model = fabric.setup_module(torch.nn.Linear(4, 2))
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""")


def _codes(analysis):
    return [(f.code, f.span.start_line + 1) for f in analysis.findings]


def test_module_on_the_environments_path(tmp_path: Path):
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "shared_cfg.py").write_text('STRATEGY = "deepspeed"\n')
    (tmp_path / "jobs").mkdir()
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "workspace_libs.pth").write_text(f"{tmp_path / 'libs'}\n")
    source = SCRIPT.format(module="shared_cfg")
    script = str(tmp_path / "jobs" / "train.py")

    with_env = analyze_source(source, script, Settings(), Project([str(tmp_path)], python=str(python)))
    assert _codes(with_env) == [("FAB001", 7)]
    assert with_env.dependencies == (str(tmp_path / "libs" / "shared_cfg.py"),)
    # Without that environment the module cannot be found: nothing is guessed.
    assert _codes(analyze_source(source, script, Settings(), Project([str(tmp_path)]))) == []


def test_src_layout_package(tmp_path: Path):
    package = tmp_path / "src" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text('STRATEGY = "deepspeed_stage_3"\n')
    (tmp_path / "scripts").mkdir()
    script = str(tmp_path / "scripts" / "train.py")
    analysis = analyze_source(
        SCRIPT.format(module="mypkg.config"), script, Settings(), Project([str(tmp_path)])
    )
    assert _codes(analysis) == [("FAB001", 7)]


def test_a_broken_environment_falls_back_with_a_message(tmp_path: Path):
    (tmp_path / "cfg.py").write_text('STRATEGY = "deepspeed"\n')
    script = str(tmp_path / "train.py")
    project = Project([str(tmp_path)], python=str(tmp_path / "no-such-venv" / "bin" / "python"))
    analysis = analyze_source(SCRIPT.format(module="cfg"), script, Settings(), project)
    assert _codes(analysis) == [("FAB001", 7)]
    assert any("no-such-venv" in note for note in analysis.notes)


def test_a_parse_cache_file_cut_short_by_another_process_does_not_lose_the_import(
    tmp_path: Path, monkeypatch
):
    # `check` workers share jedi's on-disk parse cache, which parso writes in place: a file being
    # written (or left by a killed process) reads short ("Ran out of input", "pickle data was
    # truncated"). The import must still be found, from a parse of this process's own.
    import jedi
    import parso
    from parso.cache import _get_hashed_path

    import fabric_ls.analysis.jedi_bridge as jedi_bridge

    monkeypatch.setattr(jedi.settings, "cache_directory", str(tmp_path / "jedi-cache"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helper.py").write_text('STRATEGY = "deepspeed"\n')
    script = tmp_path / "train.py"
    script.write_text("import pkg.helper\n")
    assert jedi_bridge.JediLocator(str(tmp_path), None, None).find_module("pkg.helper", str(script))
    grammar = parso.load_grammar()
    cut = 0
    for module in ("__init__.py", "helper.py"):
        cached = Path(
            _get_hashed_path(
                grammar._hashed, tmp_path / "pkg" / module, cache_path=Path(jedi.settings.cache_directory)
            )
        )
        if cached.exists():
            data = cached.read_bytes()
            cached.write_bytes(data[: len(data) // 2])
            cut += 1
    assert cut, "jedi wrote no parse cache to cut short"
    parso.cache.parser_cache.clear()  # as in a new process: only the files on disk are left
    jedi_bridge._project.cache_clear()
    locator = jedi_bridge.JediLocator(str(tmp_path), None, None)
    assert locator.find_module("pkg.helper", str(script)) == str(tmp_path / "pkg" / "helper.py")
    assert locator.failures == []
    assert jedi.settings.cache_directory == str(tmp_path / "jedi-cache")
