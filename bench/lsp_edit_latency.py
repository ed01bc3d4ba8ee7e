"""Edit → diagnostics latency on the realistic training scripts, fabric-ls next to ruff server.

The generated scripts of ``lsp_latency.py`` are simpler than what people write; this bench uses the
hand-written ``bench/scripts/realistic_train_300.py`` and ``realistic_train_3000.py`` instead. For
each script and each server (a subprocess over stdio, driven by pygls' ``LanguageClient`` with the
VS Code capabilities, as in ``lsp_latency.py``) it sends ``didOpen``, waits for the first
``publishDiagnostics``, then sends edits one at a time and times each from ``didChange`` until the
diagnostics for that version arrive. The edits are the ones a person makes:

* **type**: press Enter after a line inside the training loop and type a statement one character at
  a time (most intermediate versions do not parse), then undo the whole line;
* **flag**: change an argparse default, ``--grad-accum`` (1 → 2 → 4 → 8 → back) and ``--strategy``
  (→ fsdp → deepspeed → back), which changes what fabric-ls has to check.

It prints median and p90 per server and script, per kind of edit, the fabric-ls / ruff ratio, and the
engine alone: ``fabric_ls.engine.analyze_source`` in this process on the unedited file, median of N
runs with one ``Project`` kept across runs (what the server does) and with a new one each run, plus
the engine times the server itself recorded during the edits (``fabric-ls.serverStatus``).

    python bench/lsp_edit_latency.py                       # both scripts, fabric-ls and ruff, 2 rounds
    python bench/lsp_edit_latency.py --cycles 1 --engine-runs 5 --scripts 300
    python bench/lsp_edit_latency.py --servers fabric-ls --json /tmp/latency.json

Nothing here asserts a time; the figures go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Optional

from lsprotocol import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from lsp_latency import _make_client, _server_commands, _wait_publish, initialize  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = {
    "300": HERE / "scripts" / "realistic_train_300.py",
    "3000": HERE / "scripts" / "realistic_train_3000.py",
}
# Where the typing happens: a line inside each script's training loop, and what is typed after it.
TYPING = {
    "300": ("        running += loss.item()", "last_loss = loss.detach().float()"),
    "3000": (
        "            loss_meter.update(loss.item(), batch[1].shape[0])",
        "tokens_seen = batch[0].numel()",
    ),
}
FLAGS = (
    (re.compile(r'"--grad-accum", type=int, default=(\d+)'), ("2", "4", "8")),
    (re.compile(r'"--strategy", default="(\w+)"'), ("fsdp", "deepspeed")),
)
OPEN_TIMEOUT = 120.0
EDIT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Edit:
    kind: str
    range: types.Range
    text: str


def _position(text: str, offset: int) -> types.Position:
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


def _offset(text: str, position: types.Position) -> int:
    start = 0
    for _ in range(position.line):
        start = text.index("\n", start) + 1
    return start + position.character


def apply_edit(text: str, edit: Edit) -> str:
    start, end = _offset(text, edit.range.start), _offset(text, edit.range.end)
    return text[:start] + edit.text + text[end:]


def _replace(kind: str, text: str, start: int, end: int, new_text: str) -> Edit:
    return Edit(kind, types.Range(start=_position(text, start), end=_position(text, end)), new_text)


def typing_edits(text: str, anchor: str, statement: str) -> Iterator[Callable[[str], Edit]]:
    """Enter after ``anchor``'s line, the statement key by key, then one edit removing the line."""
    indent = anchor[: len(anchor) - len(anchor.lstrip())]

    def line_end(current: str) -> int:
        return current.index(anchor) + len(anchor)

    yield lambda current: _replace("type", current, line_end(current), line_end(current), "\n" + indent)
    for typed in range(len(statement)):
        character = statement[typed]

        def key(current: str, typed: int = typed, character: str = character) -> Edit:
            at = line_end(current) + 1 + len(indent) + typed
            return _replace("type", current, at, at, character)

        yield key
    yield lambda current: _replace(
        "type", current, line_end(current), line_end(current) + 1 + len(indent) + len(statement), ""
    )


def flag_edits(pattern: re.Pattern[str], values: tuple[str, ...]) -> Iterator[Callable[[str], Edit]]:
    """The default replaced by each value in turn, then put back."""
    original: list[str] = []

    def change(current: str, value: Optional[str]) -> Edit:
        match = pattern.search(current)
        if match is None:
            raise ValueError(f"no {pattern.pattern!r} in the script")
        if not original:
            original.append(match.group(1))
        return _replace("flag", current, match.start(1), match.end(1), value or original[0])

    for value in values:
        yield lambda current, value=value: change(current, value)
    yield lambda current: change(current, None)


def edit_plan(text: str, size: str, cycles: int) -> list[Edit]:
    """``cycles`` rounds of typing and flag changes, each edit computed on the text before it.

    Every round ends where it started, so the file is the original again after each one.
    """

    def rounds() -> Iterator[Callable[[str], Edit]]:
        for _ in range(cycles):
            yield from typing_edits(text, *TYPING[size])
            for pattern, values in FLAGS:
                yield from flag_edits(pattern, values)

    edits: list[Edit] = []
    current = text
    for make in rounds():
        edit = make(current)
        edits.append(edit)
        current = apply_edit(current, edit)
    return edits


@dataclass
class Run:
    server: str
    script: str
    lines: int
    open_ms: Optional[float] = None
    edit_ms: dict[str, list[float]] = field(default_factory=dict)
    server_engine_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def all_edits(self) -> list[float]:
        return [value for values in self.edit_ms.values() for value in values]


async def measure(server: str, command: list[str], script: pathlib.Path, size: str, edits: list[Edit]) -> Run:
    text = script.read_text(encoding="utf-8")
    run = Run(server=server, script=script.name, lines=text.count("\n"))
    client = _make_client()
    uri = script.as_uri()
    await client.start_io(*command)
    try:
        await initialize(client, script)
        opened = time.perf_counter()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        first = await _wait_publish(client, uri, 0, None, OPEN_TIMEOUT)
        if first is None:
            run.notes.append("no diagnostics after open")
            return run
        run.open_ms = (first[0] - opened) * 1000
        version = 1
        for edit in edits:
            version += 1
            before = len(client.published)
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(range=edit.range, text=edit.text)
                    ],
                )
            )
            got = await _wait_publish(client, uri, before, version, EDIT_TIMEOUT)
            if got is None:
                run.notes.append(f"no diagnostics for version {version} within {EDIT_TIMEOUT:.0f} s; stopped")
                break
            run.edit_ms.setdefault(edit.kind, []).append((got[0] - sent) * 1000)
        if server == "fabric-ls":
            status = await asyncio.wait_for(
                client.workspace_execute_command_async(
                    types.ExecuteCommandParams(command="fabric-ls.serverStatus")
                ),
                EDIT_TIMEOUT,
            )
            # The status keeps the latest analyses; the first is the open, the rest are the edits.
            run.server_engine_ms = list(status.worker.engine_ms)[-len(run.all_edits()) :]
        await asyncio.wait_for(client.shutdown_async(None), EDIT_TIMEOUT)
        client.exit(None)
    except Exception as error:  # report the server's failure and go on with the next one
        run.notes.append(f"{type(error).__name__}: {error}")
    finally:
        process = getattr(client, "_server", None)
        try:
            await asyncio.wait_for(client.stop(), 10)
        except Exception:
            pass
        if process is not None and process.returncode is None:
            process.kill()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except asyncio.TimeoutError:
                run.notes.append("server process did not exit after kill")
    return run


def engine_alone(script: pathlib.Path, runs: int) -> dict[str, list[float]]:
    """``analyze_source`` on the file in this process: a kept Project (the server's case) and a new one."""
    from fabric_ls import engine

    text = script.read_text(encoding="utf-8")
    path = str(script)
    started = time.perf_counter()
    engine.warm_up()
    engine.analyze_source(text, path)
    first_ms = (time.perf_counter() - started) * 1000
    kept = engine.Project([str(script.parent)])
    engine.analyze_source(text, path, project=kept)
    timings: dict[str, list[float]] = {"first": [first_ms], "kept project": [], "new project": []}
    for _ in range(runs):
        started = time.perf_counter()
        engine.analyze_source(text, path, project=kept)
        timings["kept project"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        engine.analyze_source(text, path, project=engine.Project([str(script.parent)]))
        timings["new project"].append((time.perf_counter() - started) * 1000)
    return timings


def median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def p90(values: list[float]) -> Optional[float]:
    if len(values) < 2:
        return median(values)
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _table(headings: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[column]) for row in [headings, *rows]) for column in range(len(headings))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in [headings, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def report(runs: list[Run], engine: dict[str, dict[str, list[float]]]) -> str:
    rows = []
    for run in runs:
        every = run.all_edits()
        rows.append(
            (
                run.server,
                f"{run.script} ({run.lines})",
                _ms(run.open_ms),
                str(len(every)),
                _ms(median(every)),
                _ms(p90(every)),
                _ms(median(run.edit_ms.get("type", []))),
                _ms(p90(run.edit_ms.get("type", []))),
                _ms(median(run.edit_ms.get("flag", []))),
                _ms(p90(run.edit_ms.get("flag", []))),
                _ms(median(run.server_engine_ms)) if run.server_engine_ms else "-",
            )
        )
    headings = (
        "server",
        "script (lines)",
        "open ms",
        "edits",
        "edit→diag median",
        "p90",
        "type median",
        "p90",
        "flag median",
        "p90",
        "engine in server",
    )
    parts = [_table(headings, rows)]

    ratios = []
    for script in dict.fromkeys(run.script for run in runs):
        ours = next((r for r in runs if r.script == script and r.server == "fabric-ls"), None)
        ruff = next((r for r in runs if r.script == script and r.server == "ruff server"), None)
        if ours is None or ruff is None or not ours.all_edits() or not ruff.all_edits():
            continue
        ratio_median = median(ours.all_edits()) / median(ruff.all_edits())  # type: ignore[operator]
        ratio_p90 = p90(ours.all_edits()) / p90(ruff.all_edits())  # type: ignore[operator]
        ratios.append((script, f"{ratio_median:.1f}×", f"{ratio_p90:.1f}×"))
    if ratios:
        parts.append(_table(("script", "fabric-ls / ruff, median", "p90"), ratios))

    engine_rows = []
    for script, timings in engine.items():
        engine_rows.append(
            (
                script,
                _ms(timings["first"][0]),
                _ms(median(timings["kept project"])),
                _ms(p90(timings["kept project"])),
                _ms(median(timings["new project"])),
                str(len(timings["kept project"])),
            )
        )
    if engine_rows:
        engine_headings = ("engine alone", "first ms", "kept Project median", "p90", "new Project", "runs")
        parts.append(_table(engine_headings, engine_rows))
    for run in runs:
        for note in dict.fromkeys(run.notes):
            parts.append(f"note: {run.server} on {run.script}: {note}")
    return "\n\n".join(parts)


async def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", nargs="*", default=["fabric-ls", "ruff server"])
    parser.add_argument("--scripts", nargs="*", default=list(SCRIPTS), choices=list(SCRIPTS))
    parser.add_argument("--cycles", type=int, default=2, help="rounds of typing + flag edits per script")
    parser.add_argument("--engine-runs", type=int, default=9, help="in-process engine runs (0: none)")
    parser.add_argument("--json", help="also write the raw figures here")
    arguments = parser.parse_args(argv)

    import fabric_ls

    # The servers are started from this working folder: run from outside the repository with
    # PYTHONPATH set to measure another copy of fabric_ls (see bench/README.md).
    print(f"fabric_ls from {pathlib.Path(fabric_ls.__file__).parent}", flush=True)
    commands = _server_commands()
    runs: list[Run] = []
    engine: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="fabric-ls-edit-latency-") as folder:
        for size in arguments.scripts:
            # A folder of its own, so each server's workspace holds the one script.
            script = pathlib.Path(folder) / size / SCRIPTS[size].name
            script.parent.mkdir()
            shutil.copyfile(SCRIPTS[size], script)
            text = script.read_text(encoding="utf-8")
            edits = edit_plan(text, size, arguments.cycles)
            kinds = {kind: sum(1 for edit in edits if edit.kind == kind) for kind in ("type", "flag")}
            print(f"{script.name}: {text.count(chr(10))} lines, {len(edits)} edits {kinds}", flush=True)
            for server in arguments.servers:
                command = commands.get(server)
                if command is None:
                    print(f"note: {server} is not installed; skipped", flush=True)
                    continue
                print(f"  {server} ...", flush=True)
                runs.append(await measure(server, command, script, size, edits))
            if arguments.engine_runs:
                print(f"  engine alone, {arguments.engine_runs} runs ...", flush=True)
                engine[script.name] = engine_alone(script, arguments.engine_runs)
    print()
    print(report(runs, engine))
    if arguments.json:
        payload = {"runs": [asdict(run) for run in runs], "engine": engine}
        pathlib.Path(arguments.json).write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
