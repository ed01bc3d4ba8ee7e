"""How a finding's condition is worded: cases merged where every option of a decision fires."""

from __future__ import annotations

from fabric_ls.explore import describe, simplify
from fabric_ls.interpreter import Decision


def _decision(key: str, options: int = 2) -> Decision:
    return Decision(key, 0, options, tuple(f"{key}={n}" for n in range(options)))


def test_a_decision_whose_every_option_fires_drops_out():
    p, s, q = _decision("precision"), _decision("summary"), _decision("quantize")
    paths = [[(p, 0), (s, 0), (q, 0)], [(p, 0), (s, 1), (q, 0)], [(p, 1), (q, 0)]]
    assert [[(d.key, i) for d, i in case] for case in simplify(paths)] == [[("quantize", 0)]]
    assert describe(paths) == "quantize=0"


def test_partial_options_stay_and_read_as_alternatives():
    choice = _decision("strategy", options=3)
    flag = _decision("flag")
    paths = [[(choice, 0), (flag, 1)], [(choice, 2), (flag, 1)]]
    assert describe(paths) == "strategy=0 and flag=1 or strategy=2 and flag=1"


def test_all_cases_covered_means_unconditional():
    flag = _decision("flag")
    assert describe([[(flag, 0)], [(flag, 1)]]) is None
