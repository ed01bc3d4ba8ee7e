"""Conditions are canonical guards (BDDs) and read as short sums of products."""

from __future__ import annotations

from fabric_ls.analysis.guards import FALSE, TRUE, DecisionInfo, Guards

STRATEGY = DecisionInfo(
    "strategy",
    ("`--strategy` is 'ddp'", "`--strategy` is 'deepspeed'", "`--strategy` is 'fsdp'"),
    "`--strategy`",
    ("'ddp'", "'deepspeed'", "'fsdp'"),
)


def _flag(guards: Guards, name: str) -> int:
    return guards.option(guards.decision(DecisionInfo(name, (f"`{name}`", f"not `{name}`"))), 0)


def test_equal_conditions_are_the_same_guard_and_contradictions_vanish():
    guards = Guards()
    tpu, compile_ = _flag(guards, "tpu"), _flag(guards, "compile")
    assert guards.and_(tpu, compile_) == guards.and_(compile_, tpu)
    assert guards.or_(tpu, guards.not_(tpu)) == TRUE
    assert guards.and_(tpu, guards.not_(tpu)) == FALSE


def test_a_decision_whose_every_option_fires_drops_out():
    guards = Guards()
    strategy = guards.decision(STRATEGY)
    tpu = _flag(guards, "tpu")
    every_option = guards.any_of([guards.and_(guards.option(strategy, n), tpu) for n in range(3)])
    assert guards.describe(every_option) == "`tpu`"


def test_options_of_one_decision_are_named_once():
    guards = Guards()
    strategy = guards.decision(STRATEGY)
    tpu = _flag(guards, "tpu")
    sharded = guards.or_(guards.option(strategy, 1), guards.option(strategy, 2))
    assert guards.describe(sharded) == "`--strategy` is 'deepspeed' or 'fsdp'"
    assert guards.describe(guards.and_(sharded, tpu)) == "`--strategy` is 'deepspeed' or 'fsdp' and `tpu`"


def test_always_is_a_tautology_and_impossible_combinations_are_not_listed():
    guards = Guards()
    strategy = guards.decision(STRATEGY)
    ddp, deepspeed = guards.option(strategy, 0), guards.option(strategy, 1)
    assert guards.describe(guards.any_of([guards.option(strategy, n) for n in range(3)])) is None
    assert guards.describe(guards.and_(ddp, deepspeed)) == "never"


def test_paths_that_do_not_count_are_dont_care():
    guards = Guards()
    tpu, resume = _flag(guards, "tpu"), _flag(guards, "resume")
    # Fires where not tpu; the tpu paths end the program: the finding holds on every path that goes on.
    assert guards.describe(guards.not_(tpu), dont_care=tpu) is None
    assert guards.describe(guards.and_(guards.not_(tpu), resume), dont_care=tpu) == "`resume`"


def test_at_most_three_clauses_then_a_count():
    guards = Guards()
    flags = [_flag(guards, f"f{n}") for n in range(5)]
    text = guards.describe(guards.any_of([guards.and_(flags[n], flags[n + 1]) for n in range(4)]))
    assert text is not None
    assert text.endswith("(and 1 more cases)")
    assert text.count(" or ") == 2


def test_options_taken_in_turn_cover_every_path_and_stay_apart():
    # Two options of a merged value that exist only under `tpu` / `compile`: the paths where
    # neither holds go with the first, so a split on them keeps every path exactly once.
    guards = Guards()
    tpu, compile_ = _flag(guards, "tpu"), _flag(guards, "compile")
    first_only = guards.and_(tpu, guards.not_(compile_))
    first, second = guards.covering([first_only, compile_])
    assert guards.or_(first, second) == TRUE
    assert guards.and_(first, second) == FALSE
    assert second == compile_
    assert guards.describe(first) == "not `compile`"


def test_quantifying_a_guard_keeps_what_its_other_variables_can_complete():
    guards = Guards()
    strategy = guards.decision(STRATEGY)
    ddp, deepspeed, fsdp = (guards.option(strategy, i) for i in range(3))
    given, extra = _flag(guards, "given"), _flag(guards, "extra")
    keep = guards.support(ddp) | guards.support(deepspeed)
    # "(ddp and given) or (fsdp and not extra)" over the strategy alone: ddp or fsdp, never deepspeed.
    path = guards.or_(guards.and_(ddp, given), guards.and_(fsdp, guards.not_(extra)))
    assert guards.exists(path, keep) == guards.or_(ddp, fsdp)
    assert guards.exists(path, frozenset()) == TRUE
    assert guards.exists(FALSE, keep) == FALSE


def test_the_options_a_path_allows_are_the_ones_it_meets():
    guards = Guards()
    given = _flag(guards, "given")  # a variable above the strategy's, and one below
    strategy = guards.decision(STRATEGY)
    options = tuple(guards.option(strategy, i) for i in range(3))
    late = _flag(guards, "late")
    path = guards.or_(guards.and_(options[0], given), guards.and_(options[2], guards.not_(late)))
    for where in (TRUE, FALSE, given, late, path, guards.and_(path, given), options[1]):
        expected = tuple(i for i, option in enumerate(options) if guards.feasible(where, option))
        assert guards.feasible_options(where, options) == expected
