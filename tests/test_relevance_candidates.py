"""Relevance reads a node's calls, stores and returns from a list kept per node (blocks lend theirs):
the same nodes a walk of the whole subtree finds."""

from __future__ import annotations

import ast
from pathlib import Path

from fabric_ls.analysis.conditions import _is_candidate, _relevance_candidates

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted([*ROOT.glob("bench/scripts/*.py"), *ROOT.glob("examples/*.py")])


def test_the_kept_lists_hold_what_a_walk_of_each_block_finds():
    checked = calls = 0
    for script in SCRIPTS:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for block in (
            node for node in ast.walk(tree) if isinstance(node, ast.stmt) and hasattr(node, "body")
        ):
            walked = [node for node in ast.walk(block) if _is_candidate(node)]
            kept = _relevance_candidates(block)
            assert len(kept) == len(walked) and {id(n) for n in kept} == {id(n) for n in walked}, script.name
            checked += 1
            calls += any(isinstance(node, ast.Call) for node in kept)
    assert checked > 200 and calls > 100  # the scripts' functions, loops and branches, most with calls
