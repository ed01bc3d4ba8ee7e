"""Which of the script's own raises a surrounding ``try`` can catch.

Where one side of a branch ends the program and the innermost ``try`` around it may catch that end,
that side goes on after the ``try``, joined there with the paths that finished its body (join.py
``_join``, statements.py ``_stmt_Try``); where only a ``try`` farther out may, the run forks. A raise
of a builtin exception that no handler around it names (``raise ValueError`` under ``except
KeyError:`` or under a bare ``try``/``finally``) is an end like any other, and the branch is joined.
"""

from __future__ import annotations

import ast
import builtins
from typing import Optional

# What a ``try``'s handlers catch: builtin exception classes, or None (a catch-all, a class of the
# script or of a library, a name the analysis cannot read).
Handlers = Optional[tuple[type, ...]]


def handled_classes(node: ast.Try) -> Handlers:
    """The builtin classes a ``try``'s handlers name; None where one of them may catch anything."""
    found: list[type] = []
    for handler in node.handlers:
        caught = handler.type
        if caught is None:
            return None
        for name in caught.elts if isinstance(caught, ast.Tuple) else [caught]:
            exception = _builtin_exception(name)
            if exception is None:
                return None
            found.append(exception)
    return tuple(found)


def raised_class(node: ast.Raise) -> Optional[str]:
    """``raise ValueError(...)``, ``raise ValueError``: the builtin's name; None otherwise (a re-raise,
    a variable, a class of the script)."""
    exc = node.exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    exception = _builtin_exception(exc) if exc is not None else None
    return exception.__name__ if exception is not None else None


def may_be_caught(raised: Optional[str], handlers: list[Handlers]) -> bool:
    """Whether a handler of a ``try`` around this point may catch the exception ``raised`` (None:
    not known)."""
    exception = getattr(builtins, raised, None) if raised else None
    for caught in handlers:
        if caught is None or (caught and (exception is None or issubclass(exception, caught))):
            return True
    return False


def _builtin_exception(node: ast.AST) -> Optional[type]:
    name = node.id if isinstance(node, ast.Name) else None
    found = getattr(builtins, name, None) if name else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None
