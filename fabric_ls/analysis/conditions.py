"""What a branch can touch, and how a test divides the paths (guards)."""

from __future__ import annotations

import ast
import weakref
from typing import Any, Callable, Optional

from fabric_ls.analysis.config_files import CONFIG_FILE_LOADS
from fabric_ls.analysis.dead_code import is_dead, marks
from fabric_ls.analysis.fabric_api import FABRIC_METHODS, PARAMETER_METHODS
from fabric_ls.analysis.guards import TRUE, DecisionInfo, Guards
from fabric_ls.analysis.hydra_calls import HYDRA_CALLS
from fabric_ls.analysis.join import SplitHere as _SplitHere
from fabric_ls.analysis.join import condition_key as _condition_key
from fabric_ls.analysis.join import same
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    FABRIC_CLASSES,
    Frame,
)
from fabric_ls.analysis.value_ops import (
    MAPPING_MUTATORS,
    SEQ_MUTATORS,
    _class_method,
    _interesting_names,
    _is_exit_call,
    _lightning_base,
    _short,
    _tracked,
)
from fabric_ls.analysis.value_ops import static_truth as _static_truth
from fabric_ls.analysis.values import (
    UNKNOWN,
    ArgParser,
    BoundMethod,
    Choice,
    ClassRef,
    Const,
    External,
    FabricMethod,
    FunctionRef,
    Mapping,
    Merged,
    ModuleRef,
    Namespace,
    Obj,
    Partial,
    Seq,
    SetupModule,
    Subcommands,
    Unknown,
    Value,
)


def _distinct_options(
    guards: Guards, options: tuple[Value, ...], option_guards: list[int]
) -> tuple[list[Value], list[int]]:
    """A choice's options with equal constants (and the same object) taken once, under the union of
    their guards: ``empty_init=self.sharded`` is True or False, however many strategies give each."""
    distinct: list[Value] = []
    distinct_guards: list[int] = []
    for option, guard in zip(options, option_guards):
        for index, known in enumerate(distinct):
            if known is option or (
                isinstance(known, Const) and isinstance(option, Const) and same(known, option)
            ):
                distinct_guards[index] = guards.or_(distinct_guards[index], guard)
                break
        else:
            distinct.append(option)
            distinct_guards.append(guard)
    return distinct, distinct_guards


def _parts_of_one_choice(values: dict[Any, Value]) -> list[list[Any]]:
    """The values that are parts of one choice (same key, same guards: unpacked from one tuple)."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for name, value in values.items():
        if isinstance(value, Choice):
            signature = (value.key, getattr(value, "guards", None), len(value.options))
            groups.setdefault(signature, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


# Node → the nodes under it that can make it relevant (calls, stores, returns, raises).
# Syntax only, so kept for as long as the node lives: across edits, reparse keeps the statements an
# edit left alone.
_CANDIDATES: weakref.WeakKeyDictionary[ast.AST, tuple[int, tuple[ast.AST, ...]]] = weakref.WeakKeyDictionary()
_CANDIDATE_TYPES = (
    ast.Call,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Return,
    ast.Yield,
    ast.Global,
    ast.Nonlocal,
    ast.Raise,
)


# Calls that change what ``parse_args()`` gives: made on one side of a branch only, they matter.
_PARSER_CHANGES = frozenset({"add_argument", "add", "set_defaults", "add_subparsers", "add_parser"})


def _relevance_candidates(node: ast.AST) -> tuple[ast.AST, ...]:
    """Those nodes under ``node`` (in no particular order: relevance asks whether any is relevant),
    leaving out dead statements (fabric_ls.analysis.dead_code: nothing they do can matter).
    A block inside it lends its own list, so each node of a function is walked once, not once
    per block around it."""
    found = _CANDIDATES.get(node)
    if found is None or found[0] != marks.version:
        collected: list[ast.AST] = [node] if _is_candidate(node) else []
        pending = [node]
        while pending:
            for child in ast.iter_child_nodes(pending.pop()):
                if isinstance(child, ast.stmt) and is_dead(child):
                    continue
                if isinstance(child, ast.stmt) and hasattr(child, "body"):
                    collected.extend(_relevance_candidates(child))
                    continue
                if _is_candidate(child):
                    collected.append(child)
                pending.append(child)
        found = _CANDIDATES[node] = (marks.version, tuple(collected))
    return found[1]


def _is_candidate(node: ast.AST) -> bool:
    return isinstance(node, _CANDIDATE_TYPES) and (
        not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) or isinstance(node.ctx, ast.Store)
    )


def _root_name(node: ast.AST) -> Optional[str]:
    """``config`` of ``config["a"].b``: the name an attribute or item chain starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class ConditionsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- relevance ---------------------------------------------------------------

    def _relevant(self, node: ast.AST, frame: Frame) -> bool:
        """Whether a branch or loop can change anything Fabric-related (else it is skipped)."""
        cached = self._relevance.get(id(node))
        if cached is not None:
            return cached
        self._relevance[id(node)] = True  # recursion guard: assume relevant while computing
        result = self._compute_relevance(node, frame, set())
        self._relevance[id(node)] = result
        return result

    def _compute_relevance(
        self, node: ast.AST, frame: Frame, seen: set[int], returns_count: bool = True
    ) -> bool:
        for child in _relevance_candidates(node):
            if isinstance(child, ast.Call):
                func = child.func
                if returns_count and _is_exit_call(func):
                    return True
                if isinstance(func, ast.Attribute) and (
                    func.attr in FABRIC_METHODS or func.attr in PARAMETER_METHODS
                ):
                    return True
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in _PARSER_CHANGES
                    and isinstance(self._peek(func.value, frame), (ArgParser, Subcommands))
                ):
                    # An option added on one side only: what ``args.<dest>`` is depends on the side.
                    return True
                if (
                    isinstance(func, ast.Name)
                    and func.id == "setattr"
                    and child.args
                    and isinstance(self._root_value(child.args[0], frame), (Obj, Namespace))
                ):
                    return True  # ``setattr(cfg, "strategy", ...)``, as ``cfg.strategy = ...``
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in SEQ_MUTATORS | MAPPING_MUTATORS
                    and isinstance(self._peek(func.value, frame), (Mapping, Seq))
                ):
                    return True
                callee = self._peek(func, frame)
                # One of several functions (a dispatch table's entry): any of them may matter.
                for one in callee.options if isinstance(callee, Choice) else (callee,):
                    if self._callee_relevant(one, frame, seen, returns_count):
                        return True
            elif isinstance(child, ast.Name):
                current = frame.lookup(child.id)
                if current is not None and _tracked(current):
                    return True
                if child.id in _interesting_names(frame.module.parsed):
                    return True
            elif isinstance(child, ast.Attribute):
                # ``self.fabric = fabric`` matters; ``self.vocab_size = n`` does not.
                if child.attr in _interesting_names(frame.module.parsed) or "fabric" in child.attr.lower():
                    return True
                # ``cfg.strategy = "deepspeed"`` on an object the script made: the call it is passed
                # to may read it (``make_fabric(cfg)`` in a helper module), whatever the attribute.
                if isinstance(self._root_value(child.value, frame), (Obj, Mapping, Namespace)):
                    return True
            elif isinstance(child, ast.Subscript):
                # ``config["strategy"] = ...`` on a dict a Fabric call reads (``Fabric(**config)``).
                key = child.slice.value if isinstance(child.slice, ast.Constant) else None
                interesting = _interesting_names(frame.module.parsed)
                current = self._root_value(child.value, frame)
                if _root_name(child.value) in interesting or key in interesting:
                    return True
                if current is not None and (_tracked(current) or isinstance(current, Mapping)):
                    return True
            elif isinstance(child, (ast.Return, ast.Yield)) and returns_count:
                return True
            elif isinstance(child, (ast.Global, ast.Nonlocal)) or (
                returns_count and isinstance(child, ast.Raise)
            ):
                # A branch that ends the program decides which paths reach the Fabric calls after it.
                return True
        return False

    def _callee_relevant(
        self, callee: Optional[Value], frame: Frame, seen: set[int], returns_count: bool
    ) -> bool:
        if isinstance(callee, Partial):
            callee = callee.function
        if isinstance(callee, BoundMethod):
            callee = callee.function
        if isinstance(callee, ClassRef):
            if _lightning_base(callee) is not None:
                return True
            init = _class_method(callee, "__init__")
            if init is not None and id(init.node) not in seen:
                seen.add(id(init.node))
                return self._compute_relevance(init.node, frame, seen, returns_count=False)
            return False
        if isinstance(callee, FunctionRef) and id(callee.node) not in seen:
            seen.add(id(callee.node))
            return self._compute_relevance(callee.node, frame, seen, returns_count)
        if isinstance(callee, (SetupModule, FabricMethod)):
            return True  # what reaches a set-up model's forward matters (FAB037), backward or not
        return isinstance(callee, External) and (
            callee.qualname in FABRIC_CLASSES
            or callee.qualname.endswith("Strategy")
            or callee.qualname in HYDRA_CALLS
            or callee.qualname in CONFIG_FILE_LOADS
        )

    def _root_value(self, node: ast.AST, frame: Frame) -> Optional[Value]:
        """What the name an attribute or item chain starts from holds now (``config`` of
        ``config["a"].b``), or None."""
        root = _root_name(node)
        return frame.lookup(root) if root is not None else None

    def _peek(self, node: ast.AST, frame: Frame) -> Optional[Value]:
        """Evaluate a callee without side effects (names and attributes only)."""
        if isinstance(node, ast.Name):
            return frame.lookup(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._peek(node.value, frame)
            if isinstance(owner, Obj):
                method = _class_method(owner.cls, node.attr) if owner.cls else None
                return method if method is not None else owner.attrs.get(node.attr)
            if isinstance(owner, ModuleRef):
                return owner.module.globals.get(node.attr)
            if isinstance(owner, ClassRef):
                return _class_method(owner, node.attr)
        return None

    # ----- truth and choices -------------------------------------------------------

    def _concrete(self, value: Value) -> Value:
        """Resolve a Choice to one option on this path (forking the run where several remain)."""
        while isinstance(value, Choice):
            options, guards = _distinct_options(self.guards, value.options, self._option_guards(value))
            value = options[self._fork(value.key, guards)]
        return value

    def _option_guards(self, choice: Choice) -> list[int]:
        if isinstance(choice, Merged):
            return list(choice.guards)
        decision = self.guards.decision(
            DecisionInfo(choice.key, choice.descriptions, choice.subject, choice.option_texts)
        )
        return [self.guards.option(decision, index) for index in range(len(choice.options))]

    def _fork(self, key: str, option_guards: list[int], whole_run: bool = False) -> int:
        """Take one of the options whose guard this path allows; the run forks if several do."""
        guards = self.guards
        feasible = [index for index, guard in enumerate(option_guards) if guards.feasible(self.guard, guard)]
        if not feasible:
            return 0
        if len(feasible) == 1:
            # The one option this path allows: nothing to decide (and the paths where no option
            # holds, where the value does not exist, go on with it rather than end).
            return feasible[0]
        # Taken in turn (a split, or one run per option), these cover every path of the statement.
        options = guards.covering([option_guards[i] for i in feasible])
        if self.splittable and self.decisions.narrows and not whole_run:
            raise _SplitHere(key, options)
        choice = self.decisions.choose(key, len(feasible))
        if self.decisions.narrows:
            self.guard = guards.and_(self.guard, options[choice])
        return feasible[choice]

    def _split(self, value: Value, node: ast.AST, frame: Frame, relevant: bool = True) -> Any:
        """How a test divides the paths: a bool when it is decided, else (then guard, else guard).

        None means: the test is undecided and the statement is not worth following.
        """
        guards = self.guards
        then_parts: list[int] = []
        else_parts: list[int] = []
        variable: Optional[int] = None
        for guard, leaf in self._leaves(value, TRUE, 0):
            truth = _static_truth(leaf)
            if truth is None:
                if not relevant:
                    return None
                if isinstance(leaf, Unknown) and leaf.key:
                    own = self._value_variable(leaf)
                elif isinstance(leaf, Obj) and leaf.truth_key:
                    own = self._condition_variable(node, frame, f"truth:{leaf.truth_key}")
                else:
                    if variable is None:
                        variable = self._condition_variable(node, frame)
                    own = variable
                then_parts.append(guards.and_(guard, own))
                else_parts.append(guards.and_(guard, guards.not_(own)))
            elif truth:
                then_parts.append(guard)
            else:
                else_parts.append(guard)
        then_guard = guards.and_(self.guard, guards.any_of(then_parts))
        else_guard = guards.and_(self.guard, guards.any_of(else_parts))
        if not guards.feasible(else_guard):
            return True
        if not guards.feasible(then_guard):
            return False
        if not relevant:
            return None
        return then_guard, else_guard

    def _options_under(self, value: Value, guard: int) -> list[tuple[int, Value]]:
        """A value's plain options where ``guard`` holds, each under ``guard`` and its own guard."""
        if not isinstance(value, Choice):
            return [(guard, value)]
        leaves = self._leaves(value, TRUE, 0)
        if len(leaves) < 2:
            return [(guard, value)]  # one option here: read as it is (``_concrete`` takes it)
        return [
            (both, leaf)
            for leaf_guard, leaf in leaves
            for both in (self.guards.and_(guard, leaf_guard),)
            if self.guards.feasible(both)
        ]

    def _combinations(
        self,
        values: dict[Any, Value],
        expand: Optional[Callable[[Any, Value, int], list[tuple[int, Value]]]] = None,
        limit: Optional[int] = None,
    ) -> list[tuple[int, dict[Any, Value]]]:
        """Each combination of the values' options that this path allows, under its guard.

        Values that are parts of one choice (``accelerator, strategy, precision = settings(args)``,
        unpacked from one tuple) take the same option, not every mix of theirs; the others take
        every option, ``expand(name, value, guard)`` giving them (by default, their plain options).
        Past ``limit`` combinations, the values not expanded yet stay as they are.
        """
        combinations: list[tuple[int, dict[Any, Value]]] = [(self.guard, dict(values))]
        if not self.decisions.narrows:
            return combinations
        for names in _parts_of_one_choice(values):
            combinations = [
                (both, {**chosen, **{name: chosen[name].options[index] for name in names}})  # type: ignore[attr-defined]
                for guard, chosen in combinations
                for index, option_guard in enumerate(self._option_guards(chosen[names[0]]))  # type: ignore[arg-type]
                for both in (self.guards.and_(guard, option_guard),)
                if self.guards.feasible(both)
            ]
        for name in values:
            expanded = [
                (both, {**chosen, name: option})
                for guard, chosen in combinations
                for both, option in (
                    expand(name, chosen[name], guard) if expand else self._options_under(chosen[name], guard)
                )
            ]
            if limit is not None and len(expanded) > limit:
                break
            combinations = expanded
        return combinations

    def _leaves(self, value: Value, guard: int, depth: int) -> list[tuple[int, Value]]:
        """A value's plain options with the guard of each (Choices and Merged values flattened)."""
        if not isinstance(value, Choice) or depth > 6:
            return [(guard, value)]
        found: list[tuple[int, Value]] = []
        for option_guard, option in zip(self._option_guards(value), value.options):
            combined = self.guards.and_(guard, option_guard)
            if self.guards.feasible(self.guard, combined):
                found.extend(self._leaves(option, combined, depth + 1))
        return found or [(guard, UNKNOWN)]

    def _condition_variable(self, node: ast.AST, frame: Frame, key: Optional[str] = None) -> int:
        """The truth of the test at ``node``: one decision per test, or per ``key`` (an object's truth,
        the same wherever that object is tested), described by the first test's text."""
        text = frame.module.parsed.segment(node) or "condition"
        text = " ".join(text.split())
        if len(text) > 60:
            text = text[:57] + "..."
        decision = self.guards.decision(
            DecisionInfo(key or _condition_key(node, frame), (f"`{text}`", f"not `{text}`"))
        )
        return self.guards.option(decision, 0)

    def _value_variable(self, leaf: Unknown) -> int:
        """The truth of an unknown value that has an identity: one decision wherever it is tested."""
        text = _short(leaf.text or "value", 60)
        given = leaf.key.rsplit(":", 1)[0] if leaf.key.endswith((":given", ":other")) else None
        if given is None:
            decision = self.guards.decision(DecisionInfo(f"truth:{leaf.key}", (f"`{text}`", f"not `{text}`")))
            return self.guards.option(decision, 0)
        # The value a flag or a parameter is given instead of its default: "`--zero` given a true
        # value" says both (the default's decision goes unsaid beside it).
        decision = self.guards.decision(
            DecisionInfo(
                f"truth:{leaf.key}", (f"`{text}` given a true value", f"`{text}` given a false value")
            )
        )
        self.guards.implies(decision, (given, 1))
        return self.guards.option(decision, 0)

    def _truth(self, value: Value, node: ast.AST, frame: Frame, fork: bool = True) -> Optional[bool]:
        """The truth of a test on this path (forking where it is undecided); None: skip."""
        split = self._split(value, node, frame, relevant=fork)
        if split is None or isinstance(split, bool):
            return split
        return self._fork(_condition_key(node, frame), list(split)) == 0
