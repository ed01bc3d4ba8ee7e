"""``fabric-ls``: the language server (default) and ``fabric-ls check`` for CI."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import tempfile
from typing import Optional, Sequence

from fabric_ls import __version__
from fabric_ls.model import Analysis, Finding
from fabric_ls.settings import Settings, parse_settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"fabric-ls: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fabric-ls", description="Find Lightning Fabric setup mistakes before the job runs."
    )
    parser.add_argument("--version", action="version", version=f"fabric-ls {__version__}")
    parser.add_argument("--stdio", action="store_true", help="serve LSP over stdio (the default)")
    parser.add_argument("--tcp", action="store_true", help="serve LSP over TCP")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=2087)
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run the language server (default)")
    serve.add_argument("--stdio", action="store_true", dest="serve_stdio")
    serve.add_argument("--tcp", action="store_true", dest="serve_tcp")
    serve.add_argument("--host", dest="serve_host")
    serve.add_argument("--port", type=int, dest="serve_port")

    check = commands.add_parser("check", help="check files and folders, print findings")
    check.add_argument("paths", nargs="*", default=["."], help="files or folders (default: .)")
    check.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text")
    check.add_argument("--strategy", help="assume this strategy where the script leaves it to `fabric run`")
    check.add_argument("--select", help="comma-separated rule codes or prefixes to report")
    check.add_argument("--ignore", help="comma-separated rule codes or prefixes to skip")
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix, apply unsafe fixes too")
    check.add_argument(
        "--matrix", action="store_true", help="show which strategies each script would fail under"
    )
    check.add_argument("--python", help="interpreter or virtualenv whose packages jedi reads")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "check":
        return _check(arguments)
    from fabric_ls.server import start

    tcp = arguments.tcp or getattr(arguments, "serve_tcp", False)
    host = getattr(arguments, "serve_host", None) or arguments.host
    port = getattr(arguments, "serve_port", None) or arguments.port
    if tcp:
        start(stdio=False, host=host, port=port)
    else:
        start(stdio=True)
    return EXIT_CLEAN


def _settings_from(arguments: argparse.Namespace, base: Settings) -> tuple[Settings, list[str]]:
    raw = {}
    if arguments.strategy:
        raw["strategy"] = arguments.strategy
    if arguments.select:
        raw["select"] = arguments.select
    if arguments.ignore:
        raw["ignore"] = arguments.ignore
    if arguments.python:
        raw["python"] = arguments.python
    return parse_settings(raw, base)


def _check(arguments: argparse.Namespace) -> int:
    from fabric_ls.engine import Project, analyze_file, iter_python_files, portability

    missing = [p for p in arguments.paths if not os.path.exists(p)]
    if missing:
        print(f"fabric-ls: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    cli_settings, problems = _settings_from(arguments, Settings())
    if problems:
        for problem in problems:
            print(f"fabric-ls: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    roots = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in arguments.paths]
    project = Project(roots, python=cli_settings.python)
    findings: list[Finding] = []
    analyses: list[Analysis] = []
    seen: set[tuple[str, int, int, str]] = set()
    for path in iter_python_files(arguments.paths):
        settings, config_problems = _file_settings(path, arguments)
        for problem in config_problems:
            print(f"fabric-ls: warning: {problem}", file=sys.stderr)
        analysis = analyze_file(path, settings, project)
        analyses.append(analysis)
        for finding in [*analysis.findings, *analysis.other_findings]:
            key = (
                os.path.abspath(finding.path),
                finding.span.start_line,
                finding.span.start_col,
                finding.code,
            )
            if key not in seen:
                seen.add(key)
                findings.append(finding)
        if arguments.matrix:
            _print_matrix(path, portability(_read(path), path, settings, project))
    findings.sort(key=lambda f: (f.path, f.span, f.code))
    if arguments.fix:
        findings = _apply_fixes(findings, arguments.unsafe_fixes)
    _report(findings, analyses, arguments.format)
    if arguments.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if findings else EXIT_CLEAN


_CONFIG_PROBLEMS_SHOWN: set[str] = set()


def _file_settings(path: str, arguments: argparse.Namespace) -> tuple[Settings, list[str]]:
    """``[tool.fabric-ls]`` from the nearest pyproject.toml, then the command line on top."""
    from fabric_ls.workspace_config import SettingsLayer, find_project_config, layered_settings

    config = find_project_config(path)
    problems: list[str] = []
    if config.error and config.path not in _CONFIG_PROBLEMS_SHOWN:
        problems.append(f"{config.path}: {config.error}; using defaults")
    layers = [
        SettingsLayer(config.path or "defaults", dict(config.table), os.path.dirname(config.path or path))
    ]
    base, layer_problems = layered_settings(layers)
    if config.path not in _CONFIG_PROBLEMS_SHOWN:
        problems.extend(layer_problems)
        _CONFIG_PROBLEMS_SHOWN.add(config.path or "")
    merged, more = _settings_from(arguments, base)
    return merged, [*problems, *more]


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def _print_matrix(path: str, matrix: dict[str, list[Finding]]) -> None:
    print(f"{_relative(path)}: strategy portability")
    for name, found in matrix.items():
        if found:
            rules = ", ".join(f"{f.code} line {f.span.start_line + 1}" for f in found)
            print(f"  {name:<20} fails: {rules}")
        else:
            print(f"  {name:<20} ok")


def _relative(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _fix_json(finding: Finding) -> Optional[dict]:
    if finding.fix is None:
        return None
    return {
        "title": finding.fix.title,
        "safe": finding.fix.safe,
        "edits": [
            {
                "line": e.span.start_line + 1,
                "column": e.span.start_col + 1,
                "end_line": e.span.end_line + 1,
                "end_column": e.span.end_col + 1,
                "new_text": e.new_text,
            }
            for e in finding.fix.edits
        ],
    }


def _as_json(finding: Finding) -> dict:
    from fabric_ls.records import get_record

    return {
        "path": _relative(finding.path),
        "line": finding.span.start_line + 1,
        "column": finding.span.start_col + 1,
        "end_line": finding.span.end_line + 1,
        "end_column": finding.span.end_col + 1,
        "code": finding.code,
        "severity": finding.severity,
        "message": finding.message,
        "strategy": finding.strategy,
        "condition": finding.condition,
        "url": get_record(finding.code).docs_url,
        "fix": _fix_json(finding),
    }


def _report(findings: list[Finding], analyses: list[Analysis], output: str) -> None:
    for analysis in analyses:
        if analysis.syntax_error:
            print(
                f"{_relative(analysis.path)}: syntax error: {analysis.syntax_error} "
                "(checked what still parses)",
                file=sys.stderr,
            )
        for note in analysis.notes:
            print(f"{_relative(analysis.path)}: note: {note}", file=sys.stderr)
    if output == "json":
        print(json.dumps([_as_json(f) for f in findings], indent=2))
        return
    if output == "sarif":
        print(json.dumps(_sarif(findings), indent=2))
        return
    if output == "github":
        for f in findings:
            level = "error" if f.severity == "error" else "warning"
            message = f.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            print(
                f"::{level} file={_relative(f.path)},line={f.span.start_line + 1},col={f.span.start_col + 1},"
                f"endLine={f.span.end_line + 1},endColumn={f.span.end_col + 1},title={f.code}::{message}"
            )
        return
    for f in findings:
        fixable = " [*]" if f.fix is not None else ""
        where = f"{_relative(f.path)}:{f.span.start_line + 1}:{f.span.start_col + 1}"
        print(f"{where}: {f.code}{fixable} {f.message}")
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    fixable_count = sum(1 for f in findings if f.fix is not None and f.fix.safe)
    if findings:
        summary = f"Found {len(findings)} problem{'s' if len(findings) != 1 else ''} ({errors} error"
        summary += f"{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''})"
        summary += f" in {len(analyses)} file{'s' if len(analyses) != 1 else ''}."
        if fixable_count:
            summary += f" {fixable_count} fixable with `fabric-ls check --fix`."
        print(summary)
    else:
        print(f"All checks passed ({len(analyses)} file{'s' if len(analyses) != 1 else ''}).")


def _sarif(findings: list[Finding]) -> dict:
    from fabric_ls.records import load_records

    records = load_records()
    used = sorted({f.code for f in findings})
    return {
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "fabric-ls",
                        "version": __version__,
                        "rules": [
                            {
                                "id": code,
                                "name": records[code].name,
                                "shortDescription": {"text": records[code].title},
                                "helpUri": records[code].docs_url,
                            }
                            for code in used
                        ],
                    }
                },
                "results": [
                    {
                        "ruleId": f.code,
                        "level": "error" if f.severity == "error" else "warning",
                        "message": {"text": f.message},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": _relative(f.path).replace(os.sep, "/")},
                                    "region": {
                                        "startLine": f.span.start_line + 1,
                                        "startColumn": f.span.start_col + 1,
                                        "endLine": f.span.end_line + 1,
                                        "endColumn": f.span.end_col + 1,
                                    },
                                }
                            }
                        ],
                    }
                    for f in findings
                ],
            }
        ],
    }


def _apply_fixes(findings: list[Finding], unsafe: bool) -> list[Finding]:
    """Apply fixes file by file; return the findings that remain unfixed."""
    from fabric_ls.fixes import apply_edits

    remaining: list[Finding] = []
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.fix is not None and (finding.fix.safe or unsafe):
            by_path.setdefault(finding.path, []).append(finding)
        else:
            remaining.append(finding)
    for path, fixable in by_path.items():
        with open(path, "rb") as handle:
            original_bytes = handle.read()
        original = original_bytes.decode("utf-8", errors="replace")
        chosen: list[Finding] = []
        taken: list[tuple] = []
        for finding in fixable:
            assert finding.fix is not None
            spans = [
                (e.span.start_line, e.span.start_col, e.span.end_line, e.span.end_col)
                for e in finding.fix.edits
            ]
            if any(_overlaps(a, b) for a in spans for b in taken):
                remaining.append(finding)  # applied on a later run, once the first fix is in
                continue
            taken.extend(spans)
            chosen.append(finding)
        edits = [e for f in chosen for e in f.fix.edits]  # type: ignore[union-attr]
        updated = apply_edits(original, edits)
        if not _write_atomically(path, original_bytes, updated):
            print(
                f"fabric-ls: {_relative(path)} changed while it was being fixed; left it alone",
                file=sys.stderr,
            )
            remaining.extend(chosen)
            continue
        for finding in chosen:
            print(
                f"Fixed {_relative(path)}:{finding.span.start_line + 1}: {finding.code} {finding.fix.title}",  # type: ignore[union-attr]
                file=sys.stderr,
            )
    return sorted(remaining, key=lambda f: (f.path, f.span, f.code))


def _overlaps(a: tuple, b: tuple) -> bool:
    return not ((a[2], a[3]) <= (b[0], b[1]) or (b[2], b[3]) <= (a[0], a[1]))


def _write_atomically(path: str, expected: bytes, text: str) -> bool:
    """Write via a temp file and rename; keep the mode; refuse if the file changed since it was read."""
    with open(path, "rb") as handle:
        if handle.read() != expected:
            return False
    mode = stat.S_IMODE(os.stat(path).st_mode)
    folder = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=".fabric-ls-", suffix=".py", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8"))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return True
