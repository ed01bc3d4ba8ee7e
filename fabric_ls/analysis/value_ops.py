"""Small operations on abstract values shared by the evaluator's parts (no state of their own)."""

from __future__ import annotations

import ast
import os
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Optional,
)

from fabric_ls.analysis.dead_code import is_dead, names_digest
from fabric_ls.analysis.fabric_api import FABRIC_METHODS
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.state import (
    FABRIC_CLASSES,
    Frame,
)
from fabric_ls.analysis.strategies import STRATEGY_CLASSES
from fabric_ls.analysis.values import (
    UNKNOWN,
    Choice,
    ClassRef,
    Const,
    External,
    FabricObj,
    FilePath,
    FunctionRef,
    LazyItems,
    LoaderBatch,
    Mapping,
    Merged,
    ModelOutput,
    Obj,
    Params,
    Seq,
    SetupDataLoader,
    SetupModule,
    SetupOptimizer,
    StrategyObj,
    Unknown,
    Value,
)

if TYPE_CHECKING:
    from fabric_ls.analysis.run_state import RunState


class _Marker:
    def __repr__(self) -> str:
        return "<unreadable>"


_NOT_LITERAL = _Marker()
_UNREADABLE = _Marker()


def _literal(value: Value) -> Any:
    """A plain Python value for a constant abstract value, else ``_NOT_LITERAL``."""
    if isinstance(value, Const):
        return value.value
    if isinstance(value, Seq):
        items = [_literal(item) for item in value.items]
        if any(item is _NOT_LITERAL for item in items):
            return _NOT_LITERAL
        return tuple(items) if value.is_tuple else items
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items.items():
            literal = _literal(item)
            if literal is _NOT_LITERAL:
                return _NOT_LITERAL
            result[key] = literal
        return result
    return _NOT_LITERAL


def _literal_seq(items: list[Value], is_tuple: bool, starred: Optional[int] = None) -> Value:
    """A list or tuple display; ``starred``: how many of its elements unpack another (None: not known)."""
    if starred is None:
        return Seq(items, is_tuple=is_tuple)
    return Seq(
        items, is_tuple=is_tuple, nonempty=len(items) > starred, written_length=-1 if starred else len(items)
    )


def _items(value: Value) -> list[Value]:
    if isinstance(value, Seq):
        return list(value.items)
    return [value]


def _unpack(value: Value, count: int) -> list[Value]:
    if isinstance(value, Choice):
        # ``model, optimizer = fabric.setup(...)`` on one of several paths: each part keeps the
        # choice's conditions, so the model and the optimizer of one path stay together.
        parts = [_unpack(option, count) for option in value.options]
        return [_same_choice(value, tuple(part[index] for part in parts)) for index in range(count)]
    if isinstance(value, LoaderBatch):
        return [value] * count  # ``for x, y in loader``: every part comes from the loader
    if isinstance(value, Seq) and len(value.items) == count:
        return list(value.items)
    if isinstance(value, Const) and isinstance(value.value, (tuple, list)) and len(value.value) == count:
        return [Const(item, value.origins) for item in value.value]
    return [UNKNOWN] * count


def _same_choice(choice: Choice, options: tuple[Value, ...]) -> Choice:
    """Another value with the same key and conditions as ``choice``, option for option."""
    if isinstance(choice, Merged):
        return Merged(choice.key, options, choice.descriptions, guards=choice.guards)
    return Choice(choice.key, options, choice.descriptions, choice.subject, choice.option_texts)


# A conditional expression whose test has more options than this is decided as an ``if`` is (the
# statement splits): kept lazy, a test built from the last one's value (``name = f"{prefix}/{key}" if
# prefix else key`` in a recursive helper) doubles at each level.
MAX_LAZY_TEST_OPTIONS = 16


def larger_than(value: Value, limit: int) -> bool:
    """Whether ``value`` has more than ``limit`` options, nested choices flattened (counted, not built)."""
    count = 0
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, Choice):
            pending.extend(current.options)
            continue
        count += 1
        if count > limit:
            return True
    return False


def known_items(value: Value) -> Optional[list[Value]]:
    """The items of a sequence the source fixes: a list or tuple, or ``range(n)`` of a constant."""
    if isinstance(value, Seq):
        return list(value.items)
    if isinstance(value, Obj) and value.library_class == "range":
        length = value.attrs.get("__length__")
        if isinstance(length, Const) and isinstance(length.value, int):
            return [Const(index) for index in range(length.value)]
    return None


def _first_item(value: Value) -> Value:
    if isinstance(value, Seq) and value.items:
        return value.items[0]
    if isinstance(value, SetupDataLoader):
        return UNKNOWN
    if isinstance(value, Obj) and value.is_dataloader:
        return LoaderBatch(value)  # a loader never given to setup_dataloaders
    return UNKNOWN


def _binop(op: ast.operator, left: Value, right: Value) -> Value:
    if isinstance(left, ModelOutput):
        return left
    if (
        isinstance(left, FilePath)
        and left.form == "path"
        and isinstance(op, ast.Div)
        and isinstance(right, Const)
        and isinstance(right.value, str)
    ):
        # ``Path("configs") / "train.yaml"``
        relative = os.path.join(left.relative, right.value)
        return FilePath(left.created_at, left.created_path, relative=relative)
    if isinstance(right, ModelOutput):
        return right
    if isinstance(left, Const) and isinstance(right, Const):
        try:
            return Const(_BINOPS[type(op)](left.value, right.value), left.origins + right.origins)
        except Exception:
            return UNKNOWN
    if isinstance(left, Seq) and isinstance(right, Seq) and isinstance(op, ast.Add):
        return Seq(left.items + right.items)
    return Unknown()


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b if _small_repeat(a, b) else _no(),
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b if not isinstance(a, str) else _no(),
    ast.Div: lambda a, b: a / b,
}


def _no() -> Any:
    raise ValueError


def _small_repeat(a: Any, b: Any) -> bool:
    """``"-" * 80`` is computed; ``"x" * 10**9`` (a script can hold one) is not built."""
    for sequence, count in ((a, b), (b, a)):
        if isinstance(sequence, (str, bytes, tuple, list)) and isinstance(count, int):
            return count * max(len(sequence), 1) <= 100_000
    return True


def _params_of(receiver: Value, node: ast.AST) -> Params:
    if isinstance(receiver, SetupModule):
        return Params(receiver.inner, meta=False, set_up=True, at=node)
    assert isinstance(receiver, Obj)
    # Setting a module up materialises and shards its parameters in place.
    set_up = "__setup__" in receiver.attrs
    return Params(receiver, meta=receiver.meta and not set_up, set_up=set_up, at=node)


def _collect_params(value: Value, depth: int = 0) -> list[Params]:
    if depth > 4:
        return []
    if isinstance(value, Params):
        return [value]
    if isinstance(value, Seq):
        found: list[Params] = []
        for item in value.items:
            found.extend(_collect_params(item, depth + 1))
        return found
    if isinstance(value, Mapping):
        found = []
        # A configuration's values not read yet are its files', which hold no parameters.
        items = value.items.built_values() if isinstance(value.items, LazyItems) else value.items.values()
        for item in items:
            found.extend(_collect_params(item, depth + 1))
        return found
    return []


def mapping_keys(value: Value, sort: bool = False, is_tuple: bool = False) -> Optional[Seq]:
    """``list(table)``, ``sorted(table)``, ``table.keys()`` of a dict whose keys are all known
    strings or numbers (of one kind, when sorted); None otherwise."""
    if not isinstance(value, Mapping):
        return None
    keys = list(value.items)
    if not all(isinstance(key, (str, int, float)) and not isinstance(key, bool) for key in keys):
        return None
    if sort:
        if not (all(isinstance(key, str) for key in keys) or not any(isinstance(key, str) for key in keys)):
            return None
        keys.sort()
    return Seq([Const(key) for key in keys], is_tuple=is_tuple)


def _class_method(cls: Optional[ClassRef], name: str, depth: int = 0) -> Optional[FunctionRef]:
    if cls is None or depth > 8:
        return None
    for statement in cls.node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
            return FunctionRef(statement, cls.module, owner=cls)
    for base in cls.bases:
        if isinstance(base, ClassRef):
            found = _class_method(base, name, depth + 1)
            if found is not None:
                return found
    return None


def _class_attribute(cls: ClassRef, name: str, run: RunState, frame: Frame) -> Optional[Value]:
    for statement in cls.node.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return run._eval(statement.value, Frame(cls.module))
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.target.id == name and statement.value is not None:
                return run._eval(statement.value, Frame(cls.module))
    return None


def _bind_fields(cls: ClassRef, instance: Obj, args: list[Value], keywords: dict[str, Value]) -> None:
    """A dataclass (or NamedTuple) built without an ``__init__`` of its own: arguments become fields."""
    fields: list[str] = []
    chain: list[ClassRef] = []
    current: Optional[ClassRef] = cls
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = next((b for b in current.bases if isinstance(b, ClassRef)), None)
    for klass in reversed(chain):
        for statement in klass.node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                if statement.target.id not in fields:
                    fields.append(statement.target.id)
    for name, value in zip(fields, args):
        instance.attrs[name] = value
    for name, value in keywords.items():
        if name in fields:
            instance.attrs[name] = value


def _lightning_base(cls: ClassRef, depth: int = 0) -> Optional[str]:
    """The Lightning class a user class derives from (Fabric or a strategy), if any."""
    if depth > 8:
        return None
    for base in cls.bases:
        if isinstance(base, External):
            if base.qualname in FABRIC_CLASSES:
                return base.qualname
            if base.qualname.rsplit(".", 1)[-1] in STRATEGY_CLASSES and base.qualname.startswith("lightning"):
                return base.qualname
        if isinstance(base, ClassRef):
            found = _lightning_base(base, depth + 1)
            if found:
                return found
    return None


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# The methods of lists and dicts the interpreter models (``calls.py``): a branch calling one on a
# value a Fabric call may read changes it (``conditions.py`` runs that branch).
SEQ_MUTATORS = frozenset({"append", "extend", "insert"})
MAPPING_MUTATORS = frozenset({"update", "setdefault"})


def _tracked(value: Value) -> bool:
    return isinstance(
        value,
        (FabricObj, Obj, SetupModule, SetupOptimizer, SetupDataLoader, Params, StrategyObj, ModelOutput, Seq),
    )


def _interesting_names(parsed: ParsedSource) -> frozenset[str]:
    """Names read by Fabric API calls and constructors anywhere in the module (with the attribute
    names and constant keys they read: ``cfg.strategy``, ``config["devices"]``)."""
    cached = parsed.interesting_names
    if cached is not None:
        return cached
    names: set[str] = set()
    for statement in parsed.tree.body:
        text = _statement_text(parsed, statement)
        found = _NAMES_BY_TEXT.get(text)
        if found is None:
            found = _names_read_by_fabric_calls(statement)
            if len(_NAMES_BY_TEXT) >= _MAX_CACHED_FACTS:
                _NAMES_BY_TEXT.clear()
            _NAMES_BY_TEXT[text] = found
        names |= found
    result = frozenset(names)
    # Kept on the parsed file itself: an id()-keyed cache would hand a new tree an old answer.
    parsed.interesting_names = result
    return result


def _names_read_by_fabric_calls(statement: ast.stmt) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            func = node.func
            is_api = isinstance(func, ast.Attribute) and func.attr in FABRIC_METHODS
            is_ctor = (
                isinstance(func, ast.Name) and (func.id.endswith("Fabric") or func.id.endswith("Strategy"))
            ) or (
                isinstance(func, ast.Attribute)
                and (func.attr.endswith("Fabric") or func.attr.endswith("Strategy"))
            )
            if is_api or is_ctor:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    for sub in ast.walk(arg):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
                        elif isinstance(sub, ast.Attribute):
                            # ``strategy=cfg.strategy``: a branch setting ``cfg.strategy`` matters.
                            names.add(sub.attr)
                        elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant):
                            if isinstance(sub.slice.value, str):
                                names.add(sub.slice.value)
    return frozenset(names)


def _is_exit_call(func: ast.AST) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("exit", "quit")
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("exit", "_exit")
        and isinstance(func.value, ast.Name)
        and func.value.id in ("sys", "os")
    )


def _looks_like_fabric_param(param: ast.arg) -> bool:
    annotation = param.annotation
    text = ""
    if isinstance(annotation, ast.Name):
        text = annotation.id
    elif isinstance(annotation, ast.Attribute):
        text = annotation.attr
    elif isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value.rsplit(".", 1)[-1]
    return text == "Fabric" or param.arg == "fabric"


def entry_functions(parsed: ParsedSource) -> list[ast.AST]:
    """Top-level functions and methods that use Fabric, directly or through the module's other
    functions and classes (candidate entry points), callers before the functions they call.

    A function a run reaches is not run again on its own, so running callers first means a helper
    is analysed where it is called, with its caller's arguments, once; and the answer does not
    depend on whether the script defines its helpers above or below their callers."""
    definitions = [
        s for s in parsed.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    facts = {id(d): _cached_facts(parsed, d) for d in definitions}
    using = {d.name for d in definitions if facts[id(d)][0]}
    changed = True
    while changed:
        changed = False
        for definition in definitions:
            if definition.name not in using and facts[id(definition)][1] & using:
                using.add(definition.name)
                changed = True
    candidates: list[ast.AST] = []
    for statement in definitions:
        if isinstance(statement, ast.ClassDef):
            for inner in statement.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    mentions, loaded, _ = _cached_facts(parsed, inner)
                    if mentions or loaded & using:
                        candidates.append(inner)
        elif statement.name in using:
            candidates.append(statement)
    return _callers_first(parsed, candidates)


def _callers_first(parsed: ParsedSource, candidates: list[ast.AST]) -> list[ast.AST]:
    """``candidates`` ordered so that each comes after the candidates that name it (a function by
    its name, a method by its attribute), otherwise in source order. Candidates that name each
    other (``main`` names ``setup``, ``setup`` launches ``main``) keep their source order."""
    methods = {id(c) for c in candidates if c not in parsed.tree.body}
    callers: dict[int, list[int]] = {}
    for index, callee in enumerate(candidates):
        name = getattr(callee, "name", "")
        is_method = id(callee) in methods
        callers[index] = [
            other
            for other, caller in enumerate(candidates)
            if other != index and name in _called_names(_cached_facts(parsed, caller), is_method)
        ]
    ancestors = {index: _closure(index, callers) for index in range(len(candidates))}
    placed: list[int] = []
    waiting = list(range(len(candidates)))
    while waiting:
        # The first in source order whose callers, outside its own cycle, are all placed.
        for index in waiting:
            outside = [a for a in ancestors[index] if index not in ancestors[a]]
            if all(a in placed for a in outside):
                cycle = [
                    i for i in waiting if i == index or (i in ancestors[index] and index in ancestors[i])
                ]
                placed.extend(cycle)
                waiting = [i for i in waiting if i not in cycle]
                break
        else:  # unreachable: the earliest candidate of a source cycle always qualifies
            placed.extend(waiting)
            break
    return [candidates[index] for index in placed]


def _closure(start: int, edges: dict[int, list[int]]) -> set[int]:
    seen: set[int] = set()
    stack = list(edges[start])
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges[node])
    return seen


# Definition source text → its facts. An edit re-parses the file; the functions it did not touch keep
# their text, so the server does not walk them again on every keystroke.
_FACTS_BY_TEXT: dict[tuple[str, str], tuple[bool, frozenset[str], frozenset[str]]] = {}
_MAX_CACHED_FACTS = 4096
# Top-level statement text → the names Fabric calls in it read (for _interesting_names).
_NAMES_BY_TEXT: dict[str, frozenset[str]] = {}


def _statement_text(parsed: ParsedSource, statement: ast.AST) -> str:
    start = getattr(statement, "lineno", 1) - 1
    end = getattr(statement, "end_lineno", None) or start + 1
    if getattr(statement, "decorator_list", None):
        start = min(start, min(d.lineno for d in statement.decorator_list) - 1)  # type: ignore[attr-defined]
    return "\n".join(parsed.lines[start:end])


def _called_names(facts: tuple[bool, frozenset[str], frozenset[str]], methods: bool) -> frozenset[str]:
    """The names a definition calls: as methods (``self.f()``), or plainly."""
    return facts[2] if methods else facts[1]


def _cached_facts(parsed: ParsedSource, definition: ast.AST) -> tuple[bool, frozenset[str], frozenset[str]]:
    text = (_statement_text(parsed, definition), names_digest(parsed))
    found = _FACTS_BY_TEXT.get(text)
    if found is None:
        mentions, loaded, attributes = _definition_facts(definition)
        found = (mentions, frozenset(loaded), frozenset(attributes))
        if len(_FACTS_BY_TEXT) >= _MAX_CACHED_FACTS:
            _FACTS_BY_TEXT.clear()
        _FACTS_BY_TEXT[text] = found
    return found


def _definition_facts(definition: ast.AST) -> tuple[bool, set[str], set[str]]:
    """One walk: does it use Fabric's API, which names and which attributes does it read? (Its dead
    statements left out: fabric_ls.analysis.dead_code.)"""
    mentions = False
    loaded: set[str] = set()
    attributes: set[str] = set()
    pending: list[ast.AST] = [definition]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.stmt) and is_dead(node):
            continue
        pending.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.add(node.id)
            if node.id.endswith("Fabric") or node.id.endswith("Strategy"):
                mentions = True
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
            if node.attr in FABRIC_METHODS or node.attr.endswith("Fabric"):
                mentions = True
    return mentions, loaded, attributes


def static_truth(value: Value) -> Optional[bool]:
    """The truth of a plain value, when it does not depend on the path."""
    if isinstance(value, Const):
        try:
            return bool(value.value)
        except Exception:
            return True
    if isinstance(value, (FabricObj, FunctionRef, ClassRef, SetupModule, SetupOptimizer, StrategyObj)):
        return True
    if isinstance(value, Obj) and value.cls is not None:
        return True
    if isinstance(value, Seq) and value.nonempty:
        return True
    return None
