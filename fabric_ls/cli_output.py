"""What ``fabric-ls check`` prints: ruff-style text (colored on a terminal), statistics, JSON,
GitHub annotations, SARIF, unified diffs of fixes, and a progress line.

Presentation only: the findings arrive sorted and deduplicated; nothing here decides what is wrong.
"""

from __future__ import annotations

import difflib
import os
import time
from collections import Counter
from typing import Any, Optional, TextIO

from fabric_ls import __version__
from fabric_ls.batch_check import SYNTAX_ERROR_CODE, SYNTAX_ERROR_NAME, SYNTAX_ERROR_TITLE
from fabric_ls.model import Finding

_RESET = "\x1b[0m"
_BOLD, _RED, _YELLOW, _CYAN = "1", "31", "33", "36"
_SEVERITY_COLOR = {"error": _RED, "warning": _YELLOW}


def color_wanted(stream: TextIO, no_color: bool = False) -> bool:
    """``--no-color`` and ``NO_COLOR`` turn color off, ``FORCE_COLOR`` on; otherwise only on a terminal."""
    if no_color or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Style:
    """ANSI styling that is a no-op when color is off."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def paint(self, text: str, *codes: str) -> str:
        if not self.enabled or not codes:
            return text
        return f"\x1b[{';'.join(codes)}m{text}{_RESET}"


def display_path(path: str) -> str:
    """The path relative to the working folder when it lies below it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def fix_applies(finding: Finding, unsafe: bool) -> bool:
    """Whether ``--fix`` (with ``--unsafe-fixes`` when ``unsafe``) would apply this finding's fix."""
    return finding.fix is not None and (finding.fix.safe or unsafe)


def finding_order(finding: Finding) -> tuple:
    """Output order: path, line, column, code (then the rest, so ties cannot depend on the run)."""
    span = finding.span
    return (
        display_path(finding.path),
        finding.cell or 0,
        span.start_line,
        span.start_col,
        finding.code,
        span.end_line,
        span.end_col,
        finding.message,
    )


def text_line(finding: Finding, style: Style, unsafe: bool) -> str:
    """``path:line:col: error FAB001 [*] message [strategy ...; when ...]``; in a notebook
    ``path:cell 3:line:col: ...`` (the line inside the cell)."""
    span = finding.span
    where = f"{display_path(finding.path)}:{cell_prefix(finding)}{span.start_line + 1}:{span.start_col + 1}:"
    severity = style.paint(finding.severity, _BOLD, _SEVERITY_COLOR.get(finding.severity, _CYAN))
    fixable = " " + style.paint("[*]", _CYAN) if fix_applies(finding, unsafe) else ""
    code = style.paint(finding.code, _BOLD)
    return f"{style.paint(where, _BOLD)} {severity} {code}{fixable} {finding.message}"


def cell_prefix(finding: Finding) -> str:
    """``cell 3:`` for a finding in a notebook, else nothing."""
    return f"cell {finding.cell}:" if finding.cell is not None else ""


def fix_hint(finding: Finding, unsafe: bool) -> Optional[str]:
    """The ``--show-fixes`` line under a finding: what its fix does, and which flag applies it."""
    if finding.fix is None:
        return _declined_hint(finding.code, finding.docs_url)
    if fix_applies(finding, unsafe):
        return f"  fix: {finding.fix.title}"
    return f"  fix (unsafe, applied with --unsafe-fixes): {finding.fix.title}"


# Said where a rule's fix declines the code it found (fabric_ls/fixes.py: better none than a wrong one).
DECLINED_REASON = "this code is not in a shape the fix can rewrite without changing what it does"


def _declined_hint(code: str, docs_url: str) -> Optional[str]:
    """For a rule with a fix that declined this code: why, and where the example fix is."""
    if code == SYNTAX_ERROR_CODE:
        return None
    from fabric_ls.records import get_record

    spec = get_record(code).fix
    if spec is None:
        return None
    where = docs_url or _rule_url(code)
    return f"  no fix here: {DECLINED_REASON}; example fix: {where}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary(findings: list[Finding], file_count: int, unsafe: bool) -> str:
    """``Found 9 problems (8 errors, 1 warning) in 10 files. 5 fixable with `--fix` (1 more ...).``"""
    if not findings:
        return f"All checks passed ({_plural(file_count, 'file')})."
    errors = sum(1 for f in findings if f.severity == "error")
    text = (
        f"Found {_plural(len(findings), 'problem')} ({_plural(errors, 'error')}, "
        f"{_plural(len(findings) - errors, 'warning')}) in {_plural(file_count, 'file')}."
    )
    fixable = sum(1 for f in findings if fix_applies(f, unsafe))
    hidden = sum(1 for f in findings if f.fix is not None) - fixable
    if fixable or hidden:
        text += f" {fixable} fixable with `--fix`"
        text += f" ({hidden} more with `--unsafe-fixes`)." if hidden else "."
    return text


def rule_name(code: str) -> str:
    if code == SYNTAX_ERROR_CODE:
        return SYNTAX_ERROR_NAME
    from fabric_ls.records import get_record

    return get_record(code).name


def _rule_title(code: str) -> str:
    if code == SYNTAX_ERROR_CODE:
        return SYNTAX_ERROR_TITLE
    from fabric_ls.records import get_record

    return get_record(code).title


def _rule_url(code: str) -> Optional[str]:
    if code == SYNTAX_ERROR_CODE:
        return None
    from fabric_ls.records import get_record

    return get_record(code).docs_url


def _statistics(findings: list[Finding], unsafe: bool) -> list[dict[str, Any]]:
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if fix_applies(f, unsafe))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [
        {"code": code, "name": rule_name(code), "count": count, "fixable": fixable[code]}
        for code, count in rows
    ]


def statistics_lines(findings: list[Finding], unsafe: bool) -> list[str]:
    """One line per rule, most frequent first, as ``ruff check --statistics``: count, code, fixable, name.

    ``[*]`` every finding of the rule is fixable with ``--fix``, ``[-]`` some are, ``[ ]`` none.
    """
    rows = _statistics(findings, unsafe)
    width = max((len(str(row["count"])) for row in rows), default=1)
    lines = []
    for row in rows:
        mark = "[*]" if row["fixable"] == row["count"] else "[-]" if row["fixable"] else "[ ]"
        lines.append(f"{row['count']:>{width}}\t{row['code']}\t{mark} {row['name']}")
    return lines


def statistics_json(findings: list[Finding], unsafe: bool) -> list[dict[str, Any]]:
    """``--statistics --format json``: ``code, name, count, fixable`` per rule."""
    return _statistics(findings, unsafe)


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


def finding_json(finding: Finding) -> dict:
    """``--format json``: one object per finding (1-based lines and columns; in a notebook, inside
    the ``cell``, as ruff; ``cell`` is null in a script)."""
    return {
        "path": display_path(finding.path),
        "cell": finding.cell,
        "line": finding.span.start_line + 1,
        "column": finding.span.start_col + 1,
        "end_line": finding.span.end_line + 1,
        "end_column": finding.span.end_col + 1,
        "code": finding.code,
        "severity": finding.severity,
        "message": finding.message,
        "strategy": finding.strategy,
        "condition": finding.condition,
        "url": finding.docs_url or _rule_url(finding.code),
        "fix": _fix_json(finding),
    }


def github_line(finding: Finding) -> str:
    """A GitHub Actions workflow command: an annotation on the pull request's diff."""
    level = "error" if finding.severity == "error" else "warning"
    message = (
        f"{cell_prefix(finding)} {finding.message}".lstrip()
        .replace("%", "%25")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
    )
    span = finding.span
    return (
        f"::{level} file={display_path(finding.path)},line={span.start_line + 1},col={span.start_col + 1},"
        f"endLine={span.end_line + 1},endColumn={span.end_col + 1},title={finding.code}::{message}"
    )


def sarif_log(findings: list[Finding]) -> dict:
    """SARIF 2.1.0, for code-scanning uploads."""
    used = sorted({f.code for f in findings})
    rules = []
    for code in used:
        rule: dict[str, Any] = {
            "id": code,
            "name": rule_name(code),
            "shortDescription": {"text": _rule_title(code)},
        }
        url = _rule_url(code)
        if url:
            rule["helpUri"] = url
        rules.append(rule)
    return {
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [
            {
                "tool": {"driver": {"name": "fabric-ls", "version": __version__, "rules": rules}},
                "results": [
                    {
                        "ruleId": f.code,
                        "level": "error" if f.severity == "error" else "warning",
                        "message": {"text": f"{cell_prefix(f)} {f.message}".lstrip()},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": display_path(f.path).replace(os.sep, "/")},
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


def unified_diff(path: str, original: str, updated: str) -> str:
    """``--diff``: the change a fix would make, as ``ruff check --diff`` shows it."""
    name = display_path(path)
    lines = difflib.unified_diff(
        original.splitlines(keepends=True), updated.splitlines(keepends=True), fromfile=name, tofile=name
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def fixed_enumeration(fixed: list[Finding]) -> list[str]:
    """``--fix --show-fixes``: what was fixed, per file and rule (``1 × FAB001 (title)``)."""
    if not fixed:
        return []
    by_path: dict[str, Counter] = {}
    titles: dict[str, str] = {}
    for finding in fixed:
        by_path.setdefault(display_path(finding.path), Counter())[finding.code] += 1
        titles.setdefault(finding.code, finding.fix.title if finding.fix else "")
    lines = [f"Fixed {_plural(len(fixed), 'problem')}:"]
    for path in sorted(by_path):
        lines.append(f"- {path}:")
        for code, count in sorted(by_path[path].items()):
            lines.append(f"    {count} × {code} ({titles[code]})")
    return lines


class Progress:
    """``fabric-ls: checked 12/40 files`` on stderr, once a run has taken a second; terminals only."""

    def __init__(self, stream: TextIO, enabled: bool, delay_seconds: float = 1.0) -> None:
        self.stream = stream
        self.enabled = enabled
        self.delay_seconds = delay_seconds
        self.started = time.monotonic()
        self.shown = False

    def update(self, done: int, total: int) -> None:
        if not self.enabled or time.monotonic() - self.started < self.delay_seconds:
            return
        self.stream.write(f"\rfabric-ls: checked {done}/{total} files")
        self.stream.flush()
        self.shown = True

    def finish(self) -> None:
        """Erase the line, so the report starts on a clean one."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
