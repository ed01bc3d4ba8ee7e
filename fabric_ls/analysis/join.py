"""Run both sides of an undecided branch on one state, and join them where they meet.

Each side runs from the same state (the trail undoes the first before the second).
What they did is then combined:

- both go on: every place written by either side gets, if the sides disagree, a
  ``Merged`` value whose options carry each side's guard;
- one side ends the program (``raise``, ``sys.exit``): the path goes on with the
  other side only, and the run records where the program ended;
- one side returns from the function: the other side goes on, and the return is
  joined with the rest of the function when it ends (``join_returns``);
- both return, both ``break`` or both ``continue``: the joined state, then the same jump.

A plain field of a Fabric's state set on one side only (``launched``, ``models_setup``)
becomes a ``PerPath`` value: what it is under each side's guard.

Anything else (``break`` on one side only, an internal marker set on one side only)
cannot be one state: ``CannotMerge`` asks the caller to fork
the run at that branch instead, as if the branch were a decision.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from fabric_ls.analysis.events import PER_PATH_FIELDS, PerPath
from fabric_ls.analysis.exits import may_be_caught
from fabric_ls.analysis.guards import FALSE, TRUE
from fabric_ls.analysis.trail import ATTR, LENGTH, LIST, MISSING, current, new_uid, write
from fabric_ls.analysis.values import Const, FabricObj, Merged, Obj, Params, StrategyAttr, Unknown, Value

_ALIKE_TYPES = (Obj, Params)

if TYPE_CHECKING:
    from fabric_ls.analysis.run_state import RunState
    from fabric_ls.analysis.state import Frame


# Each alternative's guard, and what evaluates it.
Alternatives = Sequence[tuple[int, Callable[[], Any]]]


class StopRun(Exception):
    """The run ends here (a ``raise``, ``sys.exit``, or the step budget)."""


class Return(Exception):
    def __init__(self, value: Value) -> None:
        self.value = value


class Break(Exception):
    pass


class Continue(Exception):
    pass


class CannotMerge(Exception):
    """The two sides of a branch cannot be joined into one state: fork the run there instead."""


class SplitHere(Exception):
    """A value must be one thing here and several options are possible on this path.

    The statement being executed is undone and run once per option (under each
    option's guard), then joined: a local fork, instead of re-running the program.
    """

    def __init__(self, key: str, guards: list[int]) -> None:
        self.key = key
        self.guards = guards


# Plain fields of objects (not Values) and how two sides' values combine; others cannot.
_FIELD_JOIN = {
    "setup_place": "first",  # where a fix puts the setup: either is fine
    "name": "first",
    "escaped": "any",  # "may have been launched elsewhere" if either side let it escape
    # Launched (or models set up) on one side only: the value per path, not a fork of the run.
    **{name: "per_path" for name in PER_PATH_FIELDS},
}


@dataclass
class PendingReturn:
    """A ``return`` taken on one side of a branch; joined with the rest when the function ends."""

    mark: int
    guard: int
    value: Value
    # Places that side wrote → (kind, container, key, value when it returned).
    state: dict


@dataclass
class Side:
    outcome: str  # "normal" | "return" | "break" | "continue" | "exit"
    guard: int
    value: Optional[Value]
    # place → (kind, container, key, value when the side ended)
    state: dict
    # log list id → items the side added
    logged: dict
    exit_class: Optional[str] = None  # what an "exit" raised, where known (exits.py)


def run_branches(
    run: RunState,
    frame: Frame,
    then_guard: int,
    then_side: Callable[[], Any],
    else_guard: int,
    else_side: Callable[[], Any],
) -> Optional[Value]:
    """Execute both sides of an undecided branch and continue with the joined state.

    Returns the joined value of the sides' results (for sides that are expressions).
    """
    trail = run.trail
    start_guard = run.guard
    mark = trail.mark()
    keep_mark = False
    try:
        first = _run_side(run, mark, then_guard, then_side)
        second = _run_side(run, mark, else_guard, else_side)
        keep_mark = _join(run, frame, mark, first, second, start_guard)
        if first.outcome == "normal" and second.outcome == "normal":
            if isinstance(first.value, Value) and isinstance(second.value, Value):
                return merge_values(run, [(first.guard, first.value), (second.guard, second.value)], "result")
        going = first if first.outcome == "normal" else second
        return going.value if isinstance(going.value, Value) else None
    except CannotMerge:
        trail.undo(mark)  # a join that failed half-way wrote some places
        run.guard = start_guard
        raise
    finally:
        if not keep_mark:
            trail.release(mark)


def run_alternatives(run: RunState, frame: Frame, alternatives: Alternatives) -> Any:
    """Evaluate each alternative under its guard on one state; their results, joined.

    The paths of the current guard that no alternative's guard holds on (the options of a value
    need not cover every path: where an object does not exist, it has none) go on too: a call on
    one of several values is not a reason for a path to end."""
    start = run.guard
    guards = run.guards
    # unions[i]: the paths of alternatives i, i+1, ... (one pass from the end, not one per split).
    unions = [FALSE] * (len(alternatives) + 1)
    for index in range(len(alternatives) - 1, -1, -1):
        unions[index] = guards.or_(alternatives[index][0], unions[index + 1])
    result = _run_alternatives(run, frame, alternatives, unions, 0)
    uncovered = guards.and_(start, guards.not_(unions[0]))
    run.guard = guards.or_(run.guard, uncovered)
    return result


def _run_alternatives(
    run: RunState, frame: Frame, alternatives: Alternatives, unions: list[int], first: int
) -> Any:
    if first == len(alternatives) - 1:
        guard, evaluate = alternatives[first]
        run.guard = guard
        return evaluate()
    return run_branches(
        run,
        frame,
        alternatives[first][0],
        alternatives[first][1],
        unions[first + 1],
        lambda: _run_alternatives(run, frame, alternatives, unions, first + 1),
    )


def _run_side(run: RunState, mark: int, guard: int, side: Callable[[], Any]) -> Side:
    run.guard = guard
    outcome, value, exit_class = "normal", None, None
    try:
        value = side()
    except Return as returned:
        outcome, value = "return", returned.value
    except Break:
        outcome = "break"
    except Continue:
        outcome = "continue"
    except StopRun:
        if not run.exited:
            raise  # the step budget: the run is over
        run.exited = False
        outcome, exit_class = "exit", run.exit_class
    except CannotMerge:
        run.trail.undo(mark)
        raise
    ended = Side(outcome, run.guard, value, _state_since(run, mark), _logged_since(run, mark), exit_class)
    run.trail.undo(mark)
    return ended


def _state_since(run: RunState, mark: int) -> dict:
    logs = _log_ids(run)
    state = {}
    for place, (kind, container, key, _old, owner) in run.trail.changes(mark).items():
        if id(container) in logs:
            continue
        value = list(container) if kind == LIST else current(kind, container, key)
        state[place] = (kind, container, key, value, owner)
    return state


def _logged_since(run: RunState, mark: int) -> dict:
    changes = run.trail.changes(mark)
    logged = {}
    for log in _logs(run):
        entry = changes.get((id(log), LENGTH))
        if entry is not None:
            logged[id(log)] = list(log[entry[3] :])
    return logged


def _logs(run: RunState) -> tuple[list, ...]:
    return (run.observed, run.fabric_records, run.exit_guards)


def _log_ids(run: RunState) -> set[int]:
    return {id(log) for log in _logs(run)}


def _relog(run: RunState, *sides: Side) -> None:
    for log in _logs(run):
        for side in sides:
            added = side.logged.get(id(log))
            if added:
                run.trail.extend(log, added)


def _join(run: RunState, frame: Frame, mark: int, first: Side, second: Side, start_guard: int) -> bool:
    """Apply the joined state. True when the mark must stay open (a pending return)."""
    guards = run.guards
    outcomes = (first.outcome, second.outcome)
    caught = [
        s for s in (first, second) if s.outcome == "exit" and may_be_caught(s.exit_class, run.try_handlers)
    ]
    parked = run.try_exits[-1] if run.try_exits else None
    if (
        caught
        and "normal" in outcomes
        and parked is not None
        and may_be_caught(caught[0].exit_class, run.try_handlers[-1:])
    ):
        # The innermost ``try`` may catch it: that path goes on after the ``try`` (statements.py
        # _stmt_Try joins it there), this one goes on here.
        going = second if caught[0] is first else first
        _apply_side(run, going)
        _relog(run, first, second)
        parked.append(PendingReturn(mark, caught[0].guard, Const(None), caught[0].state))
        run.guard = going.guard
        return True
    if caught:
        raise CannotMerge()  # a handler farther out may catch it: the run forks, which is exact
    if outcomes == ("normal", "normal"):
        _apply_merged(run, mark, first, second)
        _relog(run, first, second)
        run.guard = guards.or_(first.guard, second.guard)
        return False
    if first.outcome == second.outcome and first.outcome in ("break", "continue", "return"):
        _apply_merged(run, mark, first, second)
        _relog(run, first, second)
        run.guard = guards.or_(first.guard, second.guard)
        if first.outcome == "break":
            raise Break()
        if first.outcome == "continue":
            raise Continue()
        assert first.value is not None and second.value is not None
        raise Return(merge_values(run, [(first.guard, first.value), (second.guard, second.value)], "return"))
    if outcomes == ("exit", "exit"):
        run.exit_class = first.exit_class if first.exit_class == second.exit_class else None
        _relog(run, first, second)
        run.guard = guards.or_(first.guard, second.guard)
        run.exited = True
        raise StopRun()
    if "exit" in outcomes:
        ended, going = (first, second) if first.outcome == "exit" else (second, first)
        _apply_side(run, going)
        _relog(run, first, second)
        if not run.fabric_free_depth:
            run.trail.extend(run.exit_guards, [(ended.guard, run.steps)])
            run.guard = going.guard
        else:
            # Inside a Fabric-free helper a raise is the helper's business: its callers see the rest,
            # on every path (the paths it raised on are not lost: they stay covered).
            run.guard = guards.or_(ended.guard, going.guard)
        _reraise(going)
        return False
    jumps = {"break", "continue"}
    if run.loop_exits and "normal" in outcomes and (first.outcome in jumps or second.outcome in jumps):
        left, going = (first, second) if first.outcome in jumps else (second, first)
        _apply_side(run, going)
        _relog(run, first, second)
        run.loop_exits[-1].append(PendingReturn(mark, left.guard, Const(None), left.state))
        run.guard = going.guard
        return True
    if "return" in outcomes and "normal" in outcomes and frame is not None and frame.function is not None:
        returned, going = (first, second) if first.outcome == "return" else (second, first)
        _apply_side(run, going)
        _relog(run, first, second)
        assert returned.value is not None
        frame.pending_returns.append(PendingReturn(mark, returned.guard, returned.value, returned.state))
        run.guard = going.guard
        return True
    raise CannotMerge()


def _reraise(side: Side) -> None:
    if side.outcome == "return":
        assert side.value is not None
        raise Return(side.value)
    if side.outcome == "break":
        raise Break()
    if side.outcome == "continue":
        raise Continue()


def _apply_side(run: RunState, side: Side) -> None:
    for kind, container, key, value, owner in side.state.values():
        _write(run, kind, container, key, value, owner)


def _write(run: RunState, kind: int, container: Any, key: Any, value: Any, owner: Any = None) -> None:
    if kind == LIST:
        # Lists only grow; a side's list starts with what was there at the mark.
        if len(value) > len(container):
            run.trail.extend(container, list(value[len(container) :]), owner)
        return
    write(run.trail, kind, container, key, value, owner)


def _apply_merged(run: RunState, mark: int, first: Side, second: Side) -> None:
    # After both undos the places hold their values at the mark.
    for place in dict.fromkeys([*first.state, *second.state]):
        kind, container, key, _, owner = first.state.get(place) or second.state[place]
        at_mark = list(container) if kind == LIST else current(kind, container, key)
        first_value = first.state[place][3] if place in first.state else at_mark
        second_value = second.state[place][3] if place in second.state else at_mark
        joined = _join_place(
            run, kind, owner, key, [(first.guard, first_value), (second.guard, second_value)], True
        )
        _write(run, kind, container, key, joined, owner)


def _join_place(
    run: RunState, kind: int, owner: Any, key: Any, alternatives: list[tuple[int, Any]], strict: bool
) -> Any:
    existence = getattr(owner, "existence_guard", TRUE)
    if existence != TRUE:
        # A side on which the object does not exist has nothing to say about it.
        alive = [(g, v) for g, v in alternatives if run.guards.feasible(g, existence)]
        alternatives = alive or alternatives
    values = [value for _, value in alternatives]
    if all(same(values[0], other) for other in values[1:]):
        return values[0]
    if kind == LIST:
        # A list either side may have grown: it may hold what either added (lists only grow).
        union = list(values[0])
        for other in values[1:]:
            union.extend(item for item in other if not any(item is kept for kept in union))
        return union
    if kind == ATTR:
        policy = _FIELD_JOIN.get(key)
        if policy == "first":
            return next((v for v in values if v is not None), values[0])
        if policy == "any":
            return any(values)
        if policy == "per_path":
            return join_per_path(run, alternatives)
        if all(isinstance(v, Value) for v in values):
            return merge_values(run, alternatives, str(key))
        if strict:
            raise CannotMerge()
        return values[-1]
    if isinstance(key, str) and key.startswith("__") and any(v is MISSING for v in values):
        if strict:
            raise CannotMerge()  # an internal marker (``__setup__``) set on one side only
        return values[-1]
    return merge_values(run, alternatives, str(key))


def join_per_path(run: RunState, alternatives: list[tuple[int, Any]]) -> Any:
    """A plain field's values under the sides' guards: one value where they agree, else a PerPath."""
    guards = run.guards
    by_value: list[tuple[Any, int]] = []
    for guard, value in alternatives:
        options = value.options if isinstance(value, PerPath) else ((TRUE, value),)
        for inner_guard, inner in options:
            combined = guards.and_(guard, inner_guard)
            if combined == FALSE:
                continue
            for index, (known, known_guard) in enumerate(by_value):
                if known == inner and type(known) is type(inner):
                    by_value[index] = (known, guards.or_(known_guard, combined))
                    break
            else:
                by_value.append((inner, combined))
    if len(by_value) == 1:
        return by_value[0][0]
    return PerPath(tuple((guard, value) for value, guard in by_value))


def merge_values(run: RunState, alternatives: list[tuple[int, Any]], name: str) -> Value:
    """One value for several guarded ones (a name unbound on a side is Unknown there)."""
    options: list[Value] = []
    guards: list[int] = []
    flat: list[tuple[int, Any]] = []
    for guard, value in alternatives:
        if isinstance(value, Merged):
            # Options of options: one level, each under both guards.
            for inner_guard, inner in zip(value.guards, value.options):
                combined = run.guards.and_(guard, inner_guard)
                if combined != FALSE:
                    flat.append((combined, inner))
        else:
            flat.append((guard, value))
    for guard, value in flat:
        if value is MISSING:
            value = Unknown(text=name)
        for index, known in enumerate(options):
            if same(known, value):
                guards[index] = run.guards.or_(guards[index], guard)
                if known is not value:
                    _widen_existence(run, known, value)
                break
        else:
            options.append(value)
            guards.append(guard)
    if len(options) == 1:
        return options[0]
    return Merged(f"merge:{new_uid()}", tuple(options), ("",) * len(options), guards=tuple(guards))


def _widen_existence(run: RunState, kept: Any, dropped: Any) -> None:
    """One object now stands for two built on different paths: it exists wherever either did."""
    owners = [(kept, dropped)]
    if isinstance(kept, FabricObj):
        owners = [(kept.site, dropped.site)]
    for keep, drop in owners:
        wider = run.guards.or_(getattr(keep, "existence_guard", TRUE), getattr(drop, "existence_guard", TRUE))
        if hasattr(keep, "existence_guard") and wider != keep.existence_guard:
            run.trail.set_attr(keep, "existence_guard", wider)


def same(first: Any, second: Any) -> bool:
    if first is second:
        return True
    if isinstance(first, Const) and isinstance(second, Const):
        return type(first.value) is type(second.value) and equal(first.value, second.value)
    if isinstance(first, Unknown) and isinstance(second, Unknown):
        return True
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(a is b for a, b in zip(first, second))
    if isinstance(first, FabricObj) and isinstance(second, FabricObj):
        return _same_fabric(first.site, second.site)
    if isinstance(first, StrategyAttr) and isinstance(second, StrategyAttr):
        return first.fabric is second.fabric and first.read_key() == second.read_key()
    if type(first) is type(second) and isinstance(first, _ALIKE_TYPES):
        return _alike(first, second, 0)
    return False


def _alike(first: Any, second: Any, depth: int) -> bool:
    """Objects built by the same code on different paths and alike in everything the rules read
    (``model = Net()`` under each of several strategies that do not change how it is built)."""
    if first is second:
        return True
    if depth > 4 or type(first) is not type(second):
        return False
    if isinstance(first, Obj):
        return (
            first.created_at is second.created_at
            and first.meta == second.meta
            and first.cls is second.cls
            and first.is_dataloader == second.is_dataloader
            and first.is_optimizer_class == second.is_optimizer_class
            and first.library_class == second.library_class
            and len(first.params) == len(second.params)
            and all(_alike(a, b, depth + 1) for a, b in zip(first.params, second.params))
            and first.attrs.keys() == second.attrs.keys()
            and all(_alike_value(first.attrs[k], second.attrs[k], depth + 1) for k in first.attrs)
        )
    if isinstance(first, Params):
        return (
            first.meta == second.meta
            and first.set_up == second.set_up
            and first.at is second.at
            and _alike(first.source, second.source, depth + 1)
        )
    return False


def _alike_value(first: Any, second: Any, depth: int) -> bool:
    if isinstance(first, _ALIKE_TYPES) and type(first) is type(second):
        return _alike(first, second, depth)
    return same(first, second)


def _same_fabric(first: Any, second: Any) -> bool:
    """Two Fabric objects built by one ``Fabric(...)`` on different paths, alike in every way that
    matters to the rules (the strategy it resolves to, what has been done to it): one will do."""
    return (
        first.node is second.node
        and first.strategy == second.strategy
        and first.launched == second.launched
        and first.launch_count == second.launch_count
        and first.models_setup == second.models_setup
        and first.escaped == second.escaped
        and first.strategy_call is second.strategy_call
        and first.options == second.options
    )


def equal(first: Any, second: Any) -> bool:
    """``first == second`` for plain values, False where comparing raises."""
    try:
        return bool(first == second)
    except Exception:
        return False


# ----- returns on one side of a branch ---------------------------------------------------


def join_returns(run: RunState, frame: Frame, result: Value) -> Value:
    """At the end of a function: join each earlier ``return`` with what the rest did."""
    return _join_pending(run, frame.pending_returns, frame.locals, result)


def join_loop_exits(run: RunState, exits: list[PendingReturn]) -> None:
    """At the end of a loop body: join each side that left it early with what the rest did."""
    _join_pending(run, exits, None, Const(None))


def _join_pending(run: RunState, pendings: list[PendingReturn], dead: Optional[dict], result: Value) -> Value:
    """Join states left at earlier points (newest first) with the current one; ``dead``: a dict
    (the returning frame's locals) whose places no longer matter."""
    guards = run.guards
    end_guard = run.guard
    while pendings:
        pending = pendings.pop()
        changes = run.trail.changes(pending.mark)
        places = dict.fromkeys([*changes, *pending.state])
        logs = _log_ids(run)
        for place in places:
            entry = pending.state.get(place) or changes[place]
            kind, container, key, owner = entry[0], entry[1], entry[2], entry[4]
            if id(container) in logs or (dead is not None and container is dead):
                continue
            if place in pending.state:
                returned_value = pending.state[place][3]
            else:
                old = changes[place][3]
                returned_value = old if kind != LIST else list(container[:old])
            now = list(container) if kind == LIST else current(kind, container, key)
            joined = _join_place(
                run, kind, owner, key, [(pending.guard, returned_value), (end_guard, now)], False
            )
            _write(run, kind, container, key, joined, owner)
        result = merge_values(run, [(pending.guard, pending.value), (end_guard, result)], "return")
        end_guard = guards.or_(pending.guard, end_guard)
        run.trail.release(pending.mark)
    run.guard = end_guard
    return result


def resume_pending_return(run: RunState, frame: Frame) -> Value:
    """The rest of the function ended the program: go on as the latest earlier ``return`` did."""
    run.trail.extend(run.exit_guards, [(run.guard, run.steps)])
    pending = frame.pending_returns.pop()
    changes = run.trail.changes(pending.mark)
    logged = {}
    for log in _logs(run):
        entry = changes.get((id(log), LENGTH))
        if entry is not None:
            logged[id(log)] = list(log[entry[3] :])
    run.trail.undo(pending.mark)
    _apply_side(run, Side("normal", pending.guard, None, pending.state, {}))
    _relog(run, Side("normal", TRUE, None, {}, logged))
    run.trail.release(pending.mark)
    run.guard = pending.guard
    return pending.value


def condition_key(node: ast.AST, frame: Frame) -> str:
    return f"if:{frame.module.path}:{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0)}"
