"""Run a program along every path worth taking, and merge what the runs saw.

Each run replays a prefix of decisions, then takes the first option at every new
fork; the alternatives it passed become new prefixes. A finding's condition is
the set of decisions under which it appears in *every* run below them.
"""

from __future__ import annotations

import ast
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from fabric_ls.events import CallEvent, FabricState, Violation
from fabric_ls.interpreter import (
    Decision,
    Decisions,
    FunctionRef,
    Run,
    SharedAcrossRuns,
    StopRun,
    entry_functions,
)
from fabric_ls.model import Span
from fabric_ls.project import Project
from fabric_ls.source import ParsedSource
from fabric_ls.values import ClassRef

MAX_RUNS = 48
# Wall-clock budget for all runs of one file; past it the analysis says it is incomplete.
TIME_BUDGET_S = 1.5

Checker = Callable[[CallEvent], Optional[tuple[str, Violation]]]


@dataclass
class RunFinding:
    rule: str
    violation: Violation
    event: CallEvent


@dataclass
class RunRecord:
    decisions: list[Decision]
    findings: list[RunFinding]
    fabrics: list[FabricState]
    calls: list[CallEvent]
    root_start: bool = False
    exited: bool = False


@dataclass
class Exploration:
    """Everything the runs of one program saw."""

    runs: list[RunRecord] = field(default_factory=list)
    dependencies: set[str] = field(default_factory=set)
    incomplete: bool = False
    shared: SharedAcrossRuns = field(default_factory=SharedAcrossRuns)


def explore(
    project: Project,
    parsed: ParsedSource,
    check: Checker,
    assumed_strategy: Optional[str],
    force_strategy: bool = False,
) -> Exploration:
    """Run the module, then every function no run reached (entry points such as CLI targets)."""
    result = Exploration()
    reached: set[int] = set()
    roots: list[Optional[ast.AST]] = [None, *entry_functions(parsed)]
    deadline = time.monotonic() + TIME_BUDGET_S
    for function in roots:
        if time.monotonic() > deadline:
            result.incomplete = True
            break
        if function is not None and id(function) in reached:
            continue
        _explore_root(
            project, parsed, check, (assumed_strategy, force_strategy), function, result, reached, deadline
        )
    return result


def _explore_root(
    project: Project,
    parsed: ParsedSource,
    check: Checker,
    assumed: tuple[Optional[str], bool],
    function: Optional[ast.AST],
    result: Exploration,
    reached: set[int],
    deadline: float,
) -> None:
    # Breadth first: the early forks (where strategies are usually chosen) are explored
    # fully before the budget runs out on the late ones.
    pending: deque[list[int]] = deque([[]])
    runs = 0
    while pending:
        if runs >= MAX_RUNS or (runs and time.monotonic() > deadline):
            result.incomplete = True
            break
        prefix = pending.popleft()
        runs += 1
        findings: list[RunFinding] = []
        calls: list[CallEvent] = []

        def on_call(
            event: CallEvent, calls: list[CallEvent] = calls, findings: list[RunFinding] = findings
        ) -> None:
            calls.append(event)
            verdict = check(event)
            if verdict is not None:
                findings.append(RunFinding(verdict[0], verdict[1], event))

        decisions = Decisions(prefix)
        run = Run(project, parsed, decisions, on_call, assumed[0], assumed[1], result.shared)
        try:
            if function is None:
                run.run_module()
            else:
                run.run_function(_function_ref(run, function), None)
        except StopRun:
            pass
        except RecursionError:
            result.incomplete = True
        reached.update(run.executed_functions)
        result.dependencies.update(run.dependencies)
        result.runs.append(
            RunRecord(
                list(decisions.taken), findings, run.fabrics, calls, root_start=runs == 1, exited=run.exited
            )
        )
        for position in range(len(prefix), len(decisions.taken)):
            taken = decisions.taken[position]
            for alternative in range(1, taken.count):
                pending.append([d.index for d in decisions.taken[:position]] + [alternative])


def _function_ref(run: Run, node: ast.AST) -> FunctionRef:
    # A method gets its class, found among the module's definitions.
    if not run.main_env.executed:
        run.define_module()
    for value in run.main_env.globals.values():
        if isinstance(value, ClassRef) and node in value.node.body:
            return FunctionRef(node, run.main_env, owner=value)
    return FunctionRef(node, run.main_env)


# ----- merging ---------------------------------------------------------------------------


@dataclass
class _Trie:
    decision: Optional[Decision] = None
    children: dict[int, "_Trie"] = field(default_factory=dict)
    runs: list[int] = field(default_factory=list)


def _build_trie(runs: list[RunRecord], members: list[int]) -> _Trie:
    root = _Trie()
    for run_index in members:
        node = root
        node.runs.append(run_index)
        for decision in runs[run_index].decisions:
            if decision.count <= 1:
                continue
            node.decision = decision
            node = node.children.setdefault(decision.index, _Trie())
            node.runs.append(run_index)
    return root


def cover(
    trie: _Trie,
    fires: set[int],
    exited: frozenset[int] = frozenset(),
    unexplored: Optional[list[bool]] = None,
) -> list[list[tuple[Decision, int]]]:
    """The decision paths under which every run fires: [] = never, [[]] = always.

    Runs that ended at the script's own ``raise``/``sys.exit`` without firing do not
    count against a finding: the script refuses to go on along them. Alternatives the
    budget left unexplored do not count either; ``unexplored`` records that they existed.
    """
    counted = [run for run in trie.runs if run in fires or run not in exited]
    if not any(run in fires for run in counted):
        return []
    if all(run in fires for run in counted):
        if unexplored is not None and _has_unexplored(trie):
            unexplored.append(True)
        return [[]]
    if trie.decision is None:
        return []
    result: list[list[tuple[Decision, int]]] = []
    for index, child in sorted(trie.children.items()):
        for path in cover(child, fires, exited, unexplored):
            result.append([(trie.decision, index), *path])
    return result


def _has_unexplored(trie: _Trie) -> bool:
    if trie.decision is None:
        return False
    if len(trie.children) < trie.decision.count:
        return True
    return any(_has_unexplored(child) for child in trie.children.values())


def simplify(paths: list[list[tuple[Decision, int]]]) -> list[list[tuple[Decision, int]]]:
    """Merge cases that differ only in one decision whose every option is present.

    ``A and S=1 and Q`` or ``A and S=2 and Q`` (S has two options) becomes ``A and Q``.
    """
    # The trie keeps one Decision object per fork; only (key, chosen option) identifies a case.
    decisions = {decision.key: decision for path in paths for decision, _ in path}
    order = {key: n for n, key in enumerate(decisions)}
    terms: list[dict[str, int]] = []
    for path in paths:
        term = {decision.key: index for decision, index in path}
        if term not in terms:
            terms.append(term)
    changed = True
    while changed:
        changed = False
        for term in terms:
            for key in term:
                rest = {k: v for k, v in term.items() if k != key}
                siblings = [t for t in terms if key in t and {k: v for k, v in t.items() if k != key} == rest]
                if len({t[key] for t in siblings}) == decisions[key].count:
                    terms = [t for t in terms if t not in siblings]
                    if rest not in terms:
                        terms.append(rest)
                    changed = True
                    break
            if changed:
                break
    # A case that contains another case adds nothing.
    terms = [t for t in terms if not any(o is not t and o.items() <= t.items() for o in terms)]
    return [[(decisions[k], t[k]) for k in sorted(t, key=order.__getitem__)] for t in terms]


def describe(paths: list[list[tuple[Decision, int]]]) -> Optional[str]:
    """Human text for a cover: None when unconditional."""
    if paths == [[]] or not paths:
        return None
    paths = simplify(paths)
    if paths == [[]]:
        return None
    parts = []
    for path in paths[:4]:
        parts.append(" and ".join(decision.descriptions[index] for decision, index in path))
    text = " or ".join(parts)
    if len(paths) > 4:
        text += f" (and {len(paths) - 4} more cases)"
    return text


@dataclass
class MergedFinding:
    rule: str
    violation: Violation
    event: CallEvent
    strategies: list[str]
    condition: Optional[str]
    always: bool


def merge_findings(
    exploration: Exploration, span_of: Callable[[CallEvent, Violation], tuple[str, Span]]
) -> list[MergedFinding]:
    runs = exploration.runs
    groups: dict[tuple[str, str, Span], list[tuple[int, RunFinding]]] = {}
    for run_index, run in enumerate(runs):
        for finding in run.findings:
            path, span = span_of(finding.event, finding.violation)
            groups.setdefault((finding.rule, path, span), []).append((run_index, finding))
    merged: list[MergedFinding] = []
    trie_cache: dict[int, _Trie] = {}
    for (rule, _path, _span), members in groups.items():
        fires = {run_index for run_index, _ in members}
        # Compare only with the runs of the same root (the run where it fired and its siblings).
        root_members = _root_members(runs, min(fires))
        key = root_members[0]
        trie = trie_cache.get(key)
        if trie is None:
            trie = trie_cache[key] = _build_trie(runs, root_members)
        exited = frozenset(i for i in root_members if runs[i].exited)
        unexplored: list[bool] = []
        paths = cover(trie, fires, exited, unexplored)
        first = members[0][1]
        strategies = []
        for _, finding in members:
            label = finding.event.fabric.strategy.label
            if label not in strategies:
                strategies.append(label)
        # "Always" only counts when every alternative on the way was run.
        always = paths == [[]] and not unexplored
        merged.append(MergedFinding(rule, first.violation, first.event, strategies, describe(paths), always))
    return merged


def _root_members(runs: list[RunRecord], index: int) -> list[int]:
    """Runs of one root are contiguous and start with an empty-prefix run."""
    start = index
    while start > 0 and not runs[start].root_start:
        start -= 1
    end = index + 1
    while end < len(runs) and not runs[end].root_start:
        end += 1
    return list(range(start, end))


def site_conditions(
    exploration: Exploration,
) -> dict[tuple[str, int, int], list[tuple[FabricState, Optional[str]]]]:
    """For every Fabric(...) site, the strategies runs gave it and under which condition."""
    runs = exploration.runs
    by_site: dict[tuple[str, int, int], dict[str, tuple[FabricState, set[int]]]] = {}
    for run_index, run in enumerate(runs):
        for state in run.fabrics:
            if state.node is None:
                continue
            key = (state.path, state.node.lineno, state.node.col_offset)
            label = state.strategy.label + (
                "?" + (state.strategy.unknown_reason or "") if state.strategy.class_name is None else ""
            )
            entry = by_site.setdefault(key, {})
            if label in entry:
                entry[label][1].add(run_index)
            else:
                entry[label] = (state, {run_index})
    result: dict[tuple[str, int, int], list[tuple[FabricState, Optional[str]]]] = {}
    for key, labels in by_site.items():
        items: list[tuple[FabricState, Optional[str]]] = []
        for _label, (state, members) in labels.items():
            if len(labels) == 1:
                items.append((state, None))
                continue
            root = _root_members(runs, min(members))
            trie = _build_trie(
                runs,
                [
                    r
                    for r in root
                    if any(
                        s.node is not None and (s.path, s.node.lineno, s.node.col_offset) == key
                        for s in runs[r].fabrics
                    )
                ],
            )
            exited = frozenset(r for r in root if runs[r].exited)
            items.append((state, describe(cover(trie, members, exited))))
        result[key] = items
    return result
