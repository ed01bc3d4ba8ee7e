"""Does fabric-ls's memory stay flat over a long editing session?

A real LSP client (pygls' ``LanguageClient`` with the VS Code 1.65 capabilities, as in
``bench/lsp_latency.py``) opens a generated Fabric script of about 300 lines and makes
5,000 one-line edits, each waited for (its diagnostics published), so every version is
analysed: the worst case for anything kept per version. The server's RSS (VmRSS) and peak
RSS (VmHWM) from ``/proc/<pid>/status`` are read after 500 edits and after 5,000 (and at
every ``--every`` edits between), each after the server has been idle for ``--settle``
seconds. The target: RSS after 5,000 edits within 20 % of RSS after 500.

    python bench/lsp_memory.py
    python bench/lsp_memory.py --edits 5000 --baseline 500 --every 500 --lines 300
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys
import tempfile
import time
from typing import Optional

from lsprotocol import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from lsp_latency import _edited, _make_client, _wait_publish, generate_script, initialize  # noqa: E402

TIMEOUT = 30.0
LIMIT = 1.20


def _status_kb(pid: int) -> dict[str, int]:
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(rest.split()[0])
    return found


async def run(lines: int, edits: int, baseline: int, every: int, settle: float) -> int:
    command = [sys.executable, "-m", "fabric_ls"]
    with tempfile.TemporaryDirectory(prefix="fabric-ls-memory-") as folder:
        script = pathlib.Path(folder) / f"train_{lines}_lines.py"
        script.write_text(generate_script(lines), encoding="utf-8")
        text = script.read_text(encoding="utf-8")
        print(f"{script.name}: {text.count(chr(10))} lines; {edits} edits, each waited for", flush=True)
        uri = script.as_uri()
        client = _make_client()
        await client.start_io(*command)
        server = client._server  # type: ignore[attr-defined]
        rows: list[tuple[int, dict[str, int], float]] = []
        missed = 0
        try:
            await initialize(client, script)
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
                )
            )
            if await _wait_publish(client, uri, 0, 1, TIMEOUT) is None:
                print("no diagnostics after open", file=sys.stderr)
                return 2
            version = 1
            started = time.perf_counter()
            checkpoints = set(range(every, edits + 1, every)) | {baseline, edits}
            for number in range(1, edits + 1):
                version += 1
                change_range, new_text = _edited(text, number)
                before = len(client.published)
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[
                            types.TextDocumentContentChangePartial(range=change_range, text=new_text)
                        ],
                    )
                )
                if await _wait_publish(client, uri, before, version, 5.0) is None:
                    missed += 1
                if len(client.published) > 1000:
                    del client.published[:-10]  # the client must not be what grows
                if number in checkpoints:
                    await asyncio.sleep(settle)
                    figures = _status_kb(server.pid)
                    rows.append((number, figures, time.perf_counter() - started))
                    print(
                        f"after {number:5d} edits: VmRSS {figures['VmRSS'] / 1024:7.1f} MB  "
                        f"VmHWM {figures['VmHWM'] / 1024:7.1f} MB  ({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
            status = await asyncio.wait_for(
                client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="fabric-ls.serverStatus")
                ),
                TIMEOUT,
            )
            worker = status["worker"] if isinstance(status, dict) else status.worker
            analyses = worker["analyses"] if isinstance(worker, dict) else worker.analyses
            print(f"server analyses: {analyses}; edits without their own publish: {missed}")
            await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
            client.exit(None)
        finally:
            try:
                await asyncio.wait_for(client.stop(), 10)
            except Exception:
                pass
            if server.returncode is None:
                server.kill()
                await server.wait()
    by_edits = {number: figures for number, figures, _ in rows}
    first: Optional[dict[str, int]] = by_edits.get(baseline)
    last: Optional[dict[str, int]] = by_edits.get(edits)
    if not first or not last:
        return 2
    ratio = last["VmRSS"] / first["VmRSS"]
    print(
        f"\nVmRSS after {baseline}: {first['VmRSS'] / 1024:.1f} MB; after {edits}: "
        f"{last['VmRSS'] / 1024:.1f} MB; ratio {ratio:.3f} (limit {LIMIT:.2f})\n"
        f"VmHWM after {baseline}: {first['VmHWM'] / 1024:.1f} MB; after {edits}: "
        f"{last['VmHWM'] / 1024:.1f} MB; ratio {last['VmHWM'] / first['VmHWM']:.3f}"
    )
    return 0 if ratio <= LIMIT else 1


def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300, help="size of the generated script")
    parser.add_argument("--edits", type=int, default=5000, help="edits in all")
    parser.add_argument("--baseline", type=int, default=500, help="edits before the baseline reading")
    parser.add_argument("--every", type=int, default=500, help="also read RSS every this many edits")
    parser.add_argument("--settle", type=float, default=1.0, help="idle seconds before each reading")
    arguments = parser.parse_args(argv)
    return asyncio.run(
        run(arguments.lines, arguments.edits, arguments.baseline, arguments.every, arguments.settle)
    )


if __name__ == "__main__":
    sys.exit(main())
