"""An undo log of the interpreter's writes, so both sides of a branch can run on one state.

``mark()`` opens a point to come back to; every write after it records the value it
replaced; ``undo(mark)`` puts those values back; ``changes(mark)`` lists, for each
place written since the mark, its value at the mark. Objects born after the
innermost mark are never recorded: nothing older can see them until the branch
that made them is joined, and their state is what that branch left.

Places are (container, key): a dict and its key, an object and its attribute
name, or a list and ``LENGTH`` (lists only grow, so the length is their state).
"""

from __future__ import annotations

import itertools
from typing import Any

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
LENGTH = "<length>"

_ITEM, _ATTR, _LIST = 0, 1, 2

# Shared with fabric_ls.analysis.values: every object that can be written to has a uid from here.
uids = itertools.count(1)


def new_uid() -> int:
    return next(uids)


class Trail:
    def __init__(self) -> None:
        # (kind, container, key, old value, owner)
        self._entries: list[tuple[int, Any, Any, Any, Any]] = []
        # (entry count, first uid born after the mark) per open mark, innermost last.
        self._marks: list[tuple[int, int]] = []

    @property
    def active(self) -> bool:
        return bool(self._marks)

    def mark(self) -> int:
        position = len(self._entries)
        self._marks.append((position, new_uid()))
        return position

    def release(self, position: int) -> None:
        """Close the mark at ``position`` (keeping its writes)."""
        for index in range(len(self._marks) - 1, -1, -1):
            if self._marks[index][0] == position:
                del self._marks[index]
                break
        if not self._marks:
            self._entries.clear()

    def _records(self, owner_uid: int) -> bool:
        return bool(self._marks) and owner_uid < self._marks[-1][1]

    def set_item(self, container: dict, key: Any, value: Any, owner: Any = None) -> None:
        """``container[key] = value``; ``owner`` is the object the dict belongs to (its uid, its guard)."""
        if self._records(getattr(owner, "uid", 0)):
            self._entries.append((_ITEM, container, key, container.get(key, MISSING), owner))
        container[key] = value

    def set_attr(self, owner: Any, name: str, value: Any) -> None:
        if self._records(getattr(owner, "uid", 0)):
            self._entries.append((_ATTR, owner, name, getattr(owner, name), owner))
        setattr(owner, name, value)

    def extend(self, items: list, added: list, owner: Any = None) -> None:
        if self._records(getattr(owner, "uid", 0)):
            self._entries.append((_LIST, items, LENGTH, len(items), owner))
        items.extend(added)

    def undo(self, position: int) -> None:
        entries = self._entries
        while len(entries) > position:
            kind, container, key, old, _owner = entries.pop()
            _put_back(kind, container, key, old)

    def restore_older(self, position: int) -> None:
        """Close the mark at ``position``, putting back what was written since to the objects born
        before it; those born after it, and the logs (no owner), keep what was written to them."""
        born = next(first for at, first in self._marks if at == position)
        entries = self._entries
        while len(entries) > position:
            kind, container, key, old, owner = entries.pop()
            if owner is not None and getattr(owner, "uid", 0) < born:
                _put_back(kind, container, key, old)
        self.release(position)

    def changes(self, position: int) -> dict[tuple[int, Any], tuple[int, Any, Any, Any, Any]]:
        """Each place written since ``position`` → (kind, container, key, value at the mark, owner)."""
        found: dict[tuple[int, Any], tuple[int, Any, Any, Any, Any]] = {}
        for entry in self._entries[position:]:
            place = (id(entry[1]), entry[2])
            if place not in found:
                found[place] = entry
        return found


def _put_back(kind: int, container: Any, key: Any, old: Any) -> None:
    if kind == _ITEM:
        if old is MISSING:
            container.pop(key, None)
        else:
            container[key] = old
    elif kind == _ATTR:
        setattr(container, key, old)
    else:
        del container[old:]


def current(kind: int, container: Any, key: Any) -> Any:
    """The value a place holds now."""
    if kind == _ITEM:
        return container.get(key, MISSING)
    if kind == _ATTR:
        return getattr(container, key)
    return len(container)


def write(trail: Trail, kind: int, container: Any, key: Any, value: Any, owner: Any = None) -> None:
    if kind == _ITEM:
        if value is MISSING:
            if key in container:
                trail.set_item(container, key, MISSING, owner)
                container.pop(key, None)
        else:
            trail.set_item(container, key, value, owner)
    elif kind == _ATTR:
        trail.set_attr(container, key, value)


ITEM, ATTR, LIST = _ITEM, _ATTR, _LIST
