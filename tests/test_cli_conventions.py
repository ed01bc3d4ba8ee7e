"""`fabric-ls check` follows ruff's conventions: each behaviour run as a user runs it, in a subprocess."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from samples import DEEPSPEED, DEEPSPEED_FIXED

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Line 9 lacks its colon: Python says "expected ':'" at line 9, column 20.
BROKEN_TAIL = "for batch in loader\n    loss = model(batch)\n"

FINDING_LINE = re.compile(
    r"^(?P<path>\S+):(?P<line>\d+):(?P<col>\d+): "
    r"(?P<severity>error|warning) (?P<code>FAB\d{3})(?P<fix> \[\*\])? "
)
ANSI = "\x1b["


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment without color settings; this checkout's fabric_ls, whatever the cwd."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(**env),
    )


def run_on_terminal(*args: str, stream: str, cwd: Path = ROOT, **env: str) -> tuple[str, str, int]:
    """Run with ``stream`` ("stdout" or "stderr") on a pseudo-terminal; return (terminal, other, exit)."""
    controller, terminal = pty.openpty()
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    pipes[stream] = terminal  # type: ignore[assignment]
    process = subprocess.Popen(
        [sys.executable, "-m", "fabric_ls", "check", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env=_env(**env),
        **pipes,  # type: ignore[arg-type]
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    other = process.stdout if stream == "stderr" else process.stderr
    other_text = other.read().decode() if other is not None else ""
    return b"".join(chunks).decode(errors="replace"), other_text, process.wait(timeout=180)


def findings_of(stdout: str) -> list[re.Match]:
    return [m for m in map(FINDING_LINE.match, stdout.splitlines()) if m]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


# ----- text output: severity, [*], summary --------------------------------------------------


def test_every_text_finding_shows_its_severity():
    result = run("examples")
    lines = [line for line in result.stdout.splitlines() if not line.startswith("Found ")]
    assert lines and all(FINDING_LINE.match(line) for line in lines), lines
    by_path = {(m["path"], m["code"]): m["severity"] for m in findings_of(result.stdout)}
    assert by_path[("examples/cli_strategy.py", "FAB001")] == "warning"  # only when --strategy is deepspeed
    assert by_path[("examples/deepspeed_separate_setup.py", "FAB001")] == "error"
    # The condition and strategy suffix stays.
    assert "when `--strategy` is 'deepspeed']" in result.stdout


def test_star_marks_safe_fixes_and_the_summary_counts_the_unsafe_ones():
    unsafe_only = run("examples/fsdp_meta_optimizer.py")
    (finding,) = findings_of(unsafe_only.stdout)
    assert finding["code"] == "FAB002" and finding["fix"] is None
    assert unsafe_only.stdout.splitlines()[-1].endswith(
        "0 fixable with `--fix` (1 more with `--unsafe-fixes`)."
    )
    # With --unsafe-fixes, --fix would apply it: marked, as ruff does.
    (finding,) = findings_of(run("examples/fsdp_meta_optimizer.py", "--unsafe-fixes").stdout)
    assert finding["fix"] == " [*]"
    summary = run("examples").stdout.splitlines()[-1]
    assert summary == (
        "Found 9 problems (8 errors, 1 warning) in 10 files. "
        "6 fixable with `--fix` (2 more with `--unsafe-fixes`)."
    )


# ----- a file that does not parse ------------------------------------------------------------


def test_a_syntax_error_is_finding_fab000_and_the_rest_is_still_checked(tmp_path):
    script = write(tmp_path, "train.py", DEEPSPEED + BROKEN_TAIL)
    result = run(str(script), cwd=tmp_path)
    assert result.returncode == 1
    assert "All checks passed" not in result.stdout
    found = [(m["line"], m["col"], m["severity"], m["code"]) for m in findings_of(result.stdout)]
    assert found == [("8", "13", "error", "FAB001"), ("9", "20", "error", "FAB000")]
    assert "train.py:9:20: error FAB000 expected ':'" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1].startswith("Found 2 problems (2 errors, 0 warnings) in 1 file.")


def test_a_syntax_error_alone_exits_one_whatever_is_selected(tmp_path):
    write(tmp_path, "broken.py", "def train(:\n    pass\n")
    for extra in ((), ("--select", "FAB003"), ("--ignore", "FAB000")):
        result = run("broken.py", *extra, cwd=tmp_path)
        assert result.returncode == 1, extra
        assert [m["code"] for m in findings_of(result.stdout)] == ["FAB000"]


def test_fab000_in_json_github_and_sarif(tmp_path):
    write(tmp_path, "train.py", DEEPSPEED + BROKEN_TAIL)
    (syntax,) = [f for f in json.loads(run("--format", "json", cwd=tmp_path).stdout) if f["code"] == "FAB000"]
    assert (syntax["path"], syntax["line"], syntax["column"]) == ("train.py", 9, 20)
    assert (syntax["severity"], syntax["message"], syntax["fix"]) == ("error", "expected ':'", None)
    github = run("--format", "github", cwd=tmp_path).stdout.splitlines()
    assert "::error file=train.py,line=9,col=20,endLine=9,endColumn=20,title=FAB000::expected ':'" in github
    sarif = json.loads(run("--format", "sarif", cwd=tmp_path).stdout)["runs"][0]
    rules = {rule["id"]: rule["name"] for rule in sarif["tool"]["driver"]["rules"]}
    assert rules["FAB000"] == "syntax-error"
    (result,) = [r for r in sarif["results"] if r["ruleId"] == "FAB000"]
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 9


# ----- --quiet, --statistics, --output-file ---------------------------------------------------


def test_quiet_prints_the_findings_and_nothing_else(tmp_path):
    loud = run("examples")
    quiet = run("examples", "--quiet")
    assert quiet.returncode == 1
    assert quiet.stdout.splitlines() == loud.stdout.splitlines()[:-1]
    assert quiet.stderr == ""
    clean = run("examples/correct_fsdp.py", "-q")
    assert (clean.returncode, clean.stdout) == (0, "")
    write(tmp_path, "train.py", DEEPSPEED)
    diff = run("train.py", "-q", "--diff", cwd=tmp_path)
    assert diff.returncode == 1 and diff.stdout.startswith("--- train.py") and "Would fix" not in diff.stdout
    fixed = run("train.py", "-q", "--fix", cwd=tmp_path)
    assert (fixed.returncode, fixed.stdout, fixed.stderr) == (0, "", "")


def test_statistics_count_findings_per_rule():
    result = run("examples", "--statistics")
    assert result.returncode == 1
    *table, summary = result.stdout.splitlines()
    assert summary.startswith("Found 9 problems")
    rows = [line.split("\t") for line in table]
    assert rows[0] == ["3", "FAB001", "[*] joint-setup-required"]  # most frequent first
    counted = {code: int(count) for count, code, _ in rows}
    listed = [f["code"] for f in json.loads(run("examples", "--format", "json").stdout)]
    assert counted == {code: listed.count(code) for code in set(listed)}
    assert "[ ] " in dict((code, mark) for _, code, mark in rows)["FAB002"]  # unsafe: not fixable by --fix
    as_json = json.loads(run("examples", "--statistics", "--format", "json").stdout)
    assert as_json[0] == {"code": "FAB001", "name": "joint-setup-required", "count": 3, "fixable": 3}


def test_output_file_gets_the_report(tmp_path):
    report = tmp_path / "report.txt"
    result = run("examples", "--output-file", str(report))
    assert result.returncode == 1
    assert result.stdout == ""
    assert report.read_text() == run("examples").stdout
    as_json = tmp_path / "report.json"
    run("examples", "--format", "json", "--output-file", str(as_json))
    assert len(json.loads(as_json.read_text())) == 9


# ----- --diff and --show-fixes ---------------------------------------------------------------


def test_diff_prints_the_fixes_and_writes_nothing(tmp_path):
    script = write(tmp_path, "train.py", DEEPSPEED)
    result = run("train.py", "--diff", cwd=tmp_path)
    assert result.returncode == 1
    assert script.read_text() == DEEPSPEED
    assert result.stdout.startswith("--- train.py\n+++ train.py\n@@ ")
    assert "-model = fabric.setup_module(model)\n" in result.stdout
    assert "+model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))\n" in result.stdout
    assert result.stdout.splitlines()[-1] == "Would fix 1 problem."
    # The diff is exactly what --fix writes.
    patched = tmp_path / "patched.py"
    patched.write_text(DEEPSPEED)
    diff = result.stdout.rsplit("\nWould fix", 1)[0].replace("train.py", "patched.py")
    if shutil.which("patch"):
        subprocess.run(["patch", "-s", str(patched)], input=diff, text=True, check=True, cwd=tmp_path)
        assert patched.read_text() == DEEPSPEED_FIXED


def test_diff_exits_zero_when_nothing_is_fixable(tmp_path):
    assert run("examples/correct_fsdp.py", "--diff").returncode == 0
    unsafe_only = run("examples/fsdp_meta_optimizer.py", "--diff")
    assert (unsafe_only.returncode, unsafe_only.stdout) == (0, "No fixes to apply.\n")
    with_unsafe = run("examples/fsdp_meta_optimizer.py", "--diff", "--unsafe-fixes")
    assert with_unsafe.returncode == 1 and "+model = fabric.setup_module(model)\n" in with_unsafe.stdout


def test_show_fixes_names_each_fix_and_what_was_fixed(tmp_path):
    shown = run("examples/zero3_empty_init.py", "examples/fsdp_meta_optimizer.py", "--show-fixes").stdout
    lines = shown.splitlines()
    fab003 = next(i for i, line in enumerate(lines) if " FAB003 " in line)
    assert lines[fab003 + 1].startswith("  fix: ")
    fab002 = next(i for i, line in enumerate(lines) if " FAB002 " in line)
    assert lines[fab002 + 1].startswith("  fix (unsafe, applied with --unsafe-fixes): ")
    write(tmp_path, "train.py", DEEPSPEED)
    fixed = run("train.py", "--fix", "--show-fixes", cwd=tmp_path)
    assert fixed.returncode == 0
    assert fixed.stdout.splitlines()[:3] == [
        "Fixed 1 problem:",
        "- train.py:",
        "    1 × FAB001 (Set up model and optimizer together with `fabric.setup(model, optimizer)`)",
    ]


# ----- color and progress --------------------------------------------------------------------


def test_color_only_on_a_terminal_and_never_with_no_color():
    assert ANSI not in run("examples").stdout  # a pipe
    on_terminal, _, code = run_on_terminal("examples", stream="stdout")
    assert code == 1
    assert f"{ANSI}1;31merror" in on_terminal and f"{ANSI}1;33mwarning" in on_terminal
    assert ANSI not in run_on_terminal("examples", stream="stdout", NO_COLOR="1")[0]
    assert ANSI not in run_on_terminal("examples", "--no-color", stream="stdout")[0]
    assert ANSI in run("examples", FORCE_COLOR="1").stdout
    assert ANSI not in run("examples", FORCE_COLOR="1", NO_COLOR="1").stdout
    assert ANSI not in run("examples", "--format", "json", FORCE_COLOR="1").stdout


def _slow_script() -> str:
    """More `if` paths than the explorer follows: each file takes a while (a quarter second here)."""
    lines = ["import argparse", "import torch", "from lightning.fabric import Fabric", ""]
    lines.append("parser = argparse.ArgumentParser()")
    lines += [f"parser.add_argument('--flag{i}', action='store_true')" for i in range(24)]
    lines += ["args = parser.parse_args()", "fabric = Fabric(strategy='ddp' if args.flag0 else 'fsdp')"]
    lines += ["fabric.launch()"]
    for i in range(1, 24):
        lines += [f"if args.flag{i}:", f"    model = fabric.setup_module(torch.nn.Linear({i}, 2))"]
        lines += ["else:", f"    model = fabric.setup_module(torch.nn.Linear(2, {i}))"]
    return "\n".join(lines) + "\n"


def test_progress_line_on_a_terminal_for_a_slow_folder(tmp_path):
    for n in range(12):
        write(tmp_path, f"slow_{n:02}.py", _slow_script())
    started = time.monotonic()
    terminal, stdout, _ = run_on_terminal(str(tmp_path), "--jobs", "1", stream="stderr")
    if time.monotonic() - started < 2.0:
        pytest.skip("the folder was checked in under a second or so: no progress line is due")
    assert re.search(r"fabric-ls: checked \d+/12 files", terminal)
    assert "fabric-ls: checked" not in stdout
    assert stdout.splitlines()[-1] == "All checks passed (12 files)."
    # Not a terminal: no progress line.
    assert "fabric-ls: checked" not in run(str(tmp_path), "--jobs", "1").stderr


# ----- process pool --------------------------------------------------------------------------


def _mixed_folder(folder: Path) -> Path:
    shutil.copytree(EXAMPLES, folder / "examples")
    write(folder, "broken.py", DEEPSPEED + BROKEN_TAIL)
    write(folder, "deepspeed.py", DEEPSPEED)
    return folder


def test_jobs_one_and_two_give_byte_identical_output(tmp_path):
    _mixed_folder(tmp_path)
    for output in ("json", "text", "sarif"):
        serial = run(".", "--jobs", "1", "--format", output, cwd=tmp_path)
        parallel = run(".", "--jobs", "2", "--format", output, cwd=tmp_path)
        assert serial.returncode == parallel.returncode == 1
        assert serial.stdout == parallel.stdout, output
    findings = json.loads(run(".", "--format", "json", cwd=tmp_path).stdout)
    order = [(f["path"], f["line"], f["column"], f["code"]) for f in findings]
    assert order == sorted(order)
    assert ("broken.py", 9, 20, "FAB000") in order


def test_a_file_alone_gets_the_findings_it_gets_in_its_folder():
    folder = json.loads(run("examples", "--format", "json").stdout)
    for path in sorted(EXAMPLES.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        alone = json.loads(run(name, "--format", "json").stdout)
        assert [f for f in alone if f["path"] == name] == [f for f in folder if f["path"] == name], name


def test_jobs_must_be_positive():
    result = run("examples", "--jobs", "0")
    assert result.returncode == 2
    assert "positive" in result.stderr


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    for n in range(80):  # more JSON than a pipe holds
        write(tmp_path, f"train_{n:02}.py", DEEPSPEED)
    process = subprocess.Popen(
        [sys.executable, "-m", "fabric_ls", "check", ".", "--format", "json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    assert process.wait(timeout=180) == 1
    assert "Traceback" not in process.stderr.read().decode()
