"""`fabric-ls check` as a user runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from samples import DEEPSPEED, DEEPSPEED_FIXED

from fabric_ls.cli import _write_atomically

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_examples_text_output_and_exit_code():
    result = run("examples")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("examples/deepspeed_separate_setup.py:13:17: error FAB001") for line in lines)
    assert any(line.startswith("examples/fsdp_meta_optimizer.py:14:20: error FAB002") for line in lines)
    assert any(line.startswith("examples/zero3_empty_init.py:11:6: error FAB003") for line in lines)
    assert not any("correct_fsdp.py" in line for line in lines)
    assert lines[-1].startswith("Found 9 problems (8 errors, 1 warning) in 10 files.")


def test_json_format_fields():
    result = run("examples/cli_strategy.py", "--format", "json")
    assert result.returncode == 1
    (finding,) = json.loads(result.stdout)
    assert finding["path"] == "examples/cli_strategy.py"
    assert (finding["line"], finding["column"], finding["code"]) == (17, 13, "FAB001")
    assert finding["severity"] == "warning"
    assert finding["condition"] == "`--strategy` is 'deepspeed'"
    assert finding["strategy"].startswith("DeepSpeedStrategy")
    assert finding["fix"]["safe"] is True
    assert {"end_line", "end_column", "message"} <= finding.keys()


def test_clean_file_exits_zero():
    result = run("examples/correct_fsdp.py")
    assert result.returncode == 0
    assert "All checks passed" in result.stdout


def test_bad_usage_exits_two():
    assert run("no/such/file.py").returncode == 2
    assert run("examples", "--strategy", "warp_drive").returncode == 2
    assert run("examples", "--format", "yaml").returncode == 2


def test_select_and_ignore():
    selected = json.loads(run("examples", "--format", "json", "--select", "FAB003").stdout)
    assert {f["code"] for f in selected} == {"FAB003"}
    ignored = json.loads(run("examples", "--format", "json", "--ignore", "FAB001,FAB003").stdout)
    assert {"FAB001", "FAB003"}.isdisjoint({f["code"] for f in ignored})


def test_github_and_sarif_formats():
    github = run("examples/zero3_empty_init.py", "--format", "github").stdout
    assert github.startswith("::error file=examples/zero3_empty_init.py,line=11,col=6,")
    sarif = json.loads(run("examples/zero3_empty_init.py", "--format", "sarif").stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "FAB003"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 11


def test_strategy_option_is_assumed(tmp_path):
    script = tmp_path / "train.py"
    # Written for `fabric run`: no strategy, and no launch() (tests/test_declared_strategy.py has that).
    left_open = DEEPSPEED.replace('accelerator="cuda", devices=2, strategy="deepspeed"', "")
    script.write_text(left_open.replace("fabric.launch()\n", ""))
    assert run(str(script)).returncode == 0
    assumed = json.loads(run(str(script), "--strategy", "deepspeed", "--format", "json").stdout)
    assert [(f["code"], f["line"], f["severity"]) for f in assumed] == [("FAB001", 7, "warning")]


def test_fix_rewrites_the_file_and_keeps_mode_and_line_endings(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(DEEPSPEED.replace("\n", "\r\n").encode())
    os.chmod(script, 0o754)
    result = run(str(script), "--fix")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Fixed" in result.stderr and "FAB001" in result.stderr
    assert script.read_bytes() == DEEPSPEED_FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o754
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_unsafe_fixes_need_the_flag(tmp_path):
    script = tmp_path / "train.py"
    script.write_text((EXAMPLES / "fsdp_meta_optimizer.py").read_text())
    assert run(str(script), "--fix").returncode == 1
    assert "setup_module" not in script.read_text()
    assert run(str(script), "--fix", "--unsafe-fixes").returncode == 0
    assert "model = fabric.setup_module(model)" in script.read_text()


def test_atomic_write_refuses_a_file_changed_since_it_was_read(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("a = 1\n")
    assert not _write_atomically(str(script), b"something else\n", "b = 2\n")
    assert script.read_text() == "a = 1\n"


def test_virtualenvs_and_hidden_folders_are_skipped(tmp_path):
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".venv" / "lib" / "bad.py").write_text(DEEPSPEED)
    (tmp_path / "env2").mkdir()
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env2" / "bad.py").write_text(DEEPSPEED)
    (tmp_path / "good.py").write_text("x = 1\n")
    result = run(str(tmp_path))
    assert result.returncode == 0
    assert "1 file" in result.stdout


def test_matrix_shows_failing_strategies():
    result = run("examples/correct_fsdp.py", "--matrix")
    assert "deepspeed" in result.stdout
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    assert "FAB001" in lines["deepspeed"]
    assert lines["fsdp"].rstrip().endswith("ok")


def test_syntax_error_is_reported_and_the_rest_checked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(DEEPSPEED + "for batch in loader\n    loss = model(\n")
    result = run(str(script))
    assert result.returncode == 1
    assert ":9:20: error FAB000 expected ':'" in result.stdout
    assert ":8:13: error FAB001" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_special_files_are_skipped_with_a_note_never_read(tmp_path):
    import shutil
    import socket

    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(EXAMPLES / "deepspeed_separate_setup.py", folder / "train.py")
    os.mkfifo(folder / "f.py")  # reading it would block for ever
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "s.py"))
    (folder / "loop_a.py").symlink_to(folder / "loop_b.py")
    (folder / "loop_b.py").symlink_to(folder / "loop_a.py")
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "fabric_ls", "check", "--no-color", str(folder), str(folder / "f.py")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        listener.close()
    assert "train.py:" in completed.stdout and "FAB001" in completed.stdout
    assert f"skipped {folder / 'f.py'}: a named pipe" in completed.stderr
    assert f"skipped {folder / 's.py'}: a socket" in completed.stderr
    assert "loop_a.py" not in completed.stdout
