"""The VS Code extension (vscode-client/) in a real VS Code: code-server 4.100.3 in headless Chromium.

editors/tests/run_vscode_e2e.sh builds and installs the .vsix (next to a stand-in for ms-python.python,
which cannot be installed offline) and drives the editor; screenshots and the Fabric LS output channel
end up in tests/artifacts/vscode/.
"""

from __future__ import annotations

import pytest
from e2e_runner import run_e2e, skip_unless_wanted, step_names

pytestmark = skip_unless_wanted


@pytest.fixture(scope="module")
def vscode_runs() -> dict:
    return run_e2e("run_vscode_e2e.sh", ["vscode", "vscode-trust"])


@pytest.fixture(scope="module")
def vscode_run(vscode_runs: dict) -> dict:
    return vscode_runs["vscode"]


@pytest.fixture(scope="module")
def trust_run(vscode_runs: dict) -> dict:
    """editors/tests/vscode/trust_e2e.mjs: workspace trust on, a folder whose pyproject names a virtualenv."""
    return vscode_runs["vscode-trust"]


def test_every_step_ran(vscode_run: dict) -> None:
    assert step_names(vscode_run) == [
        "code-server answers",
        "workbench loads with the folder",
        "open the example script",
        "the bundled server starts in the Python extension's active environment",
        "FAB001 squiggle on the setup_optimizers line",
        "Problems panel shows FAB001 from fabric-ls",
        "the FAB001 link in the Problems panel opens the installed rule page as a preview",
        "hover on the setup call shows the resolved strategy",
        "quick fix with Ctrl+. removes the diagnostic",
        "a notebook: the FAB016 squiggle is on its cell's loss.backward() line",
        "Fabric LS: Restart Server command restarts the server",
        "the settings editor lists the extension's settings with descriptions",
        "setting fabricLs.interpreter to a bare virtualenv runs the bundled server in it",
        "undoing the fix brings FAB001 back from the server in the bare virtualenv",
        "setting fabricLs.interpreter to a Python older than 3.9 says so",
        "clearing fabricLs.interpreter goes back to the Python extension's environment",
        "fabricLs.importStrategy fromEnvironment runs the fabric-ls installed in the interpreter",
        "selecting another environment in the Python extension restarts the server in it",
    ]


def test_a_notebook_cell_gets_its_diagnostic(vscode_run: dict) -> None:
    # tests/notebooks/mixed_precision_backward.ipynb, opened in VS Code's notebook editor.
    assert "FAB016" in vscode_run["notebookProblems"]
    assert "fabric-ls" in vscode_run["notebookProblems"]


def test_output_channel_logs_the_interpreter_and_the_trace(vscode_run: dict) -> None:
    log = vscode_run["serverLog"]
    assert "[client] interpreter: " in log
    assert "[Trace" in log  # fabricLs.trace.server = "messages" in the test's user settings
    assert "Sending request 'initialize" in log


def test_problems_panel_shows_the_code_and_source(vscode_run: dict) -> None:
    assert "FAB001" in vscode_run["problems"]
    assert "fabric-ls" in vscode_run["problems"]


def test_hover_names_the_resolved_strategy(vscode_run: dict) -> None:
    assert "DeepSpeedStrategy" in vscode_run["hover"]


def test_quick_fix_rewrote_the_file(vscode_run: dict) -> None:
    assert "fabric.setup_optimizers(" in vscode_run["originalText"]
    assert "fabric.setup_optimizers(" not in vscode_run["finalText"]
    assert "fabric.setup(" in vscode_run["finalText"]


def test_the_server_runs_from_the_vsix_by_default(vscode_run: dict) -> None:
    log = vscode_run["serverLog"]
    assert "[client] server: fabric-ls bundled with the extension (" in log
    assert "/bundled/libs)" in log


def test_too_old_python_notification_names_the_interpreter_and_its_version(vscode_run: dict) -> None:
    text = vscode_run["tooOldNotification"]
    assert "needs Python 3.9 or newer" in text
    assert "from the setting fabricLs.interpreter" in text
    assert "pip install fabric-ls" not in text


def test_restricted_mode_then_trust(trust_run: dict) -> None:
    assert step_names(trust_run) == [
        "code-server answers, workspace trust on",
        "the folder opens in Restricted Mode",
        "open the script",
        "the extension starts the server and tells it the workspace is not trusted",
        "the restricted-mode message says why the pyproject's python is ignored",
        "untrusted: no FAB001 (run_config is not resolved) and nothing from the folder ran",
        "Trust in the workspace trust editor restarts the server, trusted",
        "trusted: FAB001 from the strategy read through the folder's virtualenv",
    ]


def test_restricted_mode_message_says_why_and_how(trust_run: dict) -> None:
    message = trust_run["restrictedMessage"]
    assert "not trusted" in message and ".tenv" in message and "Manage Workspace Trust" in message
    assert "FAB001" not in trust_run["untrustedProblems"]
    assert "FAB001" in trust_run["trustedProblems"] and "DeepSpeed" in trust_run["trustedProblems"]
