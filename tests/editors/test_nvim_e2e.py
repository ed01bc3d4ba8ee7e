"""The shipped Neovim configs (editors/nvim/) in a real, headless Neovim 0.11.4.

editors/tests/run_nvim_e2e.sh runs two setups, as users would install them: ``nvim`` puts editors/nvim on
the runtimepath so that plugin/fabric_ls.lua enables lsp/fabric_ls.lua (0.11+), with one setting
overridden through ``vim.lsp.config``; ``nvim-legacy`` runs legacy/fabric_ls.lua, the ``vim.lsp.start``
snippet for 0.8–0.10. LSP logs end up in tests/artifacts/nvim*/.
"""

from __future__ import annotations

import pytest
from e2e_runner import run_e2e, skip_unless_wanted, step_names

pytestmark = skip_unless_wanted

SETUPS = ["nvim", "nvim-legacy"]
WARN, ERROR = 2, 1  # vim.diagnostic.severity


@pytest.fixture(scope="module")
def nvim_runs() -> dict:
    return run_e2e("run_nvim_e2e.sh", SETUPS, timeout=600)


@pytest.fixture(params=SETUPS)
def nvim_run(request: pytest.FixtureRequest, nvim_runs: dict) -> dict:
    return nvim_runs[request.param]


def test_every_step_ran(nvim_runs: dict) -> None:
    shared = [
        "opening the script starts fabric_ls in the pyproject root",
        "FAB001 arrives on the setup_optimizers line",
        "hover on the setup call shows the resolved strategy",
        "the quick fix applies and the diagnostic clears",
    ]
    assert step_names(nvim_runs["nvim"]) == [
        "the shipped config resolves, with a user override of one setting",
        *shared,
    ]
    assert step_names(nvim_runs["nvim-legacy"]) == [
        "the legacy snippet registers its FileType autocmd",
        *shared,
    ]


def test_diagnostic_has_its_code(nvim_run: dict) -> None:
    assert "FAB001" in [d["code"] for d in nvim_run["diagnostics"]]


def test_settings_reach_the_server(nvim_runs: dict) -> None:
    def fab001(run: str) -> dict:
        return next(d for d in nvim_runs[run]["diagnostics"] if d["code"] == "FAB001")

    assert fab001("nvim")["severity"] == WARN  # severity = { FAB001 = 'warning' } via vim.lsp.config
    assert fab001("nvim-legacy")["severity"] == ERROR


def test_server_runs_as_python_module(nvim_run: dict) -> None:
    assert nvim_run["cmd"][1:] == ["-m", "fabric_ls"]
    assert nvim_run["server"]["name"] == "fabric-ls"


def test_hover_names_the_resolved_strategy(nvim_run: dict) -> None:
    assert "DeepSpeedStrategy" in nvim_run["hover"]


def test_code_action_rewrote_the_buffer(nvim_run: dict) -> None:
    assert "fabric.setup_optimizers(" not in nvim_run["final_text"]
    assert "fabric.setup(" in nvim_run["final_text"]
