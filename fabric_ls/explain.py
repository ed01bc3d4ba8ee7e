"""What the editor shows about a Fabric script besides diagnostics: hover text and labels.

Pure functions of an ``Analysis`` (plus the records and the portability map); no LSP types,
so the CLI or docs could reuse them. The per-strategy behaviour below was read from
lightning 2.6.6 (``fabric.py``, ``strategies/*.py``; see /work/shared/FABRIC_RULES.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, Mapping, Optional, Sequence

from fabric_ls.analysis.strategies import PARENT, REGISTRY
from fabric_ls.model import Analysis, CallSite, FabricSite, Finding, Origin, Span, StrategyCandidate
from fabric_ls.text import code, plain

# Looks a rule code up in the records; returns an object with the Record attributes, or None.
RecordLookup = Callable[[str], Optional[Any]]

PORTABILITY_PENDING = "Strategy portability is being computed: hover again in a moment."
PORTABILITY_STALE = "Strategy portability as of an earlier version of this file; updating."

EXPLAINED_METHODS = (
    "setup",
    "setup_module",
    "setup_optimizers",
    "setup_dataloaders",
    "init_module",
    "launch",
    "backward",
)


@dataclass(frozen=True)
class StrategyGuide:
    """What each Fabric call does under one strategy class, and the order the strategy needs."""

    order: tuple[str, ...]
    calls: Mapping[str, str] = field(default_factory=dict)


def _load_guides() -> tuple[dict[str, StrategyGuide], dict[str, str]]:
    """The per-strategy text is data (fabric_ls/knowledge/strategies.json), like the rule records."""
    text = (
        resources.files("fabric_ls")
        .joinpath("knowledge")
        .joinpath("strategies.json")
        .read_text(encoding="utf-8")
    )
    data = json.loads(text)
    guides = {
        name: StrategyGuide(order=tuple(entry["order"]), calls=dict(entry["calls"]))
        for name, entry in data["strategies"].items()
    }
    return guides, dict(data["variants"])


GUIDES, _VARIANTS = _load_guides()
_SPAWN_LAUNCH = _VARIANTS["spawn_launch"]
_ZERO3_INIT = _VARIANTS["zero3_init_module"]


def _lineage(class_name: Optional[str]) -> list[str]:
    chain: list[str] = []
    current = class_name
    while current is not None and current not in chain:
        chain.append(current)
        current = PARENT.get(current)
    if "Strategy" not in chain:
        chain.append("Strategy")
    return chain


def guide_for(candidate: StrategyCandidate) -> tuple[str, StrategyGuide]:
    """The closest class with a guide (a user subclass gets its Lightning base's), and the guide."""
    for name in _lineage(candidate.class_name):
        if name in GUIDES:
            return name, GUIDES[name]
    return "Strategy", GUIDES["Strategy"]


def call_behaviour(method: str, candidate: StrategyCandidate) -> str:
    """What ``fabric.<method>`` does under one candidate strategy."""
    if method == "launch" and candidate.registry_name in REGISTRY:
        start_method = REGISTRY[candidate.registry_name].start_method
        if start_method in ("spawn", "fork"):
            return _SPAWN_LAUNCH.format(method=start_method)
    if method == "init_module" and candidate.class_name == "DeepSpeedStrategy" and candidate.zero_stage == 3:
        return _ZERO3_INIT
    for name in _lineage(candidate.class_name):
        text = GUIDES.get(name, StrategyGuide(order=())).calls.get(method)
        if text:
            return text
    return ""


def required_order(candidate: StrategyCandidate) -> tuple[str, tuple[str, ...]]:
    """The class whose order applies and the steps, for one candidate."""
    name, guide = guide_for(candidate)
    order = guide.order
    if candidate.registry_name in REGISTRY and REGISTRY[candidate.registry_name].start_method in (
        "spawn",
        "fork",
    ):
        order = tuple(
            "`fabric.launch(train)`; everything below runs inside `def train(fabric):`"
            if "launch()" in step
            else step
            for step in order
        )
    return name, order


def site_label(site: FabricSite) -> str:
    """The inlay-hint text after ``Fabric(...)``, plain: ``DeepSpeedStrategy · ZeRO-3``."""
    return plain(site.label)


def code_lens_title(site: FabricSite) -> str:
    """The code lens text, for clients without inlay hints: the same as the inlay hint."""
    return plain(site.label)


def _where(origin: Origin, path: str) -> str:
    line = origin.span.start_line + 1
    if os.path.normcase(os.path.abspath(origin.path)) == os.path.normcase(os.path.abspath(path)):
        return f"line {line}"
    return f"`{os.path.basename(origin.path)}:{line}`"


def _candidate_lines(candidate: StrategyCandidate, path: str) -> list[str]:
    head = f"- {code(candidate.label)}"
    if candidate.condition:
        head += f" when {candidate.condition}"
    if candidate.class_name is None and candidate.unknown_reason:
        head += f": {candidate.unknown_reason}"
    lines = [head]
    for origin in candidate.provenance:
        lines.append(f"  - {_where(origin, path)}: {origin.note}")
    return lines


def _markdown_label(site: FabricSite) -> str:
    """``site.label`` as markdown: each candidate in code, its condition (already markdown) after it."""
    parts = [
        code(candidate.label) + (f" ({candidate.condition})" if candidate.condition else "")
        for candidate in site.candidates
    ]
    return " | ".join(parts) if parts else "unknown"


def site_tooltip(site: FabricSite) -> str:
    """Markdown that says where each candidate strategy came from (inlay-hint tooltip)."""
    lines = ["**Strategy candidates**", ""]
    for candidate in site.candidates:
        lines.extend(_candidate_lines(candidate, site.path))
    if not site.candidates:
        lines.append("- unknown")
    return "\n".join(lines)


def site_summary(site: FabricSite) -> str:
    """One plain-text line per candidate, for a message box."""
    parts = []
    for candidate in site.candidates:
        text = candidate.label
        if candidate.condition:
            text += f" when {plain(candidate.condition)}"
        origins = "; ".join(
            f"{plain(_where(origin, site.path))}: {plain(origin.note)}" for origin in candidate.provenance
        )
        if origins:
            text += f" ({origins})"
        parts.append(text)
    return "Fabric strategy: " + (" | ".join(parts) if parts else "unknown")


def portability_markdown(portability: Mapping[str, Sequence[Finding]], path: str) -> str:
    """A table: for each strategy, the rules that would fire and where."""
    if not portability:
        return ""
    rows = ["**Strategy portability**", "", "| strategy | would report |", "| --- | --- |"]
    for strategy in sorted(portability):
        findings = sorted(portability[strategy], key=lambda finding: (finding.span, finding.code))
        if findings:
            cells = ", ".join(
                f"{finding.code} (line {finding.span.start_line + 1})"
                if finding.path == path
                else f"{finding.code} ({os.path.basename(finding.path)}:{finding.span.start_line + 1})"
                for finding in findings
            )
        else:
            cells = "nothing"
        rows.append(f"| `{strategy}` | {cells} |")
    return "\n".join(rows)


def _example_blocks(record: Any) -> list[str]:
    before = getattr(record, "example_before", None)
    after = getattr(record, "example_after", None)
    example_fix = getattr(record, "example_fix", None)
    blocks: list[str] = []
    if isinstance(before, str) and isinstance(after, str) and before.strip() and after.strip():
        blocks += [
            "**Before**",
            "```python",
            before.rstrip(),
            "```",
            "**After**",
            "```python",
            after.rstrip(),
            "```",
        ]
    elif isinstance(example_fix, str) and example_fix.strip():
        blocks += ["**Example fix**", "```python", example_fix.rstrip(), "```"]
    elif isinstance(after, str) and after.strip():
        blocks += ["**Example fix**", "```python", after.rstrip(), "```"]
    return blocks


def finding_markdown(finding: Finding, record: Optional[Any]) -> str:
    """The finding's message, then the record's documentation and example fix."""
    title = getattr(record, "title", None) if record is not None else None
    heading = f"**{finding.code}**" + (f": {title}" if title else "")
    lines = [heading, "", finding.message]
    if finding.condition:
        lines += ["", f"Applies when {finding.condition}."]
    if record is not None:
        documentation = getattr(record, "documentation", None)
        if isinstance(documentation, str) and documentation.strip():
            lines += ["", documentation.strip()]
        examples = _example_blocks(record)
        if examples:
            lines += [""] + examples
        docs_url = getattr(record, "docs_url", None)
        if docs_url:
            lines += ["", f"[{finding.code} documentation]({docs_url})"]
    return "\n".join(lines)


def fabric_site_markdown(
    site: FabricSite,
    portability: Optional[Mapping[str, Sequence[Finding]]] = None,
    portability_note: Optional[str] = None,
) -> str:
    """Hover for ``Fabric(...)``: candidates and where they came from, the order each needs, portability."""
    lines = [f"**Fabric strategy:** {_markdown_label(site)}", ""]
    for candidate in site.candidates:
        lines.extend(_candidate_lines(candidate, site.path))
    shown: set[str] = set()
    for candidate in site.candidates:
        if candidate.class_name is None:
            continue
        name, order = required_order(candidate)
        key = f"{name}:{order}"
        if key in shown:
            continue
        shown.add(key)
        lines += ["", f"**Order {code(name)} requires**", ""]
        lines += [f"{index}. {step}" for index, step in enumerate(order, start=1)]
    table = portability_markdown(portability or {}, site.path)
    if table:
        lines += ["", table]
    if portability_note:
        lines += ["", f"_{portability_note}_"]
    return "\n".join(lines)


def call_site_markdown(call: CallSite, site: Optional[FabricSite]) -> str:
    """Hover for ``fabric.<method>(...)``: what the call does under each strategy the Fabric can have."""
    lines = [f"**`fabric.{call.method}`**"]
    candidates = site.candidates if site is not None else ()
    known = [candidate for candidate in candidates if candidate.class_name is not None]
    if not known:
        generic = GUIDES["Strategy"].calls.get(call.method, "")
        lines += ["", "The strategy of this Fabric is not known statically."]
        if generic:
            lines += ["", generic]
        return "\n".join(lines)
    for candidate in known:
        behaviour = call_behaviour(call.method, candidate)
        when = f" when {candidate.condition}" if candidate.condition else ""
        lines += ["", f"Under {code(candidate.label)}{when}: {behaviour}".rstrip()]
    if site is not None:
        lines += ["", f"Fabric created at line {site.span.start_line + 1}."]
    return "\n".join(lines)


def _contains(span: Span, line: int, column: int) -> bool:
    return (span.start_line, span.start_col) <= (line, column) <= (span.end_line, span.end_col)


def _size(span: Span) -> tuple[int, int]:
    return (span.end_line - span.start_line, span.end_col - span.start_col)


def fabric_site_at(analysis: Analysis, line: int, column: int) -> Optional[FabricSite]:
    sites = [site for site in analysis.fabric_sites if _contains(site.span, line, column)]
    return min(sites, key=lambda site: _size(site.span)) if sites else None


def call_site_at(analysis: Analysis, line: int, column: int) -> Optional[CallSite]:
    calls = [call for call in analysis.call_sites if _contains(call.span, line, column)]
    return min(calls, key=lambda call: _size(call.span)) if calls else None


def site_for_call(analysis: Analysis, call: CallSite) -> Optional[FabricSite]:
    if call.fabric_span is None:
        return None
    for site in analysis.fabric_sites:
        if site.span == call.fabric_span:
            return site
    return None


def hover_markdown(
    analysis: Analysis,
    line: int,
    column: int,
    record_for: RecordLookup,
    portability: Optional[Mapping[str, Sequence[Finding]]] = None,
    findings: Optional[Sequence[Finding]] = None,
    portability_note: Optional[str] = None,
) -> Optional[tuple[str, Span]]:
    """The hover at (line, column), and the span it is about; None when nothing Fabric-related is there.

    ``findings`` are the reported findings (after the user's select/ignore); by default all of them.
    """
    sections: list[str] = []
    span: Optional[Span] = None
    site = fabric_site_at(analysis, line, column)
    call = call_site_at(analysis, line, column)
    if site is not None and (call is None or _size(site.span) <= _size(call.span)):
        sections.append(fabric_site_markdown(site, portability, portability_note))
        span = site.span
    elif call is not None and call.method in EXPLAINED_METHODS:
        sections.append(call_site_markdown(call, site_for_call(analysis, call)))
        span = call.span
    reported = analysis.findings if findings is None else findings
    here = [
        finding
        for finding in reported
        if finding.path == analysis.path and _contains(finding.span, line, column)
    ]
    for finding in here:
        sections.append(finding_markdown(finding, record_for(finding.code)))
        if span is None:
            span = finding.span
    if not sections or span is None:
        return None
    return "\n\n---\n\n".join(sections), span
