"""Statements no finding can depend on, which the engine does not run.

A statement in a function body is *dead* when

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
import weakref
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Optional

from fabric_ls.analysis.external import is_external
from fabric_ls.analysis.scopes import function_scope
from fabric_ls.analysis.source import ParsedSource

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
# Calls that read or run a function's locals by name: no statement of that function is dead.
_DYNAMIC = frozenset({"locals", "vars", "eval", "exec", "dir", "globals"})
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
# one is never dead, so what they find is the same with or without dead statements.
RULE_WATCHED_ATTRIBUTES = frozenset(
    {
        "setup", "setup_module", "setup_optimizers", "setup_dataloaders", "launch", "backward",
        "init_module", "clip_gradients", "no_backward_sync", "barrier", "broadcast", "all_gather",
        "all_reduce", "save", "load", "parameters", "named_parameters", "global_rank", "local_rank",
        "node_rank", "is_global_zero", "get_rank", "world_size", "strategy", "device", "cuda", "to",
        "rank_zero_only",
    }
)  # fmt: skip
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
        found.update(id(node) for node in _dead_in(statement, names))
    return frozenset(found)


def _names(parsed: ParsedSource) -> ModuleNames:
    found = parsed.derived.get("module names")
    if found is None:
        found = parsed.derived["module names"] = module_names(parsed.tree)
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
            live = _without(statement, frozenset(id(node) for node in _dead_in(statement, names)))
            cached = (names.digest, ast.dump(live, annotate_fields=False, include_attributes=False))
            _FORMS[statement] = cached
        forms.append(cached[1])
    return forms


def module_names(tree: ast.Module) -> ModuleNames:
    bound: set[str] = set()
    defined: set[str] = set()
    workspace: set[str] = set()
    for statement in tree.body:
        found = _STATEMENT_NAMES.get(statement)
        if found is None:
            found = _STATEMENT_NAMES[statement] = _names_of(statement)
        bound |= found[0]
        defined |= found[1]
        workspace |= found[2]
    return ModuleNames(frozenset(bound), frozenset(defined), frozenset(workspace))


def _names_of(statement: ast.stmt) -> tuple[frozenset[str], ...]:
    bound: set[str] = set()
    defined: set[str] = set()
    workspace: set[str] = set()
    # Names the top level binds: walk it without entering function and class bodies.
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            bound.add(node.name)
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                local = (alias.asname or alias.name).split(".")[0]
                bound.add(local)
                module = alias.name if isinstance(node, ast.Import) else (node.module or "")
                if getattr(node, "level", 0) or not is_external(module or alias.name):
                    workspace.add(local)
            continue
        pending.extend(ast.iter_child_nodes(node))
    for node in ast.walk(statement):
        if isinstance(node, _FUNCTIONS):
            defined.add(node.name)
        elif isinstance(node, ast.Global):
            bound.update(node.names)
    return frozenset(bound), frozenset(defined), frozenset(workspace)


def _dead_in(statement: ast.stmt, names: ModuleNames) -> tuple[ast.stmt, ...]:
    cached = _DEAD.get(statement)
    if cached is not None and cached[0] == names.digest:
        return cached[1]
    found: list[ast.stmt] = []
    finder = _Finder(names)
    pending: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(statement, ())]
    while pending:
        node, around = pending.pop()
        if isinstance(node, _FUNCTIONS):
            found.extend(finder.dead_statements(node, around))
            around = (*around, node)
        pending.extend((child, around) for child in ast.iter_child_nodes(node))
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
    def __init__(self, names: ModuleNames) -> None:
        self.names = names

    def dead_statements(self, function: ast.AST, enclosing: tuple[ast.AST, ...]) -> list[ast.stmt]:
        scope = function_scope(function)
        inner = _inner_nodes(function)
        if any(
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC
            for node in inner
        ):
            return []
        shadowed = set(self.names.bound) | set(scope.local_names)
        for outer in enclosing:
            shadowed |= function_scope(outer).local_names
        candidates: dict[int, tuple[frozenset[str], Counter[str]]] = {}
        statements: dict[int, ast.stmt] = {}
        for statement, looping in _own_statements(function):
            targets = _targets(statement)
            if targets is None or not targets <= scope.local_names:
                continue
            expression = _value_of(statement)
            if expression is not None and not self._plain(expression, shadowed):
                continue
            reads = _reads(statement)
            if not all(_bound_before(name, node, scope, looping) for name, node in reads):
                continue
            candidates[id(statement)] = (targets, Counter(name for name, _ in reads))
            statements[id(statement)] = statement
        if not candidates:
            return []
        # Every read of a name in the function (nested functions, lambdas and classes included),
        # ``del`` and ``nonlocal`` counted as reads.
        total: Counter[str] = Counter()
        for node in inner:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Load, ast.Del)):
                total[node.id] += 1
            elif isinstance(node, (ast.Nonlocal, ast.Global)):
                total.update(node.names)
        dead = dict(candidates)
        changed = True
        while changed:
            inside: Counter[str] = Counter()
            for _, counted in dead.values():
                inside.update(counted)
            changed = False
            for key, (targets, _) in list(dead.items()):
                if any(total[name] > inside[name] for name in targets):
                    del dead[key]
                    changed = True
        return [statements[key] for key in dead]

    def _plain(self, expression: ast.AST, shadowed: set[str]) -> bool:
        """Its evaluation calls only safe builtins and safe methods (see the module's text)."""
        for node in ast.walk(expression):
            if not isinstance(node, _PLAIN_EXPRESSIONS):
                return False
            if isinstance(node, ast.Attribute) and node.attr in RULE_WATCHED_ATTRIBUTES:
                return False
            if isinstance(node, ast.Call) and not self._safe_call(node, shadowed):
                return False
        return True

    def _safe_call(self, call: ast.Call, shadowed: set[str]) -> bool:
        if any(keyword.arg == "device" for keyword in call.keywords):
            return False  # a tensor made on a device (FAB031 reads ``device=`` keywords)
        func = call.func
        if isinstance(func, ast.Name):
            if func.id not in SAFE_FUNCTIONS or func.id in shadowed:
                return False
            # ``max(xs, key=f)`` calls ``f``.
            return not any(keyword.arg == "key" for keyword in call.keywords)
        if isinstance(func, ast.Attribute):
            if func.attr not in SAFE_METHODS or func.attr in self.names.defined:
                return False
            owner = func.value
            while isinstance(owner, ast.Attribute):
                owner = owner.value
            return not (isinstance(owner, ast.Name) and owner.id in self.names.workspace_modules)
        return False


def _is_match_case(node: ast.AST) -> bool:
    return type(node).__name__ == "match_case"


def _inner_nodes(function: ast.AST) -> list[ast.AST]:
    """Every node of the function's body, nested scopes included."""
    found: list[ast.AST] = []
    for statement in function.body:  # type: ignore[attr-defined]
        found.extend(ast.walk(statement))
    return found


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
