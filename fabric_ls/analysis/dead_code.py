"""Statements no finding can depend on, which the engine does not run.

A statement in a function body of the analysed script (helper modules run as they are) is *dead* when

- it binds only local names that nothing else in the function reads (or it binds nothing: an
  expression statement, ``pass``), and
- running it changes nothing a rule reads: every call in it is a builtin or a method known to
  leave Fabric, models, optimizers and the device alone (``print``, ``len``, ``loss.item()``,
  ``logger.info``), never one of the script's own functions; it reads no local name before the
  function binds it (Python raises ``UnboundLocalError`` there, which ends the path); and it names
  no attribute a rule looks for in the source (``setup_optimizers``, ``global_rank``, ...).

Reads by other dead statements do not count, so a chain that only feeds a log line goes as a whole.

The evaluator skips them (``dead_statements``), and so do its own readings of the source (what a
branch can touch, which functions use Fabric): what they would compute is never used. So a line
being typed that nothing uses yet (``tokens_seen = batch[0].numel()``) leaves what the engine runs
unchanged (``live_forms``), and an edit that only touches such lines is answered with the last
result (fabric_ls.analysis.edit_reuse). Fixes still read the source as it is.

Every question here is about the text alone (the module, never its imports): the same text gives
the same answer in every analysis.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
import weakref
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Optional

from fabric_ls.analysis.external import is_external
from fabric_ls.analysis.fabric_api import (
    FABRIC_METHODS,
    PARAMETER_METHODS,
    RANK_ATTRIBUTES,
    RANK_CALLS,
    ZERO_FLAGS,
)
from fabric_ls.analysis.scopes import function_scope
from fabric_ls.analysis.source import ParsedSource, statement_lines

# Builtins that never call back into the script's code (no ``key=``) nor touch an object's state.
SAFE_FUNCTIONS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "callable", "chr", "complex", "dict", "divmod",
        "enumerate", "float", "format", "frozenset", "hasattr", "hash", "hex", "id", "int",
        "isinstance", "issubclass", "len", "list", "max", "min", "oct", "ord", "pow", "print",
        "range", "repr", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
    }
)  # fmt: skip
# Methods that read a value (a tensor's, a string's, a dict's) or write a log line, and never set
# anything up, move anything to a device, create a CUDA context or change what a rule reads.
# ``to``/``cuda``, the Fabric API, in-place updates and container mutators are not among them.
SAFE_METHODS = frozenset(
    {
        # logging and progress
        "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "log_dict",
        "print", "set_postfix", "set_description", "write",
        # tensors and arrays: reads and copies
        "item", "tolist", "numpy", "numel", "nelement", "size", "dim", "ndimension", "element_size",
        "float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte",
        "detach", "clone", "cpu", "mean", "sum", "prod", "std", "var", "max", "min", "argmax",
        "argmin", "abs", "neg", "sqrt", "rsqrt", "exp", "log2", "log10", "log1p", "pow", "square",
        "sigmoid", "tanh", "relu", "softmax", "log_softmax", "view", "view_as", "reshape",
        "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose", "t",
        "contiguous", "expand", "expand_as", "repeat", "narrow", "chunk", "unbind", "norm", "eq",
        "ne", "gt", "lt", "ge", "le", "all", "any", "topk", "sort", "argsort", "round", "floor",
        "ceil", "clamp", "clip", "isnan", "isinf", "isfinite", "nan_to_num", "type_as", "gather",
        "index_select", "count_nonzero", "nonzero", "cumsum", "cumprod",
        # strings
        "format", "join", "upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit",
        "splitlines", "replace", "startswith", "endswith", "zfill", "ljust", "rjust", "center",
        "title", "capitalize", "casefold", "encode", "decode", "find", "rfind", "count", "isdigit",
        "isalpha", "isalnum", "isspace", "isupper", "islower",
        # mappings and sequences, read only
        "get", "keys", "values", "items", "copy", "index",
        # clocks, paths
        "time", "perf_counter", "monotonic", "process_time", "now", "today", "utcnow",
        "strftime", "isoformat", "exists", "is_file", "is_dir", "basename", "dirname", "splitext",
        "abspath", "realpath", "expanduser", "with_suffix", "with_name", "as_posix",
    }
)  # fmt: skip
# Expression nodes whose evaluation runs no code of the script's (apart from what their calls do).
_PLAIN_EXPRESSIONS = (
    ast.Constant,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.Starred,
    ast.Call,
    ast.keyword,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.boolop,
    ast.cmpop,
)
# Attributes the rules look for in the source itself (not through the evaluator): a statement naming
# one is never dead, so an edit of it is never answered from the last result. The Fabric API and rank
# tests as the engine knows them, and what rules read beside them: ``optimizer.step()`` (FAB024),
# devices (FAB031), the strategy and the world. ``tests/test_dead_code.py`` checks that every
# attribute a rule compares with is here.
RULE_WATCHED_ATTRIBUTES = (
    FABRIC_METHODS
    | PARAMETER_METHODS
    | RANK_ATTRIBUTES
    | ZERO_FLAGS
    | RANK_CALLS
    | {"step", "device", "cuda", "to", "strategy", "world_size", "node_rank", "rank_zero_only"}
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Fields of a statement that hold statements.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class ModuleNames:
    """What the whole module says about names, for the questions asked of each statement."""

    # Bound at the module's top level, or declared ``global`` anywhere: a builtin of that name is
    # not the builtin.
    bound: frozenset[str]
    # Every function and method name the module defines: ``x.info()`` may be the script's own.
    defined: frozenset[str]
    # Modules of the workspace imported at the top level (not a package fabric-ls knows by name):
    # ``helpers.log(...)`` runs the script's own code.
    workspace_modules: frozenset[str]

    @cached_property
    def digest(self) -> str:
        parts = (self.bound, self.defined, self.workspace_modules)
        text = "|".join(",".join(sorted(names)) for names in parts)
        return hashlib.sha1(text.encode()).hexdigest()


# Per top-level statement (its node): its names (for ModuleNames), and by the module's names digest
# its dead statements and its live form. A statement an edit left alone keeps its node (reparse).
_STATEMENT_NAMES: weakref.WeakKeyDictionary[ast.AST, tuple[frozenset[str], ...]] = weakref.WeakKeyDictionary()
_DEAD: weakref.WeakKeyDictionary[ast.AST, tuple[str, tuple[ast.stmt, ...]]] = weakref.WeakKeyDictionary()
_FORMS: weakref.WeakKeyDictionary[ast.AST, tuple[str, str]] = weakref.WeakKeyDictionary()
# A dead statement carries this attribute (True): the scans of the source that cache what they found
# by node ask ``is_dead``, and ``marks.version`` says when a statement's mark last changed.
_MARK = "_fabric_ls_dead"


class _Marks:
    version = 0


marks = _Marks()


def dead_statements(parsed: ParsedSource) -> frozenset[int]:
    """The ``id`` of every dead statement of ``parsed``, each marked (``is_dead``) as this text says
    (again, where another version of the script marked a statement both share)."""
    names = _names(parsed)
    found: set[int] = set()
    for statement in parsed.tree.body:
        found.update(id(node) for node in _dead_in(statement, names, parsed.lines))
    return frozenset(found)


def _names(parsed: ParsedSource) -> ModuleNames:
    found = parsed.derived.get("module names")
    if found is None:
        found = parsed.derived["module names"] = module_names(parsed.tree, parsed.lines)
    return found  # type: ignore[no-any-return]


def names_digest(parsed: ParsedSource) -> str:
    """What the module says about names (``ModuleNames``), as a key for caches of scans by text."""
    return _names(parsed).digest


def is_dead(node: ast.AST) -> bool:
    """Whether ``node`` is a statement the evaluator skips (as the last ``dead_statements`` marked it)."""
    return getattr(node, _MARK, False)  # type: ignore[no-any-return]


def live_forms(parsed: ParsedSource) -> list[str]:
    """Each top-level statement without its dead statements, as text with positions left out: two
    versions of a script with equal forms have the engine run the same program."""
    names = _names(parsed)
    forms = []
    for statement in parsed.tree.body:
        cached = _FORMS.get(statement)
        if cached is None or cached[0] != names.digest:
            dead = _dead_in(statement, names, parsed.lines)
            live = _without(statement, frozenset(id(node) for node in dead))
            cached = (names.digest, ast.dump(live, annotate_fields=False, include_attributes=False))
            _FORMS[statement] = cached
        forms.append(cached[1])
    return forms


def module_names(tree: ast.Module, lines: list[str]) -> ModuleNames:
    bound: set[str] = set()
    defined: set[str] = set()
    workspace: set[str] = set()
    for statement in tree.body:
        found = _STATEMENT_NAMES.get(statement)
        if found is None:
            first, last = statement_lines(statement)
            text = "".join(lines[first : last + 1])
            found = _STATEMENT_NAMES[statement] = _names_of(statement, text)
        bound |= found[0]
        defined |= found[1]
        workspace |= found[2]
    return ModuleNames(frozenset(bound), frozenset(defined), frozenset(workspace))


def _names_of(statement: ast.stmt, text: str) -> tuple[frozenset[str], ...]:
    """The names a top-level statement binds at the module's level, the functions it defines (at any
    depth: read from its text, so a ``def`` in a string counts too) and the workspace modules it
    imports."""
    bound: set[str] = set(_declared(text))
    workspace: set[str] = set()
    pending: list[ast.stmt] = [statement]
    while pending:
        node = pending.pop()
        bound.update(_bound_by(node, ":=" in text))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            for alias in node.names:
                if getattr(node, "level", 0) or not is_external(module or alias.name):
                    workspace.add((alias.asname or alias.name).split(".")[0])
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            pending.extend(_child_statements(node))
    return frozenset(bound), frozenset(_DEFINED.findall(text)), frozenset(workspace)


# ``def name(`` anywhere (methods and nested functions too), and ``global a, b``.
_DEFINED = re.compile(r"\bdef\s+([^\W\d]\w*)")
_GLOBAL = re.compile(r"\bglobal\s+([^\n;#]+)")


def _declared(text: str) -> list[str]:
    return [name.strip() for names in _GLOBAL.findall(text) for name in names.split(",") if name.strip()]


def _bound_by(statement: ast.stmt, walrus: bool) -> set[str]:
    """The names one statement binds in its own scope (its blocks are read apart)."""
    if isinstance(statement, (*_FUNCTIONS, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    targets: list[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in statement.items if item.optional_vars is not None]
    elif isinstance(statement, ast.Delete):
        targets = list(statement.targets)
    names = {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    if walrus:
        # A walrus anywhere in the statement's own expressions binds in this scope too.
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.expr):
                names.update(n.target.id for n in ast.walk(child) if isinstance(n, ast.NamedExpr))  # type: ignore[union-attr]
    return names


def _child_statements(node: ast.AST) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for name in _BLOCKS:
        for child in getattr(node, name, None) or ():
            if isinstance(child, ast.stmt):
                found.append(child)
            else:  # an ``except`` handler, a ``case``
                found.extend(getattr(child, "body", ()))
    return found


def _dead_in(statement: ast.stmt, names: ModuleNames, lines: list[str]) -> tuple[ast.stmt, ...]:
    cached = _DEAD.get(statement)
    if cached is not None and cached[0] == names.digest:
        return cached[1]
    found: list[ast.stmt] = []
    finder = _Finder(names, lines)
    pending: list[tuple[ast.stmt, tuple[ast.AST, ...]]] = [(statement, ())]
    while pending:
        node, around = pending.pop()
        if isinstance(node, _FUNCTIONS):
            found.extend(finder.dead_statements(node, around))
            around = (*around, node)
        pending.extend((child, around) for child in _child_statements(node))
    if cached is not None:
        # Marked before under other module names: the caches of what scans found may be stale.
        for node in cached[1]:
            setattr(node, _MARK, False)
        if {id(node) for node in cached[1]} != {id(node) for node in found}:
            marks.version += 1
    for node in found:
        setattr(node, _MARK, True)
    _DEAD[statement] = (names.digest, tuple(found))
    return tuple(found)


def _without(node: ast.AST, dead: frozenset[int]) -> ast.AST:
    """``node`` as the engine runs it: a copy without the dead statements (itself if it has none)."""
    if not dead:
        return node
    changed: dict[str, list] = {}
    for name in _BLOCKS:
        block = getattr(node, name, None)
        if not isinstance(block, list) or not block:
            continue
        kept = [_without(child, dead) for child in block if id(child) not in dead]
        if len(kept) != len(block) or any(new is not old for new, old in zip(kept, block)):
            changed[name] = kept
    if not changed:
        return node
    copied = copy.copy(node)
    for name, block in changed.items():
        setattr(copied, name, block)
    return copied


class _Finder:
    def __init__(self, names: ModuleNames, lines: list[str]) -> None:
        self.names = names
        self.lines = lines

    def dead_statements(self, function: ast.AST, enclosing: tuple[ast.AST, ...]) -> list[ast.stmt]:
        # The statements that may be dead by their own syntax, before anything about the function is
        # read (most functions have none).
        first: list[tuple[ast.stmt, bool, frozenset[str]]] = []
        bare: list[ast.stmt] = []  # ``pass``, a docstring: nothing read, bound or called
        for statement, looping in _own_statements(function):
            targets = _targets(statement)
            expression = _value_of(statement) if targets is not None else None
            if targets == frozenset() and (expression is None or _constant(expression)):
                bare.append(statement)
            elif targets is not None and (expression is None or self._plain(expression)):
                first.append((statement, looping, targets))
        if not first:
            return bare
        # What nothing else names in the function's text is read nowhere (a name read is a name
        # written): kept only when no other statement's text says it. Text over-counts (a string, an
        # attribute of the same name), so this keeps a statement rather than drop one.
        text = self._lines_of(function)
        if _DYNAMIC_TEXT.search(text):
            return bare
        kept = _unread(first, text, self._segment)
        if not kept:
            return bare
        scope = function_scope(function)
        parameters = _parameters(function)
        # A builtin is not the builtin where the module, the function (a parameter too) or a function
        # around it binds its name.
        shadowed = set(self.names.bound) | set(scope.local_names) | parameters
        for outer in enclosing:
            shadowed |= function_scope(outer).local_names | _parameters(outer)
        checked = [
            (statement, looping, targets)
            for statement, looping, targets in kept
            if targets <= scope.local_names
            and not _calls_shadowed(statement, shadowed)
            and all(
                name in parameters or _bound_before(name, node, scope, looping)
                for name, node in _reads(statement)
            )
        ]
        return [*bare, *(statement for statement, _, _ in _unread(checked, text, self._segment))]

    def _lines_of(self, function: ast.AST) -> str:
        """The lines of a function's body (its signature's names are not reads)."""
        first = function.body[0].lineno - 1  # type: ignore[attr-defined]
        last = function.end_lineno or function.lineno  # type: ignore[attr-defined]
        return "".join(self.lines[first:last])

    def _segment(self, node: ast.AST) -> str:
        """The node's own text (a statement may share its line with another: ``x = 1; use(x)``)."""
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
        start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        lines = [line.encode("utf-8") for line in self.lines[first : last + 1]]
        if not lines:
            return ""
        if len(lines) == 1:
            return lines[0][start:end].decode("utf-8", errors="replace")
        middle = b"".join(lines[1:-1])
        return (lines[0][start:] + middle + lines[-1][:end]).decode("utf-8", errors="replace")

    def _plain(self, expression: ast.AST) -> bool:
        """Its evaluation calls only safe builtins and safe methods (see the module's text); whether
        a builtin is the builtin is asked after (``_calls_shadowed``)."""
        pending: list[ast.AST] = [expression]
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.Name, ast.Constant)):
                continue
            if not isinstance(node, _PLAIN_EXPRESSIONS):
                return False
            if isinstance(node, ast.Attribute) and node.attr in RULE_WATCHED_ATTRIBUTES:
                return False
            if isinstance(node, ast.Call) and not self._safe_call(node):
                return False
            pending.extend(ast.iter_child_nodes(node))
        return True

    def _safe_call(self, call: ast.Call) -> bool:
        if any(keyword.arg == "device" for keyword in call.keywords):
            return False  # a tensor made on a device (FAB031 reads ``device=`` keywords)
        func = call.func
        if isinstance(func, ast.Name):
            # ``max(xs, key=f)`` calls ``f``.
            return func.id in SAFE_FUNCTIONS and not any(keyword.arg == "key" for keyword in call.keywords)
        if isinstance(func, ast.Attribute):
            if func.attr not in SAFE_METHODS or func.attr in self.names.defined:
                return False
            owner = func.value
            while isinstance(owner, ast.Attribute):
                owner = owner.value
            return not (isinstance(owner, ast.Name) and owner.id in self.names.workspace_modules)
        return False


def _unread(
    found: list[tuple[ast.stmt, bool, frozenset[str]]], text: str, text_of: Callable[[ast.AST], str]
) -> list[tuple[ast.stmt, bool, frozenset[str]]]:
    """Those of ``found`` whose names no statement outside them names in ``text`` (reads by the others
    of them do not count: a chain that only feeds a log line goes as a whole)."""
    if not any(targets for _, _, targets in found):
        return found
    counts = Counter(_WORD.findall(text))
    inside = [(entry, Counter(_WORD.findall(text_of(entry[0])))) for entry in found]
    changed = True
    while changed:
        total: Counter[str] = Counter()
        for _, counted in inside:
            total.update(counted)
        kept = [(entry, counted) for entry, counted in inside if all(counts[n] <= total[n] for n in entry[2])]
        changed = len(kept) != len(inside)
        inside = kept
    return [entry for entry, _ in inside]


# A word of the source, as an identifier is spelt (in code, a string or a comment alike).
_WORD = re.compile(r"[^\W\d]\w*")
# ``locals()``, ``vars()``, ``eval(...)``: a function's names read by name.
_DYNAMIC_TEXT = re.compile(r"\b(?:locals|vars|eval|exec|dir|globals)\s*\(")


def _constant(expression: ast.AST) -> bool:
    return isinstance(expression, ast.Constant)


def _parameters(function: ast.AST) -> set[str]:
    arguments = function.args  # type: ignore[attr-defined]
    found = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return {argument.arg for argument in [*found, arguments.vararg, arguments.kwarg] if argument is not None}


def _calls_shadowed(statement: ast.stmt, shadowed: set[str]) -> bool:
    """A builtin it calls is not the builtin there: a name of the module, the function or one around it."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in shadowed
        for node in ast.walk(statement)
    )


def _is_match_case(node: ast.AST) -> bool:
    return type(node).__name__ == "match_case"


def _own_statements(function: ast.AST) -> Iterable[tuple[ast.stmt, bool]]:
    """The function's simple statements (not those of functions or classes inside it), each with
    whether it sits in a loop of the function."""
    pending: list[tuple[ast.stmt, bool]] = [(s, False) for s in reversed(function.body)]  # type: ignore[attr-defined]
    while pending:
        statement, looping = pending.pop()
        if isinstance(statement, _SCOPES):
            continue
        blocks = [getattr(statement, name, None) for name in _BLOCKS]
        if not any(isinstance(block, list) and block for block in blocks):
            yield statement, looping
            continue
        inner = looping or isinstance(statement, _LOOPS)
        for block in reversed(blocks):
            for child in reversed(block or []):
                if isinstance(child, ast.stmt):
                    pending.append((child, inner))
                elif isinstance(child, ast.excepthandler) or _is_match_case(child):
                    pending.extend((grand, inner) for grand in reversed(child.body))


def _targets(statement: ast.stmt) -> Optional[frozenset[str]]:
    """The names a dead-candidate statement binds (empty: none); None if it is not such a statement."""
    if isinstance(statement, (ast.Expr, ast.Pass)):
        return frozenset()
    if isinstance(statement, ast.Assign):
        names: set[str] = set()
        for target in statement.targets:
            elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not all(isinstance(element, ast.Name) for element in elements):
                return None
            names.update(element.id for element in elements)  # type: ignore[attr-defined]
        return frozenset(names)
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and isinstance(statement.target, ast.Name):
        if isinstance(statement, ast.AnnAssign) and statement.value is None:
            return None
        return frozenset({statement.target.id})
    return None


def _value_of(statement: ast.stmt) -> Optional[ast.AST]:
    if isinstance(statement, ast.Pass):
        return None
    return statement.value  # type: ignore[attr-defined, no-any-return]


def _reads(statement: ast.stmt) -> list[tuple[str, ast.Name]]:
    """The names the statement reads (an augmented assignment reads its target too)."""
    found = [
        (node.id, node)
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    ]
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
        found.append((statement.target.id, statement.target))
    return found


def _bound_before(name: str, node: ast.Name, scope: object, looping: bool) -> bool:
    """A read Python may run before the function binds the name raises ``UnboundLocalError``: the
    evaluator ends the path there (expressions.py ``_unbound_local``), so such a statement is kept."""
    if name not in scope.local_names or looping:  # type: ignore[attr-defined]
        return True
    first = scope.first_bound.get(name)  # type: ignore[attr-defined]
    return first is not None and (node.lineno, node.col_offset) >= first
