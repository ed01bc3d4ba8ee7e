"""One engine, one truth: the CLI and the server report the same findings for every script we ship.

For each example, each LSP test script and each rule's VALID/INVALID sample, the set of
(line, code, severity) that ``fabric-ls check --format json`` prints for the file equals what
the server (over stdio) shows for it. Suppression comments are part of it: both apply the
engine's one grammar.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from conftest import EXAMPLES, SCRIPTS, Session
from lsprotocol import types

from fabric_ls.rules import ALL_RULES

SEVERITY_NAMES = {
    types.DiagnosticSeverity.Error: "error",
    types.DiagnosticSeverity.Warning: "warning",
    types.DiagnosticSeverity.Information: "information",
    types.DiagnosticSeverity.Hint: "hint",
}

# Suppression: exact codes only (`FAB0` is no code), on the first or last line of a call.
SUPPRESSION_SAMPLE = """\
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = torch.optim.AdamW(model.parameters())
first = fabric.setup_optimizers(optimizer)  # noqa: FAB0
second = fabric.setup_optimizers(  # noqa: FAB001
    optimizer
)
third = fabric.setup_optimizers(
    optimizer
)  # fabric-ls: ignore[FAB001]
"""


def _corpus(root: pathlib.Path) -> list[pathlib.Path]:
    shutil.copytree(EXAMPLES, root / "examples")
    shutil.copytree(SCRIPTS, root / "scripts")
    samples = root / "samples"
    samples.mkdir()
    for rule in ALL_RULES:
        for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for index, case in enumerate(cases):
                source = case if isinstance(case, str) else case.source
                (samples / f"{rule.RULE}_{kind}_{index}.py").write_text(source, encoding="utf-8")
    (samples / "suppression.py").write_text(SUPPRESSION_SAMPLE, encoding="utf-8")
    return sorted(path for path in root.rglob("*.py"))


def _cli_findings(root: pathlib.Path, files: list[pathlib.Path]) -> dict[str, set[tuple[int, str, str]]]:
    completed = subprocess.run(
        [sys.executable, "-m", "fabric_ls", "check", "--format", "json", "--exit-zero", "--jobs", "1"]
        + [str(path.relative_to(root)) for path in files],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    found: dict[str, set[tuple[int, str, str]]] = {str(path.relative_to(root)): set() for path in files}
    for item in json.loads(completed.stdout):
        if item["code"] == "FAB000":
            continue  # a syntax error is the CLI's report; the server leaves those to the Python extension
        found.setdefault(item["path"], set()).add((item["line"] - 1, item["code"], item["severity"]))
    return found


def _as_set(diagnostics: list[types.Diagnostic]) -> set[tuple[int, str, str]]:
    return {(d.range.start.line, str(d.code), SEVERITY_NAMES[d.severity]) for d in diagnostics}


async def test_cli_and_server_report_the_same_findings(session: Session, tmp_path: pathlib.Path) -> None:
    if session.pulls:
        pytest.skip("one client profile is enough: both profiles show the same diagnostics")
    root = tmp_path
    files = _corpus(root)
    from_cli = _cli_findings(root, files)

    # All open at once, as in an editor: a helper module then also shows what the scripts that call
    # it find there (the CLI reports those at the helper's lines too).
    uris = {str(path.relative_to(root)): session.open(path) for path in files}
    from_server: dict[str, set[tuple[int, str, str]]] = {}
    disagreements = {}
    hrefs: set[str] = set()
    for name, uri in uris.items():
        expected = from_cli.get(name, set())
        try:
            diagnostics = await session.diagnostics(
                uri, until=lambda found, expected=expected: _as_set(found) == expected
            )
        except AssertionError:
            diagnostics = await session.diagnostics(uri)
            disagreements[name] = {"cli": sorted(expected), "server": sorted(_as_set(diagnostics))}
        from_server[name] = _as_set(diagnostics)
        hrefs.update(d.code_description.href for d in diagnostics if d.code_description is not None)
    assert not disagreements, json.dumps(disagreements, indent=1)
    # Every rule link leads to a page that exists: the installed copy, read offline.
    assert hrefs
    for href in hrefs:
        assert href.startswith("file://"), href
        assert pathlib.Path(url2pathname(urlparse(href).path)).is_file(), href
    # The corpus is not trivially empty: most invalid samples have findings, suppression works exactly.
    assert sum(len(found) for found in from_server.values()) >= len(ALL_RULES)
    assert from_server["samples/suppression.py"] == {(7, "FAB001", "error")}
