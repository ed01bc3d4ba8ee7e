"""The values the engine produces: plain dataclasses, no LSP types.

Positions are 0-based lines and 0-based columns counted in Unicode code points
(Python ``str`` indices). The LSP layer converts columns to UTF-16; the CLI adds 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Tuple

Severity = Literal["error", "warning", "information", "hint"]


@dataclass(frozen=True, order=True)
class Span:
    """A range in one file: [start, end) in (line, column) order."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Origin:
    """One step of evidence: where a value came from and why it matters."""

    path: str
    span: Span
    note: str
    # In a notebook: the cell (1-based) the span is in; the span counts lines inside that cell.
    cell: Optional[int] = None


@dataclass(frozen=True)
class TextEdit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """Edits that repair a finding in the user's own code."""

    title: str
    edits: Tuple[TextEdit, ...]
    safe: bool


@dataclass(frozen=True)
class StrategyCandidate:
    """One strategy a ``Fabric(...)`` can get, and under which condition.

    ``class_name`` is the runtime class (``DeepSpeedStrategy``), or ``None`` when
    the strategy cannot be known statically (``unknown_reason`` says why).
    """

    class_name: Optional[str]
    registry_name: Optional[str] = None
    zero_stage: Optional[int] = None
    options: Tuple[Tuple[str, object], ...] = ()
    condition: Optional[str] = None
    provenance: Tuple[Origin, ...] = ()
    unknown_reason: Optional[str] = None
    # The user class name when a subclass of a Lightning strategy is used.
    user_class: Optional[str] = None

    @property
    def label(self) -> str:
        """Short human label: ``DeepSpeedStrategy · ZeRO-3``."""
        if self.class_name is None:
            return "unknown"
        name = self.user_class or self.class_name
        if self.zero_stage is not None:
            return f"{name} · ZeRO-{self.zero_stage}"
        return name


@dataclass(frozen=True)
class FabricSite:
    """A ``Fabric(...)`` construction and the strategies it can get."""

    path: str
    span: Span
    candidates: Tuple[StrategyCandidate, ...]

    @property
    def label(self) -> str:
        parts = []
        for candidate in self.candidates:
            text = candidate.label
            if candidate.condition:
                text += f"  ({candidate.condition})"
            parts.append(text)
        return " | ".join(parts) if parts else "unknown"


@dataclass(frozen=True)
class CallSite:
    """A Fabric API call bound to the Fabric object it is made on (for hover)."""

    path: str
    span: Span
    method: str
    fabric_span: Optional[Span]


@dataclass(frozen=True)
class Finding:
    """A mistake Lightning would raise at run time, found in the source."""

    code: str
    path: str
    span: Span
    severity: Severity
    message: str
    strategy: str
    condition: Optional[str] = None
    related: Tuple[Origin, ...] = ()
    fix: Optional[Fix] = None
    # For a finding in another file: the call in the analysed script that leads there.
    via: Optional[Origin] = None
    # The rule's title and its docs page (a ``file:`` URI of the installed page by default).
    title: str = ""
    docs_url: str = ""
    # In a notebook: the cell (1-based) the span and the fix's edits are in (lines inside the cell).
    cell: Optional[int] = None


@dataclass(frozen=True)
class SyntaxProblem:
    """Where a file stops parsing (or cannot be read), in Python's own words: ``expected ':'``."""

    message: str
    span: Span
    # In a notebook: the cell (1-based) the span is in.
    cell: Optional[int] = None


@dataclass
class Analysis:
    """Everything the engine learned about one file."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    fabric_sites: list[FabricSite] = field(default_factory=list)
    call_sites: list[CallSite] = field(default_factory=list)
    # Set when the file does not parse; findings then cover what still parses.
    syntax_error: Optional[str] = None
    # The same, with its position: the CLI reports it as finding FAB000.
    syntax_problem: Optional[SyntaxProblem] = None
    # Files (besides this one) whose content the result depends on.
    dependencies: tuple[str, ...] = ()
    # The work the analysis did (statements and expressions evaluated): bounded by the budget,
    # the same on any machine (tests bound it instead of timing the analysis).
    steps: int = 0
    # Findings in other files (helper modules) reached from this script.
    other_findings: list[Finding] = field(default_factory=list)
    # Something limited the analysis (path budget, jedi time-outs): said, never hidden.
    notes: list[str] = field(default_factory=list)
    # The last analysis of the script with its positions moved, not a new one: the edit since changed
    # nothing the engine runs (fabric_ls.analysis.edit_reuse). ``steps`` are that analysis' steps.
    reused: bool = False
