"""didOpen → first diagnostics in a cold server process, fabric-ls next to ruff server.

What a user sees when they open a file: for each script (the bundled ``examples/`` and the realistic
300-line ``bench/scripts/realistic_train_300.py``) and each server, start a fresh process over stdio,
``initialize`` + ``initialized`` as VS Code does, send ``didOpen`` at once, and time until the first
``publishDiagnostics`` for that file. Each measurement is a new process (median of ``--runs``); the
time to answer ``initialize`` (process start and imports) is printed apart.

    python bench/lsp_open_latency.py                 # 3 cold starts per script and server
    python bench/lsp_open_latency.py --runs 5 --servers fabric-ls

Targets (issue 14): ≤ 150 ms for the 300-line script, ≤ 50 ms for the examples. Nothing here
asserts a time; the figures go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import sys
import time
from typing import Optional

from lsprotocol import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from lsp_latency import _make_client, _server_commands, _wait_publish, initialize  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
TIMEOUT = 60.0


def scripts() -> list[pathlib.Path]:
    return sorted((REPO / "examples").glob("*.py")) + [HERE / "scripts" / "realistic_train_300.py"]


async def open_once(command: list[str], script: pathlib.Path) -> tuple[Optional[float], Optional[float]]:
    """(ms to answer initialize, ms from didOpen to the first diagnostics) in a fresh process."""
    client = _make_client()
    text = script.read_text(encoding="utf-8")
    uri = script.as_uri()
    started = time.perf_counter()
    await client.start_io(*command)
    open_ms: Optional[float] = None
    initialize_ms: Optional[float] = None
    try:
        await initialize(client, script)
        initialize_ms = (time.perf_counter() - started) * 1000
        opened = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        first = await _wait_publish(client, uri, 0, None, TIMEOUT)
        if first is not None:
            open_ms = (first[0] - opened) * 1000
        await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
        client.exit(None)
    finally:
        process = getattr(client, "_server", None)
        try:
            await asyncio.wait_for(client.stop(), 10)
        except Exception:
            pass
        if process is not None and process.returncode is None:
            process.kill()
    return initialize_ms, open_ms


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "—"


async def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold starts per script and server")
    parser.add_argument("--servers", default="fabric-ls,ruff server", help="comma-separated")
    options = parser.parse_args(argv)
    commands = _server_commands()
    rows = []
    for name in [part.strip() for part in options.servers.split(",")]:
        command = commands.get(name)
        if command is None:
            print(f"{name}: not installed, skipped", file=sys.stderr)
            continue
        for script in scripts():
            initialize_ms: list[float] = []
            open_ms: list[float] = []
            for _ in range(options.runs):
                init, opened = await open_once(command, script)
                if init is not None:
                    initialize_ms.append(init)
                if opened is not None:
                    open_ms.append(opened)
            lines = script.read_text(encoding="utf-8").count("\n")
            rows.append((name, script.name, str(lines), _ms(initialize_ms), _ms(open_ms), str(len(open_ms))))
            print(f"  {name} {script.name}: open {_ms(open_ms)} ms", file=sys.stderr)
    headings = ("server", "script", "lines", "initialize ms", "didOpen → diagnostics ms", "runs")
    print("| " + " | ".join(headings) + " |")
    print("|" + "---|" * len(headings))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
