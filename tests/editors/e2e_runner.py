"""Runs an editor end-to-end script from editors/tests/ and returns what it recorded.

The scripts install what they need (idempotently) and write ``tests/artifacts/<run>/result.json``:
``{"ok": bool, "steps": [{"name", "ok", "detail", "ms"}], ...}`` plus what each editor showed.
They are skipped only when FABRIC_LS_SKIP_EDITOR_E2E=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"

skip_unless_wanted = pytest.mark.skipif(
    os.environ.get("FABRIC_LS_SKIP_EDITOR_E2E") == "1", reason="FABRIC_LS_SKIP_EDITOR_E2E=1"
)


def run_e2e(script: str, runs: list[str], timeout: float = 900) -> dict[str, dict[str, Any]]:
    """Run ``editors/tests/<script>`` with this interpreter as the server's and return
    ``tests/artifacts/<run>/result.json`` for each run; fail with the script's report."""
    result_paths = {run: ARTIFACTS / run / "result.json" for run in runs}
    for path in result_paths.values():
        path.unlink(missing_ok=True)
    env = {**os.environ, "FABRIC_LS_PYTHON": os.environ.get("FABRIC_LS_PYTHON", sys.executable)}
    completed = subprocess.run(
        ["bash", str(REPO / "editors" / "tests" / script)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    transcript = f"--- {script} exited {completed.returncode}\n{completed.stdout}\n{completed.stderr}"
    results: dict[str, dict[str, Any]] = {}
    for run, path in result_paths.items():
        assert path.exists(), f"{script} wrote no {path}\n{transcript}"
        result = json.loads(path.read_text())
        failed = [step for step in result["steps"] if not step["ok"]]
        report = f"{run}: failed steps: {failed}\nerror: {result.get('error')}\nartifacts: {path.parent}"
        assert result["ok"] and not failed, f"{report}\n{transcript}"
        results[run] = result
    assert completed.returncode == 0, transcript
    return results


def step_names(result: dict[str, Any]) -> list[str]:
    return [step["name"] for step in result["steps"]]
