"""Run a program, fork only where a value must be one thing, and merge what the runs saw.

A run follows both sides of every undecided branch (fabric_ls.analysis.join) and records
each Fabric call with the guard it happens under. Where a value must be one thing
(the strategy of a ``Fabric(...)``), the run takes one option and the others become
new runs, replayed from the same start (breadth first, the early forks first).

The module's top level is run once for its definitions; every entry function's runs share them,
each undoing at its end what it wrote to them (every command runs in a process of its own).

A finding's guard is the union of the guards it fires under in every run. It is
an error when that guard covers every combination of decisions the runs explored,
leaving out the paths where the script itself stops (its own ``raise``/``sys.exit``)
before reaching the call. The budget counts steps and runs, never time: the same input
gives the same answer on any machine, under any load.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from fabric_ls.analysis.dead_code import dead_statements
from fabric_ls.analysis.events import CallEvent, FabricState, Violation
from fabric_ls.analysis.guards import FALSE, TRUE, Guards
from fabric_ls.analysis.join import StopRun
from fabric_ls.analysis.project import Project
from fabric_ls.analysis.run import Run
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.state import Checker, Decisions, ExitPoint, ModuleEnv, Observed, SharedAcrossRuns
from fabric_ls.analysis.value_ops import entry_functions
from fabric_ls.analysis.values import ClassRef, FunctionRef
from fabric_ls.model import Span

# Runs of one root (the module, or one entry function nothing calls).
MAX_RUNS = 64
# Steps (statements and expressions evaluated) of all runs of one file.
MAX_TOTAL_STEPS = 400_000


@dataclass
class RunRecord:
    root: int
    observed: list[Observed]
    fabric_records: list[tuple[FabricState, int]]
    exit_guards: list[ExitPoint]
    # The combinations of decisions this run stands for (where it ended).
    final_guard: int
    # False when the step budget cut it short: its region is not known to be covered.
    completed: bool

    @property
    def calls(self) -> list[CallEvent]:
        return [observed.event for observed in self.observed]


@dataclass
class RootSummary:
    """What the runs of one root covered (where they ended, or where the script stopped by itself)."""

    covered: int = FALSE


@dataclass
class Exploration:
    """Everything the runs of one program saw."""

    runs: list[RunRecord] = field(default_factory=list)
    roots: list[RootSummary] = field(default_factory=list)
    dependencies: set[str] = field(default_factory=set)
    incomplete: bool = False
    shared: SharedAcrossRuns = field(default_factory=SharedAcrossRuns)
    # The module's top level run once for its definitions, which every entry function's runs share.
    definitions: Optional[ModuleEnv] = None
    guards: Guards = field(default_factory=Guards)
    steps: int = 0


def explore(
    project: Project,
    parsed: ParsedSource,
    check: Checker,
    assumed_strategy: Optional[str],
    force_strategy: bool = False,
) -> Exploration:
    """Run the module, then every function no run reached (entry points such as CLI targets)."""
    dead_statements(parsed)  # marked before the source is read for its entry points
    result = Exploration()
    reached: set[int] = set()
    roots: list[Optional[ast.AST]] = [None, *entry_functions(parsed)]
    for function in roots:
        if function is not None and id(function) in reached:
            continue
        if result.steps >= MAX_TOTAL_STEPS:
            result.incomplete = True
            break
        _explore_root(project, parsed, check, (assumed_strategy, force_strategy), function, result, reached)
    return result


def _explore_root(
    project: Project,
    parsed: ParsedSource,
    check: Checker,
    assumed: tuple[Optional[str], bool],
    function: Optional[ast.AST],
    result: Exploration,
    reached: set[int],
) -> None:
    guards = result.guards
    root = len(result.roots)
    summary = RootSummary()
    result.roots.append(summary)
    pending: deque[list[int]] = deque([[]])
    runs = 0
    while pending:
        if runs >= MAX_RUNS or result.steps >= MAX_TOTAL_STEPS:
            result.incomplete = True
            break
        prefix = pending.popleft()
        runs += 1
        decisions = Decisions(prefix)
        run = Run(project, parsed, decisions, check, assumed[0], assumed[1], result.shared, guards)
        completed = True
        mark: Optional[int] = None
        if function is not None:
            if result.definitions is None:
                run.define_module()
                result.definitions = run.main_env
            mark = run.adopt_definitions(result.definitions)
        try:
            if function is None:
                run.run_module()
            else:
                run.run_function(_function_ref(run, function), None)
        except StopRun:
            if run.exited:
                run.exit_guards.append((run.guard, run.steps))
            else:
                completed = False
                result.incomplete = True
        except RecursionError:
            completed = False
            result.incomplete = True
        finally:
            if mark is not None:
                # The definitions as they were made, for the next run; what this run made stays.
                run.trail.restore_older(mark)
        result.steps += run.steps
        if decisions.truncated or run.calls_too_deep:
            result.incomplete = True
        reached.update(run.executed_functions)
        result.dependencies.update(run.dependencies)
        record = RunRecord(root, run.observed, run.fabric_records, run.exit_guards, run.guard, completed)
        result.runs.append(record)
        if completed:
            summary.covered = guards.or_(summary.covered, run.guard)
        for exit_guard, _ in run.exit_guards:
            summary.covered = guards.or_(summary.covered, exit_guard)
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
class MergedFinding:
    rule: str
    violation: Violation
    event: CallEvent
    strategies: list[str]
    condition: Optional[str]
    always: bool
    # Each root's guard: the combinations of decisions the finding fires under there.
    fires: dict[int, int] = field(default_factory=dict)


def _verdict_of(
    exploration: Exploration, span_of: Callable[[CallEvent, Violation], tuple[str, Span]]
) -> dict[tuple[str, str, Span], dict[int, list[tuple[int, Observed]]]]:
    groups: dict[tuple[str, str, Span], dict[int, list[tuple[int, Observed]]]] = {}
    for run in exploration.runs:
        for observed in run.observed:
            if observed.verdict is None:
                continue
            rule, violation = observed.verdict
            path, span = span_of(observed.event, violation)
            groups.setdefault((rule, path, span), {}).setdefault(run.root, []).append(
                (observed.guard, observed)
            )
    return groups


def merge_findings(
    exploration: Exploration, span_of: Callable[[CallEvent, Violation], tuple[str, Span]]
) -> list[MergedFinding]:
    guards = exploration.guards
    merged: list[MergedFinding] = []
    for (rule, _path, _span), by_root in _verdict_of(exploration, span_of).items():
        best: Optional[tuple[bool, Optional[str]]] = None
        members: list[Observed] = []
        fires_by_root: dict[int, int] = {}
        for root, fired in sorted(by_root.items()):
            summary = exploration.roots[root]
            fires = fires_by_root[root] = guards.any_of([guard for guard, _ in fired])
            members.extend(observed for _, observed in fired)
            covered_all = summary.covered == TRUE
            # Paths the script ends by itself before the call without firing, and paths no run
            # took, do not count.
            stops = _stops_before(exploration, root, {id(observed.event.node) for _, observed in fired})
            dont_care = guards.or_(guards.and_(stops, guards.not_(fires)), guards.not_(summary.covered))
            condition = guards.describe(fires, dont_care)
            if condition == "never":
                continue
            always = condition is None and covered_all
            if best is None or (always and not best[0]):
                best = (always, condition)
        if best is None:
            continue
        first = members[0]
        assert first.verdict is not None
        strategies: list[str] = []
        for observed in members:
            label = observed.event.fabric.strategy.label
            if label not in strategies:
                strategies.append(label)
        merged.append(
            MergedFinding(rule, first.verdict[1], first.event, strategies, best[1], best[0], fires_by_root)
        )
    return merged


def _stops_before(exploration: Exploration, root: int, calls: set[int]) -> int:
    """The paths of ``root`` on which the script ends by itself (its own ``raise``/``sys.exit``)
    before it could reach one of ``calls``: an end the call comes after in the program's order
    (some path of that run reaches the call later), or an end in a run that never reaches it.
    ``sys.exit(main())`` ends every path after ``main`` made its calls: it excuses none of them."""
    guards = exploration.guards
    stops = FALSE
    for run in exploration.runs:
        if run.root != root or not run.exit_guards:
            continue
        reached = [observed.at for observed in run.observed if id(observed.event.node) in calls]
        last = max(reached, default=None)
        for guard, at in run.exit_guards:
            if last is None or at < last:
                stops = guards.or_(stops, guard)
    return stops


def site_conditions(
    exploration: Exploration, describe: bool = True
) -> dict[tuple[str, int, int], list[tuple[FabricState, Optional[str]]]]:
    """For every Fabric(...) site, the strategies runs gave it and under which condition (None
    without ``describe``: the strategies alone)."""
    guards = exploration.guards
    by_site: dict[tuple[str, int, int], dict[str, tuple[FabricState, int]]] = {}
    for run in exploration.runs:
        for state, guard in _one_per_strategy(guards, run.fabric_records):
            if state.node is None:
                continue
            key = (state.path, state.node.lineno, state.node.col_offset)
            label = state.strategy.label + (
                "?" + (state.strategy.unknown_reason or "") if state.strategy.class_name is None else ""
            )
            entry = by_site.setdefault(key, {})
            if label in entry:
                entry[label] = (entry[label][0], guards.or_(entry[label][1], guard))
            else:
                entry[label] = (state, guard)
    result: dict[tuple[str, int, int], list[tuple[FabricState, Optional[str]]]] = {}
    for key, labels in by_site.items():
        reached = guards.any_of([guard for _, guard in labels.values()])
        items: list[tuple[FabricState, Optional[str]]] = []
        for state, guard in labels.values():
            condition = (
                None if len(labels) == 1 or not describe else guards.describe(guard, guards.not_(reached))
            )
            items.append((state, None if condition == "never" else condition))
        result[key] = items
    return result


def _one_per_strategy(
    guards: Guards, records: list[tuple[FabricState, int]]
) -> list[tuple[FabricState, int]]:
    """Each Fabric with several strategies as one state per strategy, under its guard."""
    found: list[tuple[FabricState, int]] = []
    for state, guard in records:
        if not state.options:
            found.append((state, guard))
            continue
        for index in state.feasible_options(guards, guard):
            found.append((state.with_option(index), guards.and_(guard, state.options[index][0])))
    return found


__all__ = [
    "Exploration",
    "MergedFinding",
    "RunRecord",
    "TRUE",
    "explore",
    "merge_findings",
    "site_conditions",
]
