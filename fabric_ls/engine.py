"""The engine's public face: analyse a script's text, a file, or a tree of files.

parse → explore (interpreter runs, rules on each Fabric call) → merge runs →
findings with severity, condition, evidence and fix. No LSP types here.
"""

from __future__ import annotations

import ast
import os
import stat
from dataclasses import replace
from typing import Iterable, Iterator, Optional

from fabric_ls import rules
from fabric_ls.analysis.edit_reuse import Baseline, moved, reusable
from fabric_ls.analysis.events import CallEvent, FabricState, Violation
from fabric_ls.analysis.explore import Exploration, MergedFinding, explore, merge_findings, site_conditions
from fabric_ls.analysis.guards import FALSE, TRUE
from fabric_ls.analysis.project import Project
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.strategies import MATRIX_NAMES
from fabric_ls.fixes import fix_outside_repairs
from fabric_ls.model import (
    Analysis,
    CallSite,
    FabricSite,
    Finding,
    Origin,
    Span,
    StrategyCandidate,
    SyntaxProblem,
)
from fabric_ls.notebook import NOTEBOOK_SUFFIX, NotebookError, problem_in_cell, read_notebook
from fabric_ls.notebook import to_cells as notebook_findings
from fabric_ls.records import docs_url, get_record
from fabric_ls.settings import Settings
from fabric_ls.suppression import is_suppressed

DEFAULT_SETTINGS = Settings()

__all__ = [
    "Project",
    "analyze_source",
    "analyze_file",
    "analyze_notebook_text",
    "portability",
    "iter_python_files",
    "warm_up",
]

# Files larger than this are not analysed (a note says so): a training script is far
# smaller, and parsing alone takes seconds beyond it.
MAX_FILE_BYTES = 1_000_000
_SKIP_DIRS = {"node_modules", "__pycache__", "build", "dist", "site-packages", "venv", "env"}


def warm_up() -> None:
    """Load records and jedi so the first request is fast."""
    from fabric_ls.analysis.jedi_bridge import warm_up as warm_jedi
    from fabric_ls.records import load_records

    load_records()
    warm_jedi()


def analyze_source(
    source: str,
    path: str,
    settings: Settings = DEFAULT_SETTINGS,
    project: Optional[Project] = None,
    interactive: bool = False,
) -> Analysis:
    """Analyse one script's text; ``path`` locates it for imports and messages.

    ``interactive``: the code runs in an interactive session (a notebook), as Lightning's
    ``_IS_INTERACTIVE`` sees it."""
    return _analyze(source, path, settings, project, settings.strategy, force=False, interactive=interactive)


def analyze_file(
    path: str, settings: Settings = DEFAULT_SETTINGS, project: Optional[Project] = None
) -> Analysis:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        reason = f"cannot read file: {error.strerror or error}"
        return Analysis(path, syntax_error=reason, syntax_problem=SyntaxProblem(reason, Span(0, 0, 0, 0)))
    text = raw.decode("utf-8", errors="replace")
    if path.endswith(NOTEBOOK_SUFFIX):
        return analyze_notebook_text(text, path, settings, project)
    return analyze_source(text, path, settings, project)


def analyze_notebook_text(
    text: str, path: str, settings: Settings = DEFAULT_SETTINGS, project: Optional[Project] = None
) -> Analysis:
    """Analyse a notebook's JSON text: its code cells as one interactive program, findings in cells."""
    try:
        program = read_notebook(text)
    except NotebookError as error:
        return Analysis(os.path.abspath(path), syntax_error=str(error), syntax_problem=error.problem())
    analysis = analyze_source(program.text, path, settings, project, interactive=True)
    analysis.findings = notebook_findings(analysis.findings, analysis.path, program)
    if analysis.syntax_problem is not None:
        analysis.syntax_problem = problem_in_cell(analysis.syntax_problem, program)
    return analysis


def portability(
    source: str,
    path: str,
    settings: Settings = DEFAULT_SETTINGS,
    project: Optional[Project] = None,
    strategies: Optional[Iterable[str]] = None,
) -> dict[str, list[Finding]]:
    """For each registry strategy (or those given), the findings the script would get if it were chosen.

    Launch and hardware rules (``MACHINE_DEPENDENT``) are left out: choosing another strategy
    comes with its own launcher and machine.
    """
    result: dict[str, list[Finding]] = {}
    for name in strategies if strategies is not None else MATRIX_NAMES:
        analysis = _analyze(source, path, settings, project, name, force=True)
        result[name] = [f for f in analysis.findings if not rules.machine_dependent(f.code)]
    return result


def _analyze(
    source: str,
    path: str,
    settings: Settings,
    project: Optional[Project],
    assumed: Optional[str],
    force: bool,
    interactive: bool = False,
) -> Analysis:
    path = os.path.abspath(path) if not path.startswith("<") else path
    if len(source) > MAX_FILE_BYTES:
        return Analysis(
            path=path, notes=[f"file is larger than {MAX_FILE_BYTES // 1_000_000} MB; not analysed"]
        )
    if project is None:
        project = Project([os.path.dirname(path)] if not path.startswith("<") else [])
    parsed = project.parse_script(source, path)
    parsed.interactive = interactive
    key = (repr(settings), assumed, force, interactive)
    reused = _reused(project, key, parsed)
    if reused is not None:
        return reused
    wanted = frozenset(rule for rule in rules.BY_ID if settings.wants(rule))

    exploration = explore(project, parsed, _RuleChecker(wanted), assumed, force)
    analysis = Analysis(path=path)
    analysis.dependencies = tuple(sorted(exploration.dependencies))
    analysis.steps = exploration.steps
    if exploration.incomplete:
        analysis.notes.append("the script has more paths than fabric-ls follows; some were not checked")
    analysis.notes.extend(project.jedi_failures())
    if project.environment_problem:
        analysis.notes.append(project.environment_problem)
    main_findings: list[Finding] = []
    other_findings: list[Finding] = []
    for _, finding in _fold_repeats(exploration, settings, parsed):
        (main_findings if finding.path == path else other_findings).append(finding)
    analysis.fabric_sites = _fabric_sites(exploration, parsed)
    analysis.call_sites = _call_sites(exploration, path)
    analysis = _assemble(analysis, main_findings, other_findings, parsed)
    # A copy: a caller may change what it is given (a notebook's findings are put in their cells).
    project.keep_baseline(key, Baseline(parsed, main_findings, other_findings, replace(analysis)))
    return analysis


def _reused(project: Project, key: tuple[object, ...], parsed: ParsedSource) -> Optional[Analysis]:
    """The last analysis of this script, moved, where the edit since cannot change it
    (fabric_ls.analysis.edit_reuse); None where the script must be analysed."""
    baseline = project.baseline(key, parsed.path)
    lines = reusable(baseline, parsed) if baseline is not None else None
    found = moved(baseline, lines) if baseline is not None and lines is not None else None
    if baseline is None or found is None:
        return None
    main_findings, other_findings, previous = found
    analysis = _assemble(
        replace(previous, notes=list(previous.notes), reused=True), main_findings, other_findings, parsed
    )
    kept = Baseline(parsed, main_findings, other_findings, replace(analysis))
    project.keep_baseline(key, kept, reused=True)
    return analysis


def _assemble(
    analysis: Analysis, main_findings: list[Finding], other_findings: list[Finding], parsed: ParsedSource
) -> Analysis:
    """The result: the script's findings (fixes that edit what a repair made up left out), each
    finding in another file shown again at the script's call that leads there, the syntax error."""
    findings = [replace(f, fix=fix_outside_repairs(f.fix, parsed)) if f.fix else f for f in main_findings]
    findings += [at_call for f in other_findings if (at_call := _at_call(f, parsed)) is not None]
    return replace(
        analysis,
        findings=_unique_sorted(findings),
        other_findings=list(other_findings),
        syntax_error=parsed.syntax_error,
        syntax_problem=parsed.syntax_problem,
    )


# How a folded repeat is introduced in a finding's related information.
REPEAT_NOTE = "the same error, not reached"


def _fold_repeats(
    exploration: Exploration, settings: Settings, parsed: ParsedSource
) -> list[tuple[MergedFinding, Finding]]:
    """The findings, one per real error: once a finding's error is raised on every path, the same
    rule on the same Fabric later in that run is never reached; those later calls are listed in
    its related information instead of being reported again (FAB009 on every setup call).

    Suppressed findings are dropped first: a ``# noqa`` silences that line only, so the next
    call of the same error is reported in its place."""
    position = {
        id(observed.event): (run.root, index)
        for run in exploration.runs
        for index, observed in enumerate(run.observed)
    }
    found = []
    beside: dict[tuple[str, int, int], set[str]] = {}  # filled once, where a fix may be declined
    for merged in merge_findings(exploration, _span_of):
        finding = _finding(merged, settings, parsed)
        if finding is not None and finding.fix is not None and _fix_declined(merged, beside, exploration):
            finding = replace(finding, fix=None)
        if finding is not None and not _suppressed(merged.event.parsed, finding.span, finding.code):
            found.append((position.get(id(merged.event), (0, 0)), merged, finding))
    found.sort(key=lambda item: item[0])
    kept: list[tuple[MergedFinding, Finding]] = []
    raised_at: dict[tuple[int, str, str, int, int], int] = {}  # (root, rule, Fabric site) -> index in kept
    # Where the findings kept for that key raise (a warning's paths; every path for an error).
    raised_under: dict[tuple[int, str, str, int, int], int] = {}
    guards = exploration.guards
    for (root, _), merged, finding in found:
        state = merged.event.fabric
        # A Fabric the script received (a parameter) has no Fabric(...) call: its object stands for it.
        where = (state.node.lineno, state.node.col_offset) if state.node is not None else (-1, state.uid)
        key = (root, merged.rule, state.path, *where)
        first = raised_at.get(key)
        fires = merged.fires.get(root, TRUE)
        # Folded where every path it fires on raised at an earlier call of the same error (FAB009 on
        # each setup call of a Fabric not launched on a multi-GPU machine).
        reached = guards.and_(fires, guards.not_(raised_under.get(key, FALSE)))
        if first is not None and reached == FALSE:
            earlier, shown = kept[first]
            line = shown.span.start_line + 1
            note = f"{REPEAT_NOTE}: the call at line {line} raises first"
            also = Origin(finding.path, finding.span, note)
            kept[first] = (earlier, replace(shown, related=(*shown.related, also)))
            continue
        if not merged.event.caught:
            # A caught error does not end the run: the same mistake later is reached, and reported.
            if merged.always or key not in raised_at:
                raised_at[key] = len(kept)
            raised_under[key] = TRUE if merged.always else guards.or_(raised_under.get(key, FALSE), fires)
        kept.append((merged, finding))
    return kept


def _fix_declined(
    merged: MergedFinding, beside: dict[tuple[str, int, int], set[str]], exploration: Exploration
) -> bool:
    """A rule's fix is not offered where the same ``Fabric(...)`` may also get a strategy the fixed code
    would fail under (the rule's ``fix_declined_beside``: FAB001's joint setup beside XLA-FSDP). The
    strategy classes of each site (a statement split per option makes one Fabric per strategy, a
    Fabric with several has them as options) are read once, the first time a rule asks."""
    declined = getattr(rules.BY_ID.get(merged.rule), "fix_declined_beside", None)
    state = merged.event.fabric
    if declined is None or state.node is None:
        return False
    if not beside:
        for site, items in site_conditions(exploration, describe=False).items():
            beside[site] = {item.strategy.class_name for item, _ in items if item.strategy.class_name}
    classes = beside.get((state.path, state.node.lineno, state.node.col_offset), set())
    return bool(declined(classes, merged.event))


class _RuleChecker:
    """The rules as the interpreter sees them: what to check on a call, and which calls to report."""

    def __init__(self, wanted: frozenset[str]) -> None:
        self.wanted = wanted
        self.methods = frozenset(rules.CHECK_ORDER)

    def __call__(self, event: CallEvent) -> Optional[tuple[str, Violation]]:
        return rules.first_violation(event, self.wanted)


def _span_of(event: CallEvent, violation: Violation) -> tuple[str, Span]:
    return event.parsed.path, event.parsed.span(violation.node)


def _strategy_origins(state: FabricState) -> tuple[Origin, ...]:
    origins: list[Origin] = []
    if state.node is not None and state.parsed is not None:
        origins.append(Origin(state.path, state.parsed.span(state.node), "Fabric(...) created here"))
    for evidence in state.provenance:
        origin = evidence.to_origin()
        if origin not in origins:
            origins.append(origin)
    return tuple(origins)


def _finding(
    merged: MergedFinding, settings: Settings, main: Optional[ParsedSource] = None
) -> Optional[Finding]:
    record = get_record(merged.rule)
    event = merged.event
    state = event.fabric
    strategy_label = " or ".join(merged.strategies)
    args = {
        "strategy": state.strategy.user_class or state.strategy.class_name or "strategy",
        **merged.violation.args,
    }
    try:
        message = record.format_message(**args)
    except KeyError:
        message = record.title
    details = []
    if state.strategy.class_name is not None and rules.names_strategy(merged.rule):
        where = _where(state, event.parsed.path)
        details.append(f"strategy {strategy_label}{where}")
    if merged.condition:
        details.append(f"when {merged.condition}")
    if state.strategy.assumed:
        details.append("strategy assumed from the `strategy` setting")
    if details:
        message = f"{message} [{'; '.join(details)}]"
    default = rules.default_severity(merged.rule) or record.severity
    severity = default if merged.always else "warning"
    if severity == "error" and state.strategy.assumed:
        severity = "warning"
    severity = settings.severity_for(merged.rule, severity)
    if severity == "off":
        return None
    path, span = _span_of(event, merged.violation)
    fix = merged.violation.fix
    if event.parsed is not main:
        # A fix in the script itself is checked against its repairs when the result is put together.
        fix = fix_outside_repairs(fix, event.parsed)
    via = None
    if event.via is not None and main is not None:
        via = Origin(main.path, main.span(event.via), f"leads to the call in {os.path.basename(path)}")
    return Finding(
        code=merged.rule,
        path=path,
        span=span,
        severity=severity,  # type: ignore[arg-type]
        message=message,
        strategy=strategy_label,
        condition=merged.condition,
        related=_strategy_origins(state),
        fix=fix,
        via=via,
        title=record.title,
        docs_url=docs_url(record.rule, settings.docs_base_url),
    )


def _where(state: FabricState, here: str) -> str:
    if state.node is None:
        return ""
    line = state.node.lineno
    if state.path == here:
        return f" (Fabric at line {line})"
    return f" (Fabric at {os.path.basename(state.path)}:{line})"


def _suppressed(parsed: ParsedSource, span: Span, code: str) -> bool:
    return any(is_suppressed(parsed.line_text(line), code) for line in {span.start_line, span.end_line})


def _at_call(finding: Finding, main: ParsedSource) -> Optional[Finding]:
    """A finding in a helper module, shown again at the script's call that leads there.

    It carries no fix (the fix edits the helper module); a suppression comment on the call hides it.
    """
    via = finding.via
    if via is None or via.path != main.path or _suppressed(main, via.span, finding.code):
        return None
    where = f"{os.path.basename(finding.path)}:{finding.span.start_line + 1}"
    return replace(
        finding,
        path=main.path,
        span=via.span,
        message=f"{finding.message} (in {where}, reached through this call)",
        related=(Origin(finding.path, finding.span, f"the call in {where}"), *finding.related),
        fix=None,
        via=None,
    )


def _unique_sorted(findings: list[Finding]) -> list[Finding]:
    """By position and code; of findings with the same place, code and message (two calls into one
    helper reach the same line), the first."""
    unique: dict[tuple[Span, str, str], Finding] = {}
    for finding in findings:
        unique.setdefault((finding.span, finding.code, finding.message), finding)
    return sorted(unique.values(), key=lambda f: (f.span, f.code))


def _fabric_sites(exploration, parsed: ParsedSource) -> list[FabricSite]:  # type: ignore[no-untyped-def]
    sites: list[FabricSite] = []
    for (path, _line, _col), items in site_conditions(exploration).items():
        if path != parsed.path:
            continue
        state = items[0][0]
        candidates = []
        for item_state, condition in items:
            strategy = item_state.strategy
            candidates.append(
                StrategyCandidate(
                    class_name=strategy.class_name,
                    registry_name=strategy.registry_name,
                    zero_stage=strategy.zero_stage,
                    options=tuple((k, v) for k, v in strategy.options if _plain(v)),
                    condition=condition,
                    provenance=_strategy_origins(item_state),
                    unknown_reason=strategy.unknown_reason if strategy.class_name is None else None,
                    user_class=strategy.user_class,
                )
            )
        sites.append(FabricSite(path, parsed.span(state.node), tuple(candidates)))
    sites.sort(key=lambda s: s.span)
    return sites


def _plain(value: object) -> bool:
    return isinstance(value, (str, int, float, bool, type(None)))


def _call_sites(exploration, path: str) -> list[CallSite]:  # type: ignore[no-untyped-def]
    seen: dict[Span, CallSite] = {}
    for run in exploration.runs:
        for event in run.calls:
            if event.parsed.path != path or event.method == "Fabric":
                continue
            node: ast.AST = event.node
            if isinstance(event.node.func, ast.Attribute) and event.method != "tensor.backward":
                node = event.node
            span = event.parsed.span(node)
            if span in seen:
                continue
            state = event.fabric
            fabric_span = None
            if state.node is not None and state.path == path:
                fabric_span = event.parsed.span(state.node)
            seen[span] = CallSite(path, span, event.method, fabric_span)
    return sorted(seen.values(), key=lambda c: c.span)


def iter_python_files(paths: Iterable[str], skipped: Optional[list[str]] = None) -> Iterator[str]:
    """Python files and Jupyter notebooks under ``paths``, skipping virtualenvs, hidden and build folders.

    Only regular files are read: a named pipe, socket or device named ``*.py`` would block the read
    or never end; it is left out and, when ``skipped`` is given, said there.
    """
    for path in paths:
        if not os.path.isdir(path):
            if _regular(path, skipped):
                yield path
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and d not in _SKIP_DIRS
                and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
            )
            for name in sorted(files):
                if name.endswith((".py", NOTEBOOK_SUFFIX)) and _regular(os.path.join(folder, name), skipped):
                    yield os.path.join(folder, name)


def _regular(path: str, skipped: Optional[list[str]]) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError as error:  # a dangling or looping symbolic link
        if skipped is not None:
            skipped.append(f"skipped {path}: {error.strerror or error}")
        return False
    if stat.S_ISREG(mode):
        return True
    if skipped is not None:
        kind = (
            "a named pipe"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        skipped.append(f"skipped {path}: {kind}")
    return False
