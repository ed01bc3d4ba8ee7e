"""What the config-file tests share: comparing a reader's data with a loader's, half-typed documents,
and FAB001's record sample's Fabric arguments (written into config files)."""

from __future__ import annotations

import ast
import math
import random
from typing import Iterator

from command_line_support import _SAMPLE

from fabric_ls.analysis.yaml_subset import UNSUPPORTED


def agrees(ours: object, theirs: object) -> bool:
    """``ours`` (fabric-ls's reader) is ``theirs`` (a real loader's), where it is not ``UNSUPPORTED``."""
    if ours is UNSUPPORTED:
        return True
    if isinstance(ours, dict):
        return (
            isinstance(theirs, dict)
            and list(ours) == list(theirs)
            and all(agrees(ours[k], theirs[k]) for k in ours)
        )
    if isinstance(ours, list):
        return isinstance(theirs, list) and len(ours) == len(theirs) and all(map(agrees, ours, theirs))
    if isinstance(ours, float) and math.isnan(ours):
        return isinstance(theirs, float) and math.isnan(theirs)
    return type(ours) is type(theirs) and ours == theirs


def half_typed(text: str, generator: random.Random, alphabet: str, count: int = 60) -> Iterator[str]:
    """``count`` copies of ``text`` with one to three characters added or removed anywhere."""
    for _ in range(count):
        mutated = list(text)
        for _ in range(generator.randint(1, 3)):
            position = generator.randint(0, len(mutated))
            if mutated and generator.random() < 0.5:
                del mutated[min(position, len(mutated) - 1)]
            else:
                mutated.insert(position, generator.choice(alphabet))
        yield "".join(mutated)


def sample_arguments() -> dict[str, object]:
    """The keywords of FAB001's sample ``Fabric(...)``: a Fabric on two GPUs with DeepSpeed."""
    call = next(
        node
        for node in ast.walk(ast.parse(_SAMPLE.source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Fabric"
    )
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords if keyword.arg}
