"""How fast fabric-ls answers over stdio, next to ruff server, pylsp and jedi-language-server.

A real LSP client (pygls' ``LanguageClient``, with the VS Code 1.65 capabilities: push
diagnostics) drives each server on two Fabric scripts generated from ``examples/``:
about 300 and about 3,000 lines. For each it prints

* initialize: spawn → ``initialize`` answered;
* open → diagnostics: ``didOpen`` → first ``publishDiagnostics`` (cold: right after initialize);
* edit → diagnostics: median and p95 over sequential one-line edits, each waited for;
* hover and code action: median latency;
* peak RSS of the server process after 500 edits (VmHWM; its child processes' RSS added separately).

Targets for fabric-ls: edit → diagnostics ≤ 30 ms (300 lines) and ≤ 150 ms (3,000), cold open
≤ 1 s, hover and code action ≤ 50 ms, RSS ≤ 150 MB.

    python bench/lsp_latency.py                 # every server that is installed
    python bench/lsp_latency.py --servers fabric-ls --edits 50 --rss-edits 500
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import logging
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol
from pytest_lsp import client_capabilities

REPO = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
EDIT_MARKER = "# bench-edit: "
TIMEOUT = 20.0


def _server_commands() -> dict[str, Optional[list[str]]]:
    venv_bin = pathlib.Path(sys.executable).parent

    def find(name: str) -> Optional[str]:
        candidate = venv_bin / name
        return str(candidate) if candidate.exists() else shutil.which(name)

    ruff = find("ruff")
    pylsp = find("pylsp")
    jedi_ls = find("jedi-language-server")
    return {
        "fabric-ls": [sys.executable, "-m", "fabric_ls"],
        "ruff server": [ruff, "server"] if ruff else None,
        "pylsp": [pylsp] if pylsp else None,
        "jedi-language-server": [jedi_ls] if jedi_ls else None,
    }


# ---- scripts -------------------------------------------------------------------------------------


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: set[str], suffix: str) -> None:
        self.names = names
        self.suffix = suffix

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            node.id += self.suffix
        return node

    def _rename_definition(self, node: Any) -> Any:
        if node.name in self.names:
            node.name += self.suffix
        self.generic_visit(node)
        return node

    visit_FunctionDef = _rename_definition
    visit_AsyncFunctionDef = _rename_definition
    visit_ClassDef = _rename_definition


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)


def _example_parts(path: pathlib.Path, suffix: str) -> tuple[list[str], str, Optional[str]]:
    """The imports, the renamed definitions (module-level code wrapped in a function), and the entry point."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    definitions = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    renamed = _Renamer(definitions, suffix).visit(tree)
    parts: list[str] = []
    loose: list[ast.stmt] = []
    for index, node in enumerate(renamed.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _is_main_guard(node):
            continue
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # module docstring
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parts.append(ast.unparse(node))
        else:
            loose.append(node)
    if loose:
        body = ast.Module(body=loose, type_ignores=[])
        wrapped = "\n".join("    " + line for line in ast.unparse(body).splitlines())
        parts.append(f"def module_body{suffix}() -> None:\n{wrapped}")
    entry = f"main{suffix}" if "main" in definitions else None
    return imports, "\n\n\n".join(parts), entry


def _filler(index: int) -> str:
    """Ordinary model code: most of a long training script is not Fabric calls."""
    return f'''class Block{index}(torch.nn.Module):
    """Residual MLP block {index}."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.inner = torch.nn.Linear(width, width * 4)
        self.outer = torch.nn.Linear(width * 4, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.gelu(self.inner(self.norm(x)))
        return x + self.outer(hidden)


def batches{index}(count: int, width: int = 64) -> list:
    data = []
    for step in range(count):
        data.append(torch.randn(8, width) * (step + 1))
    return data'''


def generate_script(target_lines: int) -> str:
    """A runnable-looking Fabric script of about ``target_lines`` lines built from the examples."""
    examples = sorted(EXAMPLES.glob("*.py"))
    imports: list[str] = ["import torch", "from lightning.fabric import Fabric"]
    sections: list[str] = []
    entries: list[str] = []
    rounds = max(1, target_lines // 1000)
    for round_number in range(rounds):
        for number, path in enumerate(examples):
            example_imports, code, entry = _example_parts(path, f"_{round_number}_{number}")
            imports.extend(example_imports)
            sections.append(code)
            if entry:
                entries.append(entry)
    header = "\n".join(dict.fromkeys(imports))
    body = "\n\n\n".join(sections)
    text = f'"""Generated benchmark script ({target_lines} lines target)."""\n\n{header}\n\n\n{body}\n'
    index = 0
    fillers: list[str] = []
    while text.count("\n") + sum(part.count("\n") + 3 for part in fillers) < target_lines - 10:
        fillers.append(_filler(index))
        index += 1
    middle = len(fillers) // 2
    fillers.insert(middle, f"{EDIT_MARKER}000")
    calls = "\n".join(f"    {entry}()" for entry in entries[:1])
    return (
        text + "\n\n" + "\n\n\n".join(fillers) + f'\n\n\nif __name__ == "__main__":\n{calls or "    pass"}\n'
    )


# ---- client --------------------------------------------------------------------------------------


@dataclass
class Figures:
    server: str
    script: str
    initialize_s: Optional[float] = None
    open_to_diagnostics_s: Optional[float] = None
    edit_ms: list[float] = field(default_factory=list)
    hover_ms: list[float] = field(default_factory=list)
    code_action_ms: list[float] = field(default_factory=list)
    peak_rss_mb: Optional[float] = None
    children_rss_mb: Optional[float] = None
    engine_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _LenientProtocol(LanguageServerProtocol):
    """Leaves answers the bench does not read unstructured: lsprotocol 2025.0 cannot read every
    server's capabilities back (ruff's notebookDocumentSync selector, for one)."""

    def get_result_type(self, method: str) -> Any:
        if method in (types.INITIALIZE, types.WORKSPACE_EXECUTE_COMMAND):
            return None
        return super().get_result_type(method)


class BenchClient(LanguageClient):
    def __init__(self) -> None:
        super().__init__("fabric-ls-bench", "1", protocol_cls=_LenientProtocol)
        self.published: list[tuple[float, types.PublishDiagnosticsParams]] = []
        self.arrived = asyncio.Event()


def _make_client() -> BenchClient:
    client = BenchClient()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        client.published.append((time.perf_counter(), params))
        client.arrived.set()

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def on_configuration(params: types.ConfigurationParams) -> list[Any]:
        return [None for _ in params.items]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(params: types.RegistrationParams) -> None:
        return None

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_progress_create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    for method in (types.WORKSPACE_CODE_LENS_REFRESH, types.WORKSPACE_INLAY_HINT_REFRESH):
        client.feature(method)(lambda params: None)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        return None

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_show(params: types.ShowMessageParams) -> None:
        return None

    return client


async def initialize(client: BenchClient, script: pathlib.Path) -> None:
    """initialize + initialized, as VS Code would, with the script's folder as the workspace."""
    folder = script.parent.as_uri()
    await asyncio.wait_for(
        client.initialize_async(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                process_id=os.getpid(),
                root_uri=folder,
                workspace_folders=[types.WorkspaceFolder(uri=folder, name="bench")],
            )
        ),
        TIMEOUT,
    )
    client.initialized(types.InitializedParams())


async def _wait_publish(
    client: BenchClient, uri: str, after: int, version: Optional[int], timeout: float
) -> Optional[tuple[float, types.PublishDiagnosticsParams]]:
    """The first publish for ``uri`` after index ``after`` (for ``version`` if the server sends one)."""
    deadline = time.perf_counter() + timeout
    while True:
        for received, params in client.published[after:]:
            if params.uri == uri and (version is None or params.version in (None, version)):
                return received, params
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        client.arrived.clear()
        try:
            await asyncio.wait_for(client.arrived.wait(), remaining)
        except asyncio.TimeoutError:
            return None


def _rss_mb(pid: int) -> tuple[Optional[float], Optional[float]]:
    """The process's peak RSS, and the current RSS of its descendants (jedi's subprocess, ...)."""

    def field_kb(process: int, name: str) -> Optional[int]:
        try:
            with open(f"/proc/{process}/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith(name + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def children(process: int) -> list[int]:
        found: list[int] = []
        try:
            for task in os.listdir(f"/proc/{process}/task"):
                with open(f"/proc/{process}/task/{task}/children", encoding="ascii") as handle:
                    found.extend(int(child) for child in handle.read().split())
        except OSError:
            pass
        return found

    peak = field_kb(pid, "VmHWM")
    descendants: list[int] = []
    pending = children(pid)
    while pending:
        child = pending.pop()
        descendants.append(child)
        pending.extend(children(child))
    child_kb = sum(field_kb(child, "VmRSS") or 0 for child in descendants)
    return (peak / 1024 if peak else None), (child_kb / 1024 if descendants else None)


def _edited(text: str, number: int) -> tuple[types.Range, str]:
    line_number = text[: text.index(EDIT_MARKER)].count("\n")
    column = len(EDIT_MARKER)
    return (
        types.Range(
            start=types.Position(line=line_number, character=column),
            end=types.Position(line=line_number, character=column + 3),
        ),
        f"{number % 1000:03d}",
    )


VERBOSE = False


def _progress(server: str, phase: str) -> None:
    if VERBOSE:
        print(f"  {server}: {phase}", flush=True)


async def measure(
    name: str, command: list[str], script: pathlib.Path, edits: int, rss_edits: int, queries: int
) -> Figures:
    figures = Figures(server=name, script=script.name)
    client = _make_client()
    text = script.read_text(encoding="utf-8")
    uri = script.as_uri()
    started = time.perf_counter()
    await client.start_io(*command)
    try:
        await initialize(client, script)
        figures.initialize_s = time.perf_counter() - started

        opened = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        first = await _wait_publish(client, uri, 0, None, TIMEOUT)
        if first is None:
            figures.notes.append("no diagnostics after open")
        else:
            figures.open_to_diagnostics_s = first[0] - opened

        version = 1
        publishes_per_edit = first is not None
        _progress(name, "edits")
        for number in range(edits if publishes_per_edit else 0):
            version += 1
            change_range, new_text = _edited(text, number + 1)
            before = len(client.published)
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=change_range, text=new_text)
                    ],
                )
            )
            got = await _wait_publish(client, uri, before, version, 5.0)
            if got is None:
                figures.notes.append("does not publish after every edit")
                publishes_per_edit = False
                break
            figures.edit_ms.append((got[0] - sent) * 1000)
            if number >= 10 and statistics.median(figures.edit_ms) > 300:
                figures.notes.append("debounces edits: timed 11 edits only")
                break

        fabric_offset = text.index("Fabric(", text.index("def "))
        fabric_line = text[:fabric_offset].count("\n")
        fabric_column = fabric_offset - text.rfind("\n", 0, fabric_offset) - 1 + 2
        _progress(name, "hover")
        for _ in range(queries):
            sent = time.perf_counter()
            await asyncio.wait_for(
                client.text_document_hover_async(
                    types.HoverParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        position=types.Position(line=fabric_line, character=fabric_column),
                    )
                ),
                TIMEOUT,
            )
            figures.hover_ms.append((time.perf_counter() - sent) * 1000)

        diagnostics = list(client.published[-1][1].diagnostics) if client.published else []
        action_range = (
            diagnostics[0].range
            if diagnostics
            else types.Range(
                start=types.Position(line=fabric_line, character=0),
                end=types.Position(line=fabric_line, character=0),
            )
        )
        _progress(name, "code action")
        for _ in range(queries):
            sent = time.perf_counter()
            await asyncio.wait_for(
                client.text_document_code_action_async(
                    types.CodeActionParams(
                        text_document=types.TextDocumentIdentifier(uri=uri),
                        range=action_range,
                        context=types.CodeActionContext(diagnostics=diagnostics[:1]),
                    )
                ),
                TIMEOUT,
            )
            figures.code_action_ms.append((time.perf_counter() - sent) * 1000)

        _progress(name, f"{rss_edits} edits for RSS")
        for number in range(rss_edits):
            version += 1
            change_range, new_text = _edited(text, number + 7)
            before = len(client.published)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=change_range, text=new_text)
                    ],
                )
            )
            if publishes_per_edit and statistics.median(figures.edit_ms or [0.0]) <= 300:
                await _wait_publish(client, uri, before, version, 5.0)
            elif number % 25 == 0:
                await asyncio.sleep(0.05)  # a fast typist: the server gets every edit, analyses what it can
        # Let the server work through what is queued before reading its memory.
        await _wait_publish(client, uri, len(client.published) - 1, version, 30.0)
        await asyncio.sleep(0.5)
        server = getattr(client, "_server", None)
        if server is not None:
            figures.peak_rss_mb, figures.children_rss_mb = _rss_mb(server.pid)

        if name == "fabric-ls":
            status = await asyncio.wait_for(
                client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="fabric-ls.serverStatus")
                ),
                TIMEOUT,
            )
            worker = status.worker
            figures.engine_ms = list(worker.engine_ms)
            figures.notes.append(
                f"engine alone (analyze_source): median {_median(figures.engine_ms)} ms, "
                f"turning findings into diagnostics: median {_median(list(worker.present_ms))} ms"
            )
        _progress(name, "shutdown")
        await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
        client.exit(None)
    except Exception as error:  # one misbehaving server must not stop the others
        figures.notes.append(f"{type(error).__name__}: {error}")
    finally:
        server = getattr(client, "_server", None)
        try:
            await asyncio.wait_for(client.stop(), 10)
        except Exception:
            pass
        if server is not None and server.returncode is None:
            server.kill()
            try:
                # asyncio waits for the pipes to close too, which a grandchild may hold open.
                await asyncio.wait_for(server.wait(), 10)
            except asyncio.TimeoutError:
                figures.notes.append("server process did not go away after kill")
    return figures


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "n/a"


def _p95(values: list[float]) -> str:
    if len(values) < 2:
        return _median(values)
    return f"{statistics.quantiles(values, n=20, method='inclusive')[-1]:.1f}"


def report(rows: list[Figures]) -> str:
    headings = (
        "server",
        "script",
        "init s",
        "open→diag s",
        "edit→diag ms median",
        "p95",
        "hover ms",
        "code action ms",
        "peak RSS MB",
        "+children MB",
    )
    table = [headings]
    for row in rows:
        table.append(
            (
                row.server,
                row.script,
                f"{row.initialize_s:.2f}" if row.initialize_s is not None else "n/a",
                f"{row.open_to_diagnostics_s:.2f}" if row.open_to_diagnostics_s is not None else "n/a",
                _median(row.edit_ms),
                _p95(row.edit_ms),
                _median(row.hover_ms),
                _median(row.code_action_ms),
                f"{row.peak_rss_mb:.0f}" if row.peak_rss_mb else "n/a",
                f"{row.children_rss_mb:.0f}" if row.children_rss_mb else "-",
            )
        )
    widths = [max(len(str(line[column])) for line in table) for column in range(len(headings))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)) for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    for row in rows:
        for note in dict.fromkeys(row.notes):
            lines.append(f"note: {row.server} on {row.script}: {note}")
    return "\n".join(lines)


async def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", nargs="*", help="servers to run (default: every one installed)")
    parser.add_argument("--sizes", nargs="*", type=int, default=[300, 3000], help="script sizes in lines")
    parser.add_argument("--edits", type=int, default=60, help="sequential edits timed per script")
    parser.add_argument("--rss-edits", type=int, default=500, help="edits before reading peak RSS")
    parser.add_argument("--queries", type=int, default=30, help="hover and code action requests timed")
    parser.add_argument("--verbose", action="store_true", help="print each phase")
    arguments = parser.parse_args(argv)
    global VERBOSE
    VERBOSE = arguments.verbose

    commands = _server_commands()
    wanted = arguments.servers or list(commands)
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="fabric-ls-bench-") as folder:
        scripts = []
        for size in arguments.sizes:
            path = pathlib.Path(folder) / f"train_{size}_lines.py"
            path.write_text(generate_script(size), encoding="utf-8")
            scripts.append(path)
            print(f"{path.name}: {path.read_text(encoding='utf-8').count(chr(10))} lines", flush=True)
        for name in wanted:
            command = commands.get(name)
            if command is None:
                print(f"note: {name} is not installed; skipped", flush=True)
                continue
            for script in scripts:
                print(f"running {name} on {script.name} ...", flush=True)
                rows.append(
                    await measure(
                        name, command, script, arguments.edits, arguments.rss_edits, arguments.queries
                    )
                )
    print()
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
