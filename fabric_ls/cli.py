"""``fabric-ls``: the language server (default) and ``fabric-ls check`` for CI."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import tempfile
from typing import TYPE_CHECKING, NamedTuple, Optional, Sequence, TextIO

from fabric_ls import __version__, trust
from fabric_ls.cli_output import display_path
from fabric_ls.model import Finding
from fabric_ls.settings import Settings, parse_settings

if TYPE_CHECKING:
    from fabric_ls.batch_check import FileReport

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
    check.add_argument(
        "--trust-config",
        action="store_true",
        help="use the interpreter named by [tool.fabric-ls] python in pyproject.toml (off: never run it)",
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument(
        "--diff", action="store_true", help="print the fixes as a unified diff instead of writing them"
    )
    check.add_argument(
        "--show-fixes", action="store_true", help="show each finding's fix (with --fix: what was fixed)"
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print the findings and nothing else")
    check.add_argument("--statistics", action="store_true", help="print the number of findings per rule")
    check.add_argument("--output-file", metavar="PATH", help="write the report to PATH instead of stdout")
    check.add_argument("--no-color", action="store_true", help="no color, even on a terminal")
    check.add_argument(
        "--jobs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="check files in N processes (default: one per CPU)",
    )
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "check":
        try:
            return _check(arguments)
        except BrokenPipeError:
            # `fabric-ls check | head`: the reader left; say nothing more (Python would print a traceback).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_FINDINGS
    from fabric_ls.lsp.serve import start

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
    from fabric_ls.batch_check import FileTask, check_files
    from fabric_ls.cli_output import Progress
    from fabric_ls.engine import iter_python_files

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
    python = cli_settings.python
    if python is None:
        # A checked repository's own `python` runs only with --trust-config (see trust.python_for_check).
        python, trust_notes = trust.python_for_check(arguments.paths, arguments.trust_config)
        for note in trust_notes if not arguments.quiet else ():
            print(f"fabric-ls: warning: {note}", file=sys.stderr)
    # No time limit on jedi: the same files give the same findings however busy the machine is.
    project_options = {"roots": roots, "python": python, "jedi_timeout": None}
    tasks: list[FileTask] = []
    skipped: list[str] = []
    for path in iter_python_files(arguments.paths, skipped):
        if path not in arguments.paths and os.path.islink(path):
            continue  # a walk follows no symbolic link, to a file or a folder; a named path is checked
        settings, config_problems = _file_settings(path, arguments)
        for problem in config_problems if not arguments.quiet else ():
            print(f"fabric-ls: warning: {problem}", file=sys.stderr)
        tasks.append(FileTask(path, settings, arguments.matrix))
    for note in skipped if not arguments.quiet else ():
        print(f"fabric-ls: note: {note}", file=sys.stderr)
    progress = Progress(sys.stderr, enabled=not arguments.quiet and sys.stderr.isatty())
    reports = check_files(tasks, project_options, arguments.jobs or os.cpu_count() or 1, progress.update)
    progress.finish()
    findings = _unique_findings(reports)
    try:
        out = open(arguments.output_file, "w", encoding="utf-8") if arguments.output_file else sys.stdout
    except OSError as error:
        print(f"fabric-ls: error: cannot write {arguments.output_file}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    try:
        for report in reports:
            if report.matrix is not None:
                _print_matrix(report.path, report.matrix, out)
            for note in report.notes if not arguments.quiet else ():
                print(f"{display_path(report.path)}: note: {note}", file=sys.stderr)
        if arguments.diff:
            fixable = _show_diff(findings, arguments, out)
            return EXIT_FINDINGS if fixable and not arguments.exit_zero else EXIT_CLEAN
        if arguments.fix:
            findings = _fix_to_fixed_point(reports, tasks, project_options, arguments, out)
        _report(findings, len(reports), arguments, out)
    finally:
        if out is not sys.stdout:
            out.close()
    if arguments.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if findings else EXIT_CLEAN


def _unique_findings(reports: "list[FileReport]") -> list[Finding]:
    """Each file's findings, and those in helper modules it reached, once each, in output order."""
    from fabric_ls.cli_output import finding_order

    findings: list[Finding] = []
    seen: set[tuple[str, int, int, int, str]] = set()
    for report in reports:
        for finding in [*report.findings, *report.other_findings]:
            key = (
                os.path.abspath(finding.path),
                finding.cell or 0,
                finding.span.start_line,
                finding.span.start_col,
                finding.code,
            )
            if key not in seen:
                seen.add(key)
                findings.append(finding)
    return sorted(findings, key=finding_order)


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


def _print_matrix(path: str, matrix: dict[str, list[Finding]], out: TextIO) -> None:
    print(f"{display_path(path)}: strategy portability", file=out)
    for name, found in matrix.items():
        if found:
            rules = ", ".join(f"{f.code} line {f.span.start_line + 1}" for f in found)
            print(f"  {name:<20} fails: {rules}", file=out)
        else:
            print(f"  {name:<20} ok", file=out)


def _report(findings: list[Finding], file_count: int, arguments: argparse.Namespace, out: TextIO) -> None:
    from fabric_ls import cli_output

    unsafe = arguments.unsafe_fixes
    if arguments.format == "json":
        rows = (
            cli_output.statistics_json(findings, unsafe)
            if arguments.statistics
            else [cli_output.finding_json(f) for f in findings]
        )
        print(json.dumps(rows, indent=2), file=out)
        return
    if arguments.format == "sarif":
        print(json.dumps(cli_output.sarif_log(findings), indent=2), file=out)
        return
    if arguments.format == "github":
        for finding in findings:
            print(cli_output.github_line(finding), file=out)
        return
    if arguments.statistics:
        for line in cli_output.statistics_lines(findings, unsafe):
            print(line, file=out)
    else:
        style = cli_output.Style(out is sys.stdout and cli_output.color_wanted(out, arguments.no_color))
        for finding in findings:
            print(cli_output.text_line(finding, style, unsafe), file=out)
            hint = cli_output.fix_hint(finding, unsafe) if arguments.show_fixes else None
            if hint:
                print(hint, file=out)
    if not arguments.quiet:
        print(cli_output.summary(findings, file_count, unsafe), file=out)


class _FilePlan(NamedTuple):
    """The fixes chosen for one file and the text they make."""

    path: str
    original_bytes: bytes
    updated: str
    chosen: list[Finding]


def _plan_fixes(findings: list[Finding], unsafe: bool) -> tuple[list[_FilePlan], list[Finding]]:
    """Per file, the fixes to apply together (no two touching the same text); and the findings left."""
    from fabric_ls.fixes import apply_edits
    from fabric_ls.notebook import NOTEBOOK_SUFFIX, fix_notebook

    remaining: list[Finding] = []
    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.fix is not None and (finding.fix.safe or unsafe):
            by_path.setdefault(finding.path, []).append(finding)
        else:
            remaining.append(finding)
    plans: list[_FilePlan] = []
    for path, fixable in by_path.items():
        with open(path, "rb") as handle:
            original_bytes = handle.read()
        original = original_bytes.decode("utf-8", errors="replace")
        chosen: list[Finding] = []
        taken: list[tuple] = []
        applied: set = set()
        for finding in fixable:
            assert finding.fix is not None
            spans = [
                (finding.cell or 0, e.span.start_line, e.span.start_col, e.span.end_line, e.span.end_col)
                for e in finding.fix.edits
            ]
            if set(finding.fix.edits) <= applied:
                chosen.append(finding)  # the same edits as a fix already chosen: apply them once
                continue
            if any(_overlaps(a, b) for a in spans for b in taken):
                remaining.append(finding)  # applied in a later round, once the first fix is in
                continue
            taken.extend(spans)
            applied.update(finding.fix.edits)
            chosen.append(finding)
        edits = list(dict.fromkeys(e for f in chosen for e in f.fix.edits))  # type: ignore[union-attr]
        if path.endswith(NOTEBOOK_SUFFIX):
            updated = fix_notebook(original, chosen)
        else:
            updated = apply_edits(original, edits)
        plans.append(_FilePlan(path, original_bytes, updated, chosen))
    return plans, remaining


def _show_diff(findings: list[Finding], arguments: argparse.Namespace, out: TextIO) -> int:
    """``--diff``: print what ``--fix`` would change, write nothing; return how many fixes that is."""
    from fabric_ls.cli_output import unified_diff

    plans, _ = _plan_fixes(findings, arguments.unsafe_fixes)
    count = 0
    for plan in plans:
        original = plan.original_bytes.decode("utf-8", errors="replace")
        if plan.updated != original:
            print(unified_diff(plan.path, original, plan.updated), file=out)
            count += len(plan.chosen)
    if not arguments.quiet:
        print(
            f"Would fix {count} problem{'' if count == 1 else 's'}." if count else "No fixes to apply.",
            file=out,
        )
    return count


# Rounds of fix, write, re-check: a fix may uncover a finding another one masked (a missing
# launch() hides FAB001), or make room for a fix that overlapped it. Bounded, as in ruff.
MAX_FIX_ROUNDS = 10


def _fix_to_fixed_point(
    reports: "list[FileReport]",
    tasks: list,
    project_options: dict,
    arguments: argparse.Namespace,
    out: TextIO,
) -> list[Finding]:
    """Apply fixes, re-check the files they touched, repeat until nothing changes (at most
    ``MAX_FIX_ROUNDS`` rounds); return the findings of that last, fresh check."""
    from fabric_ls.batch_check import check_files
    from fabric_ls.cli_output import finding_order, fixed_enumeration

    fixed: list[Finding] = []
    seen_texts: dict[str, set[str]] = {}
    for _ in range(MAX_FIX_ROUNDS):
        written = _apply_fixes(_unique_findings(reports), arguments, fixed, seen_texts)
        if not written:
            break
        stale = [
            index
            for index, report in enumerate(reports)
            if report.path in written or any(f.path in written for f in report.other_findings)
        ]
        fresh = check_files([tasks[i] for i in stale], project_options, arguments.jobs or os.cpu_count() or 1)
        for index, report in zip(stale, fresh):
            reports[index] = report
    if arguments.show_fixes:
        for line in fixed_enumeration(sorted(fixed, key=finding_order)):
            print(line, file=out)
    return _unique_findings(reports)


def _apply_fixes(
    findings: list[Finding],
    arguments: argparse.Namespace,
    fixed: list[Finding],
    seen_texts: dict[str, set[str]],
) -> set[str]:
    """One round: apply the fixes file by file, add them to ``fixed``; return the paths written.

    A file is not written back into a text it already had (a fix that undoes another).
    """
    from fabric_ls.cli_output import cell_prefix

    plans, _ = _plan_fixes(findings, arguments.unsafe_fixes)
    written: set[str] = set()
    roots = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in arguments.paths]
    for plan in plans:
        texts = seen_texts.setdefault(plan.path, {plan.original_bytes.decode("utf-8", errors="replace")})
        if not plan.chosen or plan.updated in texts:
            continue
        if not trust.inside_roots(plan.path, roots):
            print(
                f"fabric-ls: left {display_path(plan.path)} alone: through a symbolic link it lies outside "
                "the checked folders",
                file=sys.stderr,
            )
            continue
        if not _write_atomically(plan.path, plan.original_bytes, plan.updated):
            print(
                f"fabric-ls: {display_path(plan.path)} changed while it was being fixed; left it alone",
                file=sys.stderr,
            )
            continue
        texts.add(plan.updated)
        written.add(plan.path)
        fixed.extend(plan.chosen)
        for finding in plan.chosen if not arguments.quiet else ():
            title = finding.fix.title  # type: ignore[union-attr]
            where = f"{display_path(plan.path)}:{cell_prefix(finding)}{finding.span.start_line + 1}"
            print(f"Fixed {where}: {finding.code} {title}", file=sys.stderr)
    return written


def _overlaps(a: tuple, b: tuple) -> bool:
    """Two (cell, start line, start column, end line, end column) spans share text, or are two
    insertions at one place (whose order would be a guess)."""
    if a == b:
        return True
    return a[0] == b[0] and not ((a[3], a[4]) <= (b[1], b[2]) or (b[3], b[4]) <= (a[1], a[2]))


def _write_atomically(path: str, expected: bytes, text: str) -> bool:
    """Write via a temp file and rename; keep the mode; refuse if the file changed since it was read."""
    path = os.path.realpath(path)  # a symbolic link stays a link; its target gets the text
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
