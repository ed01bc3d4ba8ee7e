"""The rules' verdicts on a call on a Fabric with several strategies, each computed once.

A rule is a pure function of the call and of what it reads from the strategy. Checked with one
strategy, a recording view of it notes the fields the rules read; another strategy that agrees on
every one of those fields gets the same verdict without running the rules again. A Fabric whose
arguments take 120 combinations (strategy × devices × precision) is checked, on a call whose rules
read only the strategy class, once per class.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Optional, cast

from fabric_ls.analysis.events import CallEvent
from fabric_ls.analysis.guards import Guards
from fabric_ls.analysis.join import equal
from fabric_ls.analysis.resolve_strategy import ResolvedStrategy


class _Reading:
    """A ResolvedStrategy that notes the fields read from it, through its methods and properties too."""

    __slots__ = ("_strategy", "_read")

    def __init__(self, strategy: ResolvedStrategy, read: list[str]) -> None:
        self._strategy = strategy
        self._read = read

    def __getattr__(self, name: str) -> Any:
        defined = getattr(type(self._strategy), name, None)
        if isinstance(defined, property):
            return defined.fget(self)  # type: ignore[misc]
        if callable(defined):
            return functools.partial(defined, self)  # ``is_a``: the fields it reads land here
        self._read.append(name)
        return getattr(self._strategy, name)


class _Verdicts:
    """What the rules said on one call, by the fields they read and those fields' values."""

    def __init__(self, check: Callable[[CallEvent], Any], event: CallEvent) -> None:
        self.check = check
        self.event = event
        # fields read → {(strategy object's call, its file, (type, value) of each field): verdict};
        # values that cannot be hashed (a list among a strategy's options) are compared one by one.
        self.known: dict[tuple[str, ...], dict[Any, Any]] = {}
        self.unhashable: list[tuple[tuple[str, ...], tuple[Any, ...], Any]] = []

    def verdict(self, index: int) -> Any:
        option = self.event.fabric.options[index][1]
        for fields, verdicts in self.known.items():
            key = self._key(index, option, fields)
            try:
                if key in verdicts:
                    return verdicts[key]
            except TypeError:
                pass
        for fields, values, verdict in self.unhashable:
            if _same_key(self._key(index, option, fields), values):
                return verdict
        return self._run(index, option)

    def _key(self, index: int, option: Any, fields: tuple[str, ...]) -> tuple[Any, ...]:
        # The Fabric's options never change: each key is read once per analysis, not once per call.
        keys = self.event.fabric._option_keys
        found = keys.get((index, fields))
        if found is None:
            found = keys[(index, fields)] = _key(option, fields)
        return found

    def _run(self, index: int, option: Any) -> Any:
        strategy = option.strategy
        read: list[str] = []
        seen = _as_seen(self.event, index)
        # The proxy stands for the strategy and notes which of its fields the rules read.
        seen.fabric.strategy = cast(ResolvedStrategy, _Reading(strategy, read))
        try:
            verdict = self.check(seen)
        finally:
            seen.fabric.strategy = strategy  # the copy is shared (FabricState.with_option)
        fields = tuple(dict.fromkeys(read))
        key = self._key(index, option, fields)
        try:
            self.known.setdefault(fields, {})[key] = verdict
        except TypeError:
            self.unhashable.append((fields, key, verdict))
        return verdict


def _key(option: Any, fields: tuple[str, ...]) -> tuple[Any, ...]:
    strategy = option.strategy
    return (
        option.strategy_call,
        option.strategy_path,
        *((type(v), v) for v in (getattr(strategy, f) for f in fields)),
    )


def _same_key(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    return len(first) == len(second) and all(equal(a, b) for a, b in zip(first, second))


def verdicts_per_strategy(
    check: Callable[[CallEvent], Any], guards: Guards, path_guard: int, event: CallEvent
) -> list[tuple[int, CallEvent, Any]]:
    """(guard, the call as the rules saw it, verdict) for each strategy this path allows that a rule
    fires on; one call no rule fires on is kept once, under the path's guard, for the call sites
    (nothing reads its guard)."""
    state = event.fabric
    verdicts = _Verdicts(check, event)
    found: list[tuple[int, CallEvent, Any]] = []
    quiet: Optional[int] = None
    for index in state.feasible_options(guards, path_guard):
        option_guard = state.options[index][0]
        verdict = verdicts.verdict(index)
        if verdict is None:
            quiet = index if quiet is None else quiet
            continue
        found.append((guards.and_(path_guard, option_guard), _as_seen(event, index), verdict))
    if quiet is not None or not found:
        found.insert(0, (path_guard, _as_seen(event, quiet or 0), None))
    return found


def _as_seen(event: CallEvent, index: int) -> CallEvent:
    """The call with the Fabric's ``index``-th strategy: what a rule reads, and the findings later."""
    seen = copy.copy(event)
    seen.fabric = event.fabric.with_option(index)
    return seen
