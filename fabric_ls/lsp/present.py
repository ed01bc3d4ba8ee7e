"""An engine analysis as the client sees it: the engine's findings, converted, nothing re-decided.

The engine has already applied the settings (select/ignore, severity), suppression comments and
the docs link; here each finding becomes a diagnostic in the client's position encoding. A
finding in a helper module (``analysis.other_findings``) is also shown under that module's URI,
when the module is the user's (in the project, or open), pointing back at the script's call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence

from lsprotocol import types

from fabric_ls.lsp import convert
from fabric_ls.lsp.documents import DocumentState, Outcome, normal_path, unique_sorted
from fabric_ls.model import Analysis, Finding, Origin


@dataclass(frozen=True)
class Context:
    """What conversion needs besides the analysis: the client's encoding and the other files."""

    encoding: str
    open_documents: Sequence[DocumentState]
    # The lines of another file (the open buffer, else the file on disk), None when unreadable.
    lines_of: convert.LinesProvider
    # The buffer version of an open module that the analysis read (None: the file on disk).
    version_read: Callable[[DocumentState], Optional[int]]
    converter: Any


def present(
    document: DocumentState, analysis: Analysis, context: Context, environment_problem: Optional[str] = None
) -> Outcome:
    findings: list[Finding] = []
    diagnostics: list[types.Diagnostic] = []
    own_path = normal_path(document.path)
    for finding in analysis.findings:
        if normal_path(finding.path) != own_path:
            continue
        diagnostic = to_diagnostic(finding, document.lines, context, document.version)
        if diagnostic is not None:
            findings.append(finding)
            diagnostics.append(diagnostic)
    contributed: dict[str, list[types.Diagnostic]] = {}
    for finding in analysis.other_findings:
        in_helper = _in_helper(document, finding, context)
        if in_helper is not None:
            contributed.setdefault(in_helper[0], []).append(in_helper[1])
    return Outcome(
        document=document,
        analysis=analysis,
        findings=tuple(findings),
        diagnostics=tuple(diagnostics),
        result_id=convert.diagnostics_result_id(diagnostics, context.converter),
        dependencies=frozenset(normal_path(path) for path in analysis.dependencies),
        notes=tuple(analysis.notes),
        environment_problem=environment_problem,
        contributed={uri: unique_sorted(found) for uri, found in sorted(contributed.items())},
    )


def to_diagnostic(
    finding: Finding, lines: Sequence[str], context: Context, version: Optional[int]
) -> Optional[types.Diagnostic]:
    return convert.to_diagnostic(
        finding,
        lines,
        context.encoding,
        finding.severity,
        version,
        docs_url=finding.docs_url or None,
        related_lines=context.lines_of,
    )


def _in_helper(
    document: DocumentState, finding: Finding, context: Context
) -> Optional[tuple[str, types.Diagnostic]]:
    """The helper module's URI and the finding as a diagnostic there, pointing back at the call.

    Only for a module in the script's project (or open): a library the script calls is not
    the user's to fix, and the diagnostic at the call already says what goes wrong there.
    """
    path = normal_path(finding.path)
    open_document = next((state for state in context.open_documents if normal_path(state.path) == path), None)
    if open_document is None and not _inside(path, normal_path(document.project_key[0])):
        return None
    lines = context.lines_of(finding.path)
    if lines is None:
        return None
    back: tuple[Origin, ...] = ()
    if finding.via is not None:
        where = f"{os.path.basename(finding.via.path)}:{finding.via.span.start_line + 1}"
        back = (Origin(finding.via.path, finding.via.span, f"reached from {where}"),)
    in_helper = replace(finding, related=(*back, *finding.related), via=None)
    # The diagnostic is shown only while the module is at the version the analysis read.
    version = context.version_read(open_document) if open_document is not None else None
    diagnostic = to_diagnostic(in_helper, lines, context, version)
    if diagnostic is None:
        return None
    uri = open_document.uri if open_document is not None else convert.path_to_uri(finding.path)
    return uri, diagnostic


def _inside(path: str, root: str) -> bool:
    return path.startswith(root.rstrip(os.sep) + os.sep)
