"""Conditions over the script's undecided inputs, as canonical boolean functions.

A *decision* is one input the source does not fix: an argparse option, an entry
parameter's default, the truth of ``if torch.cuda.is_available()``. A *guard* says
under which combinations of decisions something happens. Guards are reduced
ordered BDDs (one shared table per analysis), so equal conditions are the same
integer, "always" is ``guard == TRUE`` and contradictions are ``FALSE``.

A decision with two options is one variable (true = its first option); one with
k options has k - 1 variables read in order (the first set picks the option, none
set picks the last), so every assignment is exactly one option; an equality with a
constant carries what it implies ("the parameter was given") in its own literal.
No combination of variables is impossible, so no constraint is kept beside the guards.

``describe`` turns a guard into the text a person reads: an irredundant sum of
products (Minato–Morreale ISOP, with the caller's don't-care region),
each decision named once per clause.

We keep our own small ROBDD rather than depend on ``dd``: the guards have tens of
variables at most, and the ~200 lines here avoid a dependency in the bundled server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

FALSE = 0
TRUE = 1
_TERMINAL_LEVEL = 1 << 30


@dataclass(frozen=True)
class DecisionInfo:
    """What a person reads for one decision: its options' texts, and a subject if it has one."""

    key: str
    descriptions: tuple[str, ...]
    # "`--strategy`" and "'ddp'", "'fsdp'": lets a clause say "`--strategy` is 'ddp' or 'fsdp'".
    subject: Optional[str] = None
    option_texts: Optional[tuple[str, ...]] = None


class Guards:
    """A shared BDD table plus the decisions its variables stand for."""

    def __init__(self) -> None:
        # Node n: (level, low, high); 0 and 1 are the terminals.
        self._level: list[int] = [_TERMINAL_LEVEL, _TERMINAL_LEVEL]
        self._low: list[int] = [0, 1]
        self._high: list[int] = [0, 1]
        self._unique: dict[tuple[int, int, int], int] = {}
        self._and_cache: dict[tuple[int, int], int] = {}
        self._or_cache: dict[tuple[int, int], int] = {}
        self._not_cache: dict[int, int] = {}
        # (f, g) → whether f and g share a satisfying assignment.
        self._meets: dict[tuple[int, int], bool] = {}
        # Variable level → (decision index, option index or None for a two-option decision).
        self._variables: list[tuple[int, Optional[int]]] = []
        self.decisions: list[DecisionInfo] = []
        self._decision_index: dict[str, int] = {}
        # Decision index → the variable levels of its options.
        self._decision_variables: list[list[int]] = []
        self._support: dict[int, frozenset[int]] = {}
        # exists(): kept variables → {node: result}; feasible_options(): by the options' guards.
        self._exists: dict[frozenset[int], dict[int, int]] = {}
        self._options_support: dict[tuple[int, ...], frozenset[int]] = {}
        self._feasible_options: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}
        # Subject → the equality decisions made for it, in order; and each one's literal.
        self._equalities: dict[str, list[int]] = {}
        self._equality_subject: dict[int, str] = {}
        self._equality_literals: dict[str, int] = {}
        # subject → (constant, literal) for each constant it was compared with, in order.
        self._compared: dict[str, list[tuple[object, int]]] = {}
        self._equality_implies: dict[int, tuple[str, int]] = {}
        # A decision whose every option says another decision's option (the truth of a value given
        # on the command line says it was given): that one goes unsaid beside it.
        self._implies: dict[int, tuple[str, int]] = {}
        self._options: dict[tuple[int, int], int] = {}

    # ----- nodes ---------------------------------------------------------------------

    def _node(self, level: int, low: int, high: int) -> int:
        if low == high:
            return low
        key = (level, low, high)
        found = self._unique.get(key)
        if found is None:
            found = len(self._level)
            self._level.append(level)
            self._low.append(low)
            self._high.append(high)
            self._unique[key] = found
        return found

    def _variable(self, level: int) -> int:
        return self._node(level, FALSE, TRUE)

    @property
    def size(self) -> int:
        return len(self._level)

    # ----- decisions -----------------------------------------------------------------

    def has_decision(self, key: str) -> bool:
        """Whether some guard may already depend on the decision ``key``."""
        return key in self._decision_index

    def decision(self, info: DecisionInfo) -> int:
        """Register a decision (once per key) and return its index.

        A decision with k > 2 options has k - 1 variables, read in order: the first one set picks
        its option, none set picks the last. Every assignment is one option, so "exactly one of
        them" needs no constraint (and a feasibility test is one conjunction)."""
        index = self._decision_index.get(info.key)
        if index is not None:
            return index
        index = len(self.decisions)
        self.decisions.append(info)
        self._decision_index[info.key] = index
        levels = []
        for position in range(max(1, len(info.descriptions) - 1)):
            self._variables.append((index, position if len(info.descriptions) > 2 else None))
            levels.append(len(self._variables) - 1)
        self._decision_variables.append(levels)
        return index

    def option(self, decision: int, option: int) -> int:
        """The guard "decision takes this option"."""
        key = (decision, option)
        found = self._options.get(key)
        if found is not None:
            return found
        levels = self._decision_variables[decision]
        if len(self.decisions[decision].descriptions) <= 2:
            variable = self._variable(levels[0])
            found = variable if option == 0 else self.not_(variable)
        else:
            found = TRUE
            for level in levels[:option]:
                found = self.and_(found, self.not_(self._variable(level)))
            if option < len(levels):
                found = self.and_(found, self._variable(levels[option]))
        self._options[key] = found
        return found

    def equality(
        self,
        subject: str,
        constant: object,
        descriptions: tuple[str, str],
        implied: Optional[tuple[str, int]] = None,
    ) -> int:
        """The guard "``subject`` equals ``constant``" (a value known only by its identity).

        One variable per constant it is compared with, read in order like a decision's: the
        literal for a constant is its variable set and those of the constants before it unset, so
        "is 'ddp'" and "is 'fsdp'" never hold together by construction.
        ``implied``: a decision's option the equality implies ("the parameter is 'ddp'" implies
        "the parameter was given"), part of the literal (if that decision exists).
        """
        key = f"equals:{subject}:{constant!r}"
        found = self._equality_literals.get(key)
        if found is not None:
            return found
        decision = self.decision(DecisionInfo(key, descriptions))
        literal = self.option(decision, 0)
        others = self._equalities.setdefault(subject, [])
        for other in others:
            literal = self.and_(literal, self.not_(self.option(other, 0)))
        if implied is not None:
            self._equality_implies[decision] = implied
            if implied[0] in self._decision_index:
                literal = self.and_(literal, self.option(self._decision_index[implied[0]], implied[1]))
        others.append(decision)
        self._equality_subject[decision] = subject
        self._equality_literals[key] = literal
        self._compared.setdefault(subject, []).append((constant, literal))
        return literal

    def implies(self, decision: int, implied: tuple[str, int]) -> None:
        """Each option of ``decision`` holds only where ``implied`` (a decision's key, its option) does."""
        self._implies[decision] = implied

    def compared(self, subject: str) -> list[tuple[object, int]]:
        """The constants ``subject`` was compared with so far, each with its "equals" literal."""
        return self._compared.get(subject, [])

    # ----- operations ----------------------------------------------------------------

    def _cofactors(self, node: int, level: int) -> tuple[int, int]:
        if self._level[node] != level:
            return node, node
        return self._low[node], self._high[node]

    def not_(self, f: int) -> int:
        if f <= TRUE:
            return 1 - f
        found = self._not_cache.get(f)
        if found is None:
            level = self._level[f]
            found = self._node(level, self.not_(self._low[f]), self.not_(self._high[f]))
            self._not_cache[f] = found
        return found

    def and_(self, f: int, g: int) -> int:
        # The commonest operation: applied by its own recursion, with its own cache.
        if f == g or g == TRUE:
            return f
        if f == TRUE:
            return g
        if f == FALSE or g == FALSE:
            return FALSE
        if f > g:
            f, g = g, f
        key = (f, g)
        found = self._and_cache.get(key)
        if found is not None:
            return found
        levels, lows, highs = self._level, self._low, self._high
        f_level, g_level = levels[f], levels[g]
        if f_level == g_level:
            low, high, level = self.and_(lows[f], lows[g]), self.and_(highs[f], highs[g]), f_level
        elif f_level < g_level:
            low, high, level = self.and_(lows[f], g), self.and_(highs[f], g), f_level
        else:
            low, high, level = self.and_(f, lows[g]), self.and_(f, highs[g]), g_level
        found = low if low == high else self._node(level, low, high)
        self._and_cache[key] = found
        return found

    def or_(self, f: int, g: int) -> int:
        if f == g or g == FALSE:
            return f
        if f == FALSE:
            return g
        if f == TRUE or g == TRUE:
            return TRUE
        if f > g:
            f, g = g, f
        key = (f, g)
        found = self._or_cache.get(key)
        if found is not None:
            return found
        levels, lows, highs = self._level, self._low, self._high
        f_level, g_level = levels[f], levels[g]
        if f_level == g_level:
            low, high, level = self.or_(lows[f], lows[g]), self.or_(highs[f], highs[g]), f_level
        elif f_level < g_level:
            low, high, level = self.or_(lows[f], g), self.or_(highs[f], g), f_level
        else:
            low, high, level = self.or_(f, lows[g]), self.or_(f, highs[g]), g_level
        found = low if low == high else self._node(level, low, high)
        self._or_cache[key] = found
        return found

    def feasible(self, f: int, g: int = TRUE) -> bool:
        """Some combination of decisions satisfies ``f`` (and ``g``): every assignment of the
        variables is a combination the script can take, so that is "the conjunction is not FALSE"."""
        if f == FALSE or g == FALSE:
            return False
        if f == TRUE or g == TRUE or f == g:
            return True
        key = (f, g) if f < g else (g, f)
        found = self._meets.get(key)
        if found is None:
            conjunction = self._and_cache.get(key)
            if conjunction is not None:
                found = conjunction != FALSE
            else:
                # A walk down both graphs to the first shared satisfying path: no node is built.
                levels = self._level
                f_level, g_level = levels[f], levels[g]
                if f_level == g_level:
                    found = self.feasible(self._low[f], self._low[g]) or self.feasible(
                        self._high[f], self._high[g]
                    )
                elif f_level < g_level:
                    found = self.feasible(self._low[f], g) or self.feasible(self._high[f], g)
                else:
                    found = self.feasible(f, self._low[g]) or self.feasible(f, self._high[g])
            self._meets[key] = found
        return found

    def exists(self, f: int, keep: frozenset[int]) -> int:
        """``f`` with every variable outside ``keep`` quantified away: the assignments of ``keep``
        that some assignment of the other variables completes into one satisfying ``f``."""
        if f <= TRUE:
            return f
        cache = self._exists.get(keep)
        if cache is None:
            cache = self._exists[keep] = {}
        return self._exists_in(f, keep, max(keep, default=-1), cache)

    def _exists_in(self, f: int, keep: frozenset[int], deepest: int, cache: dict[int, int]) -> int:
        if f <= TRUE:
            return f
        level = self._level[f]
        if level > deepest:
            return TRUE  # a node of a reduced BDD is satisfiable, and nothing below it is kept
        found = cache.get(f)
        if found is None:
            low = self._exists_in(self._low[f], keep, deepest, cache)
            high = self._exists_in(self._high[f], keep, deepest, cache)
            found = self._node(level, low, high) if level in keep else self.or_(low, high)
            cache[f] = found
        return found

    def feasible_options(self, path: int, options: tuple[int, ...]) -> tuple[int, ...]:
        """The indices of ``options`` (guards over a few decisions: a Fabric's strategies) that
        ``path`` allows. The path is first reduced to those decisions' variables, so paths that
        differ only elsewhere (most of the calls of one script) ask one question, answered once."""
        support = self._options_support.get(options)
        if support is None:
            support = frozenset().union(*(self.support(option) for option in options))
            self._options_support[options] = support
        key = (options, self.exists(path, support))
        found = self._feasible_options.get(key)
        if found is None:
            found = tuple(i for i, option in enumerate(options) if self.feasible(key[1], option))
            self._feasible_options[key] = found
        return found

    def support(self, f: int) -> frozenset[int]:
        """The variables (levels) ``f`` depends on."""
        found = self._support.get(f)
        if found is None:
            if f <= TRUE:
                found = frozenset()
            else:
                found = self.support(self._low[f]) | self.support(self._high[f]) | {self._level[f]}
            self._support[f] = found
        return found

    def variables_of_decisions(self, decisions: range) -> frozenset[int]:
        return frozenset(level for d in decisions for level in self._decision_variables[d])

    def covering(self, options: list[int]) -> list[int]:
        """``options`` with the paths none of them holds on added to the first: together they cover
        every path, so taking them in turn never drops one (where a value has no option, a path goes
        on with the first rather than end)."""
        rest = self.not_(self.any_of(options))
        return [self.or_(options[0], rest), *options[1:]] if options else options

    def any_of(self, guards: list[int]) -> int:
        result = FALSE
        for guard in guards:
            result = self.or_(result, guard)
        return result

    # ----- text ----------------------------------------------------------------------

    def cover(self, lower: int, upper: int) -> list[list[tuple[int, bool]]]:
        """An irredundant sum of products between ``lower`` and ``upper`` (cubes of (level, value))."""
        cache: dict[tuple[int, int], tuple[list[list[tuple[int, bool]]], int]] = {}
        return self._isop(lower, upper, cache)[0]

    def _isop(
        self, lower: int, upper: int, cache: dict[tuple[int, int], tuple[list[list[tuple[int, bool]]], int]]
    ) -> tuple[list[list[tuple[int, bool]]], int]:
        if lower == FALSE:
            return [], FALSE
        if upper == TRUE:
            return [[]], TRUE
        found = cache.get((lower, upper))
        if found is not None:
            return found
        level = min(self._level[lower], self._level[upper])
        l0, l1 = self._cofactors(lower, level)
        u0, u1 = self._cofactors(upper, level)
        cubes0, f0 = self._isop(self.and_(l0, self.not_(u1)), u0, cache)
        cubes1, f1 = self._isop(self.and_(l1, self.not_(u0)), u1, cache)
        rest_lower = self.or_(self.and_(l0, self.not_(f0)), self.and_(l1, self.not_(f1)))
        cubes_d, fd = self._isop(rest_lower, self.and_(u0, u1), cache)
        variable = self._variable(level)
        cubes = (
            [[(level, False), *cube] for cube in cubes0]
            + [[(level, True), *cube] for cube in cubes1]
            + cubes_d
        )
        function = self.or_(
            self.or_(self.and_(self.not_(variable), f0), self.and_(variable, f1)),
            fd,
        )
        cache[(lower, upper)] = (cubes, function)
        return cubes, function

    def describe(self, guard: int, dont_care: int = FALSE, max_clauses: int = 3) -> Optional[str]:
        """Text for ``guard``: None when it always holds (outside ``dont_care``)."""
        outside = dont_care
        upper = self.or_(guard, outside)
        if upper == TRUE:
            return None
        lower = self.and_(guard, self.not_(outside))
        if lower == FALSE:
            return "never"
        clauses = _merge_clauses([self._clause(cube) for cube in self.cover(lower, upper)], self)
        # What every clause says is said once, in front: "a and (b or c)".
        common = {
            d: allowed for d, allowed in clauses[0].items() if all(c.get(d) == allowed for c in clauses)
        }
        if len(clauses) < 2:
            common = {}
        rests = [{d: a for d, a in clause.items() if d not in common} for clause in clauses]
        # Two decisions may read the same (one helper's result at two calls): a clause is said once.
        texts = sorted({self._clause_text(rest) for rest in rests}, key=lambda t: (len(t), t))
        shown = texts[:max_clauses]
        if len(texts) == 1 and common:
            common, shown = {}, [self._clause_text(clauses[0])]
        text = " or ".join(f"({c})" if " and " in c and len(shown) > 1 else c for c in shown)
        if len(texts) > max_clauses:
            text += f" (and {len(texts) - max_clauses} more cases)"
        if common:
            text = f"{self._clause_text(common)} and ({text})"
        return text

    def option_count(self, decision: int) -> int:
        return max(2, len(self.decisions[decision].descriptions))

    def _clause(self, cube: list[tuple[int, bool]]) -> dict[int, frozenset[int]]:
        """A cube as: decision → the options it allows (a decision absent from it allows all)."""
        literals: dict[int, list[tuple[Optional[int], bool]]] = {}
        for level, value in cube:
            decision, position = self._variables[level]
            literals.setdefault(decision, []).append((position, value))
        clause: dict[int, frozenset[int]] = {}
        for decision, found in literals.items():
            if found[0][0] is None:
                clause[decision] = frozenset({0 if found[0][1] else 1})
                continue
            allowed = frozenset(
                option for option in range(self.option_count(decision)) if _encodes(option, found)
            )
            if len(allowed) < self.option_count(decision):
                clause[decision] = allowed
        # "`s` is 'ddp'" already says it is not 'fsdp' (the constants tested before it go unsaid),
        # and that `s` was given a value (what the equality implies).
        held = [d for d, a in clause.items() if d in self._equality_subject and a == {0}]
        named = {self._equality_subject[d] for d in held}
        implied = {
            (self._decision_index.get(key), option)
            for key, option in (self._equality_implies[d] for d in held if d in self._equality_implies)
        }
        implied.update(
            (self._decision_index.get(key), option)
            for key, option in (
                self._implies[d] for d, a in clause.items() if d in self._implies and len(a) == 1
            )
        )
        return {
            d: a
            for d, a in clause.items()
            if not (d in self._equality_subject and a == {1} and self._equality_subject[d] in named)
            and not (len(a) == 1 and (d, next(iter(a))) in implied)
        }

    def _clause_text(self, clause: dict[int, frozenset[int]]) -> str:
        return " and ".join(
            _options_text(self.decisions[decision], sorted(clause[decision])) for decision in sorted(clause)
        )


Clause = dict[int, frozenset[int]]


def _encodes(option: int, literals: list[tuple[Optional[int], bool]]) -> bool:
    """Whether ``option`` of a many-option decision agrees with a cube's literals on its variables
    (option i: the variables before i unset, variable i set; the last option: none set)."""
    for position, value in literals:
        assert position is not None
        if position < option and value:
            return False
        if position == option and not value:
            return False
    return True


def _merge_clauses(clauses: list[Clause], guards: Guards) -> list[Clause]:
    """Join clauses that differ in one decision: "s is a and x" + "s is b and x" → "s is a or b and x"."""
    changed = True
    while changed:
        changed = False
        for i, first in enumerate(clauses):
            for j in range(i + 1, len(clauses)):
                second = clauses[j]
                if first.keys() != second.keys():
                    continue
                different = [d for d in first if first[d] != second[d]]
                if len(different) != 1:
                    continue
                decision = different[0]
                union = first[decision] | second[decision]
                merged = dict(first)
                if len(union) >= guards.option_count(decision):
                    del merged[decision]
                else:
                    merged[decision] = union
                clauses = [c for k, c in enumerate(clauses) if k not in (i, j)] + [merged]
                changed = True
                break
            if changed:
                break
    # A clause that allows less than another adds nothing.
    return [
        c for c in clauses if not any(o is not c and all(d in c and c[d] <= o[d] for d in o) for o in clauses)
    ]


def _options_text(info: DecisionInfo, allowed: list[int]) -> str:
    if len(allowed) == 1:
        return info.descriptions[allowed[0]]
    if info.subject and info.option_texts:
        count = len(info.option_texts)
        excluded = [o for o in range(count) if o not in allowed]
        if len(excluded) == 1 and len(allowed) > 2:
            return f"{info.subject} is not {info.option_texts[excluded[0]]}"
        return f"{info.subject} is " + " or ".join(info.option_texts[o] for o in allowed)
    return "(" + " or ".join(info.descriptions[o] for o in allowed) + ")"
